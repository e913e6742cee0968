"""What did each latent value learn? Confusion with known styles, purity, the words whose
frequency differs most across latent values (seed 000 Table 4), and difference marking."""
from __future__ import annotations

from collections import Counter
from typing import Sequence

from .data.vocab import WordVocab
from .metrics import oracle_assignment


def latent_label_confusion(hyps: Sequence[Sequence[str]], refs, labels, n_labels: int, seed: int = 0):
    """K x S counts: hypothesis k of a source is credited with the label of its best-matching
    reference (highest sentence BLEU, ties broken at random with ``seed``)."""
    import random
    k = len(hyps[0])
    conf = [[0] * n_labels for _ in range(k)]
    for row, ls in zip(oracle_assignment(hyps, refs, random.Random(seed)), labels):
        for z, a in enumerate(row):
            conf[z][ls[a]] += 1
    return conf


def purity(confusion) -> float:
    """Mean over latent values of the fraction of its hypotheses that match its majority label."""
    rows = [r for r in confusion if sum(r)]
    return sum(max(r) / sum(r) for r in rows) / len(rows)


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


def mark_differences(hyps: Sequence[str]) -> list[str]:
    """Each hypothesis with the words that not all hypotheses share in *asterisks*."""
    token_sets = [set(h.split()) for h in hyps]
    shared = set.intersection(*token_sets) if token_sets else set()
    return [" ".join(w if w in shared else f"*{w}*" for w in h.split()) for h in hyps]


# --------------------------------------------------------------------------- mixture degeneracies (Shen et al. §3)
D1_RATIO = 0.5      # D1: every latent but the best decodes at < half the best latent's BLEU
D2_PAIRWISE = 95.0  # D2: the K hypotheses are near copies (pairwise BLEU >= 95) of good quality


def degeneracy(per_latent_bleu, pairwise_bleu: float) -> str:
    """Label a trained mixture "D1" (one expert trained: all other latents' corpus BLEU far
    below the best one's), "D2" (latent ignored: pairwise BLEU >= 95 while every latent
    decodes well) or "ok". Thresholds: :data:`D1_RATIO`, :data:`D2_PAIRWISE`."""
    bleus = sorted(per_latent_bleu, reverse=True)
    if len(bleus) < 2:
        raise ValueError("degeneracy needs the per-latent BLEU of K >= 2 latents")
    if bleus[0] > 0 and all(b < D1_RATIO * bleus[0] for b in bleus[1:]):
        return "D1"
    if pairwise_bleu >= D2_PAIRWISE:
        return "D2"
    return "ok"


def set_dropout(model, p: float) -> None:
    """Set every dropout probability of a model (nn.Dropout modules and attention dropout)."""
    import torch.nn as nn
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = p
        elif hasattr(m, "dropout") and isinstance(m.dropout, float):
            m.dropout = p


def estep_flips(model, src, tgt_in, tgt_out, p: float, seed: int = 0) -> dict:
    """Seed 000 Fig. 3 / Shen Fig. 4: how often dropout p changes the E-step's argmin z.
    Returns the flip rate, the mean NLL gap between the best and second-best latent (no
    dropout), and the mean absolute change dropout makes to a sentence's NLL."""
    import torch
    old = [(m, getattr(m, "p", None), getattr(m, "dropout", None)) for m in model.modules()]
    with torch.no_grad():
        model.eval()
        memory, mask = model.encode(src)
        clean = model.latent_nll(memory, mask, tgt_in, tgt_out)
        torch.manual_seed(seed)
        set_dropout(model, p)
        model.train()
        memory, mask = model.encode(src)
        noisy = model.latent_nll(memory, mask, tgt_in, tgt_out)
        model.eval()
    for m, mp, md in old:   # restore the model's own dropout
        if mp is not None:
            m.p = mp
        if isinstance(md, float):
            m.dropout = md
    two = clean.topk(2, dim=1, largest=False).values
    return {"flip_rate": float((clean.argmin(1) != noisy.argmin(1)).float().mean()),
            "gap": float((two[:, 1] - two[:, 0]).mean()), "noise": float((noisy - clean).abs().mean())}
