"""Bootstrap intervals over sources and three-valued claims (nbsupport.stats), against the metrics
themselves, resamples rebuilt by hand, and sacrebleu."""
import math
import random

import numpy as np
import pytest

from nbsupport import metrics, stats

WORDS = "the a cat dog sat ran on under mat rug quickly slowly big small red".split()


def toy_sets(n=30, k=3, m=4, seed=0):
    rng = random.Random(seed)
    sent = lambda: " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9)))
    refs = [[sent() for _ in range(m)] for _ in range(n)]
    hyps = [[rs[rng.randrange(m)] if rng.random() < 0.5 else sent() for _ in range(k)] for rs in refs]
    return hyps, refs


def test_per_source_statistics_give_the_metrics_own_values():
    hyps, refs = toy_sets()
    assert stats.bleu_of(stats.pairwise_stats(hyps).sum(0))[0] == pytest.approx(metrics.pairwise_bleu(hyps))
    assert stats.bleu_of(stats.oracle_stats(hyps, refs).sum(0))[0] == pytest.approx(metrics.avg_oracle_bleu(hyps, refs))
    per_m = [stats.bleu_of(s.sum(0))[0] for s in stats.multi_ref_stats(hyps, refs)]
    assert np.mean(per_m) == pytest.approx(metrics.multi_ref_bleu(hyps, refs))
    firsts = [hs[0] for hs in hyps]
    assert stats.bleu_of(stats.corpus_stats(firsts, refs).sum(0))[0] == pytest.approx(metrics.corpus_bleu(firsts, refs))
    assert stats.coverage_per_source(hyps, refs, 3).mean() == pytest.approx(metrics.ref_coverage(hyps, refs, 3))
    assert stats.bleu_of(stats.mbleu_stats(hyps, refs).sum(0))[0] == pytest.approx(metrics.mbleu(hyps, refs))


def test_a_resample_equals_the_metric_on_the_resampled_test_set():
    """Independent method: draw the sources of a few resamples explicitly (repeating a source as
    often as it was drawn, with all its hypotheses and references) and recompute the metric."""
    hyps, refs = toy_sets(n=12)
    boot = stats.Resamples(len(hyps), resamples=5, seed=4)
    got = stats.resampled_metrics(hyps, refs, boot, which=("pairwise_bleu", "avg_oracle_bleu", "multi_ref_bleu"))
    for r, counts in enumerate(boot.counts.astype(int)):
        picked = [i for i, c in enumerate(counts) for _ in range(c)]
        h, rs = [hyps[i] for i in picked], [refs[i] for i in picked]
        assert got["pairwise_bleu"].values[r] == pytest.approx(metrics.pairwise_bleu(h))
        assert got["avg_oracle_bleu"].values[r] == pytest.approx(metrics.avg_oracle_bleu(h, rs))
        assert got["multi_ref_bleu"].values[r] == pytest.approx(metrics.multi_ref_bleu(h, rs))


def test_resamples_are_seeded_draws_of_every_source_count():
    a, b = stats.Resamples(40, 200, seed=1), stats.Resamples(40, 200, seed=1)
    assert (a.counts == b.counts).all() and (a.counts.sum(1) == 40).all()
    assert not (a.counts == stats.Resamples(40, 200, seed=2).counts).all()
    # each source is drawn once per resample on average
    assert a.counts.mean() == pytest.approx(1.0) and 0.9 < a.counts.mean(0).mean() < 1.1
    assert a.mean(np.arange(40)).mean() == pytest.approx(19.5, abs=0.5)


def test_interval_is_the_percentile_interval():
    iv = stats.interval(5.0, np.arange(1001))
    assert (iv.estimate, iv.ci_low, iv.ci_high) == pytest.approx((5.0, 25.0, 975.0))
    assert str(stats.Interval(1.234, 0.5, 2.0)) == "1.2 [0.5, 2.0]"


def test_an_interval_says_which_side_of_a_value_it_lies_on():
    read = lambda lo, hi, **kw: stats.Interval((lo + hi) / 2, lo, hi).says("A", "B", **kw)
    assert [read(0.1, 2), read(-2, -0.1), read(-1, 1), read(0.0, 1)] == ["A", "B", "not shown apart", "not shown apart"]
    assert read(0.5, 0.6, than=0.45) == "A" and read(0.3, 0.4, than=0.42, neither="near") == "B"
    assert read(0.40, 0.44, than=0.42, neither="near") == "near"


def test_a_better_system_s_interval_excludes_zero_and_identical_systems_do_not():
    hyps, refs = toy_sets(n=60)
    good = [[rs[0]] * 2 for rs in refs]                  # copies of a reference
    boot = stats.Resamples(60, 500, seed=0)
    diff = (stats.resampled_metrics(good, refs, boot)["avg_oracle_bleu"]
            - stats.resampled_metrics(hyps, refs, boot)["avg_oracle_bleu"]).interval()
    assert diff.ci_low > 0
    same = (stats.resampled_metrics(hyps, refs, boot)["pairwise_bleu"]
            - stats.resampled_metrics(hyps, refs, boot)["pairwise_bleu"]).interval()
    assert same.estimate == same.ci_low == same.ci_high == 0.0


def test_paired_bleu_uses_sacrebleu_s_paired_bootstrap():
    hyps, refs = toy_sets(n=50)
    a = [rs[0] for rs in refs]
    b = [hs[0] for hs in hyps]
    out = stats.paired_bleu(a, b, refs, resamples=200)
    assert out["difference"].estimate == pytest.approx(metrics.corpus_bleu(a, refs) - metrics.corpus_bleu(b, refs))
    assert out["difference"].ci_low > 0 and out["p_value"] < 0.05
    assert stats.paired_bleu(b, a, refs, resamples=200)["difference"].ci_high < 0       # the other way round
    same = stats.paired_bleu(b, b, refs, resamples=200)["difference"]
    assert same.estimate == same.ci_low == same.ci_high == 0.0


@pytest.mark.parametrize("low, high, direction, verdict", [
    (0.5, 2.0, ">", "holds"), (-2.0, -0.5, ">", "contradicted"), (-0.5, 2.0, ">", "not decided"),
    (-2.0, -0.5, "<", "holds"), (0.5, 2.0, "<", "contradicted"), (-0.5, 0.5, "<", "not decided"),
])
def test_claims_have_three_outcomes(low, high, direction, verdict):
    c = stats.claim("x", stats.Interval((low + high) / 2, low, high), direction, cites="paper")
    assert c.verdict == verdict and c.to_dict()["verdict"] == verdict


def test_a_threshold_claim_compares_the_interval_with_the_threshold():
    purity = stats.Interval(0.93, 0.91, 0.95)
    assert stats.claim("purity >= 0.9", purity, ">", 0.9).verdict == "holds"
    assert stats.claim("purity >= 0.9", stats.Interval(0.93, 0.85, 0.97), ">", 0.9).verdict == "not decided"
    assert stats.claim("purity >= 0.9", stats.Interval(0.8, 0.7, 0.85), ">", 0.9).verdict == "contradicted"
    with pytest.raises(ValueError, match="direction"):
        stats.claim("x", purity, ">=")
    with pytest.raises(ValueError, match="NaN"):
        stats.claim("x", stats.Interval(float("nan"), 0, 1))


def test_seeds_widen_the_interval_by_the_t_interval_of_their_mean():
    """By hand: three seeds 8, 10, 12 have sd 2, so the mean's t half-width is t(0.975, 2) * 2 / sqrt(3)
    = 4.303 * 1.1547 = 4.968 (the t quantile from a printed table), combined with the bootstrap's 1."""
    boot = stats.Interval(10.0, 9.0, 11.0)
    one = stats.seed_interval([10.0], boot)
    assert (one.estimate, one.ci_low, one.ci_high) == (10.0, 9.0, 11.0)
    three = stats.seed_interval([8.0, 10.0, 12.0], boot)
    assert three.estimate == 10.0
    assert three.ci_high - 10.0 == pytest.approx(math.hypot(1.0, 4.303 * 2.0 / math.sqrt(3)), abs=1e-3)
    assert stats.t_quantile(2) == pytest.approx(12.706, abs=1e-3) and stats.t_quantile(5) == pytest.approx(2.776, abs=1e-3)
    with pytest.raises(ValueError, match="two seeds"):
        stats.t_quantile(1)


def test_seed_mean_bootstraps_the_seeds_mean_on_paired_resamples():
    """Two seeds whose resampled values move in opposite directions: their mean does not move, so the
    bootstrap part is zero and only the t part is left (a bootstrap of each seed alone would not say so)."""
    a = stats.Resampled(9.0, np.array([8.0, 9.0, 10.0] * 100))
    b = stats.Resampled(11.0, np.array([12.0, 11.0, 10.0] * 100))
    iv = stats.seed_mean([a, b])
    half = 12.706 * math.sqrt(2) / math.sqrt(2)                  # sd of 9, 11 is sqrt(2)
    assert iv.estimate == 10.0
    assert iv.ci_low == pytest.approx(10.0 - half, abs=1e-2) and iv.ci_high == pytest.approx(10.0 + half, abs=1e-2)


def test_purity_per_source_sums_to_the_confusion_and_resamples_like_the_function():
    from nbsupport.lessons import analysis
    hyps, refs = toy_sets(n=20, k=3, m=3)
    labels = [[0, 1, 2]] * len(refs)
    per = analysis.confusion_per_source(hyps, refs, labels, 3, seed=5)
    total = analysis.latent_label_confusion(hyps, refs, labels, 3, seed=5)
    assert per.sum(0).tolist() == total
    assert stats.purity_of(np.array(total)) == pytest.approx(analysis.purity(total))
    boot = stats.Resamples(20, 4, seed=0)
    res = stats.resampled_purity(per, boot)
    assert res.estimate == pytest.approx(analysis.purity(total))
    for r, counts in enumerate(boot.counts.astype(int)):
        by_hand = sum(c * per[s] for s, c in enumerate(counts))
        assert res.values[r] == pytest.approx(analysis.purity(by_hand.tolist()))
    assert stats.purity_of(np.array([[3, 1], [0, 0]])) == pytest.approx(0.75)    # an idle latent is left out


def test_seed_interval_keeps_the_bootstrap_s_asymmetry_and_needs_a_value():
    boot = stats.Interval(10.0, 9.0, 13.0)
    one = stats.seed_interval([10.0], boot)
    assert (one.ci_low, one.ci_high) == (9.0, 13.0)
    two = stats.seed_interval([9.0, 11.0], boot)                 # sd sqrt(2), n = 2: t half-width 12.706 * 1
    assert two.ci_low == pytest.approx(10.0 - math.hypot(1.0, 12.706), abs=1e-3)
    assert two.ci_high == pytest.approx(10.0 + math.hypot(3.0, 12.706), abs=1e-3)
    with pytest.raises(ValueError, match="at least one seed"):
        stats.seed_interval([])


def test_human_resampled_is_human_scores_on_each_resampled_test_set():
    """Independent method: each resample's sources drawn explicitly, then ``metrics.human_scores``."""
    _, refs = toy_sets(n=12)
    boot = stats.Resamples(len(refs), resamples=4, seed=2)
    got = stats.human_resampled(refs, boot)
    human = metrics.human_scores(refs)
    for name, r in got.items():
        assert r.estimate == pytest.approx(human[name])
    for r, counts in enumerate(boot.counts.astype(int)):
        drawn = [rs for rs, c in zip(refs, counts) for _ in range(c)]
        for name, value in metrics.human_scores(drawn).items():
            assert got[name].values[r] == pytest.approx(value)
    with pytest.raises(ValueError, match="resamples are of"):
        stats.human_resampled(refs[:5], boot)


def test_a_claim_that_cannot_be_decided_is_not_decided_with_its_reason():
    c = stats.claim("c would hold", stats.Interval(1.0, 0.5, 1.5), ">", 0, "paper", undecided_because="why")
    assert (c.verdict, c.interval_verdict) == ("not decided", "holds") and c.to_dict()["undecided_because"] == "why"
    assert str(c).startswith("[NOT DECIDED: why] c would hold") and "holds" not in c.to_dict()["verdict"]


def test_largest_gap_and_ratio_by_hand():
    base = stats.Resampled(10.0, np.array([10.0, 12.0, 8.0]))
    a = stats.Resampled(11.0, np.array([13.0, 12.0, 8.5]))
    b = stats.Resampled(7.0, np.array([9.0, 15.0, 8.0]))
    gap = stats.largest_gap(base, [a, b])
    # |a - base| = 1, 3 | 1, 0, 0.5; |b - base| = 3 | 1, 3, 0: the larger per resample
    assert gap.estimate == 3.0 and gap.values.tolist() == [3.0, 3.0, 0.5]
    assert stats.claim("similar", stats.largest_gap(base, [base]), "<", 1.0).verdict == "holds"
    assert stats.claim("similar", gap, "<", 1.0).verdict == "not decided"        # resamples 3, 3, 0.5 straddle 1
    r = stats.ratio(a, base, 100)
    assert r.estimate == pytest.approx(110.0) and r.values.tolist() == pytest.approx([130.0, 100.0, 106.25])


def test_round_ratio_is_the_median_round_and_the_range_of_rounds():
    from nbsupport.speed import round_ratio
    # a takes 1, 2, 4 s per round, b 2, 2, 2 s: a runs at 2, 1 and 0.5 times b's speed
    r = round_ratio({"a": [1.0, 2.0, 4.0], "b": [2.0, 2.0, 2.0]}, "a", "b")
    assert (r.estimate, r.ci_low, r.ci_high) == (1.0, 0.5, 2.0)
