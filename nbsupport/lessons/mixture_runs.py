"""Experiments on mixture models (notebooks 03 and 04): one toy task, a cached model per
(variant, dropout, seed), and the measurements of Shen et al. Table 7 for each."""
from __future__ import annotations

import itertools

import torch
import numpy as np

from .analysis import degeneracy, latents_used, second_share, matched_accuracy, one_reference, per_latent_bleu_one_ref, seed_label
from ..data.batching import pad_batch
from ..decode import decode, token_ids
from ..metrics import diversity_report, pairwise_bleu, sentence_bleu
from ..models.mixture import MixtureConfig
from ..pipeline import Task, is_cached, toy_task, train_in_parallel, train_model
from ..profiles import Profile, profile
from ..train import CONVERGED_BELOW
from .. import stats
from ..models.vnmt import VNMTConfig, gaussian_kl
from ..stats import Resampled, Resamples, seed_interval
from ..train import converged as stopped
from ..views.plots import plt
from ..views.tables import mean_std


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


CONVERGED_DROP = CONVERGED_BELOW   # converged: the last epoch lowered the validation NLL by under 2%


def converged_job(t: Task, variant: MixtureConfig, epochs: int, dropout: float | None = None, seed: int = 0) -> dict:
    """:func:`variant_job` trained until an epoch lowers the validation NLL by under
    :data:`CONVERGED_DROP`, for at most ``epochs`` epochs (the reproduction's budget)."""
    return {**variant_job(t, variant, dropout, seed),
            "training_overrides": {"epochs": epochs, "converged_below": CONVERGED_DROP, "patience": 1}}


def _lesson_model_if_converged(t: Task, variant: MixtureConfig, device, dropout, seed):
    job = variant_job(t, variant, dropout, seed)
    if not is_cached(t, **job):
        return None
    model, hist = train_model(t, device=device, progress=False, **job)
    return (model, hist) if converged(hist) and t.training.get("converged_below") == CONVERGED_DROP else None


def train_to_convergence(t: Task, variant: MixtureConfig, device, epochs: int, dropout: float | None = None,
                         seed: int = 0):
    """A mixture trained to the convergence rule within ``epochs`` epochs: the lessons' cached model
    when it already stopped by the same rule (the same run, which a longer cap would only have let
    go on had it not stopped), else one trained with the cap ``epochs`` (:func:`converged_job`)."""
    return (_lesson_model_if_converged(t, variant, device, dropout, seed)
            or train_model(t, device=device, progress=False, **converged_job(t, variant, epochs, dropout, seed)))


def prefetch_to_convergence(t: Task, variants, device, epochs: int, seeds=(0,)) -> list[str]:
    """:func:`prefetch_variants` for :func:`train_to_convergence`: the models neither cached by the
    lessons (converged) nor by an earlier run, several at once on a CPU, costliest first."""
    jobs = [converged_job(t, v, epochs, None, seed) for v in variants for seed in seeds
            if _lesson_model_if_converged(t, v, "cpu", None, seed) is None]
    jobs.sort(key=lambda job: (job["options"].em == "soft", job["options"].params == "independent"), reverse=True)
    return train_in_parallel(t, jobs, device)
VNMT_DIM = 16    # the Gaussian latent's dimension (Shen et al.: 512 with 512-d models; ours are 128-d)


def train_vnmt(t: Task, device, seed: int = 0):
    """The variational NMT baseline (KL annealed over the first half of training)."""
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
def evaluate(model, t: Task, sentences: int | None = None, seed: int = 0, history=None) -> dict:
    """Table 7's columns for a mixture (or variational NMT, one prior sample per "latent"):
    per-latent BLEU against one reference per source (``per_latent_bleu_1ref``, as Table 7:
    :func:`~nbsupport.lessons.analysis.per_latent_bleu_one_ref`), pairwise BLEU, multi-reference BLEU,
    average oracle BLEU, coverage, the D1/D2 label, and the hypotheses. With the training
    ``history`` of a mixture, also the last epoch's E-step ``usage`` (sentences per latent; soft EM: posterior mass),
    ``latents_used`` and the style ``agreement`` (:func:`agreement_of`), and the label counts a
    model whose E-step used one latent as D1
    (:func:`~nbsupport.lessons.analysis.one_latent_used`)."""
    test = t.corpus.test
    srcs, refs = test.src[:sentences], test.refs[:sentences]
    device = next(model.parameters()).device
    hyps, noise = [], torch.Generator(device="cpu").manual_seed(seed)   # one stream over all batches
    for lo in range(0, len(srcs), 100):
        src = pad_batch([t.src_vocab.encode(s) for s in srcs[lo:lo + 100]]).to(device)
        # the family's own way: greedy per expert, or per draw from the prior
        ids = token_ids(decode(model, src, model.default_method, len(refs[0]), generator=noise))
        hyps += [[t.tgt_vocab.decode(h) for h in hs] for hs in ids]
    rep = diversity_report(hyps, refs, seed=seed)
    plb = per_latent_bleu_one_ref(hyps, refs, seed)
    usage = history.epochs[-1].get("usage") if history is not None and history.epochs else None
    if usage is not None:      # soft EM's usage is posterior mass: a tenth of a sentence is precision enough
        usage = [u if isinstance(u, int) else round(float(u), 1) for u in usage]
    extra = {} if usage is None else {"usage": usage, "latents_used": latents_used(usage),
                                      "agreement": agreement_of(history)}
    return {"per_latent_bleu_1ref": plb, "pairwise_bleu": rep["pairwise_bleu"], "multi_ref_bleu": rep["multi_ref_bleu"],
            "avg_oracle_bleu": rep["avg_oracle_bleu"], "coverage": rep["ref_coverage"],
            "label": degeneracy(plb, rep["pairwise_bleu"], usage), **extra, "hyps": hyps}


def resampled(hyps, t: Task, boot, seed: int = 0) -> dict:
    """The evaluation's metrics on the bootstrap resamples ``boot`` of the test sources
    (:class:`nbsupport.stats.Resamples`, shared by all models so that differences are paired):
    pairwise, multi-reference and average oracle BLEU and coverage (:func:`nbsupport.stats.resampled_metrics`),
    and ``per_latent_1ref``, one :class:`~nbsupport.stats.Resampled` per latent of the per-latent
    BLEU against the one reference of :func:`~nbsupport.lessons.analysis.per_latent_bleu_one_ref`."""
    refs = t.corpus.test.refs[:len(hyps)]
    out = stats.resampled_metrics(hyps, refs, boot, seed)
    one = [[r] for r in one_reference(refs, seed)]
    out["per_latent_1ref"] = [stats.Resampled(est, boot.bleu(stats.corpus_stats([hs[z] for hs in hyps], one)))
                              for z, est in enumerate(per_latent_bleu_one_ref(hyps, refs, seed))]
    return out


def runner_up_ratio(per_latent):
    """The D1 test's quantity with its resamples: the second-best latent's BLEU over the best
    latent's (:data:`~nbsupport.lessons.analysis.D1_RATIO` is its threshold), the ranking taken
    from the estimates. ``per_latent``: one :class:`~nbsupport.stats.Resampled` per latent."""
    best, second = sorted(per_latent, key=lambda r: r.estimate, reverse=True)[:2]
    safe = np.where(best.values > 0, best.values, np.nan)
    values = np.nan_to_num(second.values / safe, nan=1.0)    # a resample where nothing decodes: no latent stands out
    return Resampled(second.estimate / best.estimate if best.estimate > 0 else 1.0, values)


def second_usage_share(usage, seed: int = 0):
    """The share of the training sentences the E-step gave to its second most used latent
    (D1 by definition when it is about 0: one expert takes everything), with its resamples over
    the training sentences (:class:`~nbsupport.stats.Resamples` of the usage histogram). Soft
    EM's usage is posterior mass (floats): resampled as that many whole sentences, rounded."""
    usage = [float(u) for u in usage]
    n = round(sum(usage))
    if n < 1 or len(usage) < 2:
        raise ValueError(f"need a usage histogram of K >= 2 latents with some sentences, got {usage}")
    second = sorted(range(len(usage)), key=lambda z: usage[z], reverse=True)[1]
    indicator = np.zeros(n)
    indicator[:round(usage[second])] = 1.0            # the order of the sentences does not matter to a resample
    return Resampled(second_share(usage), Resamples(n, seed=seed).mean(indicator))


def converged(history, tolerance: float = CONVERGED_DROP) -> bool:
    """Has training converged on the dev set: did the last epoch lower the validation NLL by less
    than ``tolerance`` of its previous value (or raise it)? One epoch alone is never converged. The
    rule training stops by (``TrainConfig.converged_below``, :func:`nbsupport.train.converged`)."""
    return stopped(history, tolerance, 1)


def last_drop(history) -> float:
    """The relative fall of the validation NLL in the last epoch (NaN with one epoch)."""
    v = [e["valid_nll"] for e in history.epochs]
    return (v[-2] - v[-1]) / abs(v[-2]) if len(v) >= 2 else float("nan")


def training_line(name: str, history) -> str:
    """One line on how training went: the validation NLL per epoch and whether it converged (the
    last epoch's change to two decimals, so that one just at the tolerance reads as such)."""
    v = " ".join(f"{e['valid_nll']:.3f}" for e in history.epochs)
    state = "converged" if converged(history) else "NOT converged"
    return f"{name}: validation NLL/token by epoch {v} (last epoch {-last_drop(history):+.2%}: {state})"


def over_seed_values(per_seed):
    """A claim's value from the seeds' :class:`~nbsupport.stats.Resampled` of one quantity: with
    one seed, its resamples; with several, :func:`nbsupport.stats.seed_interval` of their estimates
    around the first seed's bootstrap interval (the seeds' sample sd in quadrature)."""
    per_seed = list(per_seed)
    if not per_seed:
        raise ValueError("over_seed_values needs the value of at least one seed")
    if len(per_seed) == 1:
        return per_seed[0]
    return seed_interval([r.estimate for r in per_seed], per_seed[0].interval())


@torch.no_grad()
def vnmt_probe(model, t: Task, sentences: int | None = None, seed: int = 0) -> dict:
    """Does variational NMT use its latent? On the test sources: the mean KL(q(z|x,y) || p(z|x))
    per sentence (nats, y each of the references; 0: the posterior is the prior, the latent
    carries nothing), and greedy decodes from one *posterior* sample per reference: their
    pairwise BLEU (100: the decoder ignores z even when z was inferred from different
    references) and the share of decodes whose best-matching reference (sentence BLEU) is the one
    their z was inferred from, strictly (a tie counts against it; chance: at most 1/M)."""
    test = t.corpus.test
    srcs, refs = test.src[:sentences], test.refs[:sentences]
    device = next(model.parameters()).device
    model.eval()
    g = torch.Generator(device="cpu").manual_seed(seed)
    kls, hyps, own = [], [], []
    m = len(refs[0])
    for lo in range(0, len(srcs), 100):
        chunk = list(range(lo, min(lo + 100, len(srcs))))
        src = pad_batch([t.src_vocab.encode(srcs[i]) for i in chunk]).to(device)
        memory, mask = model.encode(src)
        mu_p, lv_p = model.prior_params(memory, mask)
        outs = []
        for j in range(m):
            tgt = pad_batch([t.tgt_vocab.encode(refs[i][j]) for i in chunk]).to(device)
            mu_q, lv_q = model.posterior_params(memory, mask, tgt)
            kls += gaussian_kl(mu_q, lv_q, mu_p, lv_p).tolist()
            eps = torch.randn(tuple(mu_q.shape), generator=g).to(device)
            outs.append(token_ids(decode(model.model, src, "greedy", z=mu_q + eps * (0.5 * lv_q).exp())))
        for b, i in enumerate(chunk):
            hs = [t.tgt_vocab.decode(outs[j][b][0]) for j in range(m)]
            hyps.append(hs)
            for j, h in enumerate(hs):
                scores = [sentence_bleu(h, r) for r in refs[i]]
                own.append(float(all(scores[j] > scores[r] for r in range(m) if r != j)))
    return {"kl": sum(kls) / len(kls), "posterior_pairwise_bleu": pairwise_bleu(hyps),
            "own_reference": sum(own) / len(own), "chance": 1 / m, "hyps": hyps}


def over_seeds(per_seed: list[dict]) -> dict:
    """One Table 7 row from the evaluations of several seeds: each seed's per-latent BLEU is
    sorted (best latent first) *before* averaging, since latent indices are arbitrary labels
    (a D1 model trains latent 0 with one seed and latent 2 with another: averaging by index
    would blend them into a healthy-looking row). Means of the other columns; the label is the
    seeds' strict majority (:func:`~nbsupport.lessons.analysis.seed_label`, else "mixed"), with
    ``labels_per_seed`` beside it."""
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


# Lesson 03: the flip-rate figure's marks; section 4, hMup trained three ways (Shen Table 1), measured and read


def flip_figure_marks(ax, ks, p: float, papers: dict) -> None:
    """Adds to ``ax`` each K's coin toss 1 - 1/K (dotted, in its curve's colour) and the papers' named rates at ``p`` (stars)."""
    for line, k in zip(list(ax.get_lines()), ks):
        ax.axhline(1 - 1 / k, color=line.get_color(), ls=":", lw=1,
                   label="coin toss, 1 - 1/K (each K's colour)" if k == min(ks) else None)
    ax.scatter([p] * len(papers), list(papers.values()), marker="*", s=150, color="crimson", zorder=4, label="the papers (K = 2)")
    for i, (name, y) in enumerate(sorted(papers.items(), key=lambda kv: kv[1])):   # the lowest star's name below it
        ax.annotate(name, (p, y), xytext=(8, -12 if i == 0 else 6), textcoords="offset points", fontsize=9, color="crimson")
    ax.legend(fontsize=8)


def train_and_measure(t: Task, variants: dict, device, dropout: float, seed: int, sentences: int, boot):
    """Per column of ``variants`` (name -> MixtureConfig): (models, histories, evaluations with intervals, resampled metrics, hypotheses)."""
    prefetch_variants(t, variants.values(), device, seeds=(seed,), dropouts=(dropout,))   # several at once on a CPU
    models, hists, table, res, hyps = {}, {}, {}, {}, {}
    for col, variant in variants.items():
        models[col], hists[col] = train_variant(t, variant, device, dropout=dropout, seed=seed)
        e = evaluate(models[col], t, sentences, seed=seed, history=hists[col])
        hyps[col] = e.pop("hyps")                              # per test source, each expert's greedy translation
        res[col] = resampled(hyps[col], t, boot, seed)
        e["intervals"] = {m: res[col][m].interval().to_dict() for m in ("pairwise_bleu", "multi_ref_bleu", "coverage")}
        table[col] = e
    return models, hists, table, res, hyps


def record_table1(run, table: dict, hists: dict, dropout: float) -> None:
    """Records lesson 03's result keys (table1, grid, training, train_seconds, hMup.*) of :func:`train_and_measure`'s output."""
    key = {col: f"strong.p{dropout}.{col.replace('&', '')}" for col in table}
    for col, hist in hists.items():
        run.record(("training", key[col]), {"valid_nll": [x["valid_nll"] for x in hist.epochs]})
        run.record(("train_seconds", key[col]), hist.train_seconds)
    run.record("table1", {"hMup": table})
    run.record("grid", {key[c]: table[c] for c in ("E&M", "M")})
    run.record("hMup.dropout", dropout)
    for col in ("E&M", "M"):
        run.record(f"hMup.{col.replace('&', '')}.pairwise_bleu", table[col]["pairwise_bleu"])


def shared_styles(conf, clean, tgt_out, hyps, near: float, vocab=None, hold: float = 0.2, split: float = 0.3) -> list[dict]:
    """Per two experts each with a ``hold`` share or more of their pairs in one style: the styles, their near-ties, splitting words, identical-output share."""
    conf, clean = [list(row) for row in conf], torch.as_tensor(clean).float()
    z = clean.argmin(1).tolist()
    best2 = clean.topk(2, dim=1, largest=False)
    tied = (best2.values[:, 1] - best2.values[:, 0]) < near                   # the two best experts closer than `near`
    pairs2 = [tuple(sorted(r)) for r in best2.indices.tolist()]
    rows = [set(t) - {0} for t in torch.as_tensor(tgt_out).tolist()]            # each pair's target words (0: padding)
    holders = [tuple(e for e, row in enumerate(conf) if 0 < row[s] >= hold * sum(row)) for s in range(len(conf[0]))]
    out = []
    for a, b in sorted({h[:2] for h in holders if len(h) > 1}):
        def share(e, w):
            return sum(w in r for r, ze in zip(rows, z) if ze == e) / max(z.count(e), 1)
        apart = sorted(((abs(share(a, w) - share(b, w)), w) for w in set().union(*rows)), reverse=True)
        words = [(vocab.decode([w]) if vocab else w, share(a, w), share(b, w)) for d, w in apart[:3]
                 if d >= split and a in z and b in z]
        out.append({"experts": (a, b), "styles": [s for s, h in enumerate(holders) if h[:2] == (a, b)], "words": words,
                    "near_ties": int(sum(bool(t) and p == (a, b) for t, p in zip(tied.tolist(), pairs2))),
                    "same_output": sum(h[a] == h[b] for h in hyps) / max(len(hyps), 1)})
    return out


def pair_note(f: dict, sep: str = " ") -> str:
    """A short description of one :func:`shared_styles` finding: 'z=a, z=b: split by ...' or 'duplicates ...'."""
    head = f"z={f['experts'][0]}, z={f['experts'][1]}: "
    if f["words"]:
        return head + "split by " + ", ".join(repr(w) for w, _, _ in f["words"])
    return head + f"duplicates: {f['near_ties']} near-ties,{sep}the same translation on {f['same_output']:.0%} of test sources"


def style_bars(panels, k: int):
    """A figure of stacked bars, one panel per (title, expert x style counts, note under it): each expert's pairs by style."""
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.6), sharey=True, squeeze=False)
    for ax, (title, conf, note) in zip(axes[0], panels):
        bottom = [0] * k
        for s in range(len(conf[0])):                        # one colour per style, stacked in each expert's bar
            ax.bar(range(k), [row[s] for row in conf], bottom=bottom, color=f"C{s}", label=f"style {s}")
            bottom = [b + row[s] for b, row in zip(bottom, conf)]
        ax.set(title=title, xticks=range(k), xticklabels=[f"z={z}" for z in range(k)], xlabel="expert" + note)
    axes[0][0].set_ylabel("training pairs in the epoch")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def largest_rise(confs):
    """The epoch (1-based) whose matched accuracy rose most over the epoch before, with (before, after); None if it never rose."""
    acc = [matched_accuracy(c) for c in confs]
    e = max(range(1, len(acc)), key=lambda i: acc[i] - acc[i - 1], default=None)
    return (e + 1, acc[e - 1], acc[e]) if e is not None and acc[e] > acc[e - 1] else None
