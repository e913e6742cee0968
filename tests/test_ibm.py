"""IBM Models 1-3 by EM and the appendix-B sampler: likelihood, nltk agreement, the
temperature's limits, empirical frequencies against the tables, lengths."""
import math

import numpy as np
import pytest
import torch

from nbsupport import ibm

CORPUS = [("das haus ist klein", "the house is small"),
          ("das haus ist ja groß", "the house is big"),
          ("das buch ist klein", "the book is small"),
          ("das haus", "the house"),
          ("das buch", "the book"),
          ("ein buch", "a book"),
          ("ich fasse das buch zusammen", "i summarize the book"),
          ("fasse zusammen", "summarize")]
PAIRS = [(s.split(), t.split()) for s, t in CORPUS]


def test_model1_likelihood_never_decreases():
    m = ibm.train_model1(ibm.Bitext.from_tokens(PAIRS), iterations=8)
    ll = m.log_likelihood["model1"]
    assert all(b >= a - 1e-9 for a, b in zip(ll, ll[1:])) and ll[-1] > ll[0] + 1


def test_model1_by_hand_on_two_sentences():
    """One EM iteration from uniform t on {(a b -> x y), (a -> x)}, computed by hand."""
    bt = ibm.Bitext.from_tokens([(["a", "b"], ["x", "y"]), (["a"], ["x"])])
    t = ibm.train_model1(bt, 1).t_table()
    # uniform t: each target word's posterior is 1/3 over {NULL, a, b} (sentence 1), 1/2 over {NULL, a}
    # counts: a: x 1/3 + 1/2, y 1/3 -> t(x|a) = (5/6) / (7/6) = 5/7; b: x 1/3, y 1/3 -> 1/2
    assert t["a"]["x"] == pytest.approx(5 / 7) and t["a"]["y"] == pytest.approx(2 / 7)
    assert t["b"]["x"] == pytest.approx(0.5)
    assert t[ibm.NULL]["x"] == pytest.approx(5 / 7)


def test_tables_are_distributions():
    m = ibm.train(PAIRS, iterations=4)
    for f, row in m.t_table().items():
        assert sum(row.values()) == pytest.approx(1.0)
    assert torch.allclose(m.n[1:].sum(-1), torch.ones(len(m.bitext.src_words) - 1, dtype=torch.float64))
    d = m.d
    rows = d.sum(-1)
    assert bool(((rows - 1).abs() < 1e-9)[rows > 0].all())
    assert 0 < m.p1 < 1


def test_poisson_binomial_against_enumeration():
    q = torch.tensor([[0.2, 0.7, 0.5, 0.0], [1.0, 0.3, 0.9, 0.4]], dtype=torch.float64)
    P = ibm.poisson_binomial(q, max_k=3)          # the last column holds P(sum >= 3)
    import itertools
    for r in range(2):
        exact = [0.0] * 5
        for bits in itertools.product([0, 1], repeat=4):
            p = math.prod(q[r, j].item() if b else 1 - q[r, j].item() for j, b in enumerate(bits))
            exact[sum(bits)] += p
        assert P[r, :3].tolist() == pytest.approx(exact[:3])
        assert P[r, 3].item() == pytest.approx(exact[3] + exact[4])


# ---------------------------------------------------------------- nltk, an independent implementation
nltk_translate = pytest.importorskip("nltk.translate", reason="nltk (a test-only dependency) is not installed")


def nltk_corpus():
    return [nltk_translate.AlignedSent(t, s) for s, t in PAIRS]   # words = target, mots = source


def our_table(model):
    return model.t_table()


def test_models_1_and_2_equal_nltk():
    """Models 1 and 2 are exact EM: the tables equal nltk's (nltk's Model 2 starts from a
    Model 1 trained for twice the iterations; we do the same here)."""
    bt = ibm.Bitext.from_tokens(PAIRS)
    n1 = nltk_translate.IBMModel1(nltk_corpus(), 5)
    ours1 = ibm.train_model1(bt, 5).t_table()
    n2 = nltk_translate.IBMModel2(nltk_corpus(), 5)
    ours2 = ibm.train_model2(bt, 5, model1=ibm.train_model1(bt, 10)).t_table()
    for ours, theirs in ((ours1, n1), (ours2, n2)):
        for f, row in ours.items():
            for e, p in row.items():
                assert p == pytest.approx(theirs.translation_table[e][None if f == ibm.NULL else f], abs=1e-6)


TOLERANCE = 0.05   # Model 3: ours uses a factorised E-step, nltk the Viterbi neighbourhood


def test_model3_agrees_with_nltk_within_tolerance():
    bt = ibm.Bitext.from_tokens(PAIRS)
    m2 = ibm.train_model2(bt, 5, model1=ibm.train_model1(bt, 10))
    ours = ibm.train_model3(bt, 5, model2=m2)
    theirs = nltk_translate.IBMModel3(nltk_corpus(), 5)
    worst = 0.0
    for f, row in ours.t_table().items():
        # a word whose most likely fertility is 0 generates nothing: its t is not identified
        if f == ibm.NULL or int(ours.n[bt.src_words.index(f)].argmax()) == 0:
            continue
        best_ours = max(row, key=row.get)
        best_theirs = max(row, key=lambda e: theirs.translation_table[e][f])
        assert best_ours == best_theirs, f
        worst = max(worst, max(abs(p - theirs.translation_table[e][f]) for e, p in row.items()))
    assert worst < TOLERANCE
    # the fertility of content words agrees on its mode
    for f in ("haus", "buch", "klein"):
        n_theirs = [theirs.fertility_table[phi][f] for phi in range(ibm.MAX_FERTILITY + 1)]
        assert int(np.argmax(n_theirs)) == int(ours.n[ours.bitext.src_words.index(f)].argmax())


# ---------------------------------------------------------------- the sampler
@pytest.fixture(scope="module")
def sampler():
    return ibm.Sampler(ibm.train(PAIRS, iterations=5))


def test_temper():
    p = np.array([0.5, 0.3, 0.2])
    assert ibm.temper(p, 1.0) == pytest.approx(p)
    assert ibm.temper(p, 0).tolist() == [1, 0, 0]
    sharp = ibm.temper(p, 0.1)
    assert sharp[0] > 0.99 and ibm.entropy(ibm.temper(p, 0.5)) < ibm.entropy(p) < ibm.entropy(ibm.temper(p, 2.0))
    with pytest.raises(ValueError, match=">= 0"):
        ibm.temper(p, -1)


def test_gamma_zero_is_the_argmax_story(sampler):
    src = "das haus ist klein".split()
    stories = [sampler.sample(src, 0.0, np.random.default_rng(s)) for s in range(5)]
    assert all(s.words == stories[0].words for s in stories)
    s = stories[0]
    ids = [sampler.src_id[w] for w in src]
    assert s.phi[1:] == [int(np.argmax(sampler.n[f])) for f in ids]
    for i, f in enumerate(ids, start=1):
        e, p = sampler.options[f]
        assert all(w == sampler.tgt_words[e[int(np.argmax(p))]] for w in s.tau[i])


def test_gamma_one_matches_the_tables(sampler):
    """Empirical fertility and translation frequencies of 4000 samples against n and t
    (total variation < 0.05; the standard error at this size is about 0.01)."""
    rng = np.random.default_rng(0)
    src = ["haus", "klein"]
    stories = [sampler.sample(src, 1.0, rng) for _ in range(4000)]
    for i, w in enumerate(src, start=1):
        f = sampler.src_id[w]
        emp = np.bincount([s.phi[i] for s in stories], minlength=ibm.MAX_FERTILITY + 1) / len(stories)
        assert 0.5 * np.abs(emp - sampler.n[f]).sum() < 0.05
        e, p = sampler.options[f]
        words = [x for s in stories for x in s.tau[i]]
        emp_t = np.array([words.count(sampler.tgt_words[k]) for k in e]) / len(words)
        assert 0.5 * np.abs(emp_t - p).sum() < 0.05


def test_every_sample_has_the_storys_length(sampler):
    rng = np.random.default_rng(1)
    for g in (0.1, 0.5, 1.0, 2.0):
        for src in ("das haus ist klein", "ich fasse das buch zusammen", "unbekannt buch"):
            s = sampler.sample(src.split(), g, rng)
            assert len(s.words) == sum(s.phi) and all(s.words)
            assert sorted(j for ps in s.pi for j in ps) == list(range(1, len(s.words) + 1))
    s = sampler.sample(["unbekannt"], 1.0, rng)        # an unknown word copies itself
    assert "unbekannt" in s.words


def test_unseen_lengths_get_uniform_distortion_that_gamma_does_not_change(sampler):
    """Training saw (l, m) = (4, 4) but no source of length 4 with 9 target words: there the
    distortion is uniform at every temperature, and the story says so."""
    assert sampler.seen(4, 4) and not sampler.seen(4, 9)
    trained = sampler.distortion(1, 4, 4)
    assert trained.max() > 0.5                           # "das" -> first position, learned
    for g in (0.1, 1.0):
        assert ibm.temper(sampler.distortion(1, 4, 9), g) == pytest.approx(np.full(9, 1 / 9))
    # a story at gamma 0 of a training sentence has a seen (l, m); long fertilities do not
    assert not sampler.sample("das haus ist klein".split(), 0.0, np.random.default_rng(0)).uniform_distortion
    rng = np.random.default_rng(0)
    stories = [sampler.sample("das haus ist klein".split(), 2.0, rng) for _ in range(300)]
    assert all(s.uniform_distortion == (not sampler.seen(4, len(s.words))) for s in stories)
    assert any(s.uniform_distortion for s in stories) and max(max(s.phi[1:]) for s in stories) <= ibm.MAX_FERTILITY
