"""The claims as data (nbsupport.claims): per-seed verdicts, pooled verdicts over seeds, preconditions
that make a verdict "not decided", and every paper's table well formed."""
import importlib
import math

import numpy as np
import pytest

from nbsupport import claims, stats
from nbsupport.profiles import profile


def resampled(estimate, spread=1.0, n=1000, seed=0):
    rng = np.random.default_rng(seed)
    return stats.Resampled(estimate, estimate + spread * rng.standard_normal(n))


def seed_measured(value, valid=(3.0, 2.0, 1.99), ok=True):
    return {"gap": value, "valid_nll": {"moe": list(valid)}, "facts": {"premise": (ok, "usage [5, 5]"), "device": "cpu"}}


GAP = claims.PaperClaim("gap", "X beats Y", "§5, Table 1", "X minus Y, BLEU, test set", "gap", ">", 0.0,
                        "direction only", (claims.converged("moe"), claims.fact("premise", "usage near uniform")))


def test_per_seed_verdicts_follow_each_seed_s_interval():
    per_seed = {0: seed_measured(stats.Interval(2.0, 1.0, 3.0)), 1: seed_measured(stats.Interval(0.5, -0.5, 1.5)),
                2: seed_measured(stats.Interval(-2.0, -3.0, -1.0))}
    r = claims.decide(GAP, per_seed)
    assert [r["seeds"][s]["verdict"] for s in "012"] == ["holds", "not decided", "contradicted"]
    assert r["counts"] == {"holds": 1, "not decided": 1, "contradicted": 1}
    assert r["n_seeds"] == 3 and all(p["ok"] for p in r["preconditions"])


def test_pooled_interval_is_the_t_interval_of_the_seeds_mean_with_the_bootstrap():
    """Three seeds 1, 2, 3 (sd 1), each with a bootstrap half-width 0.5: the mean 2 and, by hand,
    half-width hypot(0.5, 4.303 / sqrt(3)) = 2.534."""
    per_seed = {s: seed_measured(stats.Interval(v, v - 0.5, v + 0.5)) for s, v in enumerate((1.0, 2.0, 3.0))}
    r = claims.decide(GAP, per_seed)
    assert r["estimate"] == pytest.approx(2.0)
    assert r["ci_high"] - 2.0 == pytest.approx(math.hypot(0.5, 4.303 / math.sqrt(3)), abs=1e-3)
    assert r["verdict"] == "not decided"           # 2 - 2.53 < 0: three seeds this far apart cannot decide it


def test_resampled_seeds_pool_on_paired_resamples():
    per_seed = {s: seed_measured(resampled(5.0 + s, 0.1, seed=s)) for s in range(3)}
    r = claims.decide(GAP, per_seed)
    boot_mean = np.mean([per_seed[s]["gap"].values for s in range(3)], axis=0)
    expected = stats.seed_interval([5.0, 6.0, 7.0], stats.interval(6.0, boot_mean))
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((expected.ci_low, expected.ci_high))
    assert r["verdict"] == "holds" and r["counts"]["holds"] == 3


def test_a_failed_precondition_makes_the_verdict_not_decided_with_its_reason():
    per_seed = {0: seed_measured(stats.Interval(5.0, 4.0, 6.0)),
                1: seed_measured(stats.Interval(5.0, 4.0, 6.0), valid=(3.0, 2.0, 1.5)),   # still falling 25%
                2: seed_measured(stats.Interval(5.0, 4.0, 6.0), ok=False)}
    r = claims.decide(GAP, per_seed)
    assert [r["seeds"][s]["verdict"] for s in "012"] == ["holds", "not decided", "not decided"]
    assert r["seeds"]["1"]["interval_verdict"] == "holds"
    assert r["verdict"] == "not decided" and r["interval_verdict"] == "holds"
    assert "converged" in r["undecided_because"] and "premise" in r["undecided_because"]
    conv = next(p for p in r["preconditions"] if p["name"] == "converged")
    assert conv["per_seed"]["1"]["ok"] is False and "+25.0%" in conv["per_seed"]["1"]["found"]


def test_the_convergence_rule_reads_the_last_epoch():
    assert claims.relative_last_drop([2.0, 1.0]) == 0.5
    assert claims.relative_last_drop([2.0]) == math.inf
    ok, found = claims.converged("a", below=0.02)({"valid_nll": {"a": [1.0, 0.99]}})
    assert ok and "+1.0%" in found
    assert not claims.converged("a", below=0.02)({"valid_nll": {"a": [1.0, 0.97]}})[0]
    # a rising last epoch has converged (or begun to overfit): not still improving
    assert claims.converged("a")({"valid_nll": {"a": [1.0, 1.1]}})[0]


def test_floors_and_devices():
    at_floor = claims.within("bleu", 0, 100, "not at a floor")
    assert not at_floor({"bleu": stats.Interval(0.0, 0.0, 0.0)})[0] and at_floor({"bleu": 40.0})[0]
    cpu = claims.compute_bound()
    assert cpu({"facts": {"device": "cpu"}})[0] and not cpu({"facts": {"device": "cuda:0"}})[0]


def test_bad_claims_and_missing_quantities_are_errors():
    with pytest.raises(ValueError, match="direction"):
        claims.PaperClaim("k", "q", "§1", "m", "x", ">=", 0, "paper")
    with pytest.raises(ValueError, match="threshold comes from"):
        claims.PaperClaim("k", "q", "§1", "m", "x", ">", 0, "")
    with pytest.raises(KeyError, match="gap"):
        claims.decide_all([GAP], {0: {"valid_nll": {}, "facts": {}}})
    with pytest.raises(ValueError, match="valid papers"):
        claims.reproduction("nobody_2020", profile("ci"))


def test_sanity_is_apart_from_the_claims():
    checks = (claims.Sanity("ordering", "A below B by construction", "ordered"),)
    out = claims.check_sanity(checks, {0: {"ordered": True}, 1: {"ordered": False}})
    assert out["ordering"]["ok"] is False and out["ordering"]["per_seed"] == {"0": True, "1": False}


def test_counts_and_tables():
    per_seed = {s: seed_measured(stats.Interval(2.0 + s, 1.0 + s, 3.0 + s)) for s in range(2)}
    records = claims.decide_all([GAP], per_seed)
    assert claims.counts(records)["per_seed"] == {"holds": 2, "not decided": 0, "contradicted": 0}
    assert "| gap |" in claims.verdict_table(records) and '"X beats Y"' in claims.claims_table([GAP])


@pytest.mark.parametrize("paper", claims.PAPERS)
def test_every_paper_s_table_is_well_formed(paper):
    """Each paper module: a title, claims with unique keys, every claim quoted with its section and
    the threshold's source, seeds from the profile (3 at lab, 2 at ci)."""
    module = importlib.import_module(f"nbsupport.claims.{paper}")
    keys = [c.key for c in module.CLAIMS]
    assert module.TITLE and keys and len(keys) == len(set(keys))
    assert all(isinstance(c, claims.PaperClaim) for c in module.CLAIMS)
    assert all(isinstance(s, claims.Sanity) for s in getattr(module, "SANITY", ()))
    assert not set(keys) & {s.key for s in getattr(module, "SANITY", ())}
    assert claims.reproduction(paper, profile("lab")).seeds == (0, 1, 2)
    assert claims.reproduction(paper, profile("ci"), first_seed=4).seeds == (4, 5)
