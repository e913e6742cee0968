"""Live views (nbsupport.views.live) and the widget layer (nbsupport.views.widgets): what a view
shows is what the model answers for the control's value (checked against the decoders and the
model's own scores), bad input is named in the view, and controls driven through ipywidgets
re-render the view."""
import ast
import re
from html import unescape

import pytest
import torch

from nbsupport import registry
from nbsupport.data.vocab import EOS, WordVocab
from nbsupport.decode import beam_search, decode, max_lengths, token_ids, token_scores
from nbsupport.models import TransformerConfig, shift_right
from nbsupport.search import empty_scores
from nbsupport.views import live, widgets

SOURCES = ["ka mo ri", "te lu po se", "na vi do"]
TARGETS = ["the dog sees the cat .", "a cat saw the dog !", "the big dog sees a cat ."]


@pytest.fixture(scope="module")
def toy():
    src_vocab, tgt_vocab = WordVocab.build(SOURCES), WordVocab.build(TARGETS)
    torch.manual_seed(0)
    cfg = dict(d_model=16, n_heads=2, d_ff=32, enc_layers=1, dec_layers=1, dropout=0.0, max_len=12)
    moe = registry.build(TransformerConfig(len(src_vocab), len(tgt_vocab), n_latent=3, **cfg)).eval()
    base = registry.build(TransformerConfig(len(src_vocab), len(tgt_vocab), **cfg)).eval()
    return src_vocab, tgt_vocab, moe, base


def rows(html: str) -> list[str]:
    """The hypothesis cells of an HTML compare table, marks removed."""
    return [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<tr[^>]*><td>[^<]*</td><td>(.*?)</td>", html)]


def test_the_row_of_latent_value_k_is_greedy_decoding_with_z_k(toy):
    src_vocab, tgt_vocab, moe, _ = toy
    for z in range(3):
        html = live.latent_view(moe, src_vocab, tgt_vocab, SOURCES[1], z=z).data
        src = torch.tensor([src_vocab.encode(SOURCES[1])])
        shown = rows(html)[:3]
        for v in range(3):
            assert shown[v] == (tgt_vocab.decode(token_ids(decode(moe, src, "greedy", z=v))[0][0]) or "(empty)")
        chosen = re.findall(r"<tr class=chosen><td>([^<]*)</td>", html)
        assert chosen == [f"z={z}"] and f"z={z}&#x27;s hypothesis" in html


def test_token_scores_sum_to_the_beam_score_and_to_the_models_own_nll(toy):
    src_vocab, _, moe, base = toy
    src = torch.tensor([src_vocab.encode(SOURCES[0])] * 2)
    hyps = beam_search(base.stepper(src), 2, 3, max_lengths(src, 1.5, 10, base.config.max_len), n_best=2)
    for row in range(2):
        for h in hyps[row]:
            assert sum(token_scores(base, src[row:row + 1], [h.tokens])[0]) == pytest.approx(h.score, abs=1e-4)
    tgt = torch.tensor([[5, 6, 7, EOS]])
    for z in range(3):
        with torch.no_grad():
            memory, mask = moe.encode(src[:1])
            nll = moe.sentence_nll(moe.decode(shift_right(tgt), memory, mask, torch.tensor([z])), tgt)
        assert sum(token_scores(moe, src[:1], [tgt[0].tolist()], z=z)[0]) == pytest.approx(-nll.item(), abs=1e-4)


def test_beam_view_lists_the_n_best_by_score_and_the_empty_translations_score(toy):
    src_vocab, tgt_vocab, _, base = toy
    html = live.beam_view(base, src_vocab, tgt_vocab, SOURCES[0], beam=4, n_best=3, exact_budget=200).data
    scores = [float(s) for s in re.findall(r"<td>(-?\d+\.\d\d)</td><td>\d+</td>", html)]
    assert len(scores) == 3 and scores == sorted(scores, reverse=True)
    src = torch.tensor([src_vocab.encode(SOURCES[0])])
    assert rows(html) == [tgt_vocab.decode(h) or "(empty)" for h in token_ids(decode(base, src, "beam", n=3, beam=4))[0]]
    exact = float(re.search(r"exact search:</b> .*?, log score (-?\d+\.\d\d)", html).group(1))
    assert exact >= scores[0]                          # seeded with the beam's best: never worse
    found = ast.literal_eval(unescape(re.search(r"exact search:</b> (.*?), log score", html).group(1)))
    found_beams_best = (found or "(empty)") == unescape(rows(html)[0])
    assert ("the same as the beam's best" in html) == found_beams_best   # equal scores in fp32 and fp64 are not "better"
    proven = live.beam_view(base, src_vocab, tgt_vocab, SOURCES[0], beam=4, exact_budget=100_000).data
    assert "proven best" in proven
    empty = float(empty_scores(base, torch.tensor([src_vocab.encode(SOURCES[0])]))[0])
    assert f"log score {empty:.2f}" in html
    assert "exact search:" in html


def test_bad_input_is_named(toy):
    src_vocab, tgt_vocab, moe, base = toy
    with pytest.raises(ValueError, match="'zzzq'"):
        live.latent_view(moe, src_vocab, tgt_vocab, "ka zzzq mo", z=0)
    with pytest.raises(ValueError, match="empty"):
        live.latent_view(moe, src_vocab, tgt_vocab, "   ", z=0)
    with pytest.raises(ValueError, match="one of 0..2"):
        live.latent_view(moe, src_vocab, tgt_vocab, SOURCES[0], z=3)
    with pytest.raises(ValueError, match="limit of 12"):
        live.beam_view(base, src_vocab, tgt_vocab, " ".join(["ka"] * 20))
    with pytest.raises(ValueError, match="temperature"):
        live.sample_view(base, src_vocab, tgt_vocab, SOURCES[0], temperature=0)


def test_controls_driven_through_ipywidgets_re_render_and_errors_stay_in_the_view(toy, capsys):
    src_vocab, tgt_vocab, moe, _ = toy
    widgets.VIEWS.clear()

    def render(sentence=SOURCES[0], z=0):
        return live.latent_view(moe, src_vocab, tgt_vocab, sentence, z)

    widgets.explore(render, True, sentence=SOURCES[0], z=widgets.toggles(range(3), "z"))
    view = widgets.VIEWS[-1]
    assert set(view.controls) == {"sentence", "z"}
    first = view.last
    view.controls["z"].value = 2                                      # as a click on z=2 would
    assert view.last != first and "z=2&#x27;s hypothesis" in view.last
    view.controls["sentence"].value = "ka zzzq"                       # as typing and Enter would
    assert view.last.startswith("⚠") and "zzzq" in view.last and "Traceback" not in view.last
    view.controls["sentence"].value = SOURCES[2]                      # and the view keeps working
    assert not view.last.startswith("⚠") and SOURCES[2] in view.last
    report = widgets.exercise([view])
    assert {r["control"] for r in report} == {"sentence", "z"}
    assert all(r["changed"] for r in report)
    assert [r["error"] for r in report if r["control"] == "sentence"] == [True, True]   # unknown word, empty
    assert "Traceback" not in capsys.readouterr().out


def test_compare_table_highlights_only_the_words_not_every_row_shares_unless_told_not_to():
    html = live.compare_table(["a", "b"], ["the cat sat", "the dog sat"])
    assert re.findall(r"<mark>(.*?)</mark>", html) == ["cat", "dog"]
    plain = live.compare_table(["a", "b", "c"], ["the cat sat", "the dog sat", ""], mark=False)
    assert "<mark>" not in plain and "the cat sat" in plain and "(empty)" in plain


def test_toggles_start_at_the_default_views_value():
    buttons = widgets.toggles((2, 4, 8), "K", value=4)
    assert buttons.value == 4 and list(buttons.options) == [2, 4, 8]
    assert widgets.toggles((2, 4, 8), "K").value == 2            # the first option by default
    with pytest.raises(ValueError, match=r"not one of their options \[2, 4, 8\]"):
        widgets.toggles((2, 4, 8), "K", value=3)
