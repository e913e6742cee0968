"""Lesson 04's helpers at the end of nbsupport/lessons/analysis.py, on small made-up inputs computed by hand."""
import math
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from nbsupport.lessons import analysis as an  # noqa: E402
from nbsupport.stats import Interval  # noqa: E402

# the toy's three styles: 0 active present "."; 1 passive past "!"; 2 active past synonym ";"
REFS = ["the soldier watches the farmer slowly beyond the road.",
        "the farmer was watched by the soldier beyond the road!",
        "the soldier observed the farmer beyond the road with care;"]
LABELS = [0, 1, 2]


def test_style_of_reads_the_final_mark_and_the_verb_phrase():
    assert [an.style_of(r) for r in REFS] == ["0", "1", "2"]
    assert an.style_of("the soldier watches the farmer!") == "none"        # style 0's verb, style 1's mark
    assert an.style_of("the soldier watched the farmer;") == "none"        # past, but not the synonym
    assert an.style_of("the farmer is watched by the soldier.") == "none"  # passive present: no style of the three


def test_content_right_ignores_optional_phrases_only():
    assert an.content_right("the soldier watches the farmer quietly beyond the road.", REFS, LABELS)   # another manner word
    assert an.content_right("the soldier watches the farmer beyond the road often.", REFS, LABELS)
    assert not an.content_right("the farmer watches the soldier beyond the road.", REFS, LABELS)       # subject and object swapped
    assert not an.content_right("the soldier watches the farmer!", REFS, LABELS)                       # no style
    # the references in another order: the style's own reference is found by its label
    assert an.content_right(REFS[2], REFS[::-1], LABELS[::-1])


def test_marker_columns_count_majority_styles_purity_and_content():
    wrong0 = "the farmer watches the soldier beyond the road."                 # style 0, content wrong
    hyps = [[REFS[0], REFS[0], "xx"],                                          # source 1: experts 0 and 1 write style 0
            [wrong0, REFS[1], "yy"]]                                          # source 2 (same references)
    cols = an.marker_columns(hyps, [REFS, REFS], [LABELS, LABELS])
    # majorities: z=0 style 0 (2 of 2), z=1 style 0 or 1 (1 each; ties go to the larger label), z=2 none
    assert cols["styles_by_markers"] == 2
    assert cols["purity_by_markers"] == pytest.approx((2 + 1 + 0) / 6)
    assert cols["content_right_by_z"] == [0.5, 1.0, 0.0]
    assert cols["content_right"] == pytest.approx(0.5)


def test_usage_text_and_shares():
    assert an.usage_text([1303.4, 1399, 1297.6]) == "1303 1399 1298"
    # a soft-EM history's raw mass and the tenth it is stored at print the same counts
    assert an.usage_text([1328.31, 1316.54, 1355.15]) == an.usage_text([1328.3, 1316.5, 1355.2]) == "1328 1317 1355"
    assert an.second_share([0, 4000, 0]) == 0
    assert an.second_share([1, 3, 2]) == pytest.approx(2 / 6)
    hists = {"a": SimpleNamespace(epochs=[{"usage": [4, 0, 0]}, {"usage": [1, 2, 1]}])}
    assert an.busiest_share(hists, ["a"]) == {"a": (1.0, 0.5)}


def _table():
    iv = {"pairwise_bleu": Interval(52.9, 51.3, 54.5), "multi_ref_bleu": Interval(58.9, 57.1, 60.6)}
    iv2 = {"pairwise_bleu": Interval(91.2, 88.2, 94.0), "multi_ref_bleu": Interval(47.2, 45.0, 49.4)}
    return {"m.ok": {"usage": [1303.4, 1399, 1297.6], "per_latent_bleu_1ref": [41.2, 40.8, 39.8], "intervals": iv,
                     "styles_by_markers": 2, "purity_by_markers": 0.694, "content_right_by_z": [1.0, 0.5, 0.0], "label": "ok",
                     "pairwise_bleu": 52.9, "multi_ref_bleu": 58.9},
            "m.d2": {"usage": [1, 2, 1], "per_latent_bleu_1ref": [33.6, 32.3, 31.9], "intervals": iv2,
                     "styles_by_markers": 1, "purity_by_markers": 0.77, "content_right_by_z": [0.29, 0.29, 0.32], "label": "D2",
                     "pairwise_bleu": 91.2, "multi_ref_bleu": 47.2}}


def test_record_collapse_writes_rows_intervals_as_dicts_and_training():
    records = {}
    run = SimpleNamespace(record=lambda key, value: records.__setitem__(key, value))
    hists = {n: SimpleNamespace(epochs=[{"valid_nll": 2.0}, {"valid_nll": 1.5}]) for n in _table()}
    an.record_collapse(run, _table(), hists)
    assert records["rule"] == {"D1_RATIO": 0.2, "D2_PAIRWISE": 86.0}
    assert records["m.ok"]["intervals"]["pairwise_bleu"] == {"estimate": 52.9, "ci_low": 51.3, "ci_high": 54.5}
    assert records[("training", "m.d2")] == [2.0, 1.5] and records["m.ok"]["label"] == "ok"


class FakeMixture:
    """encode returns the batch; expert_nll and log_prior are fixed per pair."""
    NLL = torch.tensor([[1.0, 3.0, 9.0], [4.0, 2.0, 9.0], [5.0, 6.0, 0.5]])

    def encode(self, s):
        return s, None

    def expert_nll(self, memory, mask, i, o):
        return self.NLL[memory]

    def log_prior(self, memory, mask):
        return torch.log(torch.tensor([[0.1, 0.8, 0.1]])).expand(len(memory), 3)


def test_prior_lean_counts_wins_without_the_prior_and_the_best_gain_over_the_busy_expert():
    batches = [(torch.tensor([0, 1]), None, None, None), (torch.tensor([2]), None, None, None)]
    lean = an.prior_lean(FakeMixture(), batches, usage=[0, 3, 0])
    assert lean["busy"] == 1 and lean["no_prior"] == [1, 1, 1]
    assert lean["log_prior"] == pytest.approx([-2.302585, -0.223144, -2.302585], abs=1e-5)
    assert lean["gain"] == pytest.approx(5.5)                      # pair 2: 6.0 under z=1, 0.5 under z=2
    assert lean["min_deficit"] == pytest.approx(math.log(8))       # log 0.8 - log 0.1 on every pair


def test_usage_figure_plots_each_experts_share_per_epoch():
    hists = {"a": SimpleNamespace(epochs=[{"usage": [4, 0, 0]}, {"usage": [1, 2, 1]}])}
    fig = an.usage_figure(hists, {"a": "what a changes"})
    lines = fig.axes[0].get_lines()[:3]
    assert [list(l.get_ydata()) for l in lines] == [[1.0, 0.25], [0.0, 0.5], [0.0, 0.25]]
    assert fig.axes[0].get_title() == "a (what a changes)"
    plt.close(fig)


def test_style_split_by_epoch_is_one_third_for_uniform_mass_and_one_for_sorted_styles():
    uniform = [[1.0, 1.0, 1.0]] * 3
    sorted_ = [[0, 5, 0], [0, 0, 5], [5, 0, 0]]                     # each expert one style, another for each
    hists = {"d2": SimpleNamespace(epochs=[{"latent_by_label": uniform}] * 2),
             "ok": SimpleNamespace(epochs=[{"latent_by_label": uniform}, {"latent_by_label": sorted_},
                                           {"latent_by_label": sorted_}])}
    assert an.style_split_by_epoch(hists, ["d2", "ok"]) == [[1, "0.33", "0.33"], [2, "0.33", "1.00"], [3, "", "1.00"]]


def test_expert_panels_give_each_model_its_usage_styles_and_content():
    html = an.expert_panels({"m": [REFS[0], "the farmer watches the soldier beyond the road.", "xx"]},
                            {"m": "1 2 3"}, REFS, LABELS)
    assert "m (usage 1 2 3)" in html
    assert html.count("<td>right</td>") == 1 and html.count("<td>wrong</td>") == 2
    assert html.count("<td>0</td>") == 2 and html.count("<td>none</td>") == 1


def test_latent_greedy_is_each_fixed_experts_greedy_translation():
    from nbsupport.data.batching import pad_batch
    from nbsupport.data.vocab import WordVocab
    from nbsupport.decode import Greedy, decode
    from nbsupport.models import TransformerConfig
    from nbsupport.models.mixture import MixtureConfig, MixtureModel
    torch.manual_seed(0)
    src_vocab, tgt_vocab = WordVocab.build(["ka mo ri"]), WordVocab.build(["the dog sees the cat ."])
    model = MixtureModel(TransformerConfig(len(src_vocab), len(tgt_vocab), d_model=16, n_heads=2, d_ff=32, enc_layers=1,
                                           dec_layers=1, dropout=0.0, n_latent=2), MixtureConfig()).eval()
    task = SimpleNamespace(src_vocab=src_vocab, tgt_vocab=tgt_vocab)
    out = an.latent_greedy(model, task, "ka mo", "cpu")
    src = pad_batch([src_vocab.encode("ka mo")])
    assert out == [tgt_vocab.decode(decode(model, src, Greedy(), z=z)[0][0].tokens) for z in range(2)]
