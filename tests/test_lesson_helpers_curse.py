"""Lessons 06-07's helpers in nbsupport/lessons/beam_curse.py, on small made-up inputs computed by hand."""
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from nbsupport.data.vocab import EOS, WordVocab  # noqa: E402
from nbsupport.lessons import beam_curse as bc  # noqa: E402
from nbsupport.stats import Resampled  # noqa: E402

SENTENCE = "the cat sees the dog beyond the road with care."


def test_shares_why_names_the_factors_of_each_q():
    rows = bc.shares_why(SENTENCE)
    assert [t for t, _, _ in rows] == "the cat sees the dog beyond the road with care . EOS".split()
    assert [q for _, q, _ in rows] == pytest.approx([1, .25, .25, 1, .25, .5, 1, .25, .25, .25, .5, 1])
    why = {i: w for i, (_, _, w) in enumerate(rows)}
    assert why[0] == "the only valid next token" and why[1] == "one of 4 forms"
    assert why[5] == "manner adverb skipped 0.5"                        # no adverb before the place phrase
    assert why[8] == "time phrase skipped 0.5 x written 0.5"          # "with" opens the feeling; no time phrase
    assert why[9] == "its word 1/4" and why[10] == "frequency word skipped 0.5"
    table = bc.share_table(SENTENCE)
    assert table.splitlines()[0].split() == ["token", "q_i", "why"] and "0.062" not in table and len(table.splitlines()) == 14


def test_share_table_refuses_factors_that_disagree_with_token_shares():
    with pytest.raises(ValueError, match="token_shares"):
        bc.share_table("the xyz sees the dog beyond the road.")      # not a content word: q = 1, not 1/4


class FixedLogits(torch.nn.Module):
    """Logits after a prefix of length t: rows[t - 1] (whatever the source)."""
    def __init__(self, rows):
        super().__init__()
        self.rows = torch.tensor(rows, dtype=torch.float)

    def forward(self, x, y):
        return self.rows[: y.shape[1]][None]


VOCAB = WordVocab.build(["the cat ."])       # <pad> <s> </s> <unk> . cat the


def test_next_token_rank():
    #                pad  bos  eos  unk   .   cat  the
    after_bos = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 9.0]
    after_the = [0.0, 0.0, 3.0, 0.0, 1.0, 5.0, 4.0]       # EOS ranks 3 (cat, the above it)
    after_cat = [0.0, 0.0, 9.0, 0.0, 2.0, 1.0, 0.0]       # "." ranks 2 (EOS above it)
    model = FixedLogits([after_bos, after_the, after_cat])
    x = torch.zeros(1, 2, dtype=torch.long)
    rank, above = bc.next_token_rank(model, x, VOCAB.encode("the"))
    assert rank == 3 and sorted(VOCAB.itos[w] for w in above) == ["cat", "the"]
    assert bc.next_token_rank(model, x, VOCAB.encode("the cat .")[:-1]) == (2, [EOS])


def R(estimate, spread=0.0):
    """A metric whose resamples spread evenly +-spread around its estimate."""
    return Resampled(estimate, estimate + np.linspace(-spread, spread, 101))


def made_up_q():
    """Two models at beams 4 and 64: a's BLEU falls from 30 to 20 and its length ratio from 1.0 to 0.5;
    b's holds within its interval."""
    Q = {}
    for level in ("low", "high"):
        for name, (bleu, ratio, one) in {"a": ((30, 20), (1.0, 0.5), (0.0, 0.4)), "b": ((30, 31), (1.0, 1.0), (0.0, 0.0))}.items():
            for i, b in enumerate((4, 64)):
                spread = 3.0 if name == "b" else 0.0
                Q[level, name, b] = {"multi_ref_bleu": R(bleu[i], spread * i), "len_ratio": R(ratio[i]),
                                     "one_word": R(one[i] if level == "high" else 0.0), "empty_rate": R(0.0)}
    return Q


def test_sweep_table_reads_the_made_up_numbers():
    Q = made_up_q()
    rows = bc.sweep_table(Q, "high", ["a", "b"], 4, 64).splitlines()
    assert "BLEU beam 64" in rows[0] and rows[2].split()[:4] == ["a", "30.0", "[30.0,", "30.0]"]
    assert rows[2].rstrip().endswith("40%") and rows[3].rstrip().endswith("0%")


def test_curse_figure_shades_an_interval_per_line_and_captions_the_empty_panels(capsys):
    Q = made_up_q()
    fig = bc.curse_figure(Q, [4, 64], ["low", "high"], ["a", "b"])
    assert len(fig.axes) == 6
    assert all(len(ax.collections) == 2 and len(ax.get_lines()) == 2 for ax in fig.axes)      # a band per model
    assert fig.axes[2].get_ylim() == (-0.02, 1) and fig.axes[0].get_ylim()[0] == 0
    assert [line.get_linestyle() for line in fig.axes[3].get_lines()] == ["-", "--"]
    caption = capsys.readouterr().out
    assert "no output is empty at any beam" in caption and "\nLow ambiguity: no output has <= 1 word at any beam (too little ambiguity for 'the' to win: the control)." in caption
    assert "High ambiguity: no output" not in caption and max(map(len, caption.splitlines())) < 120   # short lines


def test_records_per_level_with_intervals():
    Q = made_up_q()
    sweeps = {(lv, n): {b: {"bleu": 10.0 * b, "empty_rate": 0.1} for b in (4, 64)} for lv in ("low", "high") for n in "ab"}
    r = bc.records(sweeps, Q, [4, 64], ["a", "b"])
    assert set(r) == {"toy_low", "toy_high"} and set(r["toy_high"]) == {"a", "b"}
    assert r["toy_high"]["a"]["bleu_by_beam"] == {4: 40.0, 64: 640.0}
    assert r["toy_high"]["a"]["len_ratio_by_beam"][64] == {"estimate": 0.5, "ci_low": 0.5, "ci_high": 0.5}
    assert r["toy_low"]["b"]["empty_rate_by_beam"] == {4: 0.1, 64: 0.1}


def test_sweep_models_measures_each_model_and_beam_on_the_first_n(monkeypatch):
    from nbsupport.models import Transformer, TransformerConfig
    from nbsupport.stats import Resamples
    src_v, tgt_v = WordVocab.build(["a b c d e f g"]), WordVocab.build(["u v w x y z"])
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab=len(src_v), tgt_vocab=len(tgt_v), d_model=16, n_heads=2, d_ff=32,
                                          enc_layers=1, dec_layers=1)).eval()
    outputs = {1: ["u v", "w", "", "u v w"], 2: ["u", "v", "w", "u v"]}      # the 1-best per beam, written by hand
    seen = []

    def fixed_decode(model, src, method, beam):
        seen.append(src.shape[0])
        return [[SimpleNamespace(tokens=tgt_v.encode(h))] for h in outputs[beam][:src.shape[0]]]
    monkeypatch.setattr(bc, "decode", fixed_decode)
    test = SimpleNamespace(src=["a b c", "d e f g", "a c e", "b d f", "g"], refs=[["u v", "w"]] * 5)
    tasks = {"low": SimpleNamespace(src_vocab=src_v, tgt_vocab=tgt_v, corpus=SimpleNamespace(test=test))}
    sweeps, Q = bc.sweep_models({("low", "m"): model}, tasks, [1, 2], 4, Resamples(4, seed=0))
    assert set(Q) == {("low", "m", 1), ("low", "m", 2)} and seen == [4, 4]      # the first n only
    for b in (1, 2):
        assert sweeps["low", "m"][b]["hyps"] == outputs[b]
        assert Q["low", "m", b]["multi_ref_bleu"].estimate == pytest.approx(sweeps["low", "m"][b]["multi_ref_bleu"], abs=1e-6)
    assert Q["low", "m", 1]["one_word"].estimate == pytest.approx(0.5)       # "w" and ""
    assert Q["low", "m", 2]["one_word"].estimate == pytest.approx(0.75)      # "u", "v", "w"


def test_train_for_levels_keys_each_model_by_level_and_name_with_each_levels_options(monkeypatch):
    seen = []
    monkeypatch.setattr(bc, "prefetch_softmax_and_scones", lambda runs, alphas, device, seed: seen.append(("prefetch", len(runs))))
    def fake_train(task, alphas, device, seed, **options):
        seen.append((task, tuple(sorted(options))))
        return {n: f"{task}/{n}" for n in alphas}, {n: f"h:{task}/{n}" for n in alphas}
    monkeypatch.setattr(bc, "train_softmax_and_scones", fake_train)
    settings = {"bible_epochs": 3, "training": {"epochs": 9}, "model": {}}
    models, histories = bc.train_for_levels({"low": "L", "bible": "B"}, {"softmax": None, "scones_0.2": 0.2}, "cpu", 0, settings)
    assert models == {("low", "softmax"): "L/softmax", ("low", "scones_0.2"): "L/scones_0.2",
                      ("bible", "softmax"): "B/softmax", ("bible", "scones_0.2"): "B/scones_0.2"}
    assert histories[("bible", "scones_0.2")] == "h:B/scones_0.2"
    assert seen == [("prefetch", 2), ("L", ("model", "training")), ("B", ("epochs",))]   # the Bible: its epochs only
