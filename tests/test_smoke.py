"""The full-size smoke run's caps (NBS_MAX_STEPS, NBS_SMOKE) and the GPU-time projection: the caps
reach the engine as plain settings (TrainConfig.max_steps, the profile), the ledger through the
training loop's callbacks, all of it applied by nbs.start (nbsupport.harness.run)."""
import json
import math
from dataclasses import replace

import pytest
import torch

import nbsupport as nbs
from nbsupport import pipeline
from nbsupport import train as train_mod
from nbsupport.harness import read_environment, smoke
from nbsupport.harness.run import run_profile
from nbsupport.models import Transformer, TransformerConfig
from nbsupport.pipeline import train_or_load
from nbsupport.train import Encoded, TrainConfig, train


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("NBS_BUILD", str(tmp_path / "build"))
    for var in (smoke.MAX_STEPS_ENV, smoke.SMOKE_ENV, smoke.LEDGER_ENV):
        monkeypatch.delenv(var, raising=False)


def tiny_config(k=1):
    return TransformerConfig(src_vocab=12, tgt_vocab=14, d_model=16, n_heads=2, d_ff=32, enc_layers=1, dec_layers=2,
                             dropout=0.0, n_latent=k)


def tiny_data(n=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = [torch.randint(4, 12, (int(torch.randint(2, 6, (1,), generator=g)),), generator=g).tolist() for _ in range(n)]
    tgt = [s[::-1] + [2] for s in src]        # EOS = 2
    return Encoded(src, tgt)


def count_steps(monkeypatch):
    calls = []
    real = train_mod.training_step
    monkeypatch.setattr(train_mod, "training_step", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def test_max_steps_stops_the_loop_across_epochs(monkeypatch):
    data = tiny_data()
    cfg = TrainConfig(epochs=6, max_tokens=30, lr=1e-3, warmup=5)     # several batches per epoch
    per_epoch = len(list(data.batches(cfg.max_tokens, shuffle=False, seed=0, device="cpu")))
    assert per_epoch >= 3
    cap = per_epoch + 1                                                 # ends one step into epoch 2
    calls = count_steps(monkeypatch)
    torch.manual_seed(0)
    hist = train(Transformer(tiny_config()), data, tiny_data(6, 1), replace(cfg, max_steps=cap), "cpu", progress=False)
    assert len(calls) == cap
    assert [e["epoch"] for e in hist.epochs] == [1, 2]                 # the cut epoch is validated and recorded


def test_without_cap_every_epoch_runs(monkeypatch):
    data = tiny_data()
    cfg = TrainConfig(epochs=2, max_tokens=30, lr=1e-3, warmup=5)
    per_epoch = len(list(data.batches(cfg.max_tokens, shuffle=False, seed=0, device="cpu")))
    calls = count_steps(monkeypatch)
    train(Transformer(tiny_config()), data, tiny_data(6, 1), cfg, "cpu", progress=False)
    assert len(calls) == 2 * per_epoch


def test_capped_model_is_cached_under_another_key(monkeypatch, caplog):
    caplog.set_level("INFO", logger="nbsupport.cache")
    data, valid = tiny_data(), tiny_data(6, 1)
    cfg = TrainConfig(epochs=2, max_tokens=30, lr=1e-3, warmup=5)
    train_or_load("t", tiny_config(), replace(cfg, max_steps=1), {"d": 1}, data, valid, "cpu", progress=False)
    calls = count_steps(monkeypatch)
    train_or_load("t", tiny_config(), cfg, {"d": 1}, data, valid, "cpu", progress=False)
    assert len(calls) > 1                                    # trained for real, not the capped model loaded
    assert len(list(nbs.cache.models_dir().glob("t-*.pt"))) == 2
    calls.clear()
    train_or_load("t", tiny_config(), replace(cfg, max_steps=1), {"d": 1}, data, valid, "cpu", progress=False)
    assert calls == [] and "loaded cached model" in caplog.text   # the capped one reloads


@pytest.mark.parametrize("raw", ["0", "-3", "two", "1.5"])
def test_bad_max_steps_is_a_clear_error(monkeypatch, raw):
    monkeypatch.setenv(smoke.MAX_STEPS_ENV, raw)
    with pytest.raises(ValueError, match="positive whole number"):
        read_environment()
    with pytest.raises(ValueError, match="max_steps must be a positive integer"):
        TrainConfig(max_steps=int(raw) if raw.lstrip("-").isdigit() else raw)


def test_bad_smoke_value_names_the_valid_ones(monkeypatch):
    monkeypatch.setenv(smoke.SMOKE_ENV, "maybe")
    with pytest.raises(ValueError, match="1/true/yes"):
        nbs.start("full", quiet=True)


def test_the_step_cap_reaches_every_training_setting_and_the_ibm_models(monkeypatch):
    full = nbs.profile("full")
    assert full.max_steps is None and "max_steps" not in full.toy_training
    monkeypatch.setenv(smoke.MAX_STEPS_ENV, "3")
    capped = run_profile("full", read_environment())
    assert capped.max_steps == 3
    assert capped.toy_training["max_steps"] == capped.bible_training["max_steps"] == 3
    assert capped.multi_source["toy_training"]["max_steps"] == 3
    assert capped.ibm["iterations"] == min(full.ibm["iterations"], smoke.SMOKE_IBM_ITERATIONS)
    from nbsupport.lessons.ibm_tasks import capped as ibm_tag
    assert ibm_tag(full) == {} and ibm_tag(capped) == {"max_steps": 3}
    # the mixtures' own training settings are merged over the toy's: the cap stays
    assert nbs.mixture_runs.task(run_profile("ci", read_environment())).training["max_steps"] == 3


def test_smoke_profile_caps_evaluation_only(monkeypatch):
    full = nbs.profile("full")
    monkeypatch.setenv(smoke.SMOKE_ENV, "1")
    s = run_profile("full", read_environment())
    # divided by 25, rounded up, at least 2: computed by hand from the full profile's sizes
    assert s.bible_test == 20 and s.toy_test == 8                       # 497 / 25, 200 / 25
    assert full.bible_dev is None and s.bible_dev == 10                 # 243 / 25: validation after each epoch
    assert s.curse["sentences"] == 4 and s.curse["exact_sentences"] == 2 and s.curse["exact_budget"] == 200
    assert s.ibm["exact_budget"] == 200 and s.mixture["test_sentences"] == 4 and s.mixture["flip_sentences"] == 11
    for same in ("bible_model", "bible_training", "toy_model", "toy_training", "spm_vocab", "spm_sentences",
                 "bible_train", "toy_train", "uses_bible_training", "multi_source"):
        assert getattr(s, same) == getattr(full, same), same
    assert s.curse["beams"] == full.curse["beams"] and max(s.curse["beams"]) == 128
    assert s.mixture["seeds"] == full.mixture["seeds"] and s.ibm["gammas"] == full.ibm["gammas"]
    assert full.ibm["nmt_train"] == 5000 and s.ibm["nmt_train"] == smoke.SMOKE_IBM_NMT_TRAIN   # sampling: CPU work


def test_forward_flops_per_token_by_hand():
    c = tiny_config()
    d, f, v = c.d_model, c.d_ff, c.tgt_vocab
    # weight matrices only: encoder layer = self-attention q, kv, out (4 d^2) + feed-forward (2 d f);
    # decoder layer = self- and cross-attention (8 d^2) + feed-forward; the tied output projection v d
    src = c.enc_layers * (4 * d * d + 2 * d * f)
    tgt = c.dec_layers * (8 * d * d + 2 * d * f) + v * d
    assert smoke.forward_flops_per_token(Transformer(c)) == (2 * src, 2 * tgt)


def test_training_record_counts_tokens_and_the_e_step():
    data, valid = tiny_data(), tiny_data(6, 1)
    src_tokens = sum(len(s) for s in data.src)
    tgt_tokens = sum(len(t) for t in data.tgt)
    cfg = TrainConfig(epochs=3)
    k = 4
    model = Transformer(tiny_config(k))
    fs, ft = smoke.forward_flops_per_token(model)
    r = smoke.training_record("m", model, cfg, data, valid)
    assert (r["src_tokens_per_epoch"], r["tgt_tokens_per_epoch"]) == (src_tokens, tgt_tokens)
    step = 3 * (fs * src_tokens + ft * tgt_tokens) + fs * src_tokens + k * ft * tgt_tokens
    assert r["train_flops"] == pytest.approx(3 * step)
    assert r["steps"] == 3 * 1                        # the whole tiny set fits one 4096-token batch per epoch
    longest = max(max(len(a), len(b)) for a, b in zip(data.src, data.tgt))
    one_each = smoke.training_record("m", model, TrainConfig(epochs=2, max_tokens=longest), data, valid)
    per_epoch = len(list(data.batches(longest, shuffle=True, seed=0, device="cpu")))   # the training loop's batches
    assert one_each["steps"] == 2 * per_epoch and len(data) / 2 < per_epoch < len(data)
    plain = smoke.training_record("b", Transformer(tiny_config()), cfg, data, valid)
    assert plain["train_flops"] == pytest.approx(3 * 3 * (fs * src_tokens + ft * tgt_tokens))


def test_projection_by_hand():
    gpu = {"name": "x", "peak_tflops": 100.0, "train_mfu": 0.5, "decode_mfu": 0.01}
    recs = [{"train_flops": 3e15, "valid_flops": 0.0, "epochs": 2, "tgt_tokens_per_epoch": 10, "src_tokens_per_epoch": 7}]
    p = smoke.projection(recs, inference_flops=2e12, smoke_scale=25, gpu=gpu)
    train_s = 3e15 / (100e12 * 0.5)          # 60 s
    decode_s = 25 * 2e12 / (100e12 * 0.01)   # 50 s
    assert p["train_min"] == pytest.approx(1.0) and p["decode_min"] == pytest.approx(decode_s / 60)
    assert p["gpu_min"] == pytest.approx((train_s + decode_s) / 60) and p["within_budget"]
    assert p["train_tgt_tokens"] == 20 and p["train_src_tokens"] == 14
    assert not smoke.projection(recs * 20, 0.0, gpu=gpu)["within_budget"]      # 20 minutes
    host = [{"projected_s": 600.0}, {"projected_s": 300.0}]                     # 15 minutes of sampling
    with_host = smoke.projection(recs, 2e12, host, smoke_scale=25, gpu=gpu)
    assert with_host["host_min"] == pytest.approx(15.0) and not with_host["within_budget"]
    assert with_host["total_min"] == pytest.approx(15.0 + (train_s + decode_s) / 60)
    # a model trained on a sampled corpus of which the smoke run drew 1 in 10 counts 10x its training
    sampled = [{**recs[0], "name": "ibm3-toy-g0.5-softmax", "valid_flops": 1e15}]
    host = [{"task": "ibm3-toy-g0.5", "done": 100, "full": 1000, "projected_s": 0.0}]
    p = smoke.projection(sampled, 0.0, host, gpu=gpu)
    assert p["train_flops"] == pytest.approx(10 * 3e15 + 1e15) and p["train_tgt_tokens"] == pytest.approx(200)
    assert smoke.projection(sampled, 0.0, [{**host[0], "task": "ibm3-toy-g0.1"}], gpu=gpu)["train_flops"] == 4e15
    # a small model with many steps: the per-step floor, not its FLOPs, sets its time
    floor = {**gpu, "step_overhead_s": 0.02}
    small = [{**recs[0], "train_flops": 1e12, "steps": 3000}]             # 0.02 s of FLOPs, 60 s of steps
    assert smoke.projection(small, 0.0, gpu=floor)["train_min"] == pytest.approx(1.0)
    assert smoke.projection(recs, 0.0, gpu=floor)["train_min"] == pytest.approx(1.0)   # FLOPs-bound: 60 s


def test_host_record_projects_linearly(tmp_path):
    ledger = tmp_path / "l.jsonl"
    smoke.install_ledger(ledger)
    try:
        smoke.record_host("sampling", 2.0, done=1000, full=30000)
        smoke.record_host("cached", 0.01, done=1000, full=30000)      # loaded from the cache: not recorded
        pipeline.host_work("via the engine", 1.0, done=10, full=20)  # what the lessons call: the ledger hears it
    finally:
        smoke.uninstall_ledger()
    smoke.record_host("after", 2.0, done=1000, full=30000)           # no ledger installed: nothing
    pipeline.host_work("after, via the engine", 2.0, done=1, full=2)
    _, _, host = smoke.read_ledger(ledger)
    assert [h["what"] for h in host] == ["sampling", "via the engine"] and host[0]["projected_s"] == pytest.approx(60.0)


class _FakeSampler:
    def sample(self, words, gamma, rng):
        return type("Story", (), {"words": list(reversed(words))})()


def test_sampled_corpus_key_includes_the_number_of_sources():
    # lab (10k sources) and full (all 20k) sample from the same IBM model: a key without the
    # sizes handed full the lab corpus, with fewer references than sources
    from nbsupport.lessons.ibm_tasks import sample_corpus
    small = {"train": ["a b", "c d"], "dev": ["e f"], "test": ["g h"]}
    big = {**small, "train": ["a b", "c d", "i j"]}
    c1 = sample_corpus(_FakeSampler(), small, 0.5, 2, 0, "toy", {"dataset": "toy"})
    c2 = sample_corpus(_FakeSampler(), big, 0.5, 2, 0, "toy", {"dataset": "toy"})
    assert len(c1.train.refs) == 2 and len(c2.train.refs) == 3 and len(c2.train.src) == 3


def test_ledger_and_inference_counter(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    smoke.install_ledger(ledger)
    try:
        assert smoke.record_training in pipeline.CALLBACKS.on_model
        lin = torch.nn.Linear(3, 5)
        data, valid = tiny_data(), tiny_data(6, 1)
        train_or_load("m", tiny_config(), TrainConfig(epochs=1, max_tokens=30, warmup=5), {"d": 2}, data, valid,
                      "cpu", progress=False)                   # recorded through the loop's callbacks
        before = smoke._state["inference_flops"]
        with torch.no_grad():
            lin(torch.ones(4, 3))                       # 2 * 4 rows * 3 * 5
            with smoke.training_phase():
                lin(torch.ones(4, 3))                   # training: projected from the ledger instead
        lin(torch.ones(4, 3))                           # with gradients: training, not counted
        assert smoke._state["inference_flops"] - before == 2 * 4 * 3 * 5
        smoke._flush()
        records, flops, host = smoke.read_ledger(ledger)
        assert [r["name"] for r in records] == ["m"] and flops == smoke._state["inference_flops"] and host == []
    finally:
        smoke.uninstall_ledger()
    assert smoke.record_training not in pipeline.CALLBACKS.on_model and smoke._state["hook"] is None


def test_training_phases_are_timed_in_the_ledger(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    smoke.install_ledger(ledger)
    try:
        train_or_load("m", tiny_config(), TrainConfig(epochs=1, max_tokens=30, warmup=5), {"d": 3}, tiny_data(),
                      tiny_data(6, 1), "cpu", progress=False)
        with smoke.training_phase():
            with smoke.training_phase():                 # nested (stacked training): one phase, the outer one
                pass
    finally:
        smoke.uninstall_ledger()
    lines = [json.loads(x) for x in ledger.read_text().splitlines()]
    assert [next(iter(x)) for x in lines] == ["model", "phase", "phase"]
    assert all(x["phase"]["seconds"] >= 0 for x in lines[1:]) and lines[1]["phase"]["models"] == ["m"]


def test_measured_projection_by_hand():
    lines = [{"model": {"name": "a", "steps": 1000}}, {"phase": {"seconds": 2.0}},         # 100 of 1000 steps
             {"model": {"name": "b", "steps": 50}}, {"model": {"name": "c", "steps": 300}},
             {"phase": {"seconds": 3.0}}]                                                # 50 + 100 of 350 steps
    p = smoke.measured_projection(lines, wall_s=65.0, max_steps=100)
    assert [ph["models"] for ph in p["phases"]] == [["a"], ["b", "c"]]
    assert p["training_measured_s"] == 5.0 and p["outside_training_s"] == 60.0
    assert p["training_projected_s"] == pytest.approx(20.0 + 3.0 * 350 / 150)
    assert p["projected_min"] == pytest.approx((60.0 + 20.0 + 7.0) / 60)
    assert smoke.measured_projection(lines, wall_s=65.0, max_steps=None)["training_projected_s"] == 5.0   # uncapped: as measured
    # a model loaded from the cache has a record and no phase: a named phase leaves it out
    named = [{"model": {"name": "cached", "steps": 3000}}, {"model": {"name": "s", "steps": 300}},
             {"model": {"name": "s", "steps": 300}}, {"phase": {"seconds": 2.0, "models": ["s", "s"]}}]
    ph = smoke.measured_projection(named, wall_s=10.0, max_steps=100)["phases"]
    assert ph[0]["models"] == ["s", "s"] and ph[0]["projected_s"] == pytest.approx(2.0 * 600 / 200)
