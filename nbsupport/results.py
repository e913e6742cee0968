"""Notebook results: every number that matters is written to build/notebooks/<stem>.json
(papermill saves no widget output), atomically, with where and how it was produced."""
from __future__ import annotations

import json
import math
import platform
import time
from pathlib import Path

import torch

from .cache import atomic_path
from .paths import results_dir


def _clean(value):
    """JSON-safe copy: NaN/inf become None, tuples lists, numpy/torch scalars floats."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def machine() -> str:
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"{platform.machine()} {platform.system()}, {torch.get_num_threads()} threads, {gpu}"


def save_results(stem: str, results: dict, summary: dict | None = None) -> Path:
    """Write ``results`` (nested dicts of numbers and strings) to build/notebooks/<stem>.json.

    ``summary`` holds the few key numbers that `make notebooks` prints in its final table.
    """
    payload = dict(_clean(results))
    payload["summary"] = _clean(summary or {})
    payload["_produced"] = {"time": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine(),
                            "torch": torch.__version__}
    path = results_dir() / f"{stem}.json"
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(payload, indent=2, sort_keys=False), encoding="utf-8")
    print(f"results written to {path}")
    return path


def load_results(stem: str) -> dict:
    path = results_dir() / f"{stem}.json"
    if not path.exists():
        raise FileNotFoundError(f"no results for {stem!r} at {path}; run the notebook first")
    return json.loads(path.read_text(encoding="utf-8"))
