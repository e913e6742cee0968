"""Caching, vocabularies, batching, profiles, runtime and the environment files."""
import json
import os
import platform
import re
import sys
import tomllib
from pathlib import Path

import pytest
import torch

import nbsupport as nbs
from nbsupport import cache, pipeline
from nbsupport.data import WordVocab, pad_batch, token_batches, train_sentencepiece

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def isolated_build(tmp_path, monkeypatch):
    monkeypatch.setenv("NBS_BUILD", str(tmp_path / "build"))


def cached_json(name, key, compute):
    """A JSON value through the cache's build/load mechanism."""
    build = lambda tmp: tmp.write_text(json.dumps(compute()))
    return cache.cached_file(name, key, build, lambda p: json.loads(p.read_text()), suffix=".json")


def test_cache_builds_once_and_keys_on_content(tmp_path):
    calls = []
    compute = lambda: calls.append(1) or {"x": len(calls)}
    assert cached_json("t", {"a": 1}, compute) == {"x": 1}
    assert cached_json("t", {"a": 1}, compute) == {"x": 1}   # reused
    assert cached_json("t", {"a": 2}, compute) == {"x": 2}   # another key, rebuilt
    assert len(calls) == 2


def test_corrupt_cache_entry_is_rebuilt():
    cached_json("c", {"k": 1}, lambda: [1, 2])
    (entry,) = nbs.paths.cache_dir().glob("c-*.json")
    entry.write_text("{not json")
    assert cached_json("c", {"k": 1}, lambda: [3]) == [3]


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError):
        with cache.atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_word_vocab_round_trip_on_toy():
    c = nbs.data.toy(n_train=500, n_test=20, ambiguity="high")
    v = WordVocab.build(r for rs in c.train.refs for r in rs)
    for ref in c.test.refs[0]:
        ids = v.encode(ref)
        assert ids[-1] == v.eos and v.decode(ids) == ref


def test_sentencepiece_round_trip_and_cache():
    texts = [f"the {a} {b} sees the river number {i}." for i in range(300)
             for a, b in [("quick", "dog")]] + ["a b c d e f g h i j k l m n o p"] * 50
    v = train_sentencepiece(texts, 60, name="spm-test")
    assert v.decode(v.encode("the quick dog sees the river.")) == "the quick dog sees the river."
    assert train_sentencepiece(texts, 60, name="spm-test").path == v.path
    assert train_sentencepiece(texts, 70, name="spm-test").path != v.path


def test_token_batches_cover_everything_within_budget():
    import random
    rng = random.Random(0)
    src = [rng.randint(1, 30) for _ in range(500)]
    tgt = [rng.randint(1, 30) for _ in range(500)]
    batches = token_batches(src, tgt, max_tokens=200, seed=1)
    assert sorted(i for b in batches for i in b) == list(range(500))
    for b in batches:
        assert len(b) * max(max(src[i], tgt[i]) for i in b) <= 200
    assert batches == token_batches(src, tgt, max_tokens=200, seed=1)
    assert pad_batch([[5, 6, 7], [8]]).tolist() == [[5, 6, 7], [8, 0, 0]]


def test_unknown_profile_names_valid_ones():
    with pytest.raises(ValueError, match="ci, lab, full"):
        nbs.profile("fast")
    assert nbs.profile("ci").budget_s == 90 and nbs.profile("lab").budget_s == 600


def test_threads_from_environment(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("NBS_THREADS", "1")
        assert nbs.harness.read_environment().threads == 1
        nbs.start("ci", quiet=True)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    monkeypatch.setenv("NBS_THREADS", "many")
    with pytest.raises(ValueError, match="NBS_THREADS"):
        nbs.start("ci", quiet=True)


def test_results_are_json_with_provenance():
    path = nbs.save_results("unit", {"a": {"b": float("nan"), "c": (1, 2)}}, {"key": 1.5})
    data = json.loads(path.read_text())
    assert data["a"] == {"b": None, "c": [1, 2]} and data["summary"] == {"key": 1.5}
    assert "machine" in data["_produced"]


def _names(specs):
    return {re.split(r"[<>=!~\[ ;]", s, maxsplit=1)[0].lower().replace("_", "-") for s in specs}


def test_environment_yml_agrees_with_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = _names(project["dependencies"]) | _names(project["optional-dependencies"]["dev"])
    text = (ROOT / "environment.yml").read_text()
    lines = text[text.index("\ndependencies:"):].splitlines()
    listed = _names(l.strip()[2:] for l in lines if l.strip().startswith("- ") and not l.strip().startswith("- pip"))
    assert wanted <= listed, f"missing from environment.yml: {wanted - listed}"
    assert listed - {"python"} <= wanted, f"not in pyproject.toml: {listed - {'python'} - wanted}"
    # torch: the same range in both (no pin: a cloud notebook keeps its CUDA torch); the CPU pin in the Makefile
    spec = next(s for s in project["dependencies"] if s.startswith("torch"))
    assert "==" not in spec and f"- {spec} " in text + " ", f"environment.yml must list {spec!r} as pyproject.toml does"
    assert "pip install --quiet torch==2.13.0" in (ROOT / "Makefile").read_text()


FAULTS_SCRIPT = """
import resource, torch
import nbsupport as nbs
from nbsupport.models import Transformer, TransformerConfig
nbs.setup(0, threads=1)
torch.manual_seed(0)
model = Transformer(TransformerConfig(60, 80, d_model=128, d_ff=256, n_latent=10)).eval()
src, tgt = torch.randint(4, 60, (78, 13)), torch.randint(4, 80, (78, 13))
def estep():
    with torch.no_grad():
        memory, mask = model.encode(src)
        model.latent_nll(memory, mask, tgt, tgt, chunk=10)
estep(); estep(); estep()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
estep(); estep(); estep()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // 3)
"""


@pytest.mark.skipif(sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc malloc only")
def test_setup_stops_page_faulting_activations_back_in():
    """A repeated K=10 E-step re-used freed heap after nbs.setup() (measured on the 2-core VM:
    without it 6.3k-31k minor page faults per call, i.e. its activations mapped afresh; with it
    0-2.1k, so the bound sits between the two ranges: 2,000 failed once inside a full run)."""
    import subprocess
    out = subprocess.run([sys.executable, "-c", FAULTS_SCRIPT], capture_output=True, text=True, check=True).stdout
    assert nbs.runtime.keep_freed_memory()
    assert int(out) < 4000


def test_cudnn_attention_is_taken_out_on_cuda():
    """On an H100 cuDNN's SDPA built a plan per batch shape (a first epoch ~10x slower than the
    rest); nbs.setup() on CUDA calls avoid_cudnn_attention, which must switch that backend off."""
    if not hasattr(torch.backends.cuda, "cudnn_sdp_enabled"):
        pytest.skip("this torch has no cuDNN SDPA switch")
    before = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        nbs.runtime.avoid_cudnn_attention()
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)
    import inspect
    assert "avoid_cudnn_attention()" in inspect.getsource(nbs.runtime.setup)



def test_worker_processes_that_cannot_run_fall_back_to_one_at_a_time(capsys):
    """A job that cannot reach a worker (here a lambda, which does not pickle) is said in one line
    and answered False, so the notebook trains its models in its own process instead."""
    from nbsupport.harness.workers import try_in_processes
    assert try_in_processes(lambda x: x, [(1,), (2,)], 2) is False
    assert "training one at a time instead" in capsys.readouterr().out
    assert try_in_processes(abs, [(-1,), (2,)], 2) is True


def test_the_harness_hands_its_parallel_runner_to_the_training_code(monkeypatch):
    """Without a runner, train_several declines (each model then trains when first asked for); nbs.start
    installs the harness's worker processes, which the pipeline and the lessons use without importing them."""
    from nbsupport.harness import workers
    monkeypatch.setattr(pipeline.CALLBACKS, "parallel", None)
    assert pipeline.train_several(print, [(1,)], "cpu", "models") is False
    calls = []
    monkeypatch.setattr(pipeline.CALLBACKS, "parallel", lambda fn, jobs, device, what: calls.append((jobs, what)) or True)
    assert pipeline.train_several(print, [(1,), (2,)], "cpu", "models") is True and calls == [([(1,), (2,)], "models")]
    assert pipeline.train_several(print, [], "cpu", "models") is False and len(calls) == 1      # nothing to train
    monkeypatch.setattr(pipeline.CALLBACKS, "parallel", None)
    nbs.start("ci", 0, quiet=True)
    assert pipeline.CALLBACKS.parallel is workers.train_in_worker_processes
