"""How sure a number is: bootstrap intervals over test sources, and claims as directional tests.

Every corpus-level metric of :mod:`nbsupport.metrics` is BLEU of some (hypothesis, reference)
segments, and BLEU is a function of the segments' summed sufficient statistics (n-gram matches
and totals, lengths). So the statistics are extracted once per segment with sacrebleu's own
code, summed per *source*, and a bootstrap resample of the sources (Koehn 2004; with all K
hypotheses and all references of a source kept together) is a matrix product: a (R x n) matrix
of how often each source is drawn times the (n x 10) per-source statistics. sacrebleu then turns
each resample's sums into a score. Two systems evaluated on the same resamples give the paired
interval of their difference.

A claim (:func:`claim`) compares such an interval with a threshold in the paper's direction:
it *holds* when the whole interval lies on the paper's side, is *contradicted* when it lies on
the other side, and is *not decided* otherwise.
"""
from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np
from sacrebleu.metrics import BLEU

from . import metrics

RESAMPLES = 1000
LEVEL = 0.95
VERDICTS = ("holds", "not decided", "contradicted")
_BLEU = BLEU()


# --------------------------------------------------------------------------- intervals
@dataclass(frozen=True)
class Interval:
    """An estimate and its 95% bootstrap interval (percentile method)."""
    estimate: float
    ci_low: float
    ci_high: float

    def __str__(self) -> str:
        return f"{self.estimate:.1f} [{self.ci_low:.1f}, {self.ci_high:.1f}]"

    def format(self, spec: str = ".1f") -> str:
        return f"{self.estimate:{spec}} [{self.ci_low:{spec}}, {self.ci_high:{spec}}]"

    def to_dict(self) -> dict:
        return asdict(self)

    def says(self, above: str, below: str, neither: str = "not shown apart", than: float = 0.0) -> str:
        """Read the interval against ``than``: ``above`` when all of it lies above, ``below`` when all
        of it lies below, ``neither`` when it contains ``than`` (a paired difference reads with 0)."""
        return above if self.ci_low > than else below if self.ci_high < than else neither


def interval(estimate: float, resampled: np.ndarray, level: float = LEVEL) -> Interval:
    """``estimate`` with the percentile interval of its ``resampled`` values."""
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(np.asarray(resampled, dtype=float), [tail, 100 - tail])
    return Interval(float(estimate), float(low), float(high))


class Resamples:
    """R bootstrap resamples of n sources, as counts: ``counts[r, i]`` is how often resample r drew
    source i (each row sums to n). Fixed by ``seed``: every metric and system resampled with the
    same object sees the same resamples (a paired comparison)."""

    def __init__(self, n_sources: int, resamples: int = RESAMPLES, seed: int = 0):
        if n_sources < 1:
            raise ValueError("a bootstrap needs at least one source")
        rng = np.random.default_rng(seed)
        draws = rng.integers(0, n_sources, size=(resamples, n_sources))
        self.n = n_sources
        self.counts = np.stack([np.bincount(row, minlength=n_sources) for row in draws]).astype(float)

    def mean(self, per_source: np.ndarray) -> np.ndarray:
        """The mean of a per-source value (n,) in every resample: (R,)."""
        return self.counts @ np.asarray(per_source, dtype=float) / self.n

    def bleu(self, stats: np.ndarray) -> np.ndarray:
        """Corpus BLEU of per-source summed statistics (n x 10) in every resample: (R,)."""
        return bleu_of(self.counts @ stats)


# --------------------------------------------------------------------------- BLEU from statistics
def segment_stats(hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> np.ndarray:
    """sacrebleu's sufficient statistics of each (hypothesis, references) segment, (segments x 10)."""
    streams = [list(s) for s in zip(*refs)]       # sacrebleu takes one stream per reference position
    return np.array(_BLEU._extract_corpus_statistics(list(hyps), streams), dtype=float)


def bleu_of(summed: np.ndarray) -> np.ndarray:
    """Corpus BLEU of each row of summed statistics (R x 10, or one row of 10)."""
    rows = np.atleast_2d(summed)
    return np.array([_BLEU._compute_score_from_stats(list(r)).score for r in rows])


def per_source(segments: list[tuple[int, str, list[str]]], n_sources: int) -> np.ndarray:
    """Statistics summed per source from (source index, hypothesis, references) segments; every
    segment of a source has the same number of references."""
    out = np.zeros((n_sources, 10))
    by_refs: dict[int, list] = {}
    for seg in segments:
        by_refs.setdefault(len(seg[2]), []).append(seg)
    for group in by_refs.values():
        stats = segment_stats([h for _, h, _ in group], [r for _, _, r in group])
        np.add.at(out, [i for i, _, _ in group], stats)
    return out


# --------------------------------------------------------------------------- the metrics, per source
def pairwise_stats(hyps) -> np.ndarray:
    """Per-source statistics of pairwise BLEU (every ordered pair of a source's hypotheses)."""
    return per_source([(s, hs[i], [hs[j]]) for s, hs in enumerate(hyps) for j in range(len(hs))
                       for i in range(len(hs)) if i != j], len(hyps))


def oracle_stats(hyps, refs) -> np.ndarray:
    """Per-source statistics of average oracle BLEU (each hypothesis with its best reference)."""
    assignment = metrics.oracle_assignment(hyps, refs)
    return per_source([(s, h, [rs[a]]) for s, (hs, rs, row) in enumerate(zip(hyps, refs, assignment))
                       for h, a in zip(hs, row)], len(hyps))


def multi_ref_stats(hyps, refs) -> list[np.ndarray]:
    """Per-source statistics of multi-reference BLEU, one array per left-out reference m."""
    m = len(refs[0])
    return [per_source([(s, h, [r for i, r in enumerate(rs) if i != left]) for s, (hs, rs) in enumerate(zip(hyps, refs))
                        for h in hs], len(hyps)) for left in range(m)]


def mbleu_stats(hyps, refs) -> np.ndarray:
    """Per-source statistics of mBLEU (Lachaux et al.: every hypothesis against all its source's references)."""
    return per_source([(s, h, list(rs)) for s, (hs, rs) in enumerate(zip(hyps, refs)) for h in hs], len(hyps))


def coverage_per_source(hyps, refs, seed: int = 0) -> np.ndarray:
    """The number of distinct references each source's hypotheses match (``metrics.ref_coverage``)."""
    assignment = metrics.oracle_assignment(hyps, refs, random.Random(seed))
    return np.array([len(set(row)) for row in assignment], dtype=float)


def corpus_stats(hyps: Sequence[str], refs) -> np.ndarray:
    """Per-source statistics of corpus BLEU of one hypothesis per source against its references."""
    return per_source([(s, h, list(rs)) for s, (h, rs) in enumerate(zip(hyps, refs))], len(hyps))


def purity_of(confusion: np.ndarray) -> np.ndarray:
    """Purity (``analysis.purity``) of latent x label counts, for any leading dimensions: the mean
    over latent values that wrote something of the share of their majority label."""
    conf = np.asarray(confusion, dtype=float)
    sums, maxes = conf.sum(-1), conf.max(-1)
    used = sums > 0
    shares = np.where(used, maxes / np.where(used, sums, 1), 0.0)
    return shares.sum(-1) / np.maximum(used.sum(-1), 1)


@dataclass
class Resampled:
    """A metric's value on the test set and in every bootstrap resample."""
    estimate: float
    values: np.ndarray

    def interval(self) -> Interval:
        return interval(self.estimate, self.values)

    def __sub__(self, other: "Resampled") -> "Resampled":
        return Resampled(self.estimate - other.estimate, self.values - other.values)


def margin_over(best: Resampled, others: Sequence[Resampled]) -> Resampled:
    """``best`` minus the largest of ``others``, in every resample (is it above all of them?)."""
    return Resampled(best.estimate - max(o.estimate for o in others),
                     best.values - np.max([o.values for o in others], axis=0))


def largest_gap(base: Resampled, others: Sequence[Resampled]) -> Resampled:
    """The largest absolute difference between any of ``others`` and ``base``, in every resample
    (are they all similar to it? a claim "< margin" on this is an equivalence test)."""
    return Resampled(max(abs(o.estimate - base.estimate) for o in others),
                     np.max([np.abs(o.values - base.values) for o in others], axis=0))


def ratio(a: Resampled, b: Resampled, scale: float = 1.0) -> Resampled:
    """``scale`` * a / b, in every resample (a relative score, e.g. 100 * BLEU / a baseline's); a zero
    denominator counts as 1e-9."""
    return Resampled(scale * a.estimate / max(b.estimate, 1e-9), scale * a.values / np.maximum(b.values, 1e-9))


def resampled_metrics(hyps, refs, boot: Resamples, seed: int = 0, which=("pairwise_bleu", "avg_oracle_bleu",
                                                                       "multi_ref_bleu", "coverage")) -> dict:
    """{metric: :class:`Resampled`} of K hypotheses per source against M references (notebook
    00's metrics, with ``metrics.diversity_report``'s estimates), on the resamples ``boot``."""
    if len(hyps) != boot.n:
        raise ValueError(f"{len(hyps)} sources, but the resamples are of {boot.n}")
    out = {}
    if "pairwise_bleu" in which:
        stats = pairwise_stats(hyps)
        out["pairwise_bleu"] = Resampled(metrics.pairwise_bleu(hyps), boot.bleu(stats))
    if "avg_oracle_bleu" in which:
        out["avg_oracle_bleu"] = Resampled(metrics.avg_oracle_bleu(hyps, refs), boot.bleu(oracle_stats(hyps, refs)))
    if "multi_ref_bleu" in which:
        per_m = [boot.bleu(stats) for stats in multi_ref_stats(hyps, refs)]
        out["multi_ref_bleu"] = Resampled(metrics.multi_ref_bleu(hyps, refs), np.mean(per_m, axis=0))
    if "coverage" in which:
        cov = coverage_per_source(hyps, refs, seed)
        out["coverage"] = Resampled(float(cov.mean()), boot.mean(cov))
    if "mbleu" in which:
        out["mbleu"] = Resampled(metrics.mbleu(hyps, refs), boot.bleu(mbleu_stats(hyps, refs)))
    return out


def human_resampled(refs, boot: Resamples) -> dict:
    """{metric: :class:`Resampled`} of the human point (``metrics.human_scores``: the references
    scored against each other, multi-reference and average oracle BLEU leave-one-out), on the
    resamples ``boot`` of the sources."""
    if len(refs) != boot.n:
        raise ValueError(f"{len(refs)} sources, but the resamples are of {boot.n}")
    human = metrics.human_scores(refs)
    m = len(refs[0])
    loo = [boot.bleu(per_source([(s, rs[i], [r for j, r in enumerate(rs) if j != i]) for s, rs in enumerate(refs)],
                                len(refs))) for i in range(m)]
    best = []
    for s, rs in enumerate(refs):
        for i in range(m):
            rest = [r for j, r in enumerate(rs) if j != i]
            scores = [metrics.sentence_bleu(rs[i], r) for r in rest]
            best.append((s, rs[i], [rest[scores.index(max(scores))]]))   # first maximum, as human_scores
    return {"pairwise_bleu": Resampled(human["pairwise_bleu"], boot.bleu(pairwise_stats(refs))),
            "multi_ref_bleu": Resampled(human["multi_ref_bleu"], np.mean(loo, axis=0)),
            "avg_oracle_bleu": Resampled(human["avg_oracle_bleu"], boot.bleu(per_source(best, len(refs))))}


def resampled_purity(per_source_confusion: np.ndarray, boot: Resamples) -> "Resampled":
    """Purity of the latent x label counts summed over sources (``analysis.confusion_per_source``),
    on the test set and in every resample."""
    conf = np.asarray(per_source_confusion, dtype=float)
    return Resampled(float(purity_of(conf.sum(0))), purity_of(np.tensordot(boot.counts, conf, axes=1)))


def intervals(hyps, refs, resamples: int = RESAMPLES, seed: int = 0) -> dict[str, Interval]:
    """Notebook 00's four metrics of one system, each with its 95% bootstrap interval over sources."""
    boot = Resamples(len(hyps), resamples, seed)
    return {name: r.interval() for name, r in resampled_metrics(hyps, refs, boot, seed).items()}


# --------------------------------------------------------------------------- corpus BLEU of two systems
def paired_bleu(hyps_a: Sequence[str], hyps_b: Sequence[str], refs, resamples: int = RESAMPLES,
                seed: int = 0) -> dict:
    """Corpus BLEU of system A minus system B (one hypothesis per source each, the same
    references): the difference with its 95% interval over this module's resamples (``seed``), and
    the p-value of sacrebleu's paired bootstrap test (``sacrebleu.significance``, Koehn 2004), which
    draws its own resamples (seeded by $SACREBLEU_SEED, 12345 by default): near the boundary the two
    can disagree."""
    from sacrebleu.significance import PairedTest
    streams = [list(s) for s in zip(*refs)]
    test = PairedTest([("B", list(hyps_b)), ("A", list(hyps_a))], {"BLEU": BLEU()}, streams,
                      test_type="bs", n_samples=resamples)
    _, results = test()
    p_value = float(results["BLEU"][1].p_value)
    boot = Resamples(len(hyps_a), resamples, seed)
    diff = (Resampled(float(metrics.corpus_bleu(hyps_a, refs)), boot.bleu(corpus_stats(hyps_a, refs)))
            - Resampled(float(metrics.corpus_bleu(hyps_b, refs)), boot.bleu(corpus_stats(hyps_b, refs))))
    return {"difference": diff.interval(), "p_value": p_value}


# --------------------------------------------------------------------------- claims
@dataclass(frozen=True)
class Claim:
    """A paper's statement tested on this run: the paper expects ``estimate`` ``direction``
    ``threshold`` (">" or "<"); ``cites`` names the statement. ``undecided_because``: a reason the
    run cannot decide the statement whatever the interval says (its models did not converge, say):
    the verdict is then "not decided", and ``interval_verdict`` keeps what the interval alone says."""
    statement: str
    cites: str
    direction: str
    threshold: float
    estimate: float
    ci_low: float
    ci_high: float
    undecided_because: str | None = None

    @property
    def interval_verdict(self) -> str:
        above, below = self.ci_low > self.threshold, self.ci_high < self.threshold
        if not (above or below):
            return "not decided"
        return "holds" if above == (self.direction == ">") else "contradicted"

    @property
    def verdict(self) -> str:
        return "not decided" if self.undecided_because else self.interval_verdict

    def to_dict(self) -> dict:
        d = {"verdict": self.verdict, "estimate": self.estimate, "ci_low": self.ci_low, "ci_high": self.ci_high,
             "direction": self.direction, "threshold": self.threshold, "cites": self.cites}
        if self.undecided_because:
            d.update(interval_verdict=self.interval_verdict, undecided_because=self.undecided_because)
        return d

    def __str__(self) -> str:
        value = f"{self.estimate:.2f} [{self.ci_low:.2f}, {self.ci_high:.2f}] {self.direction} {self.threshold:g}"
        if self.undecided_because:
            return (f"[NOT DECIDED: {self.undecided_because}] {self.statement} ({self.cites}): {value} "
                    f"(the interval alone: {self.interval_verdict})")
        mark = {"holds": "holds", "not decided": "NOT DECIDED", "contradicted": "CONTRADICTED"}[self.verdict]
        return f"[{mark}] {self.statement} ({self.cites}): {value}"


def claim(statement: str, value: Interval | Resampled, direction: str = ">", threshold: float = 0.0,
          cites: str = "", undecided_because: str | None = None) -> Claim:
    """The paper's statement that ``value`` (a difference, or a quantity against ``threshold``) is
    ``direction`` (">" or "<") ``threshold``, tested with the value's interval (not decided, whatever
    the interval, when ``undecided_because`` gives a reason)."""
    if direction not in (">", "<"):
        raise ValueError(f"direction must be '>' or '<', got {direction!r}")
    iv = value.interval() if isinstance(value, Resampled) else value
    if any(math.isnan(x) for x in (iv.estimate, iv.ci_low, iv.ci_high)):
        raise ValueError(f"{statement!r}: the value or its interval is NaN")
    return Claim(statement, cites, direction, float(threshold), iv.estimate, iv.ci_low, iv.ci_high, undecided_because)


def t_quantile(n_seeds: int, level: float = LEVEL) -> float:
    """Student's t quantile for the two-sided ``level`` interval of a mean of ``n_seeds`` values
    (n - 1 degrees of freedom): 12.71 at n = 2, 4.30 at n = 3, 2.78 at n = 5."""
    from scipy.stats import t
    if n_seeds < 2:
        raise ValueError(f"a t interval needs at least two seeds, got {n_seeds}")
    return float(t.ppf(0.5 + level / 2, n_seeds - 1))


def seed_interval(values: Sequence[float], bootstrap: Interval | None = None) -> Interval:
    """The 95% interval of the *mean over model seeds* of a quantity measured on one test set: the
    seeds' t interval (t quantile with n - 1 degrees of freedom times sd / sqrt(n): the error from
    which models training happened to produce) and the test set's bootstrap interval ``bootstrap``
    (the error from which sentences were drawn, shared by every seed: the same test set), combined
    side by side in quadrature as independent errors. A confidence interval of the mean, not a
    prediction interval for one more seed. One seed has no spread: the bootstrap interval as it is."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("seed_interval needs the value of at least one seed")
    mean = sum(values) / len(values)
    below = 0.0 if bootstrap is None else bootstrap.estimate - bootstrap.ci_low
    above = 0.0 if bootstrap is None else bootstrap.ci_high - bootstrap.estimate
    if len(values) == 1:
        return Interval(mean, mean - below, mean + above)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    t_half = t_quantile(len(values)) * sd / math.sqrt(len(values))
    return Interval(mean, mean - math.hypot(below, t_half), mean + math.hypot(above, t_half))


def seed_mean(per_seed: Sequence["Resampled"]) -> Interval:
    """:func:`seed_interval` of several seeds' :class:`Resampled` values of one quantity on the same
    resamples: the bootstrap part is the percentile interval of the seeds' mean in every resample
    (paired: each resample draws the same sentences for every seed)."""
    if not per_seed:
        raise ValueError("seed_mean needs the value of at least one seed")
    mean = Resampled(float(np.mean([r.estimate for r in per_seed])), np.mean([r.values for r in per_seed], axis=0))
    return seed_interval([r.estimate for r in per_seed], mean.interval())
