"""The full-size smoke run on a CPU, and a projection of each `full` notebook's GPU time.

``make smoke-full`` runs every notebook's ``full`` code path (the real model sizes, the real
Bible data, vocabularies and maximum lengths, the largest beam) on a CPU with two caps, so
that shape, memory and vocabulary mistakes show without a GPU. All the caps live here:

* ``NBS_MAX_STEPS=N``: every training run stops after N optimiser steps (across epochs;
  the epoch in progress is validated and recorded as usual). A capped model is cached under
  a key that includes the cap, so a smoke run never feeds a real run's cache. IBM training
  (notebooks 08-09) runs one EM iteration per model instead (:data:`SMOKE_IBM_ITERATIONS`).
  Under NBS_SMOKE its IBM-3-sampled corpora have SMOKE_IBM_NMT_TRAIN training sources (the
  sampler is CPU work, also on a GPU machine: its full-size time is projected from them).
* ``NBS_SMOKE=1``: every evaluation size of the profile (test sentences, the Bible dev verses
  validated after each epoch, the exact-search budget, flip-rate and speed sentences) is
  divided by :data:`SMOKE_SCALE`, at least
  :data:`SMOKE_MIN` each; beam sizes, model sizes, the training data and the
  vocabularies stay as they are (:func:`smoke_profile`).

While ``NBS_LEDGER`` names a file, every model the notebook trains (or loads) is recorded
there with its parameter counts and its measured source and target tokens per epoch, and
the FLOPs of every forward pass outside training (decoding, scoring, evaluation) are counted;
:func:`projection` turns a ledger into projected GPU minutes per notebook.

The variables are read by :func:`nbsupport.harness.start` in the notebook's kernel, which applies
the caps to the profile (:func:`capped_profile`, :func:`smoke_profile`) and installs the ledger
(:func:`install_ledger`) through the training loop's callbacks: the engine knows none of this.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn as nn

MAX_STEPS_ENV, SMOKE_ENV, LEDGER_ENV = "NBS_MAX_STEPS", "NBS_SMOKE", "NBS_LEDGER"
SMOKE_SCALE = 25          # evaluation sizes are divided by this (and decoding FLOPs multiplied back)
SMOKE_MIN = 2             # ... but never below this many sentences
SMOKE_IBM_ITERATIONS = 1  # EM iterations per IBM model under NBS_MAX_STEPS
SMOKE_IBM_NMT_TRAIN = 1000  # IBM-3-sampled training sources per synthetic corpus (sampling is CPU work:
                            # ~100-200 sentences/s; its full-size time is projected from this sample)
BIBLE_TEST_VERSES = 497   # the Bible test split (bible_test=None means all of it)
BIBLE_DEV_VERSES = 243    # the Bible dev split, validated after every epoch (bible_dev=None: all of it)

# Sustained GPU throughput as one H100 measured it (notebook 02 at `full`: benchmarks/gpu-h100/):
# training, decoding (one token per step, a Python loop per step) and a toy step's launch-bound floor.
GPU = {"name": "H100 SXM, bf16", "peak_tflops": 989.0, "train_mfu": 0.013, "decode_mfu": 0.00015,
       "step_overhead_s": 0.02}
# ... and a small model's step is bound by kernel launches and Python, not FLOPs: a training step
# (forward, backward, optimiser) takes at least step_overhead_s, so a model's training time is
# the larger of its FLOPs time and steps x step_overhead_s (the toy models of 03, 04, 08).
BUDGET_MIN = 15.0         # the full profile's budget per notebook


def positive_int(raw: str) -> int | None:
    """``raw`` as a positive whole number, else None."""
    try:
        n = int(raw)
    except ValueError:
        return None
    return n if n >= 1 else None


def parse_max_steps(raw: str | None) -> int | None:
    """The training-step cap ``NBS_MAX_STEPS`` holds (None: no cap)."""
    raw = (raw or "").strip()
    if not raw:
        return None
    n = positive_int(raw)
    if n is None:
        raise ValueError(f"{MAX_STEPS_ENV}={raw!r}: expected a positive whole number of optimiser steps "
                         "(or leave it unset for no cap)")
    return n


def parse_smoke(raw: str | None) -> bool:
    """Whether ``NBS_SMOKE`` asks for the smoke run's evaluation sizes."""
    raw = (raw or "").strip().lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise ValueError(f"{SMOKE_ENV}={raw!r}: valid values are 1/true/yes or 0/false/no")


def _cap(n: int | None, default: int | None = None) -> int:
    n = default if n is None else n
    return max(SMOKE_MIN, math.ceil(n / SMOKE_SCALE))


def smoke_profile(p):
    """``p`` with every evaluation size divided by SMOKE_SCALE (the one place the smoke caps
    are defined). Training data, vocabularies, model sizes and beam sizes are unchanged."""
    capped = lambda block, names: block.replace(**{k: _cap(block[k]) for k in names if k in block})
    curse = capped(p.curse, ("sentences", "exact_sentences", "exact_budget", "speed_sentences"))
    ibm = capped(p.ibm, ("sentences", "exact_sentences", "exact_budget")).replace(
        nmt_train=min(p.ibm.get("nmt_train") or SMOKE_IBM_NMT_TRAIN, SMOKE_IBM_NMT_TRAIN))
    mixture = capped(p.mixture, ("test_sentences", "flip_sentences"))
    compare = capped(p.compare, ("test_sentences", "dev_sentences"))
    return replace(p, toy_test=_cap(p.toy_test), bible_test=_cap(p.bible_test, BIBLE_TEST_VERSES),
                   bible_dev=_cap(p.bible_dev, BIBLE_DEV_VERSES),
                   curse=curse, ibm=ibm, mixture=mixture, compare=compare)


def capped_profile(p, max_steps: int):
    """``p`` with every training run stopped after ``max_steps`` optimiser steps (the training
    settings' ``max_steps``, which also enters each model's cache key) and every IBM model trained
    for at most :data:`SMOKE_IBM_ITERATIONS` EM iterations."""
    cap = lambda training: {**training, "max_steps": max_steps}
    multi = p.multi_source.replace(**{k: cap(v) for k, v in p.multi_source.items() if k.endswith("training")})
    ibm = p.ibm.replace(iterations=min(p.ibm["iterations"], SMOKE_IBM_ITERATIONS))
    return replace(p, max_steps=max_steps, toy_training=cap(p.toy_training), bible_training=cap(p.bible_training),
                   multi_source=multi, ibm=ibm)


# --------------------------------------------------------------------------- FLOPs per token
_SOURCE_PARTS = ("encoder", "encoders", "enc_ln", "combiners")


def forward_flops_per_token(model: nn.Module) -> tuple[float, float]:
    """(per source token, per target token) forward FLOPs: 2 x the matrix parameters each
    token passes through (embedding look-ups are free; a tied output projection is counted).
    Of the model's ``cost().core`` (a mixture: one expert); a target encoder counts per target
    token. Attention scores (4 x length x d_model per layer and token, about 3% at Bible
    lengths) are left out."""
    model = model.cost().core
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    src = tgt = 0
    for name, p in model.named_parameters():
        if id(p) in embeddings or p.dim() < 2:
            continue
        parts = name.split(".")
        if parts[0] != "target_encoder" and any(s in parts for s in _SOURCE_PARTS):
            src += p.numel()
        else:
            tgt += p.numel()
    c = model.config
    if getattr(c, "tie_embeddings", False):
        tgt += c.tgt_vocab * c.d_model
    return 2.0 * src, 2.0 * tgt


def _tokens(data) -> tuple[int, int]:
    src = sum(sum(map(len, s)) if isinstance(s, tuple) else len(s) for s in data.src)
    return src, sum(map(len, data.tgt))


def training_record(name: str, model: nn.Module, cfg, train_data, valid_data) -> dict:
    """What the projection needs of one trained model: measured tokens per epoch, FLOPs per
    token, the passes each step makes (``model.cost()``: Hard-MoE K decoder passes in the E-step;
    a soft mixture all K experts forward and backward). Validation is measured on the data the
    run used: under NBS_SMOKE the Bible dev set is capped, and its full-size FLOPs (about 0.3% of
    an epoch's training) are left out of the projection."""
    cost = model.cost()
    fs, ft = forward_flops_per_token(model)
    k = getattr(model.config, "n_latent", 1)
    src, tgt = _tokens(train_data)
    vsrc, vtgt = _tokens(valid_data)
    steps = len(train_data.index_batches(cfg.max_tokens))        # the training loop's own batches
    train_fwd = 3.0 * (fs * src + cost.train_target_passes * ft * tgt)          # forward + backward
    if cost.extra_target_forwards:
        train_fwd += fs * src + cost.extra_target_forwards * ft * tgt         # the E-step
    valid = fs * vsrc + cost.valid_target_passes * ft * vtgt
    return {"name": name, "kind": type(model).__name__, "parameters": sum(p.numel() for p in model.parameters()),
            "flops_per_src_token": fs, "flops_per_tgt_token": ft, "n_latent": k, "epochs": cfg.epochs,
            "src_tokens_per_epoch": src, "tgt_tokens_per_epoch": tgt, "valid_tgt_tokens": vtgt,
            "steps": cfg.epochs * steps,
            "train_flops": cfg.epochs * train_fwd, "valid_flops": cfg.epochs * valid}


# --------------------------------------------------------------------------- the ledger
_state = {"training": 0, "inference_flops": 0.0, "written": 0.0, "hook": None, "ledger": None}


def _ledger() -> Path | None:
    return _state["ledger"]


def record_training(name: str, model: nn.Module, cfg, train_data, valid_data) -> None:
    """Append one model's record to the ledger (nothing without one installed)."""
    path = _ledger()
    if path is None:
        return
    for m in model.modules():   # a tied output projection is a plain matmul after dec_ln: count it there
        if hasattr(m, "dec_ln") and getattr(m.config, "tie_embeddings", False):
            m.dec_ln._nbs_tied_vocab = m.config.tgt_vocab
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps({"model": training_record(name, model, cfg, train_data, valid_data)}) + "\n")


def record_host(what: str, seconds: float, done: int, full: int, task: str | None = None) -> None:
    """Host (CPU) work that a GPU does not speed up, measured on ``done`` training items where
    `full` has ``full`` (IBM-3 sampling of the synthetic corpora): projected linearly. The
    models trained on ``task`` (a task name) then also count ``full / done`` times their tokens."""
    path = _ledger()
    if path is None or seconds < 0.5:            # nothing to record, or loaded from the cache
        return
    with path.open("a") as f:
        f.write(json.dumps({"host": {"what": what, "task": task, "seconds": seconds, "done": done, "full": full,
                                     "projected_s": seconds * full / max(done, 1)}}) + "\n")


@contextlib.contextmanager
def training_phase(names=()):
    """Forward passes inside it (training, the E-step, validation) are projected from the
    ledger, not counted as inference. Its measured wall time is appended to the ledger as a
    ``phase`` record naming the models it trains (``names``), after their model records
    (:func:`measured_projection`)."""
    _state["training"] += 1
    t0 = time.perf_counter()
    try:
        yield
    finally:
        _state["training"] -= 1
        if torch.cuda.is_available():
            torch.cuda.synchronize()         # the phase's kernels finished, not only launched
        path = _ledger()
        if path is not None and _state["training"] == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as f:
                f.write(json.dumps({"phase": {"seconds": time.perf_counter() - t0, "models": list(names)}}) + "\n")


def _linear_flops(module: nn.Module, inputs) -> float:
    x = inputs[0] if inputs else None
    if not isinstance(x, torch.Tensor):
        return 0.0
    if isinstance(module, nn.Linear):
        return 2.0 * x.numel() * module.out_features
    if getattr(module, "_nbs_tied_vocab", 0):        # a Transformer's dec_ln: the tied output projection follows
        return 2.0 * x.numel() * module._nbs_tied_vocab
    if isinstance(module, nn.LSTM):
        rows = x.numel() / module.input_size
        return 2.0 * rows * sum(p.numel() for n, p in module.named_parameters() if n.startswith("weight"))
    return 0.0


def _hook(module, inputs, output):
    if _state["training"] or torch.is_grad_enabled():
        return
    flops = _linear_flops(module, inputs)
    if flops:
        _state["inference_flops"] += flops
        if time.monotonic() - _state["written"] > 1.0:
            _flush()


def _flush() -> None:
    path = _ledger()
    if path is None:
        return
    _state["written"] = time.monotonic()
    out = path.with_suffix(".inference.json")
    out.write_text(json.dumps({"inference_flops": _state["inference_flops"]}))


def install_ledger(path: Path) -> None:
    """Record into ``path``: every model the training loop trains or loads (its callbacks), and the
    FLOPs of every Linear/LSTM forward outside training, without gradients (decoding, exact
    search, scoring, evaluation)."""
    from .. import pipeline
    _state["ledger"] = Path(path)
    if record_training not in pipeline.CALLBACKS.on_model:
        pipeline.CALLBACKS.on_model.append(record_training)
        pipeline.CALLBACKS.training.append(training_phase)
        pipeline.CALLBACKS.on_host.append(record_host)
    if _state["hook"] is None:
        _state["hook"] = nn.modules.module.register_module_forward_hook(_hook)
        atexit.register(_flush)


def uninstall_ledger() -> None:
    from .. import pipeline
    _state["ledger"] = None
    if record_training in pipeline.CALLBACKS.on_model:
        pipeline.CALLBACKS.on_model.remove(record_training)
        pipeline.CALLBACKS.training.remove(training_phase)
        pipeline.CALLBACKS.on_host.remove(record_host)
    if _state["hook"] is not None:
        _state["hook"].remove()
        _state["hook"] = None


# --------------------------------------------------------------------------- the projection
def projection(records: list[dict], inference_flops: float, host: list[dict] = (), smoke_scale: int = SMOKE_SCALE,
               gpu: dict = GPU) -> dict:
    """Projected GPU time of one notebook at `full`: the models' training and validation
    FLOPs (measured tokens x FLOPs per token x epochs) at the training throughput (or, for a
    small model, its optimiser steps at the per-step floor, whichever is longer), plus the
    inference FLOPs counted in the smoke run times ``smoke_scale`` (its evaluation sizes were
    divided by that) at the decoding throughput; plus the host work (IBM-3 sampling) projected
    from its sample. The budget is for the three together."""
    peak = gpu["peak_tflops"] * 1e12
    scale = {h["task"]: h["full"] / max(h["done"], 1) for h in host if h.get("task")}
    data_scale = [next((f for t, f in scale.items() if r["name"].startswith(t + "-")), 1.0) for r in records]
    train = sum(f * r["train_flops"] + r["valid_flops"] for f, r in zip(data_scale, records))
    decode = inference_flops * smoke_scale
    # per model: its FLOPs at the training throughput, or its steps at the per-step floor
    train_s = sum(max((f * r["train_flops"] + r["valid_flops"]) / (peak * gpu["train_mfu"]),
                      f * r.get("steps", 0) * gpu.get("step_overhead_s", 0.0)) for f, r in zip(data_scale, records))
    decode_s = decode / (peak * gpu["decode_mfu"])
    host_s = sum(h["projected_s"] for h in host)
    total_min = (train_s + decode_s + host_s) / 60
    return {"models": len(records),
            "train_tgt_tokens": sum(f * r["epochs"] * r["tgt_tokens_per_epoch"] for f, r in zip(data_scale, records)),
            "train_src_tokens": sum(f * r["epochs"] * r["src_tokens_per_epoch"] for f, r in zip(data_scale, records)),
            "train_flops": train, "decode_flops": decode,
            "train_min": train_s / 60, "decode_min": decode_s / 60, "gpu_min": (train_s + decode_s) / 60,
            "host_min": host_s / 60, "total_min": total_min, "budget_min": BUDGET_MIN,
            "within_budget": total_min <= BUDGET_MIN}


def measured_projection(lines: list[dict], wall_s: float, max_steps: int | None) -> dict:
    """A notebook's time at `full` from a run with every training capped at ``max_steps`` steps and
    the evaluation at full size: the wall time outside training as measured, plus each training
    phase's measured seconds scaled by the steps its models take uncapped over the steps they took
    (``min(steps, max_steps)`` each; ``max_steps`` None: an uncapped run, its phases as measured). A phase's models are the latest records written before it under
    the names it gives (a model loaded from the cache has a record and no phase); a phase naming none
    takes every record since the last phase. The capped epoch's validation is scaled with the steps."""
    phases, pending = [], []
    for line in lines:
        if "model" in line:
            pending.append(line["model"])
        elif "phase" in line:
            left = list(pending)
            if line["phase"].get("models"):      # each name's latest record (stacked seeds share a name)
                pending = [left.pop(max(i for i, m in enumerate(left) if m["name"] == n)) for n in line["phase"]["models"]]
            full = sum(m.get("steps", 0) for m in pending)
            done = sum(min(m.get("steps", 0), max_steps or m.get("steps", 0)) for m in pending)
            seconds = line["phase"]["seconds"]
            phases.append({"models": [m["name"] for m in pending], "seconds": seconds, "steps_done": done,
                           "steps_full": full, "projected_s": seconds * full / done if done else seconds})
            pending = []
    measured = sum(p["seconds"] for p in phases)
    projected = sum(p["projected_s"] for p in phases)
    outside = wall_s - measured
    return {"wall_s": wall_s, "training_measured_s": measured, "outside_training_s": outside,
            "training_projected_s": projected, "projected_min": (outside + projected) / 60,
            "phases": phases}


def ledger_lines(path: Path) -> list[dict]:
    """Every record of a ledger file, in order (none when it does not exist)."""
    path = Path(path)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def read_ledger(path: Path) -> tuple[list[dict], float, list[dict]]:
    """The model records of a ledger file, the inference FLOPs counted beside it, the host records."""
    path = Path(path)
    lines = ledger_lines(path)
    inf = path.with_suffix(".inference.json")
    flops = json.loads(inf.read_text())["inference_flops"] if inf.exists() else 0.0
    return [x["model"] for x in lines if "model" in x], flops, [x["host"] for x in lines if "host" in x]


def projection_table(rows: dict[str, dict]) -> str:
    from ..views.tables import table
    return table([[nb, r.get("wall_s", float("nan")), r["models"], r["train_tgt_tokens"] / 1e6, r["train_flops"] / 1e15,
                   r["decode_flops"] / 1e15, r["train_min"], r["decode_min"], r["host_min"], r["total_min"],
                   "yes" if r["within_budget"] else "NO"] for nb, r in rows.items()],
                 ["notebook", "smoke wall s", "models", "train tgt tokens (M)", "train PFLOP", "decode PFLOP",
                  "train GPU min", "decode GPU min", "host min", "total min", f"<= {BUDGET_MIN:.0f} min"], ".2f")


# --------------------------------------------------------------------------- make smoke-full
DEFAULT_MAX_STEPS = 1     # one optimiser step per model: forward, backward, update, validation, caching


def main(argv=None) -> int:
    """Run notebooks at `full` on this machine under the smoke caps into $NBS_BUILD (default
    build/smoke-full), record each one's wall time and ledger, print and write the projection
    (<build>/projection.json)."""
    import argparse
    import sys
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--max-steps", type=int, default=parse_max_steps(os.environ.get(MAX_STEPS_ENV)) or DEFAULT_MAX_STEPS)
    ap.add_argument("notebooks", nargs="*", help="notebook files (default: all of notebooks/)")
    args = ap.parse_args(argv)
    from ..paths import repo_root
    os.environ.setdefault("NBS_BUILD", str(repo_root() / "build" / "smoke-full"))
    os.environ.update({MAX_STEPS_ENV: str(args.max_steps), SMOKE_ENV: "1"})
    parse_max_steps(str(args.max_steps))                     # a bad value fails here, before any kernel starts
    from ..paths import build_dir, results_dir
    from .run_notebooks import execute, notebook_paths
    paths = [Path(p) for p in args.notebooks] or notebook_paths()
    out = build_dir() / "projection.json"
    report = json.loads(out.read_text()) if out.exists() else {}
    report.update({"gpu": GPU, "smoke_scale": SMOKE_SCALE, "max_steps": args.max_steps,
                   "budget_min": BUDGET_MIN, "device": "cpu (smoke run)"})
    rows = report.setdefault("notebooks", {})
    failed = []
    for path in paths:
        ledger = build_dir() / "ledger" / f"{path.stem}.jsonl"
        ledger.parent.mkdir(parents=True, exist_ok=True)
        ledger.unlink(missing_ok=True)
        ledger.with_suffix(".inference.json").unlink(missing_ok=True)
        os.environ[LEDGER_ENV] = str(ledger)
        print(f"== {path.name} at profile full, smoke caps ({MAX_STEPS_ENV}={args.max_steps}, "
              f"{SMOKE_ENV}=1, build {build_dir()}) ...", flush=True)
        t0, error = time.time(), None
        try:
            execute(path.resolve(), "full", out_dir=results_dir())
        except Exception as err:
            error = f"{type(err).__name__}: {str(err)[-2000:]}"
            failed.append(path.name)
        wall = time.time() - t0
        print(f"   {'FAILED' if error else 'done'} in {wall:.0f} s" + (f": {error[-600:]}" if error else ""), flush=True)
        records, inference, host = read_ledger(ledger)
        rows[path.stem] = {"wall_s": wall, "status": "failed" if error else "ok", "error": error,
                           **projection(records, inference, host), "records": records, "host": host}
        out.write_text(json.dumps(report, indent=1))
    print()
    print(f"Projected GPU time at `full` ({GPU['name']}, peak {GPU['peak_tflops']:.0f} TFLOP/s; training at "
          f"{GPU['train_mfu']:.1%} MFU, decoding at {GPU['decode_mfu']:.3%}; decoding FLOPs = the smoke run's x {SMOKE_SCALE}):")
    print(projection_table({k: rows[k] for k in sorted(rows)}))
    print(f"\nwritten to {out}")
    if failed:
        print(f"failed: {', '.join(failed)} (executed copies with the error are in {results_dir()})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
