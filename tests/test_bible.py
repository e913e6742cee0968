import pytest

from nbsupport.data import bible


@pytest.mark.parametrize("raw, clean", [
    ("[]", ""),                                                    # empty BBE verse
    ("***", ""),
    ("God`s Spirit was hovering", "God's Spirit was hovering"),   # WEB backticks
    ("offer them, [even] an offering", "offer them, even an offering"),
    ("16. for God did so love the  world", "for God did so love the world"),  # YLT number, double space
    ("(9:1) Au chef des chantres.", "Au chef des chantres."),
    ("le #Dieu qui l'a fait", "le Dieu qui l'a fait"),
    ("auf ewig. * * *", "auf ewig."),
    ("Dieu dit\u00a0: Que", "Dieu dit : Que"),
])
def test_cleaning_rules(raw, clean):
    assert bible.clean_verse(raw) == clean


def test_unknown_code_names_the_valid_ones():
    with pytest.raises(ValueError, match="'k' \\(King James"):
        bible.check_codes(["k", "2"])


@pytest.fixture(scope="module")
def prepared():
    try:
        return bible.verses()
    except FileNotFoundError as err:
        pytest.skip(str(err))


def test_split_by_whole_books(prepared):
    books = {s: {v.book for v in prepared if v.split == s} for s in bible.SPLITS}
    assert books["test"] == set(bible.TEST_BOOKS) and books["dev"] == set(bible.DEV_BOOKS)
    assert not books["train"] & (books["test"] | books["dev"])
    n_test = sum(v.split == "test" for v in prepared)
    assert 450 <= n_test <= 550


def test_every_version_present_and_clean(prepared):
    assert len(prepared) > 31000
    for v in prepared:
        for code, text in v.text.items():
            assert text and "`" not in text and "[" not in text and "  " not in text, (v.key, code)


def test_known_verse(prepared):
    john = next(v for v in prepared if v.key == 43003016)
    assert john.text["k"].startswith("For God so loved the world")
    assert john.text["y"].startswith("for God did so love the world")   # YLT, number stripped
    assert john.text["e"].startswith("Denn also hat Gott die Welt geliebt")
    assert john.split == "train"


def test_corpus_has_four_english_references(prepared):
    c = bible.corpus(sources=("e", "l"), test_limit=10)
    assert len(c.test) == 10 and all(len(r) == 4 for r in c.test.refs)
    assert c.test.labels[0] == list(bible.ENGLISH_REFERENCES)
    assert len(c.train.pairs("e")) == 4 * len(c.train)


def test_dev_limit_caps_the_dev_split_only():
    whole = bible.corpus(sources=("e",), targets=("4",), test_limit=3, train_limit=5)
    capped = bible.corpus(sources=("e",), targets=("4",), test_limit=3, train_limit=5, dev_limit=7)
    assert len(whole.dev) == bible.SPLIT_SIZES["dev"] and len(capped.dev) == 7
    assert capped.dev.meanings == whole.dev.meanings[:7] and capped.dev.refs == whole.dev.refs[:7]
    assert capped.test.meanings == whole.test.meanings
