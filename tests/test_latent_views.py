"""The live latent views of notebooks 02, 04 and 05: the source control (a test
sentence or one the student writes), the references shown only for a test sentence, and a
mixture of independent experts answering in the latent view expert by expert."""
import re
from types import SimpleNamespace

import pytest
import torch

from nbsupport import registry
from nbsupport.data.vocab import WordVocab
from nbsupport.decode import decode, token_ids, token_scores
from nbsupport.lessons.analysis import LABEL_MEANING, references_of
from nbsupport.views.widgets import source_box
from nbsupport.models import TransformerConfig
from nbsupport.models.mixture import MixtureConfig, MixtureModel
from nbsupport.views import live, widgets

SOURCES = ["ka mo ri", "te lu po se", "na vi do", "ka mo ri"]
TARGETS = ["the dog sees the cat .", "a cat saw the dog !", "the big dog sees a cat .", "the dog saw a cat ;"]
TEST = SimpleNamespace(src=SOURCES, refs=[[t, t.upper()] for t in TARGETS])


def test_references_are_those_of_a_test_sentence_and_none_for_a_written_one():
    assert references_of(TEST, "te lu po se") == TEST.refs[1]
    assert references_of(TEST, "  te  lu po se ") == TEST.refs[1]        # spaces as typed
    assert references_of(TEST, "ka mo ri") == TEST.refs[0]                # a repeated source: its first references
    assert references_of(TEST, "ka mo") == [] and references_of(TEST, "") == []


def test_source_box_suggests_the_test_sentences_and_takes_any_text():
    box = source_box(SOURCES)
    assert box.value == SOURCES[0] and list(box.options) == SOURCES[:3]   # duplicates suggested once
    assert box.ensure_option is False and box.continuous_update is False  # any text, read on Enter
    with pytest.raises(ValueError, match="at least one sentence"):
        source_box([])


@pytest.fixture(scope="module")
def toy():
    src_vocab, tgt_vocab = WordVocab.build(SOURCES), WordVocab.build(TARGETS)
    torch.manual_seed(1)
    cfg = TransformerConfig(len(src_vocab), len(tgt_vocab), n_latent=3, d_model=16, n_heads=2, d_ff=32, enc_layers=1,
                            dec_layers=1, dropout=0.0, max_len=12)
    independent = MixtureModel(cfg, MixtureConfig("hard", "uniform", "independent", "online", "M")).eval()
    return src_vocab, tgt_vocab, independent, registry.build(cfg).eval()


def _cells(html: str, row_label: str) -> list[str]:
    row = re.search(rf"<tr[^>]*><td>{re.escape(row_label)}</td>(.*?)</tr>", html).group(1)
    return [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]


def test_independent_experts_answer_one_by_one_in_the_latent_view(toy):
    """Notebook 04's view on a mixture of independent decoders: row z is expert z's own greedy
    translation, and the heat map's row v scores z's hypothesis with expert v (not expert 0)."""
    src_vocab, tgt_vocab, model, _ = toy
    src = torch.tensor([src_vocab.encode(SOURCES[1])])
    own = [token_ids(decode(e, src, "greedy"))[0][0] for e in model.experts]
    html = live.latent_view(model, src_vocab, tgt_vocab, SOURCES[1], 2).data
    for z in range(3):
        assert _cells(html, f"z={z}")[0] == (tgt_vocab.decode(own[z]) or "(empty)")
    per_expert = [token_scores(model.experts[v], src, [own[2]])[0] for v in range(3)]
    assert len({tuple(round(s, 1) for s in row) for row in per_expert}) > 1     # the experts do differ here
    for v in range(3):
        assert _cells(html, f"under z={v}") == [f"{s:.1f}" for s in per_expert[v]]


def test_a_view_on_the_source_box_names_bad_text_and_shows_references_only_for_test_sentences(toy):
    """As notebooks 02, 04 and 05 build it: driven through ipywidgets, a suggestion renders with
    its references, a written sentence without, an unknown word and empty text are named."""
    src_vocab, tgt_vocab, _, moe = toy
    widgets.VIEWS.clear()

    def render(source=SOURCES[0], z=0):
        return live.latent_view(moe, src_vocab, tgt_vocab, source, z, references=references_of(TEST, source))

    widgets.explore(render, True, source=source_box(SOURCES), z=widgets.toggles(range(3), "z"))
    view = widgets.VIEWS[-1]
    text = lambda: re.sub(r"<[^>]+>", "", view.last)
    assert "the references" in text() and "THE DOG SEES THE CAT ." in text()
    view.controls["source"].value = "na ka te"                           # written, then Enter
    assert not view.last.startswith("⚠") and "na ka te" in text() and "the references" not in text()
    report = widgets.exercise([view])
    bad = [r for r in report if r["control"] == "source" and r["error"]]
    assert len(bad) == 2 and "zzzq" in bad[0]["text"] and "empty" in bad[1]["text"]
    assert all(r["changed"] for r in report) and "Traceback" not in "".join(r["text"] for r in report)


def test_every_degeneracy_label_has_a_meaning_for_the_view():
    assert set(LABEL_MEANING) == {"ok", "D1", "D2", "mixed"}
