"""A paper's claims as data, fixed before the run, and the one function that decides them over seeds.

Each paper has a module here (:mod:`.seed_paper`, :mod:`.zoph_knight`, :mod:`.shen`, :mod:`.scones`,
:mod:`.lachaux`) holding ``CLAIMS``, a tuple of :class:`PaperClaim`: the paper's sentence quoted with
its section, what is measured (which systems, which metric, which sentences), the direction, the
threshold the paper fixes (never one read off this run), and the :class:`Precondition`\\ s the
paper's statement assumes. ``SANITY`` holds the checks of the toy's own construction (a metric's
identity, an ordering the generator builds in): they are recorded apart and never counted as a
paper's claim.

A reproduction notebook measures, for every model seed, a dict of named quantities
(:class:`nbsupport.stats.Resampled` values on one set of test-set resamples, or plain numbers) and
the facts its preconditions read (validation losses per epoch, usage counts, the device). Then
:func:`decide` gives, per claim:

* a verdict per seed: the seed's 95% bootstrap interval over the test sources against the
  threshold (holds / not decided / contradicted), "not decided" where a precondition failed on it;
* a pooled verdict on the seeds' mean (:func:`nbsupport.stats.seed_mean`: the t interval of the
  mean over seeds and the bootstrap of the mean, in quadrature), "not decided" when a
  precondition failed on any seed, with the reason;
* each precondition with its result per seed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from ..stats import VERDICTS, Interval, Resampled, claim as _claim, seed_mean
# the convergence rule of every reproduction: the last epoch lowered the validation loss by less than this fraction
from ..train import CONVERGED_BELOW


@dataclass(frozen=True)
class Precondition:
    """What a paper's statement assumes, checked on one seed's measurements: ``check(m)`` returns
    (ok, what was found). ``says`` states the assumption in a sentence."""
    name: str
    says: str
    check: Callable[[Mapping], tuple[bool, str]]

    def __call__(self, measured: Mapping) -> tuple[bool, str]:
        ok, found = self.check(measured)
        return bool(ok), str(found)


@dataclass(frozen=True)
class PaperClaim:
    """One statement of a paper, as the reproduction tests it. ``quantity`` names the per-seed
    measurement whose interval is compared with ``threshold`` in ``direction`` (">" or "<");
    ``threshold_from`` says where the paper fixes that threshold."""
    key: str
    quote: str
    section: str
    measures: str
    quantity: str
    direction: str
    threshold: float
    threshold_from: str
    preconditions: tuple[Precondition, ...] = ()

    def __post_init__(self):
        if self.direction not in (">", "<"):
            raise ValueError(f"{self.key}: direction must be '>' or '<', got {self.direction!r}")
        if not self.quote or not self.section or not self.threshold_from:
            raise ValueError(f"{self.key}: a claim needs its quote, its section and where its threshold comes from")


@dataclass(frozen=True)
class Sanity:
    """A check of the toy's or the code's own construction: ``quantity`` names a per-seed boolean."""
    key: str
    says: str
    quantity: str


# --------------------------------------------------------------------------- preconditions
def relative_last_drop(valid: Sequence[float]) -> float:
    """How much the last epoch lowered the validation loss, as a fraction of the epoch before (inf
    for a single epoch: nothing says it stopped improving)."""
    valid = [float(v) for v in valid]
    if len(valid) < 2:
        return math.inf
    return (valid[-2] - valid[-1]) / abs(valid[-2])


def converged(*models: str, below: float = CONVERGED_BELOW) -> Precondition:
    """The models (keys of ``measured["valid_nll"]``: each a list of per-epoch validation losses)
    were trained until the last epoch lowered their validation loss by less than ``below``."""
    def check(m):
        drops = {name: relative_last_drop(m["valid_nll"][name]) for name in models}
        late = {n: d for n, d in drops.items() if d >= below}
        found = ", ".join(f"{n} {d:+.1%}" if math.isfinite(d) else f"{n} one epoch" for n, d in drops.items())
        return not late, f"last-epoch drop: {found}"
    return Precondition("converged", f"{', '.join(models)} trained to convergence (last epoch lowers the validation "
                                      f"loss by less than {below:.0%})", check)


def within(quantity: str, low: float, high: float, says: str) -> Precondition:
    """The estimate of ``quantity`` lies strictly between ``low`` and ``high`` (not at a floor or a
    ceiling where the comparison means nothing)."""
    def check(m):
        value = estimate_of(m[quantity])
        return low < value < high, f"{quantity} = {value:.3g}"
    return Precondition(f"{quantity} in ({low:g}, {high:g})", says, check)


def fact(name: str, says: str) -> Precondition:
    """A premise the notebook measured as ``measured["facts"][name] = (ok, what was found)``."""
    def check(m):
        ok, found = m["facts"][name]
        return ok, found
    return Precondition(name, says, check)


def compute_bound(says: str = "timed where a training step is compute-bound (a CPU), not launch-bound") -> Precondition:
    """Timings are compared only on a CPU (a toy step on a GPU waits on kernel launches, not on the arithmetic)."""
    def check(m):
        device = str(m["facts"].get("device", "?"))
        return device.startswith("cpu"), f"device {device}"
    return Precondition("compute-bound device", says, check)


# --------------------------------------------------------------------------- deciding
def estimate_of(value) -> float:
    if isinstance(value, (Resampled, Interval)):
        return float(value.estimate)
    return float(value)


def interval_of(value) -> Interval:
    if isinstance(value, Resampled):
        return value.interval()
    if isinstance(value, Interval):
        return value
    return Interval(float(value), float(value), float(value))      # a count or a timing without resamples


def _pooled(values: list) -> Interval:
    if all(isinstance(v, Resampled) for v in values) and len({len(v.values) for v in values}) == 1:
        return seed_mean(values)
    from ..stats import seed_interval
    ivs = [interval_of(v) for v in values]
    below = sum(iv.estimate - iv.ci_low for iv in ivs) / len(ivs)
    above = sum(iv.ci_high - iv.estimate for iv in ivs) / len(ivs)
    mean = sum(iv.estimate for iv in ivs) / len(ivs)
    return seed_interval([iv.estimate for iv in ivs], Interval(mean, mean - below, mean + above))


def decide(c: PaperClaim, per_seed: Mapping[int, Mapping]) -> dict:
    """The claim ``c`` on every seed's measurements (``{seed: measured}``) and pooled over the seeds;
    the record kept in the reproduction's results (``verdict``, ``estimate``, ``ci_low``, ``ci_high``,
    ``seeds``, ``preconditions``, ``counts``, and the claim's own fields)."""
    if not per_seed:
        raise ValueError(f"{c.key}: no seed was measured")
    seeds, failed_on, conditions = {}, {}, []
    for p in c.preconditions:
        results = {s: p(m) for s, m in per_seed.items()}
        conditions.append({"name": p.name, "says": p.says, "ok": all(ok for ok, _ in results.values()),
                           "per_seed": {str(s): {"ok": ok, "found": found} for s, (ok, found) in results.items()}})
        for s, (ok, found) in results.items():
            if not ok:
                failed_on.setdefault(s, []).append(f"{p.name} ({found})")
    for s, m in per_seed.items():
        reason = "; ".join(failed_on.get(s, [])) or None
        one = _claim(c.key, interval_of(m[c.quantity]), c.direction, c.threshold, c.section, reason)
        seeds[str(s)] = {"verdict": one.verdict, "interval_verdict": one.interval_verdict,
                         "estimate": one.estimate, "ci_low": one.ci_low, "ci_high": one.ci_high}
    pooled_iv = _pooled([m[c.quantity] for m in per_seed.values()])
    reason = ("preconditions failed on seed " + "; seed ".join(f"{s}: {', '.join(r)}" for s, r in failed_on.items())
              if failed_on else None)
    pooled = _claim(c.key, pooled_iv, c.direction, c.threshold, c.section, reason)
    counts = {v: sum(1 for r in seeds.values() if r["verdict"] == v) for v in VERDICTS}
    return {"verdict": pooled.verdict, "interval_verdict": pooled.interval_verdict, "estimate": pooled.estimate,
            "ci_low": pooled.ci_low, "ci_high": pooled.ci_high, "direction": c.direction, "threshold": c.threshold,
            "threshold_from": c.threshold_from, "quote": c.quote, "section": c.section, "measures": c.measures,
            "n_seeds": len(per_seed), "seeds": seeds, "counts": counts, "preconditions": conditions,
            "undecided_because": reason}


def decide_all(claims: Sequence[PaperClaim], per_seed: Mapping[int, Mapping]) -> dict:
    """{claim key: :func:`decide`'s record} for a paper's table; every claim's quantity must have
    been measured on every seed."""
    missing = {c.key: [s for s, m in per_seed.items() if c.quantity not in m] for c in claims}
    missing = {k: v for k, v in missing.items() if v}
    if missing:
        raise KeyError(f"quantities not measured: {missing}")
    return {c.key: decide(c, per_seed) for c in claims}


def check_sanity(checks: Sequence[Sanity], per_seed: Mapping[int, Mapping]) -> dict:
    """{check key: {"says", "ok", "per_seed"}}: the construction checks, apart from the claims."""
    return {s.key: {"says": s.says, "ok": all(bool(m[s.quantity]) for m in per_seed.values()),
                    "per_seed": {str(seed): bool(m[s.quantity]) for seed, m in per_seed.items()}} for s in checks}


def counts(records: Mapping[str, dict]) -> dict:
    """Verdict counts of :func:`decide_all`'s records: pooled, and summed over the seeds."""
    pooled = {v: sum(1 for r in records.values() if r["verdict"] == v) for v in VERDICTS}
    per_seed = {v: sum(r["counts"][v] for r in records.values()) for v in VERDICTS}
    return {"pooled": pooled, "per_seed": per_seed}


def claims_table(claims: Sequence[PaperClaim]) -> str:
    """The claims as a markdown table, as fixed before the run (printed at the top of a reproduction)."""
    esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")
    rows = ["| claim | the paper says | section | measured | test | threshold from | preconditions |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for c in claims:
        pre = "; ".join(p.says for p in c.preconditions) or "none"
        rows.append(f"| {esc(c.key)} | \"{esc(c.quote)}\" | {esc(c.section)} | {esc(c.measures)} | "
                    f"{esc(c.quantity)} {c.direction} {c.threshold:g} | {esc(c.threshold_from)} | {esc(pre)} |")
    return "\n".join(rows)


def verdict_table(records: Mapping[str, dict]) -> str:
    """The verdicts, pooled and per seed, as a markdown table (printed at the end of a reproduction)."""
    seeds = sorted({s for r in records.values() for s in r["seeds"]}, key=int)
    rows = ["| claim | pooled: mean [95% interval] | test | verdict | " + " | ".join(f"seed {s}" for s in seeds)
            + " | undecided because |", "| --- " * (5 + len(seeds)) + "|"]
    short = {"holds": "holds", "not decided": "not decided", "contradicted": "CONTRADICTED"}
    for key, r in records.items():
        per = " | ".join(f"{r['seeds'][s]['estimate']:.2f} {short[r['seeds'][s]['verdict']]}" for s in seeds)
        rows.append(f"| {key} | {r['estimate']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}] | {r['direction']} "
                    f"{r['threshold']:g} | {short[r['verdict']]} | {per} | {r['undecided_because'] or ''} |")
    return "\n".join(rows)


PAPERS = ("seed_paper", "zoph_knight", "shen", "scones", "lachaux")


@dataclass
class Reproduction:
    """A paper's reproduction in one object: its claim and sanity tables, the model seeds, and the
    seeds' measurements (``measured[seed]``, filled by the notebook). ``decide()`` returns the
    records saved under ``claims``; ``record()`` everything the results file keeps."""
    paper: str
    title: str
    claims: tuple[PaperClaim, ...]
    sanity: tuple[Sanity, ...] = ()
    seeds: tuple[int, ...] = (0,)
    measured: dict = field(default_factory=dict)

    def decide(self) -> dict:
        return decide_all(self.claims, self.measured)

    def record(self) -> dict:
        decided = self.decide()
        return {"paper": self.paper, "seeds": sorted(self.measured), "claims": decided,
                "sanity": check_sanity(self.sanity, self.measured), "counts": counts(decided)}


def reproduction(paper: str, profile, first_seed: int = 0, n_seeds: int | None = None) -> Reproduction:
    """The reproduction of ``paper`` (one of :data:`PAPERS`: its module's ``TITLE``, ``CLAIMS`` and
    ``SANITY``) at ``profile`` (a :class:`nbsupport.profiles.Profile`), with model seeds
    ``first_seed``, ``first_seed + 1``, ... (``n_seeds``: the profile's ``reproduction["seeds"]``
    when None). Seed ``first_seed`` is the lessons' model: the cache shares it."""
    import importlib
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; valid papers: {', '.join(PAPERS)}")
    n = profile.reproduction["seeds"] if n_seeds is None else n_seeds
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n_seeds must be a positive integer (or None: the profile's {profile.reproduction['seeds']}), got {n!r}")
    module = importlib.import_module(f"{__name__}.{paper}")
    return Reproduction(paper, module.TITLE, tuple(module.CLAIMS), tuple(getattr(module, "SANITY", ())),
                        tuple(range(first_seed, first_seed + n)))
