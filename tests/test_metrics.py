"""Every metric on cases whose values are worked out by hand in the comments."""
import math
import random

import pytest

from nbsupport import metrics as M

# "the cat sat on a mat" against "the cat sat on the mat" (6 tokens each, no brevity penalty):
#   1-grams 5/6 (one "the" clipped... the hyp's "a" unmatched), 2-grams 3/5, 3-grams 2/4, 4-grams 1/3
# and the reverse direction has the same counts, so corpus BLEU over both ordered pairs is
#   (10/12 * 6/10 * 4/8 * 2/6) ** (1/4) = (1/12) ** (1/4) = 0.537285...
HYP, REF = "the cat sat on a mat", "the cat sat on the mat"
BLEU_HYP_REF = 100 * (1 / 12) ** 0.25


def test_pairwise_bleu_by_hand():
    assert M.pairwise_bleu([[HYP, REF]]) == pytest.approx(BLEU_HYP_REF, abs=1e-6)


def test_pairwise_bleu_identical_and_disjoint():
    assert M.pairwise_bleu([["a b c d", "a b c d", "a b c d"]]) == pytest.approx(100)
    assert M.pairwise_bleu([["a b c d", "e f g h"]]) == pytest.approx(0)


def test_pairwise_bleu_counts_every_ordered_pair():
    # three hypotheses, two identical: 2 of the 6 ordered pairs match fully, 4 share nothing;
    # every n-gram order then has precision 2/6 = 1/3, so BLEU = 33.33
    assert M.pairwise_bleu([["a b c d", "a b c d", "e f g h"]]) == pytest.approx(100 / 3, abs=1e-6)


def test_sentence_bleu_add_one_smoothing_for_n_above_1():
    # 1-grams 5/6 unsmoothed; 2..4-grams (3+1)/(5+1), (2+1)/(4+1), (1+1)/(3+1)
    expected = 100 * (5 / 6 * 4 / 6 * 3 / 5 * 2 / 4) ** 0.25
    assert M.sentence_bleu(HYP, REF) == pytest.approx(expected, abs=1e-6)


def test_multi_ref_bleu_leave_one_out():
    # m=0 leaves "e f g h" as the only reference: 0; m=1 leaves "a b c d": 100; mean 50
    assert M.multi_ref_bleu([["a b c d"]], [["a b c d", "e f g h"]]) == pytest.approx(50)


def test_multi_ref_bleu_uses_all_other_references():
    # with three references, leaving out either copy of the hypothesis still leaves the other
    refs = [["a b c d", "e f g h", "a b c d"]]
    # m=0: {efgh, abcd} -> 100; m=1: {abcd, abcd} -> 100; m=2: {abcd, efgh} -> 100
    assert M.multi_ref_bleu([["a b c d"]], refs) == pytest.approx(100)


def test_avg_oracle_pairs_each_hypothesis_with_its_best_reference():
    # paired index-wise these would score 0; the oracle matching gives 100
    assert M.avg_oracle_bleu([["a b c d", "e f g h"]], [["e f g h", "a b c d"]]) == pytest.approx(100)
    assert M.avg_oracle_bleu([[HYP]], [[REF, "a dog ran away"]]) == pytest.approx(BLEU_HYP_REF, abs=1e-6)


def test_oracle_assignment_first_maximum_on_ties():
    # "q r s t" shares nothing with either reference: both score 0, the first wins
    assert M.oracle_assignment([["q r s t", "e f g h"]], [["a b c d", "e f g h"]]) == [[0, 1]]


def test_ref_coverage_by_hand():
    hyps = [["a b c d", "a b c d"], ["a b c d", "e f g h"]]
    refs = [["a b c d", "e f g h"], ["a b c d", "e f g h"]]
    assert M.ref_coverage(hyps, refs) == pytest.approx(1.5)  # 1 reference, then 2


def test_ref_coverage_breaks_ties_at_random_with_a_seed():
    # two hypotheses that tie on both references: a random pairing covers 2 refs half the
    # time, so the mean is 1.5 in expectation (first-maximum would always give 1)
    hyps = [["q r s t", "u v w x"]] * 400
    refs = [["a b c d", "e f g h"]] * 400
    cov = M.ref_coverage(hyps, refs, seed=0)
    assert abs(cov - 1.5) < 0.1
    assert cov == M.ref_coverage(hyps, refs, seed=0)
    assert cov != M.ref_coverage(hyps, refs, seed=1)


def test_per_latent_bleu():
    hyps = [["a b c d", "x y z w"], ["e f g h", "q r s t"]]
    refs = [["a b c d", "i j k l"], ["e f g h", "m n o p"]]
    assert M.per_latent_bleu(hyps, refs) == pytest.approx([100, 0])


def test_human_scores_by_hand():
    refs = [["a b c d", "a b c d", "e f g h"]]
    h = M.human_scores(refs)
    assert h["pairwise_bleu"] == pytest.approx(100 / 3, abs=1e-6)
    # m=0 and m=1 find their copy among the others (100); m=2 finds nothing (0)
    assert h["multi_ref_bleu"] == pytest.approx(200 / 3, abs=1e-6)
    # best of the rest: copy, copy, and a tie -> first ("a b c d"): 2 of 3 pairs match,
    # every n-gram order has precision 2/3
    assert h["avg_oracle_bleu"] == pytest.approx(200 / 3, abs=1e-6)


def test_corpus_bleu_matches_sacrebleu_defaults():
    import sacrebleu
    hyps, refs = [HYP, "a b c"], [REF, "a b d"]
    assert M.corpus_bleu(hyps, refs) == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)


@pytest.mark.parametrize("bad, error", [
    ([], ValueError),                        # no sources
    (["a b", "c d"], TypeError),             # bare strings (fairseq score.py's mistake)
    ([["a"], ["b", "c"]], ValueError),       # ragged
])
def test_bad_input_is_a_clear_error(bad, error):
    with pytest.raises(error):
        M.pairwise_bleu(bad)


def test_mismatched_sources_and_single_reference():
    with pytest.raises(ValueError, match="sources"):
        M.avg_oracle_bleu([["a"]], [["a"], ["b"]])
    with pytest.raises(ValueError, match="at least 2"):
        M.multi_ref_bleu([["a"]], [["a"]])
    assert math.isnan(M.diversity_report([["a b"]], [["a b", "c d"]])["pairwise_bleu"])


def test_bleu_and_length_ratio():
    # 6 hypothesis tokens against references of 6 and 10 tokens: mean 8, ratio 0.75
    r = M.bleu_and_length([HYP], [[REF, "a much longer reference sentence than this one here ok"]])
    assert r["len_ratio"] == pytest.approx(6 / 8)
    assert r["bleu"] > 50
    assert M.bleu_and_length(["the cat"], [["the cat sat on the mat"]])["len_ratio"] == pytest.approx(2 / 6)


def test_mbleu_by_hand():
    # one hypothesis matches a reference, the other nothing: every n-gram order has precision
    # 4/8, 3/6, 2/4, 1/2 = 1/2, brevity penalty 1 (8 tokens, closest reference lengths 4 + 4)
    assert M.mbleu([["a b c d", "e f g h"]], [["a b c d", "x y z w"]]) == pytest.approx(50, abs=1e-6)


# ---------------------------------------------------------------- bad input
def test_corpus_bleu_rejects_bare_strings_and_uneven_reference_lists():
    with pytest.raises(TypeError, match=r"hyps: expected a list of strings, got a bare string"):
        M.corpus_bleu("abc", ["abd", "x", "y"])        # same length: compared character by character before
    with pytest.raises(TypeError, match=r"refs: expected a list of strings .* got a bare string"):
        M.corpus_bleu(["a", "b", "c"], "abd")
    with pytest.raises(ValueError, match=r"refs: every source needs the same number of strings, got sizes \[1, 2\]"):
        # zip(*refs) silently dropped "x y" before
        M.corpus_bleu(["a b c d", "e f g h"], [["a b c d", "x y"], ["e f g h"]])
    with pytest.raises(TypeError, match=r"hyps\[1\]: expected a string, got int"):
        M.corpus_bleu(["a", 3], ["a", "b"])


def test_bleu_and_length_rejects_bare_strings():
    with pytest.raises(TypeError, match="hyps: expected a list of strings, got a bare string"):
        M.bleu_and_length("ab", [["a"], ["b"]])
    with pytest.raises(ValueError, match="same number of strings"):
        M.bleu_and_length(["a", "b"], [["a", "c"], ["b"]])


@pytest.mark.parametrize("call", [
    lambda: M.pairwise_bleu([]), lambda: M.multi_ref_bleu([], []), lambda: M.avg_oracle_bleu([], []),
    lambda: M.ref_coverage([], []), lambda: M.per_latent_bleu([], []), lambda: M.mbleu([], []),
    lambda: M.human_scores([]), lambda: M.corpus_bleu([], []), lambda: M.bleu_and_length([], []),
    lambda: M.diversity_report([], []),
])
def test_empty_inputs_are_a_clear_error(call):
    with pytest.raises(ValueError, match="need at least one"):
        call()


def test_diversity_report_checks_its_inputs_first():
    with pytest.raises(ValueError, match=r"hyps: need at least 1 strings per source, got 0"):
        M.diversity_report([[]], [["a b", "c d"]])       # IndexError before
    with pytest.raises(TypeError, match=r"hyps\[0\]\[1\]: expected a string, got list"):
        M.diversity_report([["a", ["b"]]], [["a b", "c d"]])


# ---------------------------------------------------------------- degenerate outputs
def test_pairwise_bleu_of_identical_short_or_empty_hypotheses_is_100():
    # sacrebleu gives 0 when the corpus holds no 4-grams, which read as "most diverse"
    assert M.pairwise_bleu([["a b", "a b"]]) == 100
    assert M.pairwise_bleu([["", "", ""]]) == 100                          # identical empty strings
    assert M.pairwise_bleu([["a b c", "a b c"], ["", ""], ["x.", "x ."]]) == 100   # 13a: "x." is "x ."
    # not identical: BLEU as usual (no shared unigram: 0; an empty vs a non-empty: 0)
    assert M.pairwise_bleu([["a b", "c d"]]) == 0
    assert M.pairwise_bleu([["a b c d", ""]]) == 0


def test_pairwise_bleu_with_an_empty_hypothesis_among_others_by_hand():
    # source 1: two copies of "a b c d" (1- to 4-grams 8/8, 6/6, 4/4, 2/2); source 2: "x y"
    # against "" adds 2 unmatched 1-grams and 1 unmatched 2-gram, "" against "x y" adds only
    # reference length: precisions 8/10, 6/7, 1, 1; lengths 10 and 10, no brevity penalty
    expected = 100 * (8 / 10 * 6 / 7) ** 0.25
    assert M.pairwise_bleu([["a b c d", "a b c d"], ["x y", ""]]) == pytest.approx(expected, abs=1e-6)


def test_pairwise_bleu_of_ordinary_sets_is_sacrebleus():
    import sacrebleu
    hyps = [["the cat sat on the mat", "a cat sat on a mat", "the dog sat"],
            ["he went home early", "he went home", "she left the house early"]]
    sys_, ref = zip(*[(h[i], h[j]) for h in hyps for j in range(3) for i in range(3) if i != j])
    assert M.pairwise_bleu(hyps) == pytest.approx(sacrebleu.corpus_bleu(list(sys_), [list(ref)]).score, abs=1e-9)


def test_ref_coverage_of_identical_hypotheses_that_match_no_reference_is_1():
    # K=4 copies of one sentence sharing nothing with the 4 references: every reference ties
    # at sentence BLEU 0; drawing a tie per copy covered 4 * (1 - (3/4)^4) = 2.73 references
    # on average; the copies are one point, so they pick one reference
    hyps = [["q r s t"] * 4] * 200
    refs = [["a b c d", "e f g h", "i j k l", "m n o p"]] * 200
    for seed in range(3):
        assert M.ref_coverage(hyps, refs, seed=seed) == 1.0
    for seed in range(10):   # identical after 13a tokenisation ("q r." is "q r .")
        assert len(set(M.oracle_assignment([["q r .", "q r."]], [["a", "b"]], random.Random(seed))[0])) == 1


def test_ref_coverage_without_duplicates_is_the_papers_random_tie_breaking():
    # an independent implementation of seed 000 section 4: every hypothesis draws one of its
    # best references with random.Random(seed), in order; duplicates do not change the others
    hyps = [["q r s t", "a b c d", "u v w x"], ["e f g h", "y z", "a b"]] * 50
    refs = [["a b c d", "e f g h", "i j"], ["e f g h", "e f g h", "a b"]] * 50
    rng, total = random.Random(7), 0
    for hs, rs in zip(hyps, refs):
        picks = set()
        for h in hs:
            scores = [M.sentence_bleu(h, r) for r in rs]
            picks.add(rng.choice([i for i, s in enumerate(scores) if s == max(scores)]))
        total += len(picks)
    assert M.ref_coverage(hyps, refs, seed=7) == pytest.approx(total / len(hyps))


def test_scenario_sets_check_their_references():
    from nbsupport.lessons.scenarios import scenario_sets
    with pytest.raises(TypeError, match="bare strings"):
        scenario_sets(["a b", "c d", "e f"])
    with pytest.raises(ValueError, match="need at least one source"):
        scenario_sets([])                                  # IndexError before
    refs = [["a b c", "d e f"], ["g h i", "j k l"], ["m n o", "p q r"]]
    sets = scenario_sets(refs)
    assert sorted(map(sorted, sets["D"])) == sorted(map(sorted, refs))   # D: the references, shuffled


def test_scenario_a_damages_a_different_reference_for_each_hypothesis():
    from nbsupport.lessons.scenarios import scenario_sets
    # every word names its source i and reference k, so a kept word tells which reference it came from
    refs = [[" ".join(f"s{i}r{k}w{j}" for j in range(10)) for k in range(4)] for i in range(200)]
    owner = {w: (i, k) for i, rs in enumerate(refs) for k, r in enumerate(rs) for w in r.split()}
    replaced = total = 0
    for i, hs in enumerate(scenario_sets(refs, seed=3)["A"]):
        copied = []
        for h in hs:
            words = h.split()
            own = {owner[w][1] for w in words if owner[w][0] == i}
            assert len(words) == 10 and len(own) <= 1           # one reference's words, in place
            assert all(owner[w][0] != i or w == f"s{i}r{owner[w][1]}w{j}" for j, w in enumerate(words))
            copied += own
            replaced += sum(owner[w][0] != i for w in words)    # replacements come from other sources
            total += len(words)
        assert len(copied) == len(set(copied))                  # K different references
    assert abs(replaced / total - 0.5) < 0.03                   # the default damage: half the words
    undamaged = scenario_sets(refs, seed=3, damage=0.0)["A"]
    assert [sorted(h) for h in undamaged] == [sorted(rs) for rs in refs]   # no damage: the references
    with pytest.raises(ValueError, match="share must be in"):
        scenario_sets(refs, damage=1.5)


def test_mean_std_is_the_sample_spread_and_one_seed_has_none():
    from nbsupport.views.tables import mean_std
    assert mean_std([1.0, 2.0, 3.0]) == "2.00 ± 1.00"            # sample sd: sqrt(2 / (3 - 1))
    assert mean_std([4.0, 6.0]) == "5.00 ± 1.41"                 # not the population's 1.00
    assert mean_std([45.0]) == "45.00 ± n/a"                     # one seed: no spread, never "± 0.00"


def test_sentence_map_distances_are_one_hundred_minus_bleu_for_three_sentences():
    import numpy as np
    import nbsupport as nbs
    # three points always embed exactly in a plane when the distances obey the triangle inequality
    from nbsupport.lessons.scenarios import sentence_map
    sents = ["the cat sat on the mat today", "the cat sat on a mat today", "a dog ran in the park at noon"]
    xy = sentence_map(sents)
    for i in range(3):
        for j in range(3):
            want = 0.0 if i == j else 100 - (nbs.metrics.sentence_bleu(sents[i], sents[j])
                                             + nbs.metrics.sentence_bleu(sents[j], sents[i])) / 2
            assert abs(float(np.linalg.norm(xy[i] - xy[j])) - want) < 1e-6
    assert xy.shape == (3, 2) and xy[0, 0] >= 0 and xy[0, 1] >= 0
    with pytest.raises(ValueError, match="at least 2"):
        sentence_map(["one"])
