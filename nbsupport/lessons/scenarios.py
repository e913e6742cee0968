"""Hand-made hypothesis sets for the four scenarios of the seed paper Fig. 1 (Shen et al. Fig. 1),
built from real references so the metrics can be watched on them."""
from __future__ import annotations

import random
from typing import Sequence

from ..metrics import _check

DAMAGE = 0.5      # scenario A: the share of a reference's words replaced
SCENARIOS = {
    "A": "spread around the references: K damaged copies of K different references (each word "
         f"replaced, with probability {DAMAGE:g}, by a word of another verse)",
    "B": "clustered near one reference: K near-copies of reference 0, each missing one word",
    "C": "one poor hypothesis: K-1 references plus one unrelated sentence",
    "D": "match the references: the K references themselves, shuffled",
}


def _drop_word(text: str, position: int) -> str:
    words = text.split()
    if len(words) < 2:
        return text
    del words[position % len(words)]
    return " ".join(words)


def damaged_copy(text: str, pool: Sequence[str], share: float, rng: random.Random) -> str:
    """``text`` with each word replaced, with probability ``share``, by a word drawn from ``pool``
    (words of unrelated sentences): a hypothesis near its reference, but not on it."""
    if not 0 <= share <= 1:
        raise ValueError(f"share must be in [0, 1], got {share}")
    if share and not pool:
        raise ValueError("a damaged copy needs a non-empty pool of replacement words")
    return " ".join(rng.choice(pool) if rng.random() < share else w for w in text.split())


def scenario_sets(refs: Sequence[Sequence[str]], seed: int = 0, damage: float = DAMAGE) -> dict[str, list[list[str]]]:
    """Hypothesis sets (one list of K = M strings per source) for scenarios A-D.

    ``refs`` are the M references of each source; unrelated sentences are references of
    other sources of the same list, so their language and style are realistic. Scenario A
    (Fig. 1: hypotheses spread around the references) damages a *different* reference for each
    of its K hypotheses, in a random order, replacing a share ``damage`` of the words.
    """
    m = _check(refs, "refs")
    rng = random.Random(seed)
    n = len(refs)
    if n < m + 1:
        raise ValueError(f"need at least {m + 1} sources to draw unrelated sentences, got {n}")

    def unrelated(i: int, count: int) -> list[str]:
        others = rng.sample([j for j in range(n) if j != i], count)
        return [refs[j][rng.randrange(m)] for j in others]

    sets = {"A": [], "B": [], "C": [], "D": []}
    for i, rs in enumerate(refs):
        pool = [w for s in unrelated(i, m) for w in s.split()]
        order = list(range(m))
        rng.shuffle(order)
        sets["A"].append([damaged_copy(rs[k], pool, damage, rng) for k in order])
        sets["B"].append([_drop_word(rs[0], rng.randrange(10_000)) for _ in range(m)])
        sets["C"].append(list(rs[:m - 1]) + unrelated(i, 1))
        shuffled = list(rs)
        rng.shuffle(shuffled)
        sets["D"].append(shuffled)
    return sets


def sentence_map(sentences: Sequence[str]):
    """2-D points for ``sentences`` whose distances approximate 100 - sentence BLEU (the mean of
    both directions, so that the distance is symmetric): classical multidimensional scaling, the
    picture of the seed paper Fig. 1 drawn from real sentences. Identical sentences get the same point.
    Returns an (n, 2) numpy array, its sign fixed so that the first sentence has x >= 0, y >= 0."""
    import numpy as np
    from ..metrics import sentence_bleu

    n = len(sentences)
    if n < 2:
        raise ValueError(f"a map needs at least 2 sentences, got {n}")
    bleu = np.array([[sentence_bleu(h, r) for r in sentences] for h in sentences])
    d = 100 - (bleu + bleu.T) / 2
    np.fill_diagonal(d, 0)
    j = np.eye(n) - 1 / n
    vals, vecs = np.linalg.eigh(-0.5 * j @ (d ** 2) @ j)
    top = np.argsort(vals)[::-1][:2]
    xy = vecs[:, top] * np.sqrt(np.clip(vals[top], 0, None))
    xy[:, xy[0] < 0] *= -1
    return xy
