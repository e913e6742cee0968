"""`python -m nbsupport.run_notebooks --profile lab`: execute every notebook in sequence with
papermill (the venv's own python3 kernel) into build/notebooks/, then print one summary
table of the key numbers each notebook wrote."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from .paths import repo_root, results_dir
from .profiles import PROFILE_NAMES, profile


def notebook_paths(folder: Path | None = None) -> list[Path]:
    folder = folder or repo_root() / "notebooks"
    return sorted(p for p in folder.glob("[0-9][0-9]_*.ipynb"))


def execute(path: Path, profile_name: str, seed: int = 0, out_dir: Path | None = None,
            timeout_s: int | None = None) -> Path:
    """Run one notebook non-interactively; returns the executed copy's path."""
    import papermill as pm
    profile(profile_name)
    # figures must reach the executed notebook, whatever backend the calling shell prefers
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"  # clear error for an unknown profile before starting a kernel
    out_dir = out_dir or results_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / path.name
    pm.execute_notebook(str(path), str(out), kernel_name="python3", cwd=str(path.parent),
                        parameters={"PROFILE": profile_name, "SEED": seed, "INTERACTIVE": False},
                        progress_bar=False, execution_timeout=timeout_s)
    return out


def summary_table(stems: list[str]) -> str:
    lines = [f"{'notebook':32s} {'key number':40s} value"]
    for stem in stems:
        path = results_dir() / f"{stem}.json"
        if not path.exists():
            lines.append(f"{stem:32s} {'(no results written)':40s}")
            continue
        summary = json.loads(path.read_text()).get("summary", {})
        for key, value in summary.items():
            shown = f"{value:.2f}" if isinstance(value, float) else str(value)
            lines.append(f"{stem:32s} {key:40s} {shown}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--profile", default="lab", choices=PROFILE_NAMES)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("notebooks", nargs="*", help="notebook files (default: all of notebooks/)")
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.notebooks] or notebook_paths()
    failed = []
    for path in paths:
        t0 = time.time()
        print(f"== {path.name} at profile {args.profile} ...", flush=True)
        try:
            execute(path.resolve(), args.profile, args.seed)
            print(f"   done in {time.time() - t0:.0f} s", flush=True)
        except Exception as err:
            print(f"   FAILED after {time.time() - t0:.0f} s: {type(err).__name__}: {err}", flush=True)
            failed.append(path.name)
    print()
    print(summary_table([p.stem for p in paths]))
    if failed:
        print(f"\nfailed: {', '.join(failed)} (executed copies with the error are in {results_dir()})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
