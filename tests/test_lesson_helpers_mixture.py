"""Lesson 03's helpers in nbsupport/lessons/mixture_runs.py, on small made-up inputs computed by hand."""
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from nbsupport.lessons import mixture_runs as mr  # noqa: E402
from nbsupport.stats import Resampled  # noqa: E402


# three styles; experts 0 and 2 share styles 0 and 2, expert 1 holds style 1
CONF = [[5, 0, 5], [0, 10, 0], [4, 0, 6]]
# clean NLLs of 4 pairs over 3 experts: pairs 0, 1 go to z=0, pairs 2, 3 to z=2; pair 1 is a near-tie of 0 and 2
CLEAN = torch.tensor([[1.0, 9.0, 5.0], [1.0, 9.0, 1.5], [9.0, 8.0, 1.0], [7.0, 9.0, 2.0]])
# word 7 in z=2's pairs only; word 5 in every pair; 0 is padding
TGT = torch.tensor([[5, 3, 0], [5, 4, 0], [5, 7, 0], [5, 7, 3]])


def test_shared_styles_finds_the_splitting_word_and_the_near_ties():
    hyps = [["a", "b", "a"], ["c", "d", "e"]]                      # z=0 and z=2 agree on one of two sources
    (f,) = mr.shared_styles(CONF, CLEAN, TGT, hyps, near=1.0)
    assert f["experts"] == (0, 2) and f["styles"] == [0, 2]
    assert f["words"] == [(7, 0.0, 1.0), (4, 0.5, 0.0)]           # word 3: in 1/2 of each expert's pairs, no split
    assert f["near_ties"] == 1 and f["same_output"] == 0.5


def test_shared_styles_without_a_splitting_word_are_duplicates():
    tgt = torch.tensor([[5, 3, 0], [5, 3, 0], [5, 3, 0], [5, 3, 0]])   # every pair the same words
    (f,) = mr.shared_styles(CONF, CLEAN, tgt, [["x", "y", "x"]], near=1.0)
    assert f["words"] == [] and f["same_output"] == 1.0
    assert mr.shared_styles([[10, 0], [0, 10]], CLEAN[:, :2], tgt, [["x", "y"]], near=1.0) == []   # one style each


def test_pair_note_says_split_or_duplicates():
    split = {"experts": (0, 2), "styles": [0, 2], "words": [("quietly", 0.0, 0.6)], "near_ties": 0, "same_output": 0.0}
    dup = {"experts": (1, 2), "styles": [1], "words": [], "near_ties": 9, "same_output": 0.99}
    assert mr.pair_note(split) == "z=0, z=2: split by 'quietly'"
    assert mr.pair_note(dup, "\n") == "z=1, z=2: duplicates: 9 near-ties,\nthe same translation on 99% of test sources"


def test_style_bars_stack_each_experts_pairs():
    fig = mr.style_bars([("t", CONF, "\nnote")], 3)
    ax = fig.axes[0]
    tops = [max(p.get_y() + p.get_height() for p in ax.patches if abs(p.get_x() + p.get_width() / 2 - z) < 0.01) for z in range(3)]
    assert tops == [10, 10, 10] and len(ax.patches) == 9 and ax.get_xlabel() == "expert\nnote"


def test_flip_figure_marks_adds_the_coin_tosses_and_named_stars():
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    for k in (2, 4):
        ax.plot([0, 1], [0, 0.5])
    mr.flip_figure_marks(ax, [2, 4], 0.1, {"seed": 0.45, "Shen": 0.42})
    assert sorted(l.get_ydata()[0] for l in ax.get_lines()[2:]) == [0.5, 0.75]
    assert [(t.get_text(), t.xyann[1]) for t in ax.texts] == [("Shen", -12), ("seed", 6)]


def test_train_and_measure_assembles_each_column(monkeypatch):
    boot = SimpleNamespace()
    monkeypatch.setattr(mr, "prefetch_variants", lambda *a, **k: [])
    monkeypatch.setattr(mr, "train_variant", lambda t, v, device, dropout, seed: (f"model-{v}", f"hist-{v}"))
    monkeypatch.setattr(mr, "evaluate", lambda m, t, n, seed, history: {"pairwise_bleu": 1.0, "hyps": [[m]]})
    iv = Resampled(1.0, np.array([0.5, 1.5]))
    monkeypatch.setattr(mr, "resampled", lambda hyps, t, b, seed: {m: iv for m in ("pairwise_bleu", "multi_ref_bleu", "coverage")})
    models, hists, table, res, hyps = mr.train_and_measure(None, {"x": "vx", "y": "vy"}, "cpu", 0.1, 0, 10, boot)
    assert models == {"x": "model-vx", "y": "model-vy"} and hists["y"] == "hist-vy" and hyps["x"] == [["model-vx"]]
    assert "hyps" not in table["x"] and table["x"]["intervals"]["coverage"]["estimate"] == 1.0


def test_record_table1_writes_the_lessons_keys():
    rec = {}
    run = SimpleNamespace(record=lambda key, value: rec.__setitem__(key, value))
    hist = SimpleNamespace(epochs=[{"valid_nll": 3.0}, {"valid_nll": 2.0}], train_seconds=5.0)
    table = {c: {"pairwise_bleu": b} for c, b in (("no", 40.0), ("E&M", 70.0), ("M", 50.0))}
    mr.record_table1(run, table, {c: hist for c in table}, 0.1)
    assert rec[("training", "strong.p0.1.EM")] == {"valid_nll": [3.0, 2.0]} and rec[("train_seconds", "strong.p0.1.no")] == 5.0
    assert set(rec["grid"]) == {"strong.p0.1.EM", "strong.p0.1.M"} and rec["hMup.EM.pairwise_bleu"] == 70.0
    assert rec["hMup.dropout"] == 0.1 and rec["table1"] == {"hMup": table}


def test_largest_rise_names_the_epoch_where_matched_accuracy_jumps():
    mixed = [[4, 3, 3], [3, 4, 3], [3, 3, 4]]                       # 12 of 30 matched
    apart = [[10, 0, 0], [0, 10, 0], [0, 0, 10]]                     # 30 of 30
    assert mr.largest_rise([mixed, mixed, apart]) == (3, pytest.approx(0.4), pytest.approx(1.0))
    assert mr.largest_rise([mixed]) is None
    assert mr.largest_rise([apart, mixed]) is None                   # a fall is not a rise
