import math
import random
import statistics
from collections import Counter

import pytest

from nbsupport import data, metrics
from nbsupport.data import synthetic as T


def test_deterministic_by_seed():
    a, b = data.toy(n_train=300, n_test=20, seed=3), data.toy(n_train=300, n_test=20, seed=3)
    assert a.train.pairs() == b.train.pairs() and a.test.refs == b.test.refs
    c = data.toy(n_train=300, n_test=20, seed=4)
    assert c.train.pairs() != a.train.pairs()


def test_no_test_or_dev_source_in_training():
    c = data.toy(n_train=3000, n_dev=100, n_test=100)
    train = set(c.train.src)
    assert not train & set(c.test.src) and not train & set(c.dev.src)
    assert not set(c.dev.src) & set(c.test.src)


def test_training_is_single_reference_test_has_every_style():
    c = data.toy(n_train=500, n_test=30, n_styles=4)
    assert all(len(r) == 1 for r in c.train.refs)
    assert all(labels == [0, 1, 2, 3] for labels in c.test.labels)
    # the training styles are drawn at random: all four occur, none dominates
    counts = Counter(l[0] for l in c.train.labels)
    assert set(counts) == {0, 1, 2, 3} and max(counts.values()) < 0.35 * 500


def test_styles_are_consistent_across_sentences():
    c = data.toy(n_train=0, n_test=100, n_styles=4)
    for refs in c.test.refs:
        for style, ref in enumerate(refs):
            f = data.style_features(style)
            assert ref.endswith(f["punctuation"])
            assert (" by the " in ref) == (f["voice"] == "passive")
    # a source never tells the style: the same source has all four targets
    assert all(len(set(r)) == 4 for r in c.test.refs)


def test_subtle_styles_differ_in_one_or_two_tokens():
    c = data.toy(n_train=0, n_test=50, style_strength="subtle")
    for refs in c.test.refs:
        for a in refs:
            for b in refs:
                if a != b:
                    ta, tb = data.WordVocab.tokenize(a), data.WordVocab.tokenize(b)
                    assert len(ta) == len(tb)
                    assert 1 <= sum(x != y for x, y in zip(ta, tb)) <= 2


def test_strong_styles_are_further_apart_than_subtle():
    strong = metrics.human_scores(data.toy(n_train=0, n_test=100).test.refs)["pairwise_bleu"]
    subtle = metrics.human_scores(data.toy(n_train=0, n_test=100, style_strength="subtle").test.refs)["pairwise_bleu"]
    assert 20 < strong < 45 < subtle


def test_no_ambiguity_means_one_translation_per_style():
    c = data.toy(n_train=0, n_test=20, n_styles=1, refs_per_style=5)
    assert all(len(set(r)) == 1 for r in c.test.refs)


def test_entropy_of_low_ambiguity_matches_sampling():
    # plug-in entropy of 40,000 samples of one meaning (81 outcomes) against the exact value
    m = T.Meaning(0, None, 1, 2, None, None)
    rng = random.Random(0)
    counts = Counter(T.realise(m, 0, "strong", "low", rng) for _ in range(40_000))
    n = sum(counts.values())
    plug_in = -sum(c / n * math.log(c / n) for c in counts.values())
    assert len(counts) == 3 ** 4
    assert plug_in == pytest.approx(T.entropy_nats(m, "low"), abs=0.01)
    assert T.entropy_nats(m, "low") == pytest.approx(4 * (math.log(2) + 0.5 * math.log(2)))


def test_token_shares_are_the_generators_conditional_probabilities():
    # low: the 81 translations' products of q_i sum to 1 and each equals its sampled frequency;
    # high: -sum log q_i over samples averages to the exact entropy (the expectation of -log p(y))
    m = T.Meaning(0, 3, 1, 2, None, (3, 3))
    rng = random.Random(1)
    counts = Counter(T.realise(m, 0, "strong", "low", rng) for _ in range(40_000))
    p = {y: math.prod(T.token_shares(y, "low")) for y in counts}
    assert len(counts) == 3 ** 4 and sum(p.values()) == pytest.approx(1.0, abs=1e-12)
    assert all(abs(c / 40_000 - p[y]) < 5 * math.sqrt(p[y] / 40_000) for y, c in counts.items())
    surprisal = [-sum(map(math.log, T.token_shares(T.realise(m, 0, "strong", "high", rng), "high")))
                 for _ in range(4_000)]
    mean, sd = sum(surprisal) / len(surprisal), statistics.stdev(surprisal)
    assert abs(mean - T.entropy_nats(m, "high")) < 4 * sd / math.sqrt(len(surprisal))
    # by hand: content words 1/4; "quietly" 1/2 * 1/4; "beyond" sure once the adverb is decided; "at" 1/2;
    # "." 1/2 * 1/2 (company and frequency left out); "the" and EOS sure
    assert T.token_shares("the dog calls the cat quietly beyond the road at dawn.", "high") == \
        [1, 1 / 4, 1 / 4, 1, 1 / 4, 1 / 8, 1, 1, 1 / 4, 1 / 2, 1 / 4, 1 / 4, 1]


def test_high_ambiguity_has_at_least_ten_nats():
    c = data.toy(n_train=0, n_test=200, ambiguity="high")
    mean = sum(T.entropy_nats(m, "high") for m in c.test.meanings) / len(c.test)
    assert mean >= 10
    # every content word takes its 4 surface forms about equally often
    forms = Counter(tok.rstrip(".!;,") for refs in c.test.refs for r in refs for tok in r.split()
                    if tok.rstrip(".!;,").rstrip("234") == "dog")
    assert len(forms) == 4 and min(forms.values()) > 0.15 * sum(forms.values())


def test_ambiguous_test_sets_carry_several_samples():
    c = data.toy(n_train=0, n_test=10, n_styles=1, ambiguity="low")
    assert all(len(r) == 4 for r in c.test.refs)


def test_trilingual_sources_disambiguate_each_other():
    la, lb = T.ToyLanguage(0, "sov", "even"), T.ToyLanguage(1, "vso", "odd")
    amb_a, amb_b = T.ambiguous_nouns(la), T.ambiguous_nouns(lb)
    assert len(amb_a) == len(amb_b) == 4
    # the two languages merge different pairs ...
    assert {frozenset(v) for v in amb_a.values()}.isdisjoint({frozenset(v) for v in amb_b.values()})
    # ... so the pair of words determines every noun
    assert len({(la.noun[i], lb.noun[i]) for i in range(len(T.NOUNS))}) == len(T.NOUNS)
    c = data.toy_trilingual(n_train=200, n_test=20, seed=0)
    assert set(c.test.sources) == {"xa", "xb", "xc"} and all(len(r) == 1 for r in c.test.refs)
    assert c.info["merged_nouns"]["xa"] == amb_a and c.info["merged_nouns"]["xb"] == amb_b
    assert c.info["noun_words"]["xa"] == la.noun


def test_the_close_language_resolves_only_half_of_the_first_ones_merged_nouns():
    """xc (Fig. 6 in miniature) shares two of xa's four merged pairs: with xa, the four nouns of the
    shared pairs stay ambiguous, every other noun is determined by the pair of words."""
    langs = T.trilingual_languages(0)
    la, lc = langs["xa"], langs["xc"]
    pairs = lambda L: {frozenset(v) for v in T.ambiguous_nouns(L).values()}
    shared = pairs(la) & pairs(lc)
    assert len(pairs(lc)) == 4 and len(shared) == 2
    words = [(la.noun[i], lc.noun[i]) for i in range(len(T.NOUNS))]
    still_ambiguous = {T.NOUNS[i] for i, w in enumerate(words) if words.count(w) > 1}
    assert still_ambiguous == set().union(*shared) and len(still_ambiguous) == 4
    assert lc.noun != la.noun and lc.order == "sov"
    with pytest.raises(ValueError, match="even, odd, close"):
        T.ToyLanguage(0, "sov", merge="all")


@pytest.mark.parametrize("kwargs, word", [({"style_strength": "loud"}, "strong, subtle"),
                                          ({"ambiguity": "huge"}, "none, low, high"),
                                          ({"n_styles": 9}, "between 1 and 8")])
def test_bad_settings_name_the_valid_values(kwargs, word):
    with pytest.raises(ValueError, match=word):
        data.toy(**kwargs)


def test_unknown_data_set():
    with pytest.raises(ValueError, match="toy, toy-trilingual, bible"):
        data.load("wmt")


def test_pipeline_trilingual_task_accepts_overrides():
    import nbsupport as nbs
    task = nbs.pipeline.toy_task(nbs.profile("ci"), 0, trilingual=True, n_train=100)
    assert task.src_lang == "xa" and len(task.corpus.test.refs[0]) == 1
    task2 = nbs.pipeline.toy_task(nbs.profile("ci"), 0, trilingual=True, n_train=100, n_styles=2, src_lang="xb")
    assert task2.src_lang == "xb" and len(task2.corpus.test.refs[0]) == 2
