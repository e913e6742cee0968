"""Notebooks 08-09's helpers in nbsupport.lessons.ibm_tasks: its tables, figure, sweeps and records, on
small made-up inputs whose answers are worked out by hand."""
import math
from types import SimpleNamespace

import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")

from nbsupport import stats  # noqa: E402
from nbsupport.data.vocab import BOS, WordVocab  # noqa: E402
from nbsupport.lessons import ibm_tasks  # noqa: E402
from nbsupport.models import Transformer, TransformerConfig  # noqa: E402
from nbsupport.search import ModelScorer  # noqa: E402

R = stats.Resampled
B = "multi_ref_bleu"


def test_plot_by_gamma_draws_one_line_with_interval_per_model():
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    series = {n: [R(v, np.array([v - 1, v + 1])) for v in (10.0, 20.0, 30.0)] for n in ("a", "b")}
    ibm_tasks.plot_by_gamma(ax, series, [0.1, 0.3, 1.0], "BLEU")
    assert len(ax.containers) == 2 and [t.get_text() for t in ax.get_xticklabels()] == ["0.1", "0.3", "1.0"]
    assert list(ax.lines[0].get_ydata()) == [10.0, 20.0, 30.0] and ax.get_ylabel() == "BLEU"
    plt.close(fig)


def fake_task(refs):
    test = SimpleNamespace(src=[f"s{i}" for i in range(len(refs))], refs=refs)
    return SimpleNamespace(corpus=SimpleNamespace(test=test))


def fake_raw(hyps, expansions, exact_hyps=None):
    """Beam searches (every beam) output ``hyps``; exact search ``exact_hyps`` (default: the same)."""
    sweep = {"hyps": hyps}
    return {"beam4": sweep, "beam4_exact_sources": sweep, "seeds": {1: sweep, 4: sweep},
            "exact": {"hyps": hyps if exact_hyps is None else exact_hyps, "expansions": expansions}}


def test_quality_by_model_perfect_hypotheses_and_the_relative_score():
    refs = [["the cat sleeps .", "the cat sleeps ."], ["a dog runs far away .", "a dog runs far away ."]]
    tasks, hyps = {1.0: fake_task(refs)}, [r[0] for r in refs]
    wrong = ["x y z w", "x y z w v u"]                                       # no word in common with the references
    raw = {1.0: {"softmax": fake_raw(hyps, [1, 4], exact_hyps=wrong),      # softmax: beams right, the mode wrong
                 "scones_1.0": fake_raw(wrong, [2, 8], exact_hyps=hyps)}}   # SCONES: beams wrong, the mode right
    q = ibm_tasks.quality_by_model(tasks, raw, [1.0], ["softmax", "scones_1.0"], exact=[0, 1], proven=[1],
                                   n_beam=2, start_beams=[1, 4])
    assert q["beam4"][1.0, "softmax"][B].estimate == pytest.approx(100.0)
    assert q["beam4"][1.0, "softmax"]["len_ratio"].estimate == pytest.approx(1.0)
    assert q["beam4"][1.0, "scones_1.0"][B].estimate == pytest.approx(0.0)
    assert q["exact"][1.0, "softmax"][B].estimate == pytest.approx(0.0)
    assert q["exact"][1.0, "scones_1.0"][B].estimate == pytest.approx(100.0)
    assert set(q["by_beam"][1.0, "softmax"]) == {"beam 1", "beam 4", "mode"}
    assert q["by_beam"][1.0, "softmax"]["beam 4"][B].estimate == pytest.approx(100.0)
    assert q["by_beam"][1.0, "softmax"]["mode"][B].estimate == pytest.approx(0.0)
    assert q["states"][1.0, "softmax"].estimate == pytest.approx(2.0)       # log2(4) on the proven sentence 1
    assert q["states"][1.0, "scones_1.0"].estimate == pytest.approx(3.0)    # log2(8)
    assert q["rel"][1.0, "scones_1.0"].estimate == pytest.approx(100.0)    # its mode as good as softmax's beam 4
    assert q["rel"][1.0, "softmax"].estimate == pytest.approx(0.0)         # softmax's mode: nothing right
    none = ibm_tasks.quality_by_model(tasks, raw, [1.0], ["softmax"], exact=[0, 1], proven=[], n_beam=2, start_beams=[1, 4])
    assert none["exact"] == {} and none["rel"] == {} and set(none["beam4"]) == {(1.0, "softmax")}


def test_beam_and_exact_records_keys_and_values():
    refs = [["the cat sleeps ."], ["a dog runs ."]]
    tasks, hyps = {g: fake_task(refs) for g in (0.1, 1.0)}, [r[0] for r in refs]
    models = ["softmax", "scones_1.0"]
    raw = {g: {n: fake_raw(hyps, [1, 2]) for n in models} for g in tasks}
    for g in tasks:
        for n in models:
            raw[g][n]["exact"]["seconds_per_sentence"] = 0.5
    share = {(g, n): 0.5 if n == "softmax" else 1.0 for g in tasks for n in models}
    sampler = SimpleNamespace(task_entropy=lambda srcs, g: {"t": g},
                              sample=lambda s, g, rng: SimpleNamespace(uniform_distortion=g < 0.5))
    ibm3 = SimpleNamespace(p1=0.1, log_likelihood={"model1": [-3.0, -2.0]})
    for proven in ([0], []):
        q = ibm_tasks.quality_by_model(tasks, raw, [0.1, 1.0], models, [0, 1], proven, 2, [1, 4])
        beam, beam_summary = ibm_tasks.beam_records([0.1, 1.0], models, q["beam4"], ibm3, sampler, [["x"]] * 3)
        exact, exact_summary = ibm_tasks.exact_records([0.1, 1.0], models, q, raw, share, proven, 2,
                                                       {"exact_max_words": 9, "exact_budget": 100})
        assert not set(beam["1.0"]) & set(exact["1.0"]) and not set(beam_summary) & set(exact_summary)   # no key twice
        records = {**beam, **exact, **{g: {**beam[g], **exact[g]} for g in ("0.1", "1.0")}}   # lessons 08 and 09 together
        summary = {**beam_summary, **exact_summary}
        assert set(records) == {"0.1", "1.0", "ibm", "exact_search", "entropy", "uniform_distortion_share"}
        per = ["beam4_bleu", "beam4_multi_ref_bleu", "beam4_len_ratio", "proven_fraction", "exact_s_per_sentence"]
        if proven:
            per += ["exact_bleu", "exact_rel", "beam4_bleu_on_proven", "exact_len_ratio", "beam4_len_ratio_on_proven",
                    "exact_empty_rate", "exact_log2_states"]
        assert set(records["1.0"]) == {f"{n}.{k}" for n in models for k in per}
        assert records["1.0"]["softmax.beam4_bleu"]["estimate"] == pytest.approx(100.0)
        assert records["0.1"]["softmax.proven_fraction"] == 0.5
        assert records["exact_search"] == {"sentences": 2, "max_words": 9, "budget": 100, "proven_everywhere": len(proven),
                                           "smallest_proven_share": 0.5}
        assert records["ibm"] == {"p1": 0.1, "log_likelihood": {"model1": [-3.0, -2.0]}}
        assert records["entropy"]["0.3"] == {"t": 0.3}
        assert records["uniform_distortion_share"] == {"0.05": 1.0, "0.1": 1.0, "0.2": 1.0, "0.3": 1.0, "0.5": 0.0,
                                                       "0.7": 0.0, "1.0": 0.0, "1.5": 0.0}
        assert summary["exact search: proven for all"] == f"{len(proven)} of 2"
        assert ("gamma 1.0 softmax exact_rel" in summary) == bool(proven)


VOCAB = WordVocab(["the", "cat", "sleeps", "."])


def tiny_model():
    torch.manual_seed(0)
    return Transformer(TransformerConfig(src_vocab=len(VOCAB), tgt_vocab=len(VOCAB), d_model=32, n_heads=4, d_ff=64,
                                         enc_layers=1, dec_layers=1, dropout=0.0)).eval()


def test_the_and_full_scores_the_stop_and_the_best_full_translation():
    model = tiny_model()
    full, the, entropy = ibm_tasks.the_and_full(model, VOCAB, VOCAB, "cat sleeps", ["the", "", "the cat .", "cat sleeps ."])
    src = torch.tensor([VOCAB.encode("cat sleeps")])
    score = ModelScorer(model, src)
    by_hand = lambda ids: [float(score([BOS] + ids[:k])[ids[k]]) for k in range(len(ids))]
    assert the == pytest.approx(by_hand(VOCAB.encode("the")), abs=1e-4)          # log P(the | x), log P(EOS | x, the)
    fulls = {h: by_hand(VOCAB.encode(h)) for h in ("the cat .", "cat sleeps .")}  # "the" and "" are not full translations
    assert sum(full) == pytest.approx(max(sum(v) for v in fulls.values()), abs=1e-4)
    assert 0 <= entropy <= math.log(len(VOCAB))
    only_the, _, _ = ibm_tasks.the_and_full(model, VOCAB, VOCAB, "cat sleeps", ["the"])   # nothing else: the first
    assert len(only_the) == 2


def test_the_and_full_entropy_by_hand_for_known_logits():
    model = tiny_model()
    logits = torch.full((len(VOCAB),), -1e4)                  # every next token, whatever the prefix: p = 1/2, 1/4, 1/4, 0...
    logits[VOCAB.encode("cat")[0]], logits[VOCAB.encode("sleeps")[0]], logits[VOCAB.encode(".")[0]] = math.log(2), 0.0, 0.0
    model.decode = lambda tgt_in, *args, **kwargs: logits.expand(tgt_in.shape[0], tgt_in.shape[1], -1)
    _, the, entropy = ibm_tasks.the_and_full(model, VOCAB, VOCAB, "cat sleeps", ["cat sleeps ."])
    assert entropy == pytest.approx(1.5 * math.log(2), abs=1e-6)      # 1/2 log 2 + 2 * 1/4 log 4
    assert the[0] < -1e3                                              # "the" has no mass under these logits


def test_measure_seeds_exact_search_with_the_beams():
    task = SimpleNamespace(corpus=SimpleNamespace(test=SimpleNamespace(src=["cat sleeps", "the cat", "sleeps"],
                                                                       refs=[["the cat ."], ["cat ."], ["sleeps ."]])),
                           src_vocab=VOCAB, tgt_vocab=VOCAB)
    out = ibm_tasks.measure(task, tiny_model(), exact=[0, 2], n_beam=3, start_beams=[1, 4], budget=50, batch_size=4)
    assert set(out) == {"beam4", "beam4_exact_sources", "seeds", "exact"} and set(out["seeds"]) == {1, 4}
    assert len(out["beam4"]["hyps"]) == 3 and len(out["exact"]["hyps"]) == 2
    assert out["beam4_exact_sources"] is out["seeds"][4]
    assert out["beam4_exact_sources"]["hyps"] == [out["beam4"]["hyps"][0], out["beam4"]["hyps"][2]]   # same sources, same beam
    assert all(s >= b - 1e-4 for s, b in zip(out["exact"]["scores"], out["exact"]["seed_scores"]))


def test_measure_beam_and_beam_quality_match_measure_and_quality_by_model():
    task = SimpleNamespace(corpus=SimpleNamespace(test=SimpleNamespace(src=["cat sleeps", "the cat", "sleeps"],
                                                                       refs=[["the cat ."], ["cat ."], ["sleeps ."]])),
                           src_vocab=VOCAB, tgt_vocab=VOCAB)
    model = tiny_model()
    beam4 = ibm_tasks.measure_beam(task, model, n_beam=3)
    full = ibm_tasks.measure(task, model, exact=[0], n_beam=3, start_beams=[1, 4], budget=20, batch_size=4)
    assert beam4["hyps"] == full["beam4"]["hyps"] and len(beam4["hyps"]) == 3
    q = ibm_tasks.quality_by_model({1.0: task}, {1.0: {"softmax": full}}, [1.0], ["softmax"], [0], [], 3, [1, 4], seed=0)
    mine = ibm_tasks.beam_quality({1.0: task}, {(1.0, "softmax"): beam4}, [1.0], ["softmax"], 3, seed=0)
    for k in (B, "bleu", "len_ratio"):
        assert mine[1.0, "softmax"][k].interval().to_dict() == q["beam4"][1.0, "softmax"][k].interval().to_dict()


def test_pairs_and_models_trains_every_model_on_every_pair_gamma_by_gamma(monkeypatch):
    calls = []
    monkeypatch.setattr(ibm_tasks, "synthetic_task", lambda cfg, base, g, seed: f"pair{g}")
    monkeypatch.setattr(ibm_tasks, "train_many_in_parallel", lambda jobs, device: calls.append([t for t, _ in jobs]))
    monkeypatch.setattr(ibm_tasks, "train_model", lambda task, device, progress, **job: (f"{task}:{job['model_overrides'].get('scones_alpha')}", f"h{task}"))
    tasks, models, histories = ibm_tasks.pairs_and_models("ci", None, [0.1, 1.0], {"softmax": None, "scones_0.2": 0.2}, 0, "cpu",
                                                          {"epochs": 2})
    assert tasks == {0.1: "pair0.1", 1.0: "pair1.0"} and calls == [["pair0.1", "pair1.0", "pair0.1", "pair1.0"]]
    assert list(models) == [(0.1, "softmax"), (0.1, "scones_0.2"), (1.0, "softmax"), (1.0, "scones_0.2")]
    assert models[1.0, "scones_0.2"] == "pair1.0:0.2" and histories[0.1, "softmax"] == "hpair0.1"
