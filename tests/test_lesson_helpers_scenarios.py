"""Notebook 00's table, reading and figure helpers (nbsupport/lessons/scenarios.py), on small made-up inputs."""
import types

import numpy as np
import pytest

from nbsupport.lessons import scenarios as s
from nbsupport.stats import Resampled


def rs(estimate, *values):
    return Resampled(estimate, np.array(values or (estimate,), dtype=float))


def test_sentences_table_and_score_grid():
    t = s.sentences_table(["a b", "c d"], ["a b"])
    assert [line.split()[0] for line in t.splitlines()[2:]] == ["y^1", "y^2", "ŷ^1"]
    grid = s.score_grid(["x", "yy"], ["r1", "r22", "r333"], lambda h, r: len(h) * len(r))
    assert grid.splitlines()[3].split() == ["ŷ^2", "4", "6", "8"]       # 2 × 2, 2 × 3, 2 × 4


def test_map_labels_name_a_copied_reference_once():
    refs, hyps = ["a b", "c d", "e f"], ["c d", "a x"]
    assert s.map_labels(refs, hyps) == (["$y^1$", "$y^2 = \\hat y^1$", "$y^3$"], ["", "$\\hat y^2$"])


def test_one_source_map_moves_the_copied_label_left(capsys):
    fig = s.one_source_map(["the cat sat on the mat", "a dog ran far away", "birds fly high"],
                           ["the cat sat on the mat", "a dog ran"], caption="what to see")
    moved = [t for t in fig.axes[0].texts if "=" in t.get_text()]
    assert len(moved) == 1 and moved[0].get_horizontalalignment() == "right"
    assert "Figure: what to see" in capsys.readouterr().out


def test_toy_human_points_and_table():
    r = s.toy_human_points(n_test=6, seed=0)
    assert set(r) == {"strong", "subtle"} and set(r["strong"]) == {"none", "low", "high"}
    assert r["strong"]["none"]["entropy_nats"] == 0 and r["strong"]["low"]["entropy_nats"] > 0
    assert r["subtle"]["none"]["pairwise_bleu"] > r["strong"]["none"]["pairwise_bleu"]    # subtle styles are more alike
    assert "subtle / high" in s.toy_table(r)


def test_verse_table_lists_the_english_references():
    from nbsupport.data import bible
    verse = types.SimpleNamespace(text={c: f"text {c}" for c in bible.ENGLISH_REFERENCES})
    t = s.verse_table(verse, "a verse")
    assert "a verse" in t.splitlines()[0]
    assert all(f"text {c}" in t and bible.SHORT_NAMES[c] in t for c in bible.ENGLISH_REFERENCES)


def test_estimates_and_interval_table_rename_coverage():
    r = {"A": {"pairwise_bleu": rs(10, 9, 11), "coverage": rs(2, 0, 4), "multi_ref_bleu": rs(5)}}
    assert s.estimates(r) == {"A": {"pairwise_bleu": 10, "multi_ref_bleu": 5, "ref_coverage": 2}}
    t = s.interval_table(r, "set", skip=["multi_ref_bleu"])
    assert "ref_coverage" in t and "multi_ref_bleu" not in t and "2.0 [0.1, 3.9]" in t


def test_signature_table_marks_ranks_that_break_the_level():
    scores = {"A": {"q": 10.0}, "B": {"q": 30.0}, "C": {"q": 20.0}}
    t = s.signature_table(scores, {"q": "021"}, {})
    assert [line.split()[1:] for line in t.splitlines()[2:5]] == [["low:", "3", "✓"], ["high:", "1", "✓"], ["medium:", "2", "✓"]]
    assert t.endswith("3 of 3 levels fit this run's ranks")
    t = s.signature_table(scores, {"q": "201"}, {})              # A "high" but lowest, B "low" but highest
    assert t.endswith("0 of 3 levels fit this run's ranks")      # C's 20 lies below "low" B's 30: no fit either
    human = {"q": rs(20, 19, 21)}
    assert "human: 2 ✓" in s.signature_table(scores, {"q": "02="}, human)
    assert "human: 1 ✗" in s.signature_table(scores, {"q": "0=1"}, human)    # B's 30 lies outside [19.05, 20.95]


def test_widest():
    a = {"pairwise_bleu": rs(10, 8, 12), "avg_oracle_bleu": rs(50, 50, 51)}
    b = {"pairwise_bleu": rs(20, 20, 20), "avg_oracle_bleu": rs(60, 55, 65)}
    assert s.widest(a, b) == pytest.approx(0.95 * 10)           # b's quality interval: [55.25, 64.75]


def test_fig1_quality_diversity_caption_gives_the_widest_interval(capsys):
    r = {"A": {"pairwise_bleu": rs(10, 9, 11), "avg_oracle_bleu": rs(50, 49, 51)}}
    s.fig1_quality_diversity(r, {"pairwise_bleu": rs(30, 30), "avg_oracle_bleu": rs(40, 40)}, caption="see.")
    assert "see. 95% intervals at most 1.9 BLEU wide, about a marker's width." in capsys.readouterr().out


def test_summary_reads_the_right_entries():
    toy = {st: {a: {"pairwise_bleu": p, "entropy_nats": e} for a, e in (("none", 0), ("low", 4.2), ("high", 12))}
           for st, p in (("strong", 30), ("subtle", 60))}
    fig1 = {k: {"ref_coverage": v} for k, v in zip("ABCD", (3.9, 1, 3.25, 4))}
    out = s.summary({"pairwise_bleu": 1, "avg_oracle_bleu": 2, "multi_ref_bleu": 3}, toy, fig1, 38.0)
    assert out["toy subtle pairwise BLEU"] == 60 and out["toy entropy nats (low / high)"] == "4.20 / 12.00"
    assert out["fig1 coverage B / C / A"] == "1.00 / 3.25 / 3.90" and out["fig1 D - human multi-ref BLEU"] == 38.0
