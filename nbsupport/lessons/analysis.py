"""What did each latent value learn? Confusion with known styles, purity, the words whose
frequency differs most across latent values (the seed paper Table 4), and difference marking."""
from __future__ import annotations

import math
import random
from collections import Counter
from typing import Sequence

import numpy as np
import matplotlib.pyplot as plt
import torch
import torch.nn as nn
from scipy.optimize import linear_sum_assignment

from ..data.vocab import WordVocab
from ..metrics import corpus_bleu, oracle_assignment
from ..data import synthetic as syn
from ..data.batching import pad_batch
from ..decode import decode
from ..models.transformer import shift_right
from ..stats import Resampled
from ..views.live import compare_table


def latent_label_confusion(hyps: Sequence[Sequence[str]], refs, labels, n_labels: int, seed: int = 0):
    """K x S counts: hypothesis k of a source is credited with the label of its best-matching
    reference (highest sentence BLEU, ties broken at random with ``seed``)."""
    return confusion_per_source(hyps, refs, labels, n_labels, seed).sum(axis=0).tolist()


def confusion_per_source(hyps: Sequence[Sequence[str]], refs, labels, n_labels: int, seed: int = 0) -> np.ndarray:
    """Each source's share of :func:`latent_label_confusion`: (sources x K x S) counts, for
    resampling the sources (:func:`nbsupport.stats.purity_of`)."""
    k = len(hyps[0])
    conf = np.zeros((len(hyps), k, n_labels), dtype=int)
    for s, (row, ls) in enumerate(zip(oracle_assignment(hyps, refs, random.Random(seed)), labels)):
        for z, a in enumerate(row):
            conf[s, z, ls[a]] += 1
    return conf


def purity(confusion) -> float:
    """Mean over latent values of the fraction of its hypotheses that match its majority label."""
    rows = [r for r in confusion if sum(r)]
    return sum(max(r) / sum(r) for r in rows) / len(rows)


def styles_owned(confusion) -> int:
    """How many labels are the majority label of some latent value that has hypotheses: S of S is
    one label per value (two values sharing a label own it once; purity cannot tell)."""
    return len({max(range(len(row)), key=row.__getitem__) for row in confusion if sum(row)})


def matched_accuracy(confusion) -> float:
    """The share of hypotheses written in the style their latent value is matched to, when each
    latent value is matched to a *different* style (the one-to-one matching with the most
    hypotheses, Hungarian algorithm). Unlike :func:`purity`, latent values that all write one style
    score 1/S, not 1; K x S counts with K <= S (every value needs a style of its own)."""
    c = np.asarray(confusion, dtype=float)
    if c.ndim != 2 or c.shape[0] > c.shape[1] or c.sum() <= 0:
        raise ValueError(f"matched_accuracy needs K x S counts with K <= S and some hypotheses, got shape {c.shape}")
    rows, cols = linear_sum_assignment(c, maximize=True)
    return float(c[rows, cols].sum() / c.sum())


def resampled_matched_accuracy(per_source_confusion, boot):
    """:func:`matched_accuracy` of the latent x style counts summed over the sources
    (:func:`confusion_per_source`), on the test set and in every resample of ``boot``
    (:class:`nbsupport.stats.Resamples`): a :class:`nbsupport.stats.Resampled`."""
    conf = np.asarray(per_source_confusion, dtype=float)
    return Resampled(matched_accuracy(conf.sum(0)),
                     np.array([matched_accuracy(c) for c in np.tensordot(boot.counts, conf, axes=1)]))


def latents_used(usage: Sequence[int], share: float = 0.01) -> int:
    """How many latent values (experts, domains) took more than ``share`` of the training
    sentences, from a usage histogram (one count per value)."""
    return sum(u > share * sum(usage) for u in usage)


def word_preferences(hyps: Sequence[Sequence[str]], top: int = 10, min_count: int = 5):
    """Words whose frequency differs most across latent values: [(word, [count per z])],
    ranked by the ratio of the largest to the smallest count (+1 smoothed)."""
    k = len(hyps[0])
    counts = [Counter() for _ in range(k)]
    for hs in hyps:
        for z, h in enumerate(hs):
            counts[z].update(WordVocab.tokenize(h))
    words = {w for c in counts for w, n in c.items()}
    rows = [(w, [c[w] for c in counts]) for w in words if sum(c[w] for c in counts) >= min_count]
    rows.sort(key=lambda r: (-(max(r[1]) + 1) / (min(r[1]) + 1), r[0]))
    return rows[:top]


# --------------------------------------------------------------------------- mixture degeneracies (Shen et al. §3)
# Calibrated on the papers' own labelled rows (tests/test_mixture.py holds them all):
# * D1 (one expert trained, Shen Table 7 online + independent; the seed paper Table 2): every other
#   latent decodes at <= 0.023 of the best latent's BLEU; in every healthy row the second-best
#   latent reaches >= 0.61 of the best (Table 7 offline independent hMlp: 15.8 of 25.7). Any
#   ratio in (0.023, 0.61] agrees with all of them; 0.2 leaves a factor of 3 or more to each side.
# * D2 (latent ignored): the lowest pairwise BLEU the papers call D2 is 87.6 (Shen Table 1, hMup
#   with dropout in E&M); the highest of a model they call healthy is 80.4 (Shen Table 5, sMup
#   en-fr, "well performing"), and the seed paper Table 2 gives beam search 84.8 with no failure. Any
#   threshold in (84.8, 87.6] agrees with all of them; 86 sits inside.
D1_RATIO = 0.2
D2_PAIRWISE = 86.0


def is_d1(per_latent_bleu) -> bool:
    """D1, one expert trained: every latent but the best decodes at < D1_RATIO x its BLEU."""
    bleus = sorted(per_latent_bleu, reverse=True)
    if len(bleus) < 2:
        raise ValueError("the D1 test needs the per-latent BLEU of K >= 2 latents")
    return bleus[0] > 0 and all(b < D1_RATIO * bleus[0] for b in bleus[1:])


def is_d2(pairwise_bleu: float) -> bool:
    """D2, latent ignored: the K hypotheses are near copies, pairwise BLEU >= D2_PAIRWISE."""
    return pairwise_bleu >= D2_PAIRWISE


def one_latent_used(usage: Sequence[int] | None) -> bool:
    """D1 by its definition (Shen §3: one expert "is always picked while the other components
    starve"): the E-step gave more than 1% of the training sentences to at most one latent value
    (:func:`latents_used` of a usage histogram, e.g. the last training epoch's). With shared
    parameters the starved latents can still decode well (the decoder is trained through the one
    used latent), so per-latent BLEU alone does not show it. No histogram (None): False."""
    return usage is not None and sum(usage) > 0 and latents_used(usage) < 2


def degeneracy(per_latent_bleu, pairwise_bleu: float, usage: Sequence[int] | None = None) -> str:
    """Label a trained mixture "D1" (:func:`is_d1`, or :func:`one_latent_used` when the E-step's
    ``usage`` histogram is given), else "D2" (:func:`is_d2`), else "ok".

    Only diversity and the latents' BLEU *relative to each other* are judged: D2 means the
    experts write near copies and (not being D1) decode about equally well; absolute quality
    is not checked (the papers' D2 rows have BLEU as high as, or higher than, their healthy
    rows: Shen Table 1, E&M against M). Thresholds :data:`D1_RATIO` and :data:`D2_PAIRWISE`
    are calibrated on the papers' labelled rows (see above). "ok" therefore needs the experts
    to write different translations that decode comparably well and, given ``usage``, the
    E-step to send sentences to at least two of them."""
    if is_d1(per_latent_bleu) or one_latent_used(usage):
        return "D1"
    return "D2" if is_d2(pairwise_bleu) else "ok"


def seed_label(labels) -> str:
    """One label for a variant trained with several seeds: the label of a strict majority of
    the seeds, else "mixed" (then read the per-seed labels)."""
    labels = list(labels)
    if not labels:
        raise ValueError("seed_label needs the labels of at least one seed")
    best = max(sorted(set(labels)), key=labels.count)
    return best if labels.count(best) * 2 > len(labels) else "mixed"


def per_latent_bleu_one_ref(hyps: Sequence[Sequence[str]], refs, seed: int = 0) -> list[float]:
    """Shen Table 7's "BLEU per latent": K corpus BLEUs, hypothesis k of every source against
    ONE reference of that source (the paper: "corpus level BLEU w.r.t. one reference"). The
    reference is drawn uniformly per source with ``seed`` and is the same for all K latents:
    WMT's single reference has no relation to any latent's style, while the toy's references
    are ordered by style, so a fixed index would favour the latent that learned that style."""
    if len(hyps) != len(refs) or not hyps:
        raise ValueError(f"need one hypothesis set per reference set, got {len(hyps)} and {len(refs)}")
    one = one_reference(refs, seed)
    return [corpus_bleu([hs[z] for hs in hyps], one) for z in range(len(hyps[0]))]


def one_reference(refs, seed: int = 0) -> list[str]:
    """The one reference per source that :func:`per_latent_bleu_one_ref` scores against (drawn
    uniformly per source with ``seed``)."""
    rng = random.Random(seed)
    return [rs[rng.randrange(len(rs))] for rs in refs]


def set_dropout(model, p: float) -> None:
    """Set every dropout probability of a model (nn.Dropout modules and attention dropout)."""
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = p
        elif hasattr(m, "dropout") and isinstance(m.dropout, float):
            m.dropout = p


def estep_flips(model, src, tgt_in, tgt_out, p: float, seed: int = 0) -> dict:
    """The seed paper's Fig. 3 / Shen Fig. 4: how often dropout p changes the E-step's argmin z.
    Returns the flip rate, the mean NLL gap between the best and second-best latent (no
    dropout), the mean absolute change dropout makes to a sentence's NLL, and the mean
    ``relative_noise`` (:func:`flip_details`)."""
    d = flip_details(*estep_with_dropout(model, src, tgt_in, tgt_out, p, seed))
    return {"flip_rate": float(d["flipped"].mean()), "gap": float(d["gap"].mean()), "noise": float(d["noise"].mean()),
            "relative_noise": float(d["relative_noise"].mean())}


def flip_details(clean, noisy) -> dict:
    """Per sentence, from the (B, K) NLLs of one E-step without and with dropout
    (:func:`estep_with_dropout`), as numpy arrays: ``flipped`` (1 where the argmin changed),
    ``gap`` (second-best minus best NLL, no dropout), ``noise`` (the mean absolute change of the
    K NLLs) and ``relative_noise``: the absolute change of the *difference* between the two
    clean-best experts' NLLs, |(noisy_2nd - clean_2nd) - (noisy_best - clean_best)|. A change
    every expert shares (the encoder's dropout moves all K NLLs together) cannot flip the choice;
    with K = 2 the choice flips exactly when the difference moves by more than the gap, against
    the gap's sign."""
    clean, noisy = clean.float(), noisy.float()
    order = clean.argsort(dim=1)
    best, second = order[:, :1], order[:, 1:2]
    shift = noisy - clean
    gap = (clean.gather(1, second) - clean.gather(1, best)).squeeze(1)
    relative = (shift.gather(1, second) - shift.gather(1, best)).squeeze(1).abs()
    out = {"flipped": (clean.argmin(1) != noisy.argmin(1)).float(), "gap": gap,
           "noise": shift.abs().mean(1), "relative_noise": relative}
    return {k: v.detach().cpu().numpy() for k, v in out.items() if isinstance(v, torch.Tensor)}


def estep_with_dropout(model, src, tgt_in, tgt_out, p: float, seed: int = 0):
    """One E-step twice: every latent value's sentence NLL (B, K) without dropout and with
    dropout ``p`` (seeded); the model's own dropout is restored. The argmin of each row is the
    E-step's choice: where the two differ, dropout flipped it (:func:`estep_flips`)."""
    if not 0 <= p < 1:
        raise ValueError(f"the dropout probability p must be in [0, 1), got {p!r}")
    old = [(m, getattr(m, "p", None), getattr(m, "dropout", None)) for m in model.modules()]
    devices = [src.device.index or 0] if src.is_cuda else []
    try:   # the kernel's random state is left as it was: a widget calls this on every move
        with torch.no_grad(), torch.random.fork_rng(devices=devices):
            model.eval()
            memory, mask = model.encode(src)
            clean = model.latent_nll(memory, mask, tgt_in, tgt_out)
            torch.manual_seed(seed)
            set_dropout(model, p)
            model.train()
            memory, mask = model.encode(src)
            noisy = model.latent_nll(memory, mask, tgt_in, tgt_out)
    finally:
        model.eval()
        for m, mp, md in old:   # restore the model's own dropout, also after an error
            if mp is not None:
                m.p = mp
            if isinstance(md, float):
                m.dropout = md
    return clean, noisy


def sample_sentences(data, n: int, seed: int, device="cpu"):
    """(src, tgt_in, tgt_out) of ``n`` training pairs drawn uniformly without replacement
    (seeded): ordinary sentences of every length, as the papers' flip rates are measured on
    (a token batch would hold only sentences of similar length)."""
    if not 0 < n <= len(data):
        raise ValueError(f"n must be in 1..{len(data)} (the number of pairs), got {n}")
    idx = random.Random(seed).sample(range(len(data)), n)
    tgt = pad_batch([data.tgt[i] for i in idx]).to(device)
    return pad_batch([data.src[i] for i in idx]).to(device), shift_right(tgt), tgt


# --------------------------------------------------------------------------- live views of the latent (02, 04, 05)
def references_of(test, sentence: str) -> list[str]:
    """The references of ``sentence`` when it is a source of ``test`` (its first occurrence,
    spaces normalised), else none: a sentence the student wrote has no references."""
    key = " ".join(str(sentence).split())
    for src, refs in zip(test.src, test.refs):
        if " ".join(src.split()) == key:
            return list(refs)
    return []


LABEL_MEANING = {"D1": "D1, one expert trained: the E-step sends (nearly) every sentence to one expert, "
                       "or the other experts' rows decode badly",
                 "D2": "D2, latent ignored: the experts write (nearly) the same sentence",
                 "ok": "neither D1 nor D2: every expert used, each writing a good translation",
                 "mixed": "its seeds got different labels"}


# --------------------------------------------------------------------------- lesson 04: expert collapse
def style_of(hyp: str, k: int = 3) -> str:
    """The one toy style of 0..k-1 (as a str) whose final mark and verb phrase (voice, tense, synonym) ``hyp`` has, else "none"."""
    words, fits = f" {hyp[:-1]} ", []
    for s in range(k):
        f = syn.style_features(s)
        past, which = f["tense"] == "past", f["synonyms"]
        verbs = [f"{'was' if past else 'is'} {v[which][2]} by" if f["voice"] == "passive" else v[which][past] for v in syn.VERBS]
        if hyp.endswith(f["punctuation"]) and any(f" {v} " in words for v in verbs):
            fits.append(str(s))
    return fits[0] if len(fits) == 1 else "none"


_OPTIONAL_WORDS = {w for _, template, words in syn.OPTIONAL for w in template.format(" ".join(words)).split()}


def _content(text: str) -> str:
    """A toy sentence without its optional phrases' words and its final mark: what :func:`content_right` compares."""
    return " ".join(w for w in text[:-1].split() if w not in _OPTIONAL_WORDS)


def _own_reference(hyp: str, refs: Sequence[str], labels: Sequence[int]) -> str | None:
    """The reference of ``hyp``'s style (:func:`style_of`), or None when it has none among ``labels``."""
    style = style_of(hyp, len(refs))
    return refs[list(labels).index(int(style))] if style != "none" and int(style) in labels else None


def content_right(hyp: str, refs: Sequence[str], labels: Sequence[int]) -> bool:
    """Whether ``hyp`` without the toy's optional phrases is word for word the reference of its own style (:func:`style_of`)."""
    ref = _own_reference(hyp, refs, labels)
    return ref is not None and _content(hyp) == _content(ref)


def marker_columns(hyps, refs, labels) -> dict:
    """Per model, from its K translations per source: how many different majority styles its experts write, their purity
    ("none" counts against it, is never a majority), and the share of sources whose content is right, per expert and mean."""
    k = len(hyps[0])
    counts = [Counter(style_of(hs[z], k) for hs in hyps) for z in range(k)]
    majority = [max(((n, s) for s, n in c.items() if s != "none"), default=(0, "none")) for c in counts]
    by_z = [sum(content_right(hs[z], rs, ls) for hs, rs, ls in zip(hyps, refs, labels)) / len(hyps) for z in range(k)]
    return {"styles_by_markers": len({s for _, s in majority} - {"none"}),
            "purity_by_markers": sum(n for n, _ in majority) / (k * len(hyps)),
            "content_right": sum(by_z) / k, "content_right_by_z": by_z}


def usage_text(usage) -> str:
    """A usage histogram (pairs per expert) as whole counts, space-separated: "1303 1399 1298". Rounded first to a tenth,
    as :func:`~nbsupport.lessons.mixture_runs.evaluate` stores soft EM's mass, then halves up: both print alike."""
    return " ".join(str(math.floor(round(float(u), 1) + 0.5)) for u in usage)


def latent_greedy(model, task, sentence: str, device) -> list[str]:
    """The K greedy translations of one source sentence, one per fixed expert z."""
    src = pad_batch([task.src_vocab.encode(sentence)]).to(device)
    return [task.tgt_vocab.decode(h.tokens) for h in decode(model, src, "latent_greedy")[0]]


def expert_panels(hyps: dict, usage: dict, refs, labels) -> str:
    """HTML: side by side, per model its K translations of one source, each with its style and whether its content is right."""
    tables = [compare_table([f"z={z}" for z in range(len(hs))], hs, title=f"{name} (usage {usage[name]})", column="translation",
                            extra={"its style": [style_of(h, len(hs)) for h in hs],
                                   "content": ["right" if content_right(h, refs, labels) else "wrong" for h in hs]})
              for name, hs in hyps.items()]
    return "<div style='display:flex; flex-wrap:wrap; gap:24px'>" + "".join(tables) + "</div>"


def record_collapse(run, table: dict, hists: dict) -> None:
    """Write lesson 04's results: the thresholds, each mixture's row (intervals as dicts) and its dev loss per epoch."""
    run.record("rule", {"D1_RATIO": D1_RATIO, "D2_PAIRWISE": D2_PAIRWISE})
    run.record("training", {})
    for name, e in table.items():
        run.record(name, {**e, "intervals": {m: i.to_dict() for m, i in e["intervals"].items()}})
        run.record(("training", name), [ep["valid_nll"] for ep in hists[name].epochs])


def second_share(usage) -> float:
    """The second-busiest expert's share of the pairs in a usage histogram."""
    return sorted(usage)[-2] / sum(usage)


def prior_lean(model, batches, usage) -> dict:
    """A learned-prior mixture's hard E-step over ``batches`` without its prior: ``busy`` (the expert with the most
    ``usage``), ``no_prior`` (pairs won per expert by NLL alone), ``log_prior`` (mean log p(z|x) per z), ``gain``
    (the most nats by which any expert fits a pair better than the busy one) and ``min_deficit`` (the fewest nats by
    which the busy expert's log p(z|x) leads every idle one's, over the pairs: above ``gain``, no idle expert wins)."""
    busy, wins, log_prior, gain = max(range(len(usage)), key=lambda z: usage[z]), None, [], []
    with torch.no_grad():
        for s, i, o, *_ in batches:
            memory, mask = model.encode(s)
            nll = model.expert_nll(memory, mask, i, o).cpu()             # -log p(y|z,x): (pairs, K)
            counts = torch.bincount(nll.argmin(1), minlength=nll.shape[1])
            wins = counts if wins is None else wins + counts
            log_prior.append(model.log_prior(memory, mask).cpu())
            gain.append(nll[:, busy] - nll.min(1).values)
    prior = torch.cat(log_prior)                                          # (pairs, K)
    idle = torch.cat([prior[:, :busy], prior[:, busy + 1:]], 1)
    return {"busy": busy, "no_prior": wins.tolist(), "log_prior": prior.mean(0).tolist(),
            "gain": torch.cat(gain).max().item(), "min_deficit": (prior[:, busy] - idle.max(1).values).min().item()}


def usage_figure(hists: dict, names: dict):
    """One panel per model (``names``: model -> what it changes): each expert's share of the training pairs per epoch."""
    fig, axes = plt.subplots(1, len(names), figsize=(11, 3.2), sharey=True, squeeze=False)
    for ax, (name, change) in zip(axes[0], names.items()):
        share = [[u / sum(ep["usage"]) for u in ep["usage"]] for ep in hists[name].epochs]   # (epochs, K)
        epochs = list(range(1, len(share) + 1))
        for z in range(len(share[0])):
            ax.plot(epochs, [s[z] for s in share], marker="osDv^"[z % 5], ms=max(9 - 2 * z, 3), mfc="none",
                    label=f"expert z={z}")                              # hollow: coinciding ones show
        ax.axhline(1 / len(share[0]), color="grey", linestyle=":", linewidth=1)
        ax.set(title=f"{name} ({change})", xlabel="epoch", xticks=epochs, ylim=(-0.03, 1.03))
        ax.title.set_fontsize(9)
    axes[0][0].set_ylabel("share of the training pairs")
    axes[0][-1].legend(fontsize=8, loc="center right")
    fig.tight_layout()
    return fig


def busiest_share(hists: dict, names) -> dict:
    """Per model, the busiest expert's share of the training pairs in the first and in the last epoch."""
    def share(ep):
        return max(ep["usage"]) / sum(ep["usage"])
    return {n: (share(hists[n].epochs[0]), share(hists[n].epochs[-1])) for n in names}


def style_split_by_epoch(hists: dict, names: Sequence[str]) -> list[list]:
    """Rows (epoch, then per model the E-step's :func:`matched_accuracy` of its expert x style mass that epoch, '' past its last)."""
    rows = []
    for e in range(max(len(hists[n].epochs) for n in names)):
        rows.append([e + 1] + [f"{matched_accuracy(hists[n].epochs[e]['latent_by_label']):.2f}"
                               if e < len(hists[n].epochs) else "" for n in names])
    return rows
