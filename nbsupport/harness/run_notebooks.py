"""`python -m nbsupport.harness.run_notebooks --profile lab`: execute every lesson in sequence with
papermill (the venv's own python3 kernel) into build/notebooks/, then print one summary
table of the key numbers each notebook wrote. ``--reproductions``: the papers' reproduction
notebooks (notebooks/reproductions/) instead, each timed."""
from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import sys
import time
from pathlib import Path

from ..paths import repo_root, results_dir
from ..profiles import PROFILE_NAMES, profile
from ..runtime import check_seed


def notebook_paths(folder: Path | None = None) -> list[Path]:
    """The lessons: notebooks/NN_*.ipynb."""
    folder = folder or repo_root() / "notebooks"
    return sorted(p for p in folder.glob("[0-9][0-9]_*.ipynb"))


def reproduction_paths(folder: Path | None = None) -> list[Path]:
    """The reproductions, one per paper: notebooks/reproductions/*.ipynb."""
    folder = folder or repo_root() / "notebooks" / "reproductions"
    return sorted(folder.glob("[a-z]*.ipynb"))


def parameter_names(path: Path) -> list[str]:
    """The names assigned in the notebook's cell tagged ``parameters``: what papermill can set."""
    cells = [c for c in json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
             if "parameters" in c.get("metadata", {}).get("tags", [])]
    if not cells:
        raise ValueError(f"{Path(path).name} has no cell tagged 'parameters'")
    source = cells[0]["source"]
    names = []
    for node in ast.parse(source if isinstance(source, str) else "".join(source)).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        names += [t.id for t in targets if isinstance(t, ast.Name) and t.id not in names]
    return names


def check_parameters(path: Path, parameters: dict) -> None:
    """An error naming the valid parameters if ``parameters`` has a name that the notebook's
    ``parameters`` cell does not assign (papermill would only log a warning and run the
    defaults: ``-p PROFLE ci`` would run ``lab``); checks PROFILE and SEED's values too."""
    valid = parameter_names(path)
    for name in parameters:
        if name not in valid:
            close = difflib.get_close_matches(name, valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"unknown parameter {name!r} for {Path(path).name}{hint}; "
                             f"valid parameters: {', '.join(valid)}")
    if "PROFILE" in parameters:
        if not isinstance(parameters["PROFILE"], str):   # a notebook calls nbs.profile(PROFILE) itself
            raise TypeError(f"PROFILE must be a profile name ({', '.join(PROFILE_NAMES)}), "
                            f"got {parameters['PROFILE']!r}")
        profile(parameters["PROFILE"])
    if "SEED" in parameters:
        check_seed(parameters["SEED"])


INJECTED_NOTE = "# Set by the runner for this run (papermill): these values replace the cell above."


def explain_injected_parameters(executed: Path) -> None:
    """Begin papermill's injected parameters cell in an executed copy with a comment saying what it is, so
    that a reader of the copy knows why a second parameters cell follows the notebook's own (written
    atomically; the cell ran before the comment was added, and a comment changes nothing it did)."""
    nb = json.loads(executed.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            if not source.startswith(INJECTED_NOTE):
                cell["source"] = INJECTED_NOTE + "\n" + source
    tmp = executed.with_name(executed.name + ".tmp")
    tmp.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(executed)


def execute(path: Path, profile_name: str, seed: int = 0, out_dir: Path | None = None,
            timeout_s: int | None = None, parameters: dict | None = None) -> Path:
    """Run one notebook non-interactively; returns the executed copy's path. ``parameters`` set
    other names of the notebook's ``parameters`` cell (or override PROFILE, SEED, INTERACTIVE)."""
    parameters = {"PROFILE": profile_name, "SEED": seed, "INTERACTIVE": False, **(parameters or {})}
    check_parameters(path, parameters)    # a clear error before starting a kernel
    import papermill as pm
    # figures must reach the executed notebook, whatever backend the calling shell prefers
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    out_dir = out_dir or results_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / path.name
    # the kernel's own log stays quiet (its "running over TCP without encryption" warning means nothing here)
    pm.execute_notebook(str(path), str(out), kernel_name="python3", cwd=str(path.parent),
                        parameters=parameters, progress_bar=False, execution_timeout=timeout_s,
                        extra_arguments=["--IPKernelApp.log_level=ERROR"])
    explain_injected_parameters(out)
    return out


def parameter_value(text: str):
    """A command-line value as papermill's ``-p`` reads it: a Python literal (1, 0.5, True,
    None) if it is one, else the string itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


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
    ap.add_argument("--profile", choices=PROFILE_NAMES, help="the run profile (default: lab)")
    ap.add_argument("--seed", type=int, help="the seed (default: 0)")
    ap.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="set a name of the notebooks' parameters cell, as papermill -p does (-p PROFILE ci)")
    ap.add_argument("--reproductions", action="store_true",
                    help="run the reproduction notebooks (notebooks/reproductions/) instead of the lessons")
    ap.add_argument("notebooks", nargs="*", help="notebook files (default: every lesson, or every reproduction)")
    args = ap.parse_args(argv)
    params = {name: parameter_value(value) for name, value in args.parameter}
    for name, option in (("PROFILE", args.profile), ("SEED", args.seed)):
        if option is not None and params.setdefault(name, option) != option:
            ap.error(f"--{name.lower()} {option} and -p {name} {params[name]} disagree")
    params = {"PROFILE": "lab", "SEED": 0, **params}
    paths = [Path(p) for p in args.notebooks] or (reproduction_paths() if args.reproductions else notebook_paths())
    for path in paths:        # every mistake reported before the first notebook starts
        if not path.exists():
            ap.error(f"no notebook {path}")
        try:
            check_parameters(path, params)
        except (ValueError, TypeError) as err:
            ap.error(str(err))
    failed, times, start = [], {}, time.time()
    for path in paths:
        t0 = time.time()
        print(f"== {path.name} at profile {params['PROFILE']} ...", flush=True)
        try:
            execute(path.resolve(), params["PROFILE"], params["SEED"], parameters=params)
            times[path.stem] = time.time() - t0
            print(f"   done in {times[path.stem]:.0f} s", flush=True)
        except Exception as err:
            print(f"   FAILED after {time.time() - t0:.0f} s: {type(err).__name__}: {err}", flush=True)
            failed.append(path.name)
    print()
    print(summary_table([p.stem for p in paths]))
    print("\nwall time: " + ", ".join(f"{stem} {t:.0f} s" for stem, t in times.items())
          + f"; {time.time() - start:.0f} s in all")
    if failed:
        print(f"\nfailed: {', '.join(failed)} (executed copies with the error are in {results_dir()})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
