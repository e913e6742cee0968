"""Notebook 10's comparison: the spread-aware ranking, the dev-set tuning and the
live method view, against values computed by hand."""
import dataclasses
import math

import numpy as np
import pytest
import torch
from matplotlib.text import Text

import nbsupport as nbs
from nbsupport.lessons import comparison as cmp


def row(pw, orc, pw_sd=0.0, or_sd=0.0):
    base = {m: 0.0 for m in cmp.METRICS}
    return {**base, "pairwise_bleu": pw, "avg_oracle_bleu": orc,
            "std": {**base, "pairwise_bleu": pw_sd, "avg_oracle_bleu": or_sd}}


def test_distance_summary_and_spread_by_hand():
    assert cmp.distance({"pairwise_bleu": 33.0, "avg_oracle_bleu": 36.0},
                        {"pairwise_bleu": 30.0, "avg_oracle_bleu": 40.0}) == pytest.approx(5.0)
    per_seed = [{m: v for m in cmp.METRICS} for v in (1.0, 2.0, 3.0)]
    s = cmp.summarise(per_seed)
    assert s["pairwise_bleu"] == 2.0 and s["std"]["coverage"] == pytest.approx(1.0)   # sample sd of 1, 2, 3
    assert s["per_seed"]["distinct"] == [1.0, 2.0, 3.0] and s["seeds"] == 3
    assert cmp.summarise(per_seed[:1])["std"]["pairwise_bleu"] == 0.0
    assert cmp.spread([5.0]) == 0.0 and cmp.spread([1.0, 3.0]) == pytest.approx(math.sqrt(2))


def test_tune_picks_the_setting_closest_to_the_human_point(monkeypatch):
    t = cmp.task("ci")
    human = cmp.human_point(t.corpus.dev.refs[:6])
    # a fake decoder whose dev point depends on top_k: (pairwise, oracle) = (human pw + 10 - 3k, human or - k)
    points = {k: (human["pairwise_bleu"] + 10 - 3 * k, human["avg_oracle_bleu"] - k) for k in cmp.GRIDS["topk"]["top_k"]}
    monkeypatch.setattr(cmp, "translate", lambda name, model, t, srcs, k, seed, top_k: top_k)
    monkeypatch.setattr(cmp, "scores", lambda k, refs, seed: {"pairwise_bleu": points[k][0], "avg_oracle_bleu": points[k][1]})
    best, tried = cmp.tune("topk", None, t, 4, 6)
    by_hand = min(points, key=lambda k: math.hypot(points[k][0] - human["pairwise_bleu"], points[k][1] - human["avg_oracle_bleu"]))
    assert best == {"top_k": by_hand} == {"top_k": 3}         # distances 4.5, 3.2, 7.1, 22.4, 53.9, 117.0 (every point is below the human oracle BLEU)
    assert [r["top_k"] for r in tried] == [2, 3, 5, 10, 20, 40]
    assert cmp.tune("beam", None, t, 4, 6) == ({}, [])       # nothing to tune
    # the seed paper's criterion: the best quality on the dev set (oracle BLEU falls with k here: k = 2)
    assert cmp.tune("topk", None, t, 4, 6, criterion="quality")[0] == {"top_k": 2}
    with pytest.raises(ValueError, match="valid criteria: human, quality"):
        cmp.tune("topk", None, t, 4, 6, criterion="best")


def test_train_all_shares_the_baseline_and_vnmt(monkeypatch):
    calls = []
    monkeypatch.setattr(cmp, "train_for", lambda name, t, k, device, seed, lam: calls.append((name, k)) or (object(), 1.0))
    out = cmp.train_all(None, (2, 4, 8), "cpu")
    assert set(out) == {(n, k) for n in cmp.COMPARED for k in (2, 4, 8)}
    assert all(out[n, k] is out["sampling", 2] for n in cmp.DECODING for k in (2, 4, 8))
    assert out["vnmt", 2] is out["vnmt", 8] and out["hard_moe", 2] is not out["hard_moe", 8]
    # one baseline, one VNMT, and one model per K for each of the four latent-K methods
    assert len(calls) == 1 + 1 + 4 * 3


def test_one_rule_says_which_model_a_method_uses():
    """model_key is the one place that decides sharing: the decoding methods are exactly the
    registry's plain-Transformer methods, all on "baseline"; VNMT one model; the rest one per K."""
    assert tuple(n for n in cmp.COMPARED if cmp.uses_the_baseline(n)) == cmp.DECODING
    assert {cmp.model_key(n, k) for n in cmp.DECODING for k in (2, 8)} == {"baseline"}
    assert cmp.model_key("vnmt", 2) == cmp.model_key("vnmt", 8) == "vnmt"
    assert cmp.model_key("hMlp", 4) == ("hMlp", 4) and not cmp.one_model_for_every_k("target_conditioning")
    assert cmp.one_model_for_every_k("beam") and cmp.one_model_for_every_k("vnmt")


def test_the_profiles_methods_and_toy_model(monkeypatch):
    assert cmp.methods("full") == cmp.methods("ci") == cmp.COMPARED
    assert cmp.methods("lab") == tuple(m for m in cmp.COMPARED if m != "sMup")          # hMlp stands for the mixtures
    lab = nbs.profile("lab")
    t = cmp.task(lab)
    assert {k: t.model_sizes[k] for k in lab.compare["model"]} == lab.compare["model"] != {k: lab.toy_model[k] for k in lab.compare["model"]}
    assert t.training["epochs"] == lab.compare["training"]["epochs"]
    with pytest.raises(ValueError, match="'smup'.*valid: sampling, topk"):
        cmp.methods(dataclasses.replace(lab, compare=lab.compare.replace(methods=("beam", "smup"))))
    with pytest.raises(TypeError, match="unexpected keyword argument 'method'"):
        lab.compare.replace(method=("beam",))                  # a misspelt setting fails where it is written
    for name in nbs.PROFILE_NAMES:                             # notebook 10 runs K <= S only: no profile lists a K above S
        c = nbs.profile(name).compare
        assert c["ks"] and all(k <= c["styles"] for k in c["ks"]), name


def test_method_view_decodes_live_and_names_bad_input():
    t = cmp.task("ci")
    torch.manual_seed(0)
    model = nbs.registry.build(nbs.models.TransformerConfig(len(t.src_vocab), len(t.tgt_vocab), n_latent=3, **t.model_sizes)).eval()
    test = t.corpus.test
    html = cmp.method_view("hard_moe", model, t, test.src[0], 3, references=test.refs[0]).data
    hyps = cmp.translate("hard_moe", model, t, [test.src[0]], 3)[0]
    assert "hard_moe (no setting to tune), K = 3" in html and f"{len(set(hyps))} distinct of 3" in html
    assert html.count("best reference") == 1 and all(f"<td>ref {i}</td>" in html for i in range(len(test.refs[0])))
    best = [max(range(4), key=lambda i: nbs.metrics.sentence_bleu(h, test.refs[0][i])) for h in hyps]
    assert all(f"<td>ref {b}</td><td>{nbs.metrics.sentence_bleu(h, test.refs[0][b]):.1f}</td>" in html
               for h, b in zip(hyps, best))
    with pytest.raises(ValueError, match="'zzzq'"):
        cmp.method_view("hard_moe", model, t, test.src[0] + " zzzq", 3)
    with pytest.raises(ValueError, match="empty"):
        cmp.method_view("hard_moe", model, t, "  ", 3)


def test_distance_does_not_penalise_quality_above_the_human_point():
    human = {"pairwise_bleu": 30.0, "avg_oracle_bleu": 40.0}
    assert cmp.distance({"pairwise_bleu": 33.0, "avg_oracle_bleu": 55.0}, human) == pytest.approx(3.0)
    assert cmp.distance({"pairwise_bleu": 30.0, "avg_oracle_bleu": 36.0}, human) == pytest.approx(4.0)


def test_choose_lambda_keeps_the_lowest_validation_nll(monkeypatch):
    """Target conditioning's lambda (notebooks 05 and 10): every candidate is trained at the K
    asked, and the one whose model has the lowest validation NLL wins, not the first or the
    largest; the domains each used are counted from its last epoch's usage (more than 1%)."""
    import types
    nll = {1.0: 0.52, 100.0: 0.31, 1000.0: 0.35}
    usage = {1.0: [4000, 0, 0, 0], 100.0: [990, 1010, 1000, 1000], 1000.0: [1500, 1480, 1000, 20]}
    seen = []

    def fake(t, k, device, seed=0, lam=1.0):
        seen.append((k, lam))
        return object(), types.SimpleNamespace(best_valid=nll[lam], epochs=[{"usage": usage[lam]}])

    monkeypatch.setattr(cmp, "train_target_conditioning", fake)
    lam, tried = cmp.choose_lambda(None, 4, "cpu")
    assert lam == 100.0 and seen == [(4, l) for l in cmp.LAMBDAS]
    assert {l: r["domains_used"] for l, r in tried.items()} == {1.0: 1, 100.0: 4, 1000.0: 3}
    nll[1000.0] = 0.30
    assert cmp.choose_lambda(None, 4, "cpu")[0] == 1000.0


def test_target_conditioning_needs_its_lambda():
    """No silent default: the paper's lambda = 1 as written collapses on the toy (notebook 05),
    so training target conditioning without a chosen lambda is an error naming the candidates."""
    with pytest.raises(ValueError, match=r"choose_lambda.*1, 100, 1000"):
        cmp.train_for("target_conditioning", None, 4, "cpu")


def test_distance_on_the_multi_reference_axis_by_hand():
    """Notebook 10's quality axis: the multi-reference BLEU gap counts only below the human point."""
    human = {"pairwise_bleu": 30.0, "multi_ref_bleu": 50.0, "avg_oracle_bleu": 0.0}
    assert cmp.distance({"pairwise_bleu": 34.0, "multi_ref_bleu": 47.0}, human, "multi_ref_bleu") == pytest.approx(5.0)
    assert cmp.distance({"pairwise_bleu": 24.0, "multi_ref_bleu": 80.0}, human, "multi_ref_bleu") == pytest.approx(6.0)
    # the default axis is still average oracle BLEU, which the point above would not have
    with pytest.raises(KeyError):
        cmp.distance({"pairwise_bleu": 24.0, "multi_ref_bleu": 80.0}, human)


def test_resampled_distance_is_the_distance_in_every_resample():
    """Each resample's distance is :func:`distance` of that resample's values (the human point's
    values from the same resample), and the estimate is the distance of the estimates."""
    import numpy as np
    from nbsupport.stats import Resampled
    point = {"pairwise_bleu": Resampled(40.0, np.array([40.0, 36.0, 26.0])),
             "multi_ref_bleu": Resampled(45.0, np.array([45.0, 41.0, 60.0]))}
    human = {"pairwise_bleu": Resampled(37.0, np.array([36.0, 31.0, 30.0])),
             "multi_ref_bleu": Resampled(49.0, np.array([48.0, 53.0, 50.0]))}
    d = cmp.resampled_distance(point, human, "multi_ref_bleu")
    assert d.estimate == pytest.approx(5.0)                       # 3 and 4
    assert d.values == pytest.approx([5.0, 13.0, 4.0])             # (4, 3), (5, 12), (-4, above the human point: 0)


def test_scores_have_lachaux_mbleu():
    t = cmp.task("ci")
    test = t.corpus.test
    hyps = [[r[0], r[1], r[1]] for r in test.refs[:5]]
    s = cmp.scores(hyps, test.refs[:5])
    assert s["mbleu"] == pytest.approx(100.0) and s["distinct"] == pytest.approx(2.0)   # every hypothesis is a reference


def test_quality_diversity_curves_take_asymmetric_intervals():
    """An error given as (below, above) draws the interval's two ends, not a symmetric bar."""
    import matplotlib
    matplotlib.use("Agg")
    from nbsupport.views import plots
    fig = plots.quality_diversity_curves({"m": [(50.0, 40.0, (2.0, 6.0), (1.0, 3.0)), (45.0, 38.0, 1.0, 1.0)]}, [2, 4])
    ax = fig.axes[0]
    xs = sorted(float(x) for line in ax.lines for x in line.get_xdata())
    ys = sorted(float(y) for line in ax.lines for y in line.get_ydata())
    assert 48.0 in xs and 56.0 in xs and 39.0 in ys and 43.0 in ys     # 50 - 2, 50 + 6; 40 - 1, 40 + 3


def test_quality_diversity_spread_labels_overlap_neither_each_other_nor_markers():
    import matplotlib
    matplotlib.use("Agg")
    from nbsupport.views import plots
    # six names crowded in a corner of a wide plot: the default offsets make six pairs of them collide
    points = {f"variant-{i}": (50 + 0.4 * i, 60 + 0.3 * (i % 3)) for i in range(6)} | {"far-a": (10, 20), "far-b": (90, 95)}
    fig = plots.quality_diversity(points, spread_labels=True, groups={n: n[-1] for n in points})
    ax = fig.axes[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [Text.get_window_extent(t, renderer) for t in ax.texts if t.get_text() in points]   # names, not leader lines
    assert sorted(t.get_text() for t in ax.texts if t.get_text() in points) == sorted(points)
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    # a marker's centre never lies under a name
    for xy in points.values():
        px, py = ax.transData.transform(xy)
        assert not any(b.x0 < px < b.x1 and b.y0 < py < b.y1 for b in boxes)
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_labels_of_points_with_error_bars_overlap_neither_each_other_nor_the_points():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from nbsupport.views import plots
    # three methods at K = 2, 4, 8 crowded together, each with its bars: the first offset makes labels collide
    pts = [(44 + 4 * i + k / 4, 60 + 0.6 * i - k / 8, f"{m}{k}", "C0", (43 + 4 * i, 45 + 4 * i + k / 4, 59, 61 + 0.6 * i))
           for i, m in enumerate("HTM") for k in (2, 4, 8)]
    fig, ax = plt.subplots(figsize=(5, 4))
    for x, y, _, _, (xl, xh, yl, yh) in pts:
        ax.errorbar([x], [y], xerr=[[x - xl], [xh - x]], yerr=[[y - yl], [yh - y]], marker="o")
    ax.set(xlim=(40, 60), ylim=(50, 70))
    fig.canvas.draw()
    naive = [ax.annotate(t, (x, y), xytext=(5, 4), textcoords="offset pixels", fontsize=7) for x, y, t, _, _ in pts]
    first = [t.get_window_extent(fig.canvas.get_renderer()) for t in naive]
    assert any(a.overlaps(b) for i, a in enumerate(first) for b in first[i + 1:])     # the test's crowding is real
    for t in naive:
        t.remove()
    plots.label_points(ax, pts)
    fig.canvas.draw()
    boxes = [Text.get_window_extent(t, fig.canvas.get_renderer()) for t in ax.texts]            # names, not leader lines
    assert sorted(t.get_text() for t in ax.texts) == sorted(p[2] for p in pts)
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    for x, y, *_ in pts:                                     # no label covers a marker
        cx, cy = ax.transData.transform((x, y))
        assert not any(b.x0 < cx < b.x1 and b.y0 < cy < b.y1 for b in boxes)
    plt.close(fig)


def test_only_methods_that_write_nearly_k_distinct_hypotheses_may_lead():
    distinct = {"beam": 4.0, "vnmt": 1.17, "hard_moe": 3.5, "sampling": 3.49}
    assert cmp.full_sets(distinct, 4) == ("beam", "hard_moe")          # 3.5 = K - 0.5 is enough, 3.49 is not
    assert cmp.full_sets({"vnmt": 1.17, "beam": 2.0}, 2) == ("beam",)   # the case: 1.17 distinct of 2
    with pytest.raises(ValueError, match="positive"):
        cmp.full_sets(distinct, 0)


def test_the_grids_reach_toward_sampling_and_the_edge_is_named():
    assert max(cmp.GRIDS["topk"]["top_k"]) >= 20 and 0.99 <= max(cmp.GRIDS["nucleus"]["top_p"]) < 1.0
    assert cmp.at_grid_edge("topk", {"top_k": max(cmp.GRIDS["topk"]["top_k"])})
    assert not cmp.at_grid_edge("nucleus", {"top_p": 0.9})


def test_matched_accuracy_scores_one_shared_style_at_chance_unlike_purity():
    one_style = [[10, 0, 0, 0]] * 4                    # every latent value writes style 0
    assert nbs.analysis.purity(one_style) == 1.0
    assert nbs.analysis.matched_accuracy(one_style) == pytest.approx(0.25)
    # a permutation: values 0..3 write styles 2, 0, 3, 1, with one stray hypothesis each
    perm = [[0, 1, 9, 0], [9, 0, 0, 1], [1, 0, 0, 9], [0, 9, 1, 0]]
    assert nbs.analysis.matched_accuracy(perm) == pytest.approx(36 / 40)
    # the matching is one-to-one: two values sharing style 0 cannot both be credited with it
    assert nbs.analysis.matched_accuracy([[10, 0], [10, 0]]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="K <= S"):
        nbs.analysis.matched_accuracy([[1, 0]] * 3)
    # resampled: the estimate on the test set, and a resample drawing only source 0 gives source 0's own score
    per_source = np.array([[[1, 0], [0, 1]], [[0, 1], [0, 1]]])
    boot = nbs.stats.Resamples(2, resamples=50, seed=0)
    r = nbs.analysis.resampled_matched_accuracy(per_source, boot)
    assert r.estimate == pytest.approx(0.75)
    only_first = np.where((boot.counts[:, 0] == 2))[0]
    assert all(r.values[i] == pytest.approx(1.0) for i in only_first) and len(r.values) == 50


def test_beam_curves_draw_the_metrics_asked_for_with_their_labels():
    from nbsupport.views import plots
    beams, models, levels = [1, 4], ["softmax", "scones_0.2"], ["low", "high"]
    metrics = [("multi_ref_bleu", "multi-reference BLEU"), ("one_word", "share of outputs of <= 1 word")]
    curves = {(lv, m, k): [float(i), float(i + 1)] for i, (lv, m, k) in
              enumerate((lv, m, k) for lv in levels for m in models for k, _ in metrics)}
    fig = plots.beam_curves(curves, beams, levels, models, metrics=metrics)
    axes = np.array(fig.axes).reshape(len(levels), len(metrics))
    assert [ax.get_ylabel() for ax in axes[0]] == [label for _, label in metrics]
    line = axes[1][1].get_lines()[0]                      # high ambiguity, one_word, softmax
    assert list(line.get_ydata()) == curves["high", "softmax", "one_word"]
    plots.plt.close(fig)


def test_styles_owned_counts_each_majority_label_once():
    from nbsupport.lessons.analysis import purity, styles_owned
    one_each = [[9, 1, 0], [0, 8, 2], [1, 0, 9]]
    shared = [[9, 1, 0], [8, 0, 2], [1, 0, 9]]          # values 0 and 1 both mostly write label 0
    assert styles_owned(one_each) == 3 and styles_owned(shared) == 2
    assert styles_owned([[0, 0, 0], [5, 1, 0], [0, 0, 4]]) == 2   # a value with no hypotheses owns nothing
    assert purity(shared) > 0.8                         # what purity cannot tell


def test_error_bars_by_hand():
    from nbsupport.stats import Interval
    from nbsupport.views.plots import error_bars
    assert error_bars([Interval(5.0, 4.0, 7.5), Interval(2.0, 2.5, 3.0)]) == [[1.0, 0.0], [2.5, 1.0]]   # never negative
