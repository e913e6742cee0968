"""Hand-made hypothesis sets for the four scenarios of seed 000 Fig. 1 (Shen et al. Fig. 1),
built from real references so the metrics can be watched on them."""
from __future__ import annotations

import random
from typing import Sequence

from ..metrics import _check

SCENARIOS = {
    "A": "spread out: K unrelated sentences (other verses)",
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


def scenario_sets(refs: Sequence[Sequence[str]], seed: int = 0) -> dict[str, list[list[str]]]:
    """Hypothesis sets (one list of K = M strings per source) for scenarios A-D.

    ``refs`` are the M references of each source; unrelated sentences are references of
    other sources of the same list, so their language and style are realistic.
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
        sets["A"].append(unrelated(i, m))
        sets["B"].append([_drop_word(rs[0], rng.randrange(10_000)) for _ in range(m)])
        sets["C"].append(list(rs[:m - 1]) + unrelated(i, 1))
        shuffled = list(rs)
        rng.shuffle(shuffled)
        sets["D"].append(shuffled)
    return sets
