"""Where things live. Each path can be overridden by an environment variable."""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def repo_root() -> Path:
    """The course checkout (the folder holding pyproject.toml), else the working directory."""
    root = PACKAGE_DIR.parent
    return root if (root / "pyproject.toml").exists() else Path.cwd()


def data_dir() -> Path:
    """Prepared corpora and downloaded data wheels: $NBS_DATA or <repo>/data."""
    return Path(os.environ.get("NBS_DATA", repo_root() / "data"))


def build_dir() -> Path:
    """Notebook results, caches and trained models: $NBS_BUILD or <repo>/build."""
    return Path(os.environ.get("NBS_BUILD", repo_root() / "build"))


def cache_dir() -> Path:
    return build_dir() / "cache"


def results_dir() -> Path:
    """Executed notebooks and their results files: $NBS_RESULTS or <build>/notebooks (the test
    suite's ci runs write elsewhere, so they never replace a lab or full run's results)."""
    return Path(os.environ["NBS_RESULTS"]) if os.environ.get("NBS_RESULTS") else build_dir() / "notebooks"
