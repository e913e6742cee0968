"""The decoders against the test cases two peer libraries publish for their own decoders, and the
stepper contract with a minimal hand-written stepper.

Ported cases (their numbers, our token ids: PAD 0, BOS 1, EOS 2, UNK 3, w1 4, w2 5; fairseq's
dictionary has the same eos, unk, w1 and w2):
- fairseq ``tests/test_sequence_generator.py``: ``TestSequeneceGenerator`` (beam search with and
  without length normalisation, ``test_maxlen``), ``TestDiverseBeamSearch.test_diverse_beam_search``
  and ``TestTopPSamplingSearch``; their per-step tables (``tests/utils.py``
  ``sequence_generator_setup``) are written here as tables of the prefix, which is what each of
  their rows stands for (the comments beside them give the prefix).
- Hugging Face transformers ``tests/generation/test_logits_process.py``: ``test_top_k_dist_warper``,
  ``test_top_p_dist_warper`` and ``test_hamming_diversity``.
"""
import math

import pytest
import torch

from nbsupport.data.vocab import BOS, EOS, PAD
from nbsupport.decode import (Beam, DiverseBeam, Greedy, Sampling, TableStepper, beam_search, greedy_or_sample,
                              nucleus, top_k_filter)

W1, W2 = 4, 5
V = 6


def log_table(eos, w1, w2):
    """fairseq's rows give p(eos), p(unk) = 0, p(w1), p(w2): as log probabilities over our 6 ids."""
    p = [0.0] * V
    p[EOS], p[W1], p[W2] = eos, w1, w2
    return [math.log(x) if x > 0 else -math.inf for x in p]


class SentenceStepper:
    """The minimal stepper of the contract (``nbsupport.models.protocol.Stepper``): every row knows
    its sentence; ``expand`` and ``reorder`` change the rows in place and return None. Each
    sentence has its own table of the prefix; every prefix asked about is recorded with its
    sentence, and a call with the wrong number of rows fails."""

    device = torch.device("cpu")

    def __init__(self, tables):
        self.tables = tables                       # one function prefix-tuple -> log scores per sentence
        self.rows = list(range(len(tables)))       # the sentence of every row
        self.asked = []

    def expand(self, n: int) -> None:
        self.rows = [s for s in self.rows for _ in range(n)]

    def reorder(self, index: torch.Tensor) -> None:
        self.moves = getattr(self, "moves", []) + [(r, i) for r, i in enumerate(index.tolist())
                                                     if self.rows[r] != self.rows[i]]    # across sentences
        self.rows = [self.rows[i] for i in index.tolist()]

    def __call__(self, prefix: torch.Tensor) -> torch.Tensor:
        assert prefix.shape[0] == len(self.rows), f"{prefix.shape[0]} prefixes for {len(self.rows)} rows"
        out = []
        for sentence, row in zip(self.rows, prefix.tolist()):
            assert row[0] == BOS
            body = tuple(t for t in row[1:] if t != PAD)
            self.asked.append((sentence, body))
            out.append(self.tables[sentence](body))
        return torch.tensor(out, dtype=torch.float64)


def fairseq_beam_tables():
    """``sequence_generator_setup``'s tables, by the prefix each of their rows stands for;
    once a table runs out, EOS has probability 1 (as in fairseq's ``TestIncrementalDecoder``)."""
    s1 = {(): (0.0, 0.9, 0.1), (W1,): (1.0, 0.0, 0.0), (W2,): (0.0, 0.9, 0.1),
          (W2, W1): (0.0, 0.1, 0.9), (W2, W2): (0.6, 0.2, 0.2),
          (W2, W1, W2): (1.0, 0.0, 0.0), (W2, W1, W1): (1.0, 0.0, 0.0)}
    s2 = {(): (0.0, 0.7, 0.3), (W1,): (0.25, 0.35, 0.4), (W2,): (0.0, 0.1, 0.9),
          (W1, W2): (0.6, 0.4, 0.0), (W2, W2): (0.01, 0.0, 0.99),
          (W2, W2, W2): (0.1, 0.5, 0.4), (W1, W2, W1): (1.0, 0.0, 0.0)}
    return [lambda prefix, t=t: log_table(*t.get(prefix, (1.0, 0.0, 0.0))) for t in (s1, s2)]


def assert_hypothesis(h, tokens, probs, normalized):
    """fairseq's ``assertHypoTokens`` and ``assertHypoScore``: positional scores are the tokens' log
    probabilities; the score their sum, divided by the length (EOS included) when normalised."""
    assert h.tokens == tokens
    assert h.token_scores == pytest.approx([math.log(p) for p in probs], abs=1e-4)
    total = sum(math.log(p) for p in probs)
    assert h.score == pytest.approx(total, abs=1e-6)
    assert h.normalized == pytest.approx(total / len(probs) if normalized else total, abs=1e-6)


# ---------------------------------------------------------------- fairseq: beam search
def test_fairseq_beam_search_with_normalization():
    (a, b), (c, d) = beam_search(SentenceStepper(fairseq_beam_tables()), 2, beam=2, max_len=10, n_best=2,
                                 length_norm=True)
    assert_hypothesis(a, [W1, EOS], [0.9, 1.0], True)
    assert_hypothesis(b, [W2, W1, W2, EOS], [0.1, 0.9, 0.9, 1.0], True)
    assert_hypothesis(c, [W1, W2, W1, EOS], [0.7, 0.4, 0.4, 1.0], True)
    assert_hypothesis(d, [W1, W2, EOS], [0.7, 0.4, 0.6], True)


def test_fairseq_beam_search_without_normalization():
    """Sentence 1 as fairseq expects. Sentence 2 differs by the stopping rule, on purpose: fairseq
    stops a sentence once it holds ``beam`` finished hypotheses (w1 w2 EOS 0.168 at step 2,
    w1 w2 w1 EOS 0.112 at step 3); ours stops once no live hypothesis can beat the worst of them
    (unnormalised scores only fall), and the live w2 w2 w2 (0.267) can: it ends as
    w2 w2 w2 w1 EOS (0.134), a better second-best than fairseq's."""
    (a, b), (c, d) = beam_search(SentenceStepper(fairseq_beam_tables()), 2, beam=2, max_len=10, n_best=2)
    assert_hypothesis(a, [W1, EOS], [0.9, 1.0], False)
    assert_hypothesis(b, [W2, W1, W2, EOS], [0.1, 0.9, 0.9, 1.0], False)
    assert_hypothesis(c, [W1, W2, EOS], [0.7, 0.4, 0.6], False)
    assert_hypothesis(d, [W2, W2, W2, W1, EOS], [0.3, 0.9, 0.99, 0.5, 1.0], False)
    assert d.score > math.log(0.7 * 0.4 * 0.4)                      # fairseq's second-best


def test_fairseq_beam_search_maxlen():
    """fairseq's max_len_b=2 allows 2 tokens before the forced EOS: our limit counts the EOS, 3."""
    (a, b), (c, d) = beam_search(SentenceStepper(fairseq_beam_tables()), 2, beam=2, max_len=3, n_best=2,
                                 length_norm=True)
    assert_hypothesis(a, [W1, EOS], [0.9, 1.0], True)
    assert_hypothesis(b, [W2, W2, EOS], [0.1, 0.1, 0.6], True)
    assert_hypothesis(c, [W1, W2, EOS], [0.7, 0.4, 0.6], True)
    assert_hypothesis(d, [W2, W2, EOS], [0.3, 0.9, 0.01], True)


# ---------------------------------------------------------------- fairseq: diverse beam search
def fairseq_diverse_tables():
    """``TestDiverseBeamSearch``'s tables: the same row for every hypothesis of a sentence at a step."""
    steps = [[(0.0, 0.9, 0.1), (0.0, 0.6, 0.4), (1.0, 0.0, 0.0)],
             [(0.0, 0.7, 0.3), (0.25, 0.35, 0.4), (0.9, 0.1, 0.0)]]
    return [lambda prefix, s=s: log_table(*(s[len(prefix)] if len(prefix) < len(s) else (1.0, 0.0, 0.0)))
            for s in steps]


def test_fairseq_diverse_beam_search_at_strength_zero():
    """Their published case (diversity_strength=0): both groups find the same hypothesis."""
    (a, b), (c, d) = DiverseBeam(n=2, beam=2, groups=2, diversity=0.0, length_norm=True).search(
        SentenceStepper(fairseq_diverse_tables()), 2, [10, 10])
    for h in (a, b):
        assert_hypothesis(h, [W1, W1, EOS], [0.9, 0.6, 1.0], True)
    for h in (c, d):
        assert_hypothesis(h, [W1, W2, EOS], [0.7, 0.4, 0.9], True)
    assert a.penalty == b.penalty == 0.0


def test_diverse_beam_search_penalty_on_the_fairseq_tables_by_hand():
    """Sentence 1 at strength 0.5, worked by hand. Step 0: group 0 takes w1 (log 0.9); group 1 ranks
    w1 at log 0.9 - 0.5 = -0.605 above w2 (log 0.1 = -2.303) and takes it, paying 0.5. Step 1:
    group 0 takes w1 (log 0.54 = -0.616); group 1 ranks w1 at -0.616 - 0.5 = -1.116 below w2
    (log 0.36 = -1.022) and takes w2. Step 2: both end (EOS 1.0); group 1 pays 0.5 for the EOS
    group 0 chose. Hugging Face's penalty (earlier groups' chosen tokens, added into the running
    score) picks the same paths; fairseq counts both candidates group 0 considered (w1 and w2), so
    at step 1 it penalises w1 and w2 alike and its group 1 would repeat w1 w1."""
    (a, b), = DiverseBeam(n=2, beam=2, groups=2, diversity=0.5).search(
        SentenceStepper(fairseq_diverse_tables()[:1]), 1, [10])
    assert a.tokens == [W1, W1, EOS] and a.penalty == 0.0
    assert b.tokens == [W1, W2, EOS]
    assert b.score == pytest.approx(math.log(0.36))                  # the true score
    assert b.penalty == pytest.approx(1.0)                           # 0.5 at step 0 and at the EOS
    assert b.token_scores == pytest.approx([math.log(0.9), math.log(0.4), 0.0])


def test_hugging_face_hamming_diversity_counts_the_earlier_groups_chosen_tokens():
    """``test_hamming_diversity``: uniform scores over 4 tokens, beams of 2 in 2 groups; group 0
    chose one token per source (a different one for each), and group 1's scores are exactly
    ``diversity`` lower on that token and unchanged elsewhere. Here group 0's choice is made by a
    margin of 0.002 in probability: a penalty of 1.0 moves group 1 to the runner-up (both groups
    then end with EOS at step 1, and group 1 pays for that one); one of 0.0001 (below the margin)
    leaves it there, paying 0.0001 for the token and again for the EOS."""
    def uniform_with(best):
        def fn(prefix):
            if prefix:
                return log_table(1.0, 0.0, 0.0)
            p = [0.0, 0.0, 0.248, 0.2505, 0.249, 0.249]           # EOS, UNK (the runner-up), w1, w2
            p[best] += 0.0025
            return [math.log(x) if x > 0 else -math.inf for x in p]
        return fn
    tables = [uniform_with(W1), uniform_with(W2)]
    moved = DiverseBeam(n=2, beam=2, groups=2, diversity=1.0).search(SentenceStepper(tables), 2, [10, 10])
    kept = DiverseBeam(n=2, beam=2, groups=2, diversity=1e-4).search(SentenceStepper(tables), 2, [10, 10])
    for (first, second), (same_first, same_second), chosen in zip(moved, kept, (W1, W2)):
        assert first.tokens[0] == chosen and first.penalty == 0.0
        assert second.tokens == [3, EOS]
        assert second.penalty == pytest.approx(1.0)                  # nothing at step 0, 1.0 for the shared EOS
        assert same_second.tokens == same_first.tokens == [chosen, EOS]
        assert same_second.penalty == pytest.approx(2e-4)          # once for the token, once for the EOS


# ---------------------------------------------------------------- fairseq / Hugging Face: top-p and top-k
def test_hugging_face_top_p_dist_warper():
    """p = 0.8 on [0.3, 0.1, 0.1, 0.5] keeps 0.5 and 0.3 (exactly 0.8 in float32: the boundary);
    on [0.15, 0.3, 0.3, 0.25] keeps all but 0.15. They keep the kept scores as they are; we
    renormalise the kept probabilities."""
    probs = torch.tensor([[0.3, 0.1, 0.1, 0.5], [0.15, 0.3, 0.3, 0.25]], dtype=torch.float32)
    expected = torch.tensor([[0.3, 0.0, 0.0, 0.5], [0.0, 0.3, 0.3, 0.25]])
    out = nucleus(probs, 0.8)
    assert ((out > 0) == (expected > 0)).all(), out
    assert torch.allclose(out, expected / expected.sum(dim=-1, keepdim=True), atol=1e-6)


def test_nucleus_boundary_in_float32_keeps_no_extra_token():
    """The better tokens sum to exactly top_p in float32: the next token is out. (cumsum - p
    rounds the mass before it below top_p, which kept it.)"""
    ten = torch.full((1, 10), 0.1)
    assert int((nucleus(ten, 0.6) > 0).sum()) == 6                     # (cumsum - p) kept 7
    assert int((nucleus(ten, 0.61) > 0).sum()) == 7
    probs = torch.tensor([[0.4, 0.3, 0.2, 0.1]])
    three = float(probs.cumsum(dim=-1)[0, 2])                           # 0.9 as float32 sums it
    assert (nucleus(probs, three)[0] > 0).tolist() == [True, True, True, False]   # (cumsum - p) kept all 4


def test_hugging_face_top_k_dist_warper():
    """top_k=3 on a ramp keeps the three largest; ties with the k-th best stay."""
    ramp = torch.arange(10, dtype=torch.float).unsqueeze(0).repeat(2, 1)
    ramp[1:, :5] += 10
    out = top_k_filter(ramp, 3)
    assert torch.isinf(out[0]).tolist() == 7 * [True] + 3 * [False]
    assert torch.isinf(out[1]).tolist() == 2 * [True] + 3 * [False] + 5 * [True]
    assert not torch.isinf(top_k_filter(torch.ones(2, 5) / 5, 1)).any()          # all tied with the best


def test_fairseq_top_p_sampling_search():
    """``TestTopPSamplingSearch``: step 0 w1 (1.0); step 1 eos 0.25, w1 0.4, w2 0.35; then EOS.
    p = 0.2: only w1; p = 0.575: w1 or w2 (0.4 < 0.575, then 0.75), never the EOS."""
    def fn(prefix):
        if len(prefix) == 0:
            return log_table(0.0, 1.0, 0.0)
        if len(prefix) == 1:
            return log_table(0.25, 0.4, 0.35)
        return log_table(1.0, 0.0, 0.0)
    g = torch.Generator().manual_seed(0)
    low = Sampling(n=20, top_p=0.2).search(SentenceStepper([fn]), 1, [10], g)[0]
    for h in low:
        assert_hypothesis(h, [W1, W1, EOS], [1.0, 0.4, 1.0], False)
    high = Sampling(n=50, top_p=0.575).search(SentenceStepper([fn]), 1, [10], g)[0]
    assert {tuple(h.tokens) for h in high} == {(W1, W1, EOS), (W1, W2, EOS)}
    for h in high:
        assert h.token_scores == pytest.approx([0.0, math.log(0.4 if h.tokens[1] == W1 else 0.35), 0.0])


# ---------------------------------------------------------------- the stepper contract
def test_every_strategy_drives_the_minimal_in_place_stepper():
    """``expand`` and ``reorder`` return None: a decoder that used their return value, or skipped
    ``expand``, fails here; every row is asked about its own sentence's prefixes only."""
    tables = fairseq_beam_tables()
    for search in (Greedy(), Sampling(n=3), Sampling(n=2, top_k=1), Beam(n=2, beam=2), Beam(n=1, beam=3),
                   DiverseBeam(n=2, beam=2, groups=2, diversity=0.5)):
        stepper = SentenceStepper(tables)
        hyps = search.search(stepper, 2, [6, 6], torch.Generator().manual_seed(0))
        assert len(hyps) == 2 and all(len(hs) == search.n for hs in hyps), search
        for hs in hyps:
            for h in hs:
                assert math.fsum(h.token_scores) == pytest.approx(h.score) and len(h.token_scores) == len(h.tokens)


def test_empty_beam_slots_never_ask_about_another_sentence():
    """Sentence 0 writes only w1, sentence 1 only w2: a beam of 3 has empty slots (two live
    continuations at most); they must be filled from the same sentence."""
    def only(word):
        def fn(prefix):
            return log_table(0.5, 0.5, 0.0) if word == W1 else log_table(0.5, 0.0, 0.5)
        return fn
    stepper = SentenceStepper([only(W1), only(W2)])
    beam_search(stepper, 2, beam=3, max_len=5, n_best=2)
    assert stepper.moves == [], "a row continued another sentence's row"
    for sentence, prefix in stepper.asked:
        assert set(prefix) <= {(W1, W2)[sentence]}, (sentence, prefix)


def test_greedy_per_token_scores_are_the_tables():
    (h,), = Greedy().search(TableStepper(lambda row: log_table(0.1, 0.6, 0.3) if len(row) < 3 else log_table(1, 0, 0)),
                            1, [10])
    assert_hypothesis(h, [W1, W1, EOS], [0.6, 0.6, 1.0], False)
    cut, = greedy_or_sample(TableStepper(lambda row: log_table(0.1, 0.6, 0.3)), 1, 2)
    assert cut.tokens == [W1, EOS] and cut.token_scores == pytest.approx([math.log(0.6), math.log(0.1)])
