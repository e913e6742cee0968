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
