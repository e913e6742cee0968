"""The `full` profile measured on one GPU: notebooks side by side, training capped, evaluation at full size.

    python benchmarks/gpu_full.py --max-steps 100 --timeout-s 430 --out DIR 01 06 07 08

Each notebook runs at ``full`` from its own empty model cache with ``NBS_MAX_STEPS`` (every model
stops after that many optimiser steps) and a ledger (``NBS_LEDGER``), but without ``NBS_SMOKE``: the
Bible, the models, the beams, the exact searches and the IBM-3 corpora are full size. Its time at
``full`` is then measured, not assumed: the wall time outside training as it ran, plus each training
phase's seconds scaled to its models' uncapped steps (``nbsupport.harness.smoke.measured_projection``).
A notebook that runs out of time still gives its cells' durations (papermill saves after each cell)
and the phases it reached. Side by side on one GPU each time is an upper bound on its time alone.
Writes ``DIR/full.json`` and ``DIR/full.md``; ``--also CMD`` runs one more command beside them.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import sys
from pathlib import Path

from gpu_check import ROOT, run        # this folder's script: one subprocess, its log, its wall time, 124 when out of time

sys.path.insert(0, str(ROOT))
from nbsupport.harness.smoke import ledger_lines, measured_projection  # noqa: E402


def run_notebook(path: Path, out: Path, max_steps: int | None, timeout: float, threads: int) -> dict:
    """One notebook at full; ``max_steps`` None: uncapped, end to end (its wall time is its time at full)."""
    build, ledger = out / "build" / path.stem, out / f"{path.stem}.ledger.jsonl"
    env = {"NBS_BUILD": str(build), "NBS_LEDGER": str(ledger), "NBS_THREADS": str(threads),
           **({"NBS_MAX_STEPS": str(max_steps)} if max_steps is not None else {})}
    r = run([sys.executable, "-m", "nbsupport.harness.run_notebooks", "--profile", "full", str(path)],
            out / f"{path.stem}.log", timeout, env)
    return {"rc": r["rc"], "finished": r["rc"] == 0, "capped": max_steps is not None,
            **measured_projection(ledger_lines(ledger), r["wall_s"], max_steps), "cells": cell_times(build, path)}


def cell_times(build: Path, path: Path) -> list[dict]:
    """Each executed cell's seconds (papermill's metadata) and its first line, longest first."""
    executed = next(iter(sorted(build.rglob(path.name))), None)
    if executed is None:
        return []
    cells = json.loads(executed.read_text())["cells"]
    rows = [{"cell": i, "seconds": round(c["metadata"].get("papermill", {}).get("duration") or 0.0, 1),
             "first_line": first_line_of(c)}
            for i, c in enumerate(cells) if c["cell_type"] == "code"]
    running = [i for i, c in enumerate(cells) if c["metadata"].get("papermill", {}).get("status") == "running"]
    rows = sorted(rows, key=lambda r: -r["seconds"])[:12]
    return rows + [{"cell": i, "seconds": None, "first_line": "(running when stopped) " + first_line_of(cells[i])}
                   for i in running]


def first_line_of(cell: dict) -> str:
    text = "".join(cell["source"]).strip()
    return text.splitlines()[0][:90] if text else ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("lessons", nargs="+", help="lesson numbers, e.g. 01 06")
    ap.add_argument("--uncapped", nargs="*", default=[], help="of those, the lessons run end to end, training uncapped")
    ap.add_argument("--max-steps", type=int, default=100)
    ap.add_argument("--timeout-s", type=float, default=430)
    ap.add_argument("--out", required=True)
    ap.add_argument("--also", default=None, help="one more shell command run beside the notebooks (its log: also.log)")
    args = ap.parse_args(argv)
    for cap in ("NBS_SMOKE", "NBS_MAX_STEPS"):      # evaluation at full size; the cap only where asked for, per notebook
        os.environ.pop(cap, None)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for nn in args.lessons:
        found = sorted((ROOT / "notebooks").glob(f"{nn}_*.ipynb"))
        if len(found) != 1:
            ap.error(f"no single lesson numbered {nn!r} in notebooks/")
        paths.append(found[0])
    streams = len(paths) + bool(args.also)
    threads = max(1, (os.cpu_count() or 1) // streams)
    with concurrent.futures.ThreadPoolExecutor(streams) as pool:
        jobs = {p.stem: pool.submit(run_notebook, p, out, None if p.name[:2] in args.uncapped else args.max_steps,
                                    args.timeout_s, threads) for p in paths}
        if args.also:
            also_job = pool.submit(run, ["bash", "-c", args.also], out / "also.log", args.timeout_s, {"NBS_THREADS": str(threads)})
        rows = {name: job.result() for name, job in jobs.items()}
    report = {"max_steps": args.max_steps, "timeout_s": args.timeout_s, "streams": streams, "threads": threads,
              "notebooks": rows, **({"also": also_job.result()} if args.also else {})}
    (out / "full.json").write_text(json.dumps(report, indent=1))
    lines = [f"`full`, training capped at {args.max_steps} steps a model (uncapped: {', '.join(args.uncapped) or 'none'}), "
             f"evaluation full size, {streams} side by side",
             "", "| notebook | finished | wall s | training measured s | outside training s | projected min at full |",
             "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {n} | {'yes' if r['finished'] else 'no (rc ' + str(r['rc']) + ')'} | {r['wall_s']:.0f} | "
              f"{r['training_measured_s']:.0f} | {r['outside_training_s']:.0f} | "
              f"{r['projected_min']:.1f}{'' if r['finished'] else ' (so far)'} |" for n, r in rows.items()]
    (out / "full.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
