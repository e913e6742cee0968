"""`make gpu-check`: one command that measures the course on the machine's GPU and writes one folder.

    python benchmarks/gpu_check.py [--budget-s 480] [--streams 1] [--out benchmarks]

On a machine with one GPU and nothing but the course installed it writes
``benchmarks/gpu-<device>/``: ``info.json`` (device, torch, CUDA), ``bench/`` (``bench.py --size lab``),
``kernels.log`` (the kernel tests: the compiled Triton kernel runs on a GPU), ``lessons.json`` (every
lesson at ``lab``, each from its own empty model cache, its wall time, or where the budget ran out),
the reproduction of one paper (its model seeds) and ``summary.md``. The kernel tests and the bench
run first, alone; then the lessons and the reproduction, one after another, or with ``--streams N``
N of them side by side on the one GPU (longest first; their times are then each one's wall time
beside N - 1 others, an upper bound on its time alone). A step that would start with too little
time left is skipped and said so. Without a GPU it runs end to end as a rehearsal: the bench at its
tiny size, the lessons and the reproduction at ``ci``, the GPU-only kernel test skipped.
"""
from __future__ import annotations

import argparse
import concurrent.futures
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
# lessons longest first (their lab times on a 2-core CPU, benchmarks/README.md), so that streams end together
LONGEST_FIRST = ["05", "04", "02", "01", "09", "08", "07", "03", "10", "06", "00"]


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


def lesson_order(paths: list[Path]) -> list[Path]:
    rank = {nn: i for i, nn in enumerate(LONGEST_FIRST)}
    return sorted(paths, key=lambda p: rank.get(p.name[:2], len(rank)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--budget-s", type=float, default=480.0)
    ap.add_argument("--streams", type=int, default=1, help="lessons run side by side on the one GPU (default 1)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks"))
    args = ap.parse_args(argv)
    if args.streams < 1:
        ap.error(f"--streams must be a positive integer, got {args.streams}")
    gpu = torch.cuda.is_available()
    folder = Path(args.out) / f"gpu-{slug(device_name())}"
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    left = lambda: args.budget_s - (time.perf_counter() - start)
    info = {"device": device_name(), "gpu": gpu, "torch": torch.__version__, "cuda": torch.version.cuda,
            "bf16_native": bool(gpu and torch.cuda.is_bf16_supported(including_emulation=False)),
            "cpu_threads": torch.get_num_threads(), "profile": "lab" if gpu else "ci (rehearsal: no GPU)",
            "streams": args.streams}
    (folder / "info.json").write_text(json.dumps(info, indent=2))
    py, profile = sys.executable, "lab" if gpu else "ci"
    build = folder / "build"                      # an empty model cache per lesson: every model trained here
    threads = max(1, (os.cpu_count() or 1) // args.streams)
    notebooks = ROOT / "notebooks"
    lessons = lesson_order(sorted(notebooks.glob("[0-9][0-9]_*.ipynb")))
    # the bench may take at most a third of the budget: the lessons are the check's main measurement
    alone = [("kernels", [py, "-m", "pytest", "-q", "tests/test_kernels.py"], {}, float("inf")),
             ("bench", [py, "benchmarks/bench.py", "--size", "lab" if gpu else "tiny", "--out", str(folder / "bench")], {},
              args.budget_s / 3)]
    side_by_side = [(PAPER, [py, "-m", "nbsupport.harness.run_notebooks", "--reproductions", "--profile", profile,
                             f"notebooks/reproductions/{PAPER}.ipynb"], {"NBS_BUILD": str(build / PAPER)})]
    side_by_side += [(p.stem, [py, "-m", "nbsupport.harness.run_notebooks", "--profile", profile, f"notebooks/{p.name}"],
                      {"NBS_BUILD": str(build / p.stem)}) for p in lessons]
    if args.streams > 1:
        for _, _, env in side_by_side:
            env["NBS_THREADS"] = str(threads)

    def step(name, cmd, env, cap=float("inf")):
        if left() < 30:
            return {"skipped": f"budget of {args.budget_s:.0f} s spent"}
        result = run(cmd, folder / f"{name}.log", min(left(), cap), env)
        print(f"{name}: rc {result['rc']}, {result['wall_s']} s", flush=True)
        return result

    steps = {name: step(name, cmd, env, cap) for name, cmd, env, cap in alone}
    side_start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(args.streams) as pool:
        done = dict(zip([n for n, _, _ in side_by_side], pool.map(lambda job: step(*job), side_by_side)))
    steps[PAPER] = done.pop(PAPER)
    lesson_times = {}
    for name, result in sorted(done.items()):
        log = folder / f"{name}.log"
        t = re.search(r"(done|FAILED) (?:in|after) (\d+) s", log.read_text()) if log.exists() else None
        if t:
            lesson_times[name] = {"wall_s": int(t.group(2)), "ok": t.group(1) == "done"}
        elif "rc" in result:
            lesson_times[name] = {"wall_s": result["wall_s"], "ok": False, "rc": result["rc"]}
    ran = [r for r in done.values() if "rc" in r]
    # the lessons' wall time: from the first one's start to the last one's end (side by side, not their sum)
    steps["lessons"] = ({"rc": max((r["rc"] for r in ran), key=abs), "wall_s": round(time.perf_counter() - side_start, 1),
                         "streams": args.streams} if ran else next(iter(done.values()), {"skipped": "no lessons"}))
    (folder / "lessons.json").write_text(json.dumps(lesson_times, indent=2))
    (folder / "steps.json").write_text(json.dumps(steps, indent=2))
    beside = f", {args.streams} side by side" if args.streams > 1 else ", one at a time"
    lines = [f"# GPU check: {info['device']}", "",
             f"torch {info['torch']}, CUDA {info['cuda']}, native bf16: {info['bf16_native']}, "
             f"profile {info['profile']}, budget {args.budget_s:.0f} s", "",
             "| step | exit | wall s |", "| --- | --- | --- |"]
    lines += [f"| {n} | {s.get('rc', s.get('skipped'))} | {s.get('wall_s', '')} |" for n, s in steps.items()]
    lines += ["", f"| lesson | wall s (empty cache{beside}) |", "| --- | --- |"]
    lines += [f"| {n} | {v['wall_s']}{'' if v['ok'] else ' (failed)'} |" for n, v in lesson_times.items()]
    (folder / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(s.get("rc", 0) == 0 for s in steps.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
