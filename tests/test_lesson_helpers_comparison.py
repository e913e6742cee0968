"""Notebook 10's table, reading and figure helpers (nbsupport/lessons/comparison.py), on small made-up inputs."""
import numpy as np

from nbsupport.lessons import comparison as c
from nbsupport.stats import Interval, Resampled


def rs(estimate, *values):
    return Resampled(estimate, np.array(values, dtype=float))


def test_shared_words():
    assert c.shared_words(["a b c", "a c d"], ["a x", "a y"]) == "c"      # "a" is in every reference
    assert c.shared_words(["a b", "c d"], ["a"]) == "none"


def test_shown():
    long = "a b c d e f g h i j k l m n"
    hs = [long, long + " again", long, "x y z w v u t s r q p o n m"]
    assert [c.shown(h, hs, k) for k, h in enumerate(hs)] == [long, "1 +again", "= 1", "x y z w v [cut] q p o n m"]
    assert c.shown(long, [long, "short one"], 0) == "a b c d e [cut] j k l m n"      # no near-copy follows: cut
    assert c.shown("a c.", ["a b.", "a c."], 1) == "1 +c −b"


def test_frontier_and_above_frontier():
    R = {("a", 1): {"pairwise_bleu": rs(10, 10), "q": rs(50, 50)},
         ("a", 2): {"pairwise_bleu": rs(30, 30), "q": rs(70, 70)},
         ("b", 1): {"pairwise_bleu": rs(40, 40), "q": rs(60, 60)}}        # beaten by (30, 70) on both axes
    R[("b", 2)] = R[("b", 1)]
    line = c.frontier(R, ["a", "b"], [1, 2], "q")
    assert line == [(10, 50), (30, 70)]
    assert c.above_frontier((20, 61), line) and not c.above_frontier((20, 59), line)
    assert not c.above_frontier((35, 99), line)                           # outside the line's span


def test_pick_text_and_grid():
    clear = {"method": "a", "runner_up": "b", "clear": True, "tied": [], "margin": {"estimate": 1.0, "ci_low": 0.001, "ci_high": 2.0}}
    tie = {"method": "b", "runner_up": "a", "clear": False, "tied": ["a", "c"], "margin": None}   # b: the tie's decoding method
    assert c.pick_text(clear) == "a +1.00 [+0.001, +2.00] over b"
    assert c.pick_text(tie) == "b ≈ a ≈ c"
    assert c.named(tie) == ["b", "a", "c"] and c.named(clear) == ["a"]
    rec = {need: {"K2": clear, "K4": tie} for _, need, _ in c.ANSWER}
    assert "K=4 (= S)" in c.grid_table(rec, [2, 4], 4)


def test_answer_reading_says_ties_and_misses():
    pick = lambda m, r, clear: {"method": m, "runner_up": r, "clear": clear, "tied": [] if clear else [r]}
    right = {"cover the styles": "hard_moe", "quality first": "hard_moe", "most varied wording": "sampling",
             "no latent model: cover": "diverse_beam", "no latent model: quality": "beam"}
    rec = {need: {"K2": pick(m, "x", True), "K4": pick(m, "x", True)} for need, m in right.items()}
    assert c.answer_reading(rec, [2, 4], ["hard_moe"]) == "holds at K = 2, 4"
    rec["quality first"]["K2"] = pick("hard_moe", "beam", False)            # a tie with a method outside the row
    assert c.answer_reading(rec, [2, 4], ["hard_moe"]) == \
        "holds at K = 2, 4, tied with another method for 'are the best' at K=2 (hard_moe ≈ beam)"
    rec["no latent model: cover"]["K4"] = pick("sampling", "beam", True)    # the row's method not named
    assert c.answer_reading(rec, [2, 4], ["hard_moe"]) == "does not hold for 'one ordinary model, to cover' at K=4"
    assert c.answer_reading(rec, [2, 4], []).startswith("does not hold for 'cover the styles' at K=2")   # none found


def test_avoid_text_and_beaten_by():
    assert c.avoid_text({2: {"hard_moe": "below the bar", "x": "y beats it", "v": "below the bar"}, 4: {}}) == \
        "avoid at K=2: below the bar: hard_moe, v; x (y beats it)\navoid at K=4: none"
    R = {("a", 2): {"pairwise_bleu": rs(50, 50, 51), "q": rs(40, 40, 41)},
         ("b", 2): {"pairwise_bleu": rs(30, 30, 31), "q": rs(60, 60, 61)}}
    assert c.beaten_by("a", 2, ["a", "b"], R, latent=["a"], decoding=["b"], quality="q") == "b"
    assert c.beaten_by("b", 2, ["a", "b"], R, latent=["a"], decoding=["b"], quality="q") is None
    assert c.beaten_by("a", 2, ["a", "b"], R, latent=[], decoding=[], quality="q") is None   # a decoding a: a latent b costs more


def test_signed():
    assert c.signed(0.004) == "+0.004" and c.signed(-1.234) == "-1.23" and c.signed(0) == "0.00"


def test_grid_ends_and_tuning_reading():
    settings = {("topk", 2): {"top_k": 40}, ("nucleus", 2): {"top_p": 0.7}, ("beam", 2): {}}
    settings[("diverse_beam", 2)] = {"diversity": min(c.GRIDS["diverse_beam"]["diversity"])}
    assert c.grid_ends(settings) == ["topk K=2 (largest)", "diverse_beam K=2 (smallest)"]
    human = {"multi_ref_bleu": 40.0, "pairwise_bleu": 30.0}
    above_less = {"multi_ref_bleu": 50.0, "pairwise_bleu": 35.0}
    assert c.tuning_reading({"topk.K2": [above_less]}, human).startswith("No setting tried (1) scores below")
    wide = c.tuning_reading({"topk.K2": [above_less, {"multi_ref_bleu": 50.0, "pairwise_bleu": 20.0}]}, human)
    assert wide == "Of the 2 settings tried, 0 score below the dev references' quality and 1 are more diverse than them."
    low = c.tuning_reading({"topk.K2": [above_less], "diverse_beam.K2": [{"multi_ref_bleu": 0, "pairwise_bleu": 90}]}, human)
    assert low == "Of the 2 settings tried, 1 score below the dev references' quality and 0 are more diverse than them."


def test_purity_table_and_figure():
    R = {(n, k): {"pairwise_bleu": rs(p, p - 1, p + 1), "multi_ref_bleu": rs(q, q - 1, q + 1), "coverage": rs(cv, cv, cv)}
         for (n, k), (p, q, cv) in {("sampling", 2): (30, 50, 1.5), ("beam", 2): (80, 60, 1.0), ("hard_moe", 2): (50, 65, 2.0)}.items()}
    found = {"hard_moe": (0.9, Interval(0.9, 0.8, 0.95), 2, "above 1/2")}
    assert "2 of 4" in c.purity_table(found, {"hard_moe": 12.34}, 2, 4) and "12.3" in c.purity_table(found, {"hard_moe": 12.34}, 2, 4)
    fig, best = c.plane_figure(R, {"pairwise_bleu": 25.0, "multi_ref_bleu": 40.0}, ["sampling", "beam"], ["hard_moe"], [2])
    assert len(fig.axes) == 2 and best == [(30, 50), (80, 60)]
