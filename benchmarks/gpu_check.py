"""`make gpu-check`: one command that measures the course on the machine's GPU and writes one folder.

    python benchmarks/gpu_check.py [--budget-s 480] [--out benchmarks]

On a machine with one GPU and nothing but the course installed it writes
``benchmarks/gpu-<device>/``: ``info.json`` (device, torch, CUDA), ``bench/`` (``bench.py --size lab``),
``kernels.log`` (the kernel tests: the compiled Triton kernel runs on a GPU), ``lessons.json`` (every
lesson at ``lab`` from an empty model cache, its wall time, or where the budget ran out), the
reproduction of one paper (its model seeds) and ``summary.md``. Steps run in that order within
``--budget-s`` seconds; a step that would start with too little time left is skipped and said so.
Without a GPU it runs end to end as a rehearsal: the bench at its tiny size, the lessons and the
reproduction at ``ci``, the GPU-only kernel test skipped.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
PAPER = "seed_paper"          # the reproduction whose seeds are timed (baseline and Hard-MoE, 3 seeds)


def device_name() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"CPU {platform.machine()}"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def run(cmd: list[str], log: Path, timeout: float, env: dict | None = None) -> dict:
    """Run ``cmd`` with its output in ``log``; its wall time and exit status (124: out of time)."""
    t0 = time.perf_counter()
    with log.open("w") as out:
        try:
            rc = subprocess.run(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                                env={**os.environ, **(env or {})}).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return {"command": " ".join(cmd), "rc": rc, "wall_s": round(time.perf_counter() - t0, 1), "log": log.name}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--budget-s", type=float, default=480.0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks"))
    args = ap.parse_args(argv)
    gpu = torch.cuda.is_available()
    folder = Path(args.out) / f"gpu-{slug(device_name())}"
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    left = lambda: args.budget_s - (time.perf_counter() - start)
    info = {"device": device_name(), "gpu": gpu, "torch": torch.__version__, "cuda": torch.version.cuda,
            "bf16_native": bool(gpu and torch.cuda.is_bf16_supported(including_emulation=False)),
            "cpu_threads": torch.get_num_threads(), "profile": "lab" if gpu else "ci (rehearsal: no GPU)"}
    (folder / "info.json").write_text(json.dumps(info, indent=2))
    py, profile = sys.executable, "lab" if gpu else "ci"
    build = folder / "build"                      # an empty model cache: every model trained here
    steps = {}
    plan = [
        ("bench", [py, "benchmarks/bench.py", "--size", "lab" if gpu else "tiny", "--out", str(folder / "bench")], {}),
        ("kernels", [py, "-m", "pytest", "-q", "tests/test_kernels.py"], {}),
        ("lessons", [py, "-m", "nbsupport.harness.run_notebooks", "--profile", profile], {"NBS_BUILD": str(build)}),
        (PAPER, [py, "-m", "nbsupport.harness.run_notebooks", "--reproductions", "--profile", profile,
                 f"notebooks/reproductions/{PAPER}.ipynb"], {"NBS_BUILD": str(build)}),
    ]
    for name, cmd, env in plan:
        if left() < 30:
            steps[name] = {"skipped": f"budget of {args.budget_s:.0f} s spent"}
            continue
        steps[name] = run(cmd, folder / f"{name}.log", left(), env)
        print(f"{name}: rc {steps[name]['rc']}, {steps[name]['wall_s']} s", flush=True)
    lessons = {}
    for line in (folder / "lessons.log").read_text().splitlines() if (folder / "lessons.log").exists() else []:
        m = re.match(r"== (\S+)\.ipynb", line)
        if m:
            current = m.group(1)
        t = re.search(r"(done|FAILED) (?:in|after) (\d+) s", line)
        if t:
            lessons[current] = {"wall_s": int(t.group(2)), "ok": t.group(1) == "done"}
    (folder / "lessons.json").write_text(json.dumps(lessons, indent=2))
    (folder / "steps.json").write_text(json.dumps(steps, indent=2))
    lines = [f"# GPU check: {info['device']}", "",
             f"torch {info['torch']}, CUDA {info['cuda']}, native bf16: {info['bf16_native']}, "
             f"profile {info['profile']}, budget {args.budget_s:.0f} s", "",
             "| step | exit | wall s |", "| --- | --- | --- |"]
    lines += [f"| {n} | {s.get('rc', s.get('skipped'))} | {s.get('wall_s', '')} |" for n, s in steps.items()]
    lines += ["", "| lesson | wall s (empty cache) |", "| --- | --- |"]
    lines += [f"| {n} | {v['wall_s']}{'' if v['ok'] else ' (failed)'} |" for n, v in lessons.items()]
    (folder / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(s.get("rc", 0) == 0 for s in steps.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
