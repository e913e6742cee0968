"""Quality and diversity metrics for sets of translations, on sacrebleu.

Shapes used everywhere:
    hyps: one entry per source sentence, each a list of K hypothesis strings;
    refs: one entry per source sentence, each a list of M reference strings.
Every function returns BLEU points (0-100) unless stated. sacrebleu's defaults are used
for corpus BLEU (tokenizer 13a, exponential smoothing).

Definitions follow Shen et al. 2019 section 4 (pairwise BLEU, leave-one-out multi-reference
BLEU, per-latent BLEU of Table 7) and the seed-000 paper section 4 (average oracle BLEU,
reference coverage, the "human" scores).

Bare strings, non-strings, empty inputs and uneven lists raise a TypeError/ValueError naming
the argument. Degenerate outputs are defined: exact matches score 100 even without 4-grams
(:func:`corpus_bleu`), so identical (also empty) hypotheses have pairwise BLEU 100, and
identical hypotheses pick the same reference in :func:`ref_coverage`.
"""
from __future__ import annotations

import random
from typing import Sequence

import torch
from sacrebleu.metrics import BLEU

Sets = Sequence[Sequence[str]]

_CORPUS = BLEU()
# the seed paper footnote 4: sentence BLEU with +1 smoothing for n > 1 (sacrebleu's add-k, k=1,
# which sacrebleu applies to n > 1 only).
_SENTENCE = BLEU(smooth_method="add-k", smooth_value=1, effective_order=True)


def _strings(xs, what: str) -> list[str]:
    """Validate a non-empty flat list of strings (not a bare string); return it as a list."""
    if isinstance(xs, str):
        raise TypeError(f"{what}: expected a list of strings, got a bare string; wrap it in a list: [{what}]")
    xs = list(xs)
    if not xs:
        raise ValueError(f"{what}: need at least one string, got an empty list")
    for i, x in enumerate(xs):
        if not isinstance(x, str):
            raise TypeError(f"{what}[{i}]: expected a string, got {type(x).__name__}")
    return xs


def _check(sets: Sets, what: str, at_least: int = 1) -> int:
    """Validate a list of equally sized lists of strings; return the common size."""
    if isinstance(sets, str) or any(isinstance(s, str) for s in sets):
        raise TypeError(f"{what}: expected a list (one per source) of lists of strings, "
                        "got bare strings; wrap each source's strings in a list")
    if len(sets) == 0:
        raise ValueError(f"{what}: need at least one source sentence, got an empty list")
    sizes = {len(s) for s in sets}
    if len(sizes) != 1:
        raise ValueError(f"{what}: every source needs the same number of strings, got sizes {sorted(sizes)}")
    (n,) = sizes
    if n < at_least:
        raise ValueError(f"{what}: need at least {at_least} strings per source, got {n}")
    for i, s in enumerate(sets):
        for j, x in enumerate(s):
            if not isinstance(x, str):
                raise TypeError(f"{what}[{i}][{j}]: expected a string, got {type(x).__name__}")
    return n


def _check_pair(hyps: Sets, refs: Sets, min_refs: int = 1) -> tuple[int, int]:
    k = _check(hyps, "hyps")
    m = _check(refs, "refs", min_refs)
    if len(hyps) != len(refs):
        raise ValueError(f"hyps has {len(hyps)} sources but refs has {len(refs)}")
    return k, m


def _tokens(text: str) -> str:
    return _CORPUS.tokenizer(text)


def corpus_bleu(hyps: Sequence[str], refs: Sequence[str] | Sequence[Sequence[str]]) -> float:
    """Corpus BLEU of a flat list of hypotheses. ``refs`` is a flat list (one reference each)
    or a list of reference lists (several references each, all of the same length).

    A corpus in which every hypothesis is identical (13a tokens) to one of its references
    scores 100, as BLEU of an exact match does, also when the corpus is too short to hold
    n-grams of every order 1-4 (sacrebleu returns 0 there) or is all empty strings."""
    hyps = _strings(hyps, "hyps")
    if isinstance(refs, str):
        raise TypeError("refs: expected a list of strings (one reference per hypothesis) or a list of "
                        "reference lists, got a bare string; wrap it in a list: [refs]")
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    if all(isinstance(r, str) for r in refs):
        ref_sets = [[r] for r in refs]
    else:
        _check(refs, "refs")
        ref_sets = [list(r) for r in refs]
    return _corpus_score(hyps, ref_sets)[0]


def _corpus_score(hyps: list[str], ref_sets: list[list[str]]) -> tuple[float, int]:
    """sacrebleu's corpus BLEU (100 for all-exact matches, see :func:`corpus_bleu`) and the
    hypotheses' length in tokens."""
    score = _CORPUS.corpus_score(hyps, [list(s) for s in zip(*ref_sets)])
    if 0 in score.totals and all(_tokens(h) in {_tokens(r) for r in rs} for h, rs in zip(hyps, ref_sets)):
        return 100.0, score.sys_len    # exact matches, too short for sacrebleu's 4-gram precisions
    return score.score, score.sys_len


def bleu_and_length(hyps: Sequence[str], refs: Sets) -> dict[str, float]:
    """Corpus BLEU of one hypothesis per source against all its references, and the length
    ratio: total hypothesis length / total *mean* reference length (13a tokens).

    sacrebleu's own ratio uses the reference closest in length, which hides a system that
    drops optional material whenever one sampled reference happens to be short; the mean
    reference length is what a translation is expected to be."""
    hyps = _strings(hyps, "hyps")
    _check(refs, "refs")
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} reference sets")
    bleu, sys_len = _corpus_score(hyps, [list(rs) for rs in refs])
    mean_ref = sum(sum(len(_tokens(r).split()) for r in rs) / len(rs) for rs in refs)
    return {"bleu": bleu, "len_ratio": sys_len / max(mean_ref, 1)}


def sentence_bleu(hyp: str, ref: str) -> float:
    """Sentence BLEU against one reference, +1 smoothing for n > 1 (the seed paper footnote 4)."""
    if not isinstance(hyp, str) or not isinstance(ref, str):
        raise TypeError(f"sentence_bleu takes two strings, got {type(hyp).__name__} and {type(ref).__name__}")
    return _SENTENCE.sentence_score(hyp, [ref]).score


def pairwise_bleu(hyps: Sets) -> float:
    """Corpus BLEU over every ordered pair j != k of hypotheses of the same source,
    hypothesis k scored against hypothesis j (Shen et al. 2019 section 4). Lower = more diverse.

    Degenerate sets: K identical hypotheses score 100 (each is an exact copy of the others),
    also when they are too short for 4-grams or empty (identical empty strings count as
    identical); see :func:`corpus_bleu`. An empty hypothesis among non-empty ones matches
    nothing: as the reference of the others it lowers the precisions, as their hypothesis it
    adds a brevity penalty."""
    k = _check(hyps, "hyps", 2)
    sys_, ref = [], []
    for hs in hyps:
        for j in range(k):
            for i in range(k):
                if i != j:
                    sys_.append(hs[i])
                    ref.append(hs[j])
    return corpus_bleu(sys_, ref)


def multi_ref_bleu(hyps: Sets, refs: Sets) -> float:
    """Shen et al.'s leave-one-out BLEU: for each m, corpus BLEU of all hypotheses against the
    M-1 other references; the mean over m. Comparable with the human score of ``human_scores``."""
    k, m = _check_pair(hyps, refs, 2)
    scores = []
    for left_out in range(m):
        sys_, rs = [], []
        for hs, refset in zip(hyps, refs):
            others = [r for i, r in enumerate(refset) if i != left_out]
            for h in hs:
                sys_.append(h)
                rs.append(others)
        scores.append(corpus_bleu(sys_, rs))
    return sum(scores) / m


def _best_refs(hyp: str, refset: Sequence[str]) -> tuple[float, list[int]]:
    """Highest sentence BLEU of ``hyp`` against each reference, and the indices that reach it."""
    scores = [sentence_bleu(hyp, r) for r in refset]
    best = max(scores)
    return best, [i for i, s in enumerate(scores) if s == best]


def oracle_assignment(hyps: Sets, refs: Sets, rng: random.Random | None = None) -> list[list[int]]:
    """For each source and hypothesis, the index of its best-matching reference (highest
    sentence BLEU). Ties go to the first maximum, or to a random one when ``rng`` is given.

    Identical hypotheses (13a tokens) of a source are the same point, so they get the same
    reference: a repeated hypothesis takes its first copy's pick. (One draw is still made per
    hypothesis, so the picks of the others do not depend on the duplicates.)"""
    _check_pair(hyps, refs)
    out = []
    for hs, refset in zip(hyps, refs):
        row, picked = [], {}
        for h in hs:
            _, ties = _best_refs(h, refset)
            pick = ties[0] if rng is None else rng.choice(ties)
            row.append(picked.setdefault(_tokens(h), pick))
        out.append(row)
    return out


def avg_oracle_bleu(hyps: Sets, refs: Sets) -> float:
    """Average oracle BLEU (the seed paper section 4): each hypothesis paired with the reference of
    highest sentence BLEU (first maximum on ties), then corpus BLEU of those pairs."""
    assignment = oracle_assignment(hyps, refs)
    sys_, rs = [], []
    for hs, refset, row in zip(hyps, refs, assignment):
        for h, a in zip(hs, row):
            sys_.append(h)
            rs.append(refset[a])
    return corpus_bleu(sys_, rs)


def ref_coverage(hyps: Sets, refs: Sets, seed: int = 0) -> float:
    """Reference coverage (the seed paper section 4): pair each hypothesis with its best reference
    (ties broken by an RNG seeded with ``seed``); the mean number of distinct references
    matched per source. Between 1 and min(K, M).

    Every hypothesis is paired, as in the paper, also one that shares nothing with any
    reference (sentence BLEU 0 against all: a random one). Identical hypotheses pick the
    same reference (:func:`oracle_assignment`), so K copies of one sentence cover exactly 1."""
    assignment = oracle_assignment(hyps, refs, random.Random(seed))
    return sum(len(set(row)) for row in assignment) / len(assignment)


def per_latent_bleu(hyps: Sets, refs: Sets) -> list[float]:
    """K corpus BLEUs: hypothesis k of every source against all M references. (Shen et al.'s
    Table 7 scores against one reference: :func:`nbsupport.lessons.analysis.per_latent_bleu_one_ref`.)"""
    k, _ = _check_pair(hyps, refs)
    return [corpus_bleu([hs[i] for hs in hyps], refs) for i in range(k)]


def mbleu(hyps: Sets, refs: Sets) -> float:
    """Lachaux et al. 2020 section 4.1: corpus BLEU of every hypothesis against all the
    references of its source (no leave-one-out)."""
    k, _ = _check_pair(hyps, refs)
    return corpus_bleu([h for hs in hyps for h in hs], [rs for rs in refs for _ in range(k)])


def human_scores(refs: Sets) -> dict[str, float]:
    """The human point of every plot, from the references alone:

    * ``pairwise_bleu``: pairwise BLEU of the references;
    * ``multi_ref_bleu``: each reference against the M-1 others, mean over m;
    * ``avg_oracle_bleu``: each reference paired with the best of the rest (first maximum
      on ties), corpus BLEU of those pairs.
    """
    m = _check(refs, "refs", 2)
    loo = [corpus_bleu([rs[i] for rs in refs],
                       [[r for j, r in enumerate(rs) if j != i] for rs in refs]) for i in range(m)]
    sys_, best = [], []
    for rs in refs:
        for n in range(m):
            rest = [r for j, r in enumerate(rs) if j != n]
            _, ties = _best_refs(rs[n], rest)
            sys_.append(rs[n])
            best.append(rest[ties[0]])
    return {"pairwise_bleu": pairwise_bleu(refs),
            "multi_ref_bleu": sum(loo) / m,
            "avg_oracle_bleu": corpus_bleu(sys_, best)}


def diversity_report(hyps: Sets, refs: Sets, seed: int = 0) -> dict[str, float]:
    """All set-level metrics at once, as the notebooks print them (pairwise BLEU is NaN for K=1)."""
    k, _ = _check_pair(hyps, refs, 2)
    return {"pairwise_bleu": pairwise_bleu(hyps) if k > 1 else float("nan"),
            "multi_ref_bleu": multi_ref_bleu(hyps, refs),
            "avg_oracle_bleu": avg_oracle_bleu(hyps, refs),
            "ref_coverage": ref_coverage(hyps, refs, seed)}


# --------------------------------------------------------------------------- latent usage in training
class LatentUsage:
    """How much of an epoch's training pairs each of the K latent values took, overall and by each
    training pair's true label (the toy's style: it shows what the E-step discovered). A step
    reports either the latent it chose per sentence, (B,) indices, or the E-step's
    responsibilities, (B, K) rows summing to 1 (soft EM): then a latent's usage is its summed
    posterior mass, as the authors' code logs it (fairseq ``translation_moe``:
    ``prob_z_xy.float().sum(dim=0)``), not the count of sentences where it is the argmax (a near
    uniform posterior would hand all of them to whichever latent is ahead by a hair)."""

    def __init__(self, k: int, labels: list[int] | None):
        self.k, self.labels = k, labels
        self.n_labels = 1 + max(labels) if labels else 0
        self.counts = torch.zeros(k, dtype=torch.float64)
        self.by_label = torch.zeros(k, max(self.n_labels, 1), dtype=torch.float64)   # latent x true label

    def add(self, z: torch.Tensor, idx: list[int]) -> None:
        z = z.detach().cpu()
        mass = z.double() if z.dim() == 2 else torch.nn.functional.one_hot(z.long(), self.k).double()   # (B, K)
        self.counts += mass.sum(0)
        if self.n_labels:
            self.by_label.index_add_(1, torch.tensor([self.labels[i] for i in idx]), mass.T)

    @staticmethod
    def _plain(t: torch.Tensor):
        """Whole numbers as ints (counts of sentences), posterior mass as floats."""
        return t.long().tolist() if bool((t == t.round()).all()) else t.tolist()

    def on_step(self, batch, z) -> None:
        """A training loop's watcher (:func:`nbsupport.train.train`): the step's choice of latents."""
        if z is not None:
            self.add(z, batch.idx)

    def on_epoch_end(self) -> dict:
        return self.record()

    def record(self) -> dict:
        latent = self.k > 1
        return {"usage": self._plain(self.counts) if latent else None,
                "latent_by_label": self._plain(self.by_label) if latent and self.n_labels else None}
