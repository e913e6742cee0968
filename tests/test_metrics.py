"""Every metric on cases whose values are worked out by hand in the comments."""
import math

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
