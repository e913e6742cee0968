"""Experiments on mixture models (notebooks 03 and 04): one toy task, a cached model per
(variant, dropout, seed), and the measurements of Shen et al. Table 7 for each."""
from __future__ import annotations

import itertools

import torch

from .analysis import degeneracy, per_latent_bleu_one_ref, seed_label
from ..data.batching import pad_batch
from ..metrics import diversity_report
from ..models.mixture import MixtureConfig
from ..pipeline import Task, toy_task, train_in_parallel, train_model
from ..profiles import Profile, profile


def task(cfg: Profile | str, seed: int = 0, strength: str = "strong") -> Task:
    """The toy with the profile's mixture settings: S styles, low ambiguity (so that quality
    is not saturated), a smaller training set than the other lessons (many short runs)."""
    cfg = profile(cfg)              # a profile name is accepted too
    mx = cfg.mixture
    return toy_task(cfg, seed, n_styles=mx["styles"], style_strength=strength, ambiguity="low", n_train=mx["toy_train"],
                    model=mx.get("model"), training=mx.get("training"))


def variant_job(t: Task, variant: MixtureConfig, dropout: float | None = None, seed: int = 0,
                k: int | None = None) -> dict:
    """The :func:`~nbsupport.pipeline.train_model` arguments of a mixture of ``variant`` with model
    dropout ``dropout`` (the profile's when None), K = ``k`` (the task's references when None)."""
    k = k or len(t.corpus.test.refs[0])
    return {"name": f"mix-{variant.name}-{variant.dropout_in.replace('&', '')}-k{k}", "n_latent": k, "seed": seed,
            "model_overrides": {} if dropout is None else {"dropout": dropout}, "options": variant}


def train_variant(t: Task, variant: MixtureConfig, device, dropout: float | None = None, seed: int = 0,
                  k: int | None = None):
    """A cached mixture of ``variant`` with model dropout ``dropout`` (the profile's when None)."""
    return train_model(t, device=device, progress=False, **variant_job(t, variant, dropout, seed, k))


def prefetch_variants(t: Task, variants, device, seeds=(0,), dropouts=(None,)) -> list[str]:
    """Train the variants' uncached models (every seed and model dropout; None: the profile's)
    several at once on a CPU (soft losses first: they run all K decoders with gradients), for
    :func:`train_variant` to load; see ``pipeline.train_in_parallel``."""
    jobs = [variant_job(t, v, dropout, seed) for v in variants for dropout in dropouts for seed in seeds]
    jobs.sort(key=lambda job: (job["options"].em == "soft", job["options"].params == "independent"), reverse=True)
    return train_in_parallel(t, jobs, device)


VNMT_DIM = 16    # the Gaussian latent's dimension (Shen et al.: 512 with 512-d models; ours are 128-d)


def train_vnmt(t: Task, device, seed: int = 0):
    """The variational NMT baseline (KL annealed over the first half of training)."""
    from ..models.vnmt import VNMTConfig
    return train_model(t, f"vnmt-dz{VNMT_DIM}", device, n_latent=VNMT_DIM, seed=seed, progress=False, options=VNMTConfig())


def assignment_agreement(confusion) -> float:
    """Share of training sentences whose E-step latent matches their true style under the
    best one-to-one mapping of latents to styles (chance: 1/S for uniform assignments)."""
    k, s = len(confusion), len(confusion[0])
    total = sum(map(sum, confusion))
    best = 0
    for latents in itertools.permutations(range(k), min(k, s)):
        best = max(best, sum(confusion[z][style] for style, z in enumerate(latents[:s])))
    return best / total if total else float("nan")


@torch.no_grad()
def evaluate(model, t: Task, sentences: int | None = None, seed: int = 0) -> dict:
    """Table 7's columns for a mixture (or variational NMT, one prior sample per "latent"):
    per-latent BLEU against one reference per source (``per_latent_bleu_1ref``, as Table 7:
    :func:`~nbsupport.lessons.analysis.per_latent_bleu_one_ref`), pairwise BLEU, multi-reference BLEU,
    average oracle BLEU, coverage, the D1/D2 label, and the hypotheses. (Style agreement comes
    from the training history: :func:`agreement_of`.)"""
    test = t.corpus.test
    srcs, refs = test.src[:sentences], test.refs[:sentences]
    device = next(model.parameters()).device
    hyps, noise = [], torch.Generator(device="cpu").manual_seed(seed)   # one stream over all batches
    for lo in range(0, len(srcs), 100):
        src = pad_batch([t.src_vocab.encode(s) for s in srcs[lo:lo + 100]]).to(device)
        ids = model.hypotheses(src, len(refs[0]), generator=noise)   # the family's own way: per expert, or per prior sample
        hyps += [[t.tgt_vocab.decode(h) for h in hs] for hs in ids]
    rep = diversity_report(hyps, refs, seed=seed)
    plb = per_latent_bleu_one_ref(hyps, refs, seed)
    return {"per_latent_bleu_1ref": plb, "pairwise_bleu": rep["pairwise_bleu"], "multi_ref_bleu": rep["multi_ref_bleu"],
            "avg_oracle_bleu": rep["avg_oracle_bleu"], "coverage": rep["ref_coverage"],
            "label": degeneracy(plb, rep["pairwise_bleu"]), "hyps": hyps}


def over_seeds(per_seed: list[dict]) -> dict:
    """One Table 7 row from the evaluations of several seeds: each seed's per-latent BLEU is
    sorted (best latent first) *before* averaging, since latent indices are arbitrary labels
    (a D1 model trains latent 0 with one seed and latent 2 with another: averaging by index
    would blend them into a healthy-looking row). Means of the other columns; the label is the
    seeds' strict majority (:func:`~nbsupport.lessons.analysis.seed_label`, else "mixed"), with
    ``labels_per_seed`` beside it."""
    from ..views.tables import mean_std
    if not per_seed:
        raise ValueError("over_seeds needs the evaluation of at least one seed")
    n = len(per_seed)
    ranked = [sorted(e["per_latent_bleu_1ref"], reverse=True) for e in per_seed]
    row = {"per_latent_bleu_1ref": [sum(r[z] for r in ranked) / n for z in range(len(ranked[0]))]}
    for key in ("pairwise_bleu", "multi_ref_bleu", "avg_oracle_bleu", "coverage", "agreement"):
        if all(key in e for e in per_seed):
            row[key] = sum(e[key] for e in per_seed) / n
    labels = [e["label"] for e in per_seed]
    row.update(label=seed_label(labels), labels_per_seed=labels,
               pairwise_bleu_sd=mean_std([e["pairwise_bleu"] for e in per_seed]),
               multi_ref_bleu_sd=mean_std([e["multi_ref_bleu"] for e in per_seed]))
    return row


def agreement_of(history) -> float:
    return assignment_agreement(history.epochs[-1]["latent_by_label"])
