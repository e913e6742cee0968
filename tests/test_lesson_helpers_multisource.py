"""Notebook 01's helpers in nbsupport.lessons.multisource: its tables, figures and printed readings,
on small made-up inputs (or the tiny trilingual toy) whose answers are worked out by hand."""
from types import SimpleNamespace

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from nbsupport import stats  # noqa: E402
from nbsupport.data.synthetic import NOUNS  # noqa: E402
from nbsupport.lessons import multisource as ms  # noqa: E402
from nbsupport.views import widgets  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return ms.toy_data("ci", 0, n_train=20, n_test=30)


def word(data, role, noun):
    return data.corpus.info["noun_words"][ms.ROLES["toy"][role]][NOUNS.index(noun)]


def test_merges_table_lists_each_source_s_merged_words_with_their_two_nouns(data):
    lines = ms.merges_table(data).splitlines()
    assert lines[0].split() == ["source", "merged", "words"] and [l.split()[0] for l in lines[2:]] == ["fr", "de", "close"]
    for line in lines[2:]:
        role, pairs = line.split(None, 1)
        assert len(pairs.split(", ")) == 4                       # four merged pairs per language
        for pair in pairs.split(", "):
            w, nouns = pair.split(" = ")
            assert [word(data, role, n) for n in nouns.split("/")] == [w, w]


def test_merged_subject_example_is_the_first_sentence_with_a_fr_merged_subject_and_an_unmerged_object(data):
    merged = lambda role, n: sum(word(data, role, m) == word(data, role, NOUNS[n]) for m in NOUNS) > 1
    ok = lambda m: merged("fr", m.subj) and not any(merged(r, m.obj) for r in ("fr", "de", "close"))
    i = ms.merged_subject_example(data)
    assert ok(data.corpus.test.meanings[i]) and not any(ok(m) for m in data.corpus.test.meanings[:i])


def fake_data(window):
    split = lambda *xs: SimpleNamespace(sources={"xa": list(xs), "xb": ["a"]})
    return SimpleNamespace(corpus=SimpleNamespace(train=split("a b c", "a"), test=split("a b")), model_sizes={"window": window})


def test_window_note_compares_the_longest_source_and_its_end_marker_with_the_window():
    assert ms.window_note(fake_data(3)).endswith("4 positions with </s>, window D = 3: the window cuts the longest toy sources")
    assert ms.window_note(fake_data(4)).endswith("window D = 4: the window never cuts a toy source")


def test_score_system_records_the_scores_of_the_outputs(data, monkeypatch):
    refs = [rs[0] for rs in data.corpus.test.refs]
    monkeypatch.setattr(ms, "evaluate_system", lambda *a, **k: {"ppl": 1.25, "bleu": 100.0, "hyps": list(refs)})
    model = SimpleNamespace(n_parameters=lambda: 7)
    record, scores = ms.score_system(model, data, "fr", stats.Resamples(len(refs), seed=0))
    assert record["ppl"] == 1.25 and record["parameters"] == 7 and record["ppl_floor"] == ms.perplexity_floor(data, "fr")
    assert record["noun_accuracy"] == {"merged nouns": 1.0, "other nouns": 1.0}       # the references: every noun right
    assert scores["bleu"].estimate == pytest.approx(100.0) and record["intervals"]["bleu"]["ci_low"] == pytest.approx(100.0)


def test_paper_bleu_reads_each_system_against_its_first_source_in_the_paper_s_languages():
    # by hand from the paper: Fig. 4 French 21.0 -> French+German 23.2; Fig. 6 English 13.4 -> English+French 14.5
    assert ms.paper_bleu("fr+de.basic") == "Fig. 4: French 21.0 -> French+German 23.2"
    assert ms.paper_bleu("fr+close.basic") == "Fig. 6: English 13.4 -> English+French 14.5"
    assert ms.paper_bleu("fr+de.attn_basic") == "Fig. 4: French 25.2 -> French+German 30.0, both with attention"
    assert ms.paper_bleu("de") == "Fig. 4: German 17.3" and ms.paper_bleu("fr+fr.two_versions") == "-"


def test_expected_merged_share_is_a_coin_flip_where_the_sources_leave_two_senses(data):
    # fr merges all its 8 nouns in pairs; de merges them in other pairs; close shares 2 of fr's 4 pairs
    assert ms.expected_merged_share(data, "fr") == 0.5
    assert ms.expected_merged_share(data, "fr+de.basic") == 1.0
    assert ms.expected_merged_share(data, "fr+close.basic") == 0.75


def test_merged_nouns_figure_draws_a_bar_per_system_and_its_red_mark(data):
    iv = {n: stats.Interval(0.5, 0.4, 0.6) for n in ("fr", "fr+de.basic")}
    fig = ms.merged_nouns_figure(data, iv)
    ax = fig.axes[0]
    assert [p.get_width() for p in ax.patches] == [0.5, 0.5]
    assert sorted(ax.collections[-1].get_offsets()[:, 0].tolist()) == [0.5, 1.0]
    assert "share of merged nouns" in ax.get_xlabel()


def test_explore_meanings_opens_on_the_attention_system_and_the_dog_and_the_cat(data, monkeypatch):
    seen = {}
    monkeypatch.setattr(ms, "translation_html", lambda model, d, system, sources, beam, names: f"{system} beam {beam}")
    monkeypatch.setattr(ms, "composed_view", lambda corpus, translate, names, **parts: seen.update(parts) or
                        translate({"xa": "w"}))
    ms.explore_meanings({"fr": None, "fr+de.attn_basic": None}, data, interactive=False)
    assert widgets.VIEWS[-1].last == "fr+de.attn_basic beam 1"
    assert seen["subject"] == "dog" and seen["object"] == "cat"


def test_gloss_names_particles_and_a_merged_word_s_two_nouns(data):
    g = ms.gloss(data, "xa")
    assert g["ga"] == "subj." and g["o"] == "obj."
    vina = word(data, "fr", "dog")
    assert g[vina] == "/".join(n for n in NOUNS if word(data, "fr", n) == vina) and len(g[vina].split("/")) == 2


def fake_maps(data, dog_xa):
    """Output "the dog </s>"; source xa: [dog's word, "x", "</s>"], source xb: ["y", "</s>"]."""
    return {"output": ["the", "dog", "</s>"], "text": "the dog",
            "sources": [{"lang": "xa", "tokens": [dog_xa, "x", "</s>"], "weights": [[0.1, 0.6, 0.1], [0.2, 0.0, 0.6], [0.1, 0.1, 0.1]]},
                        {"lang": "xb", "tokens": ["y", "</s>"], "weights": [[0.5, 0.5], [0.4, 0.2], [0.9, 0.1]]}]}


def test_noun_attention_shares_are_shares_of_the_noun_rows_weight(data, monkeypatch):
    dog = word(data, "fr", "dog")
    monkeypatch.setattr(ms, "attention_maps_of", lambda *a: fake_maps(data, dog))
    shares = ms.noun_attention_shares(None, data, "fr+de.attn_basic", 2)
    assert shares["fr"] == pytest.approx((0.2 / 0.8, 0.6 / 0.8, 0.8))     # the "dog" row: 0.2 on dog's word, 0.6 on </s>, 0.8 in all
    assert shares["de"] == pytest.approx((0.0, 0.2 / 0.6, 0.6))            # "y" is not de's word for dog


def test_shares_table_says_where_the_attention_mostly_sits():
    lines = ms.shares_table({"fr": (0.1, 0.8, 0.9), "de": (0.6, 0.2, 1.0), "close": (0.3, 0.3, 0.5)}).splitlines()[2:]
    assert lines[0].split()[1:] == ["0.90", "10%", "80%", "on", "</s>"]
    assert lines[1].rstrip().endswith("on the noun's own word") and lines[2].rstrip().endswith("split")
    assert "60%" in lines[1] and "20%" in lines[1]


def test_attention_figure_glosses_the_source_words_and_titles_the_output(data, monkeypatch):
    dog = word(data, "fr", "dog")
    monkeypatch.setattr(ms, "attention_maps_of", lambda *a: fake_maps(data, dog))
    fig = ms.attention_figure(None, data, "fr+de.attn_basic", 0)
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels[0].startswith(f"{dog}\n(") and "dog" in labels[0] and labels[-1] == "</s>"   # level, gloss below
    assert all(t.get_rotation() == 0 for t in fig.axes[0].get_xticklabels())
    assert fig.axes[0].get_xlabel() == "source fr (as written)" and "'the dog'" in fig._suptitle.get_text()
    assert len(fig.axes) == 4                                               # two maps, two colour bars
