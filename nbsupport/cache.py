"""Content-addressed caching with atomic writes, and the trained models' cache (:func:`cached_model`).

A cache entry's name is a hash of everything that affects it (``key``), so two
notebooks asking for the same thing share it, and a changed setting never reuses a
stale entry. Entries are written to a temporary name in the same folder and renamed,
so an interrupted run never leaves a half-written entry behind, and two processes
building the same entry each rename a complete file onto it; an entry that fails to
load is rebuilt.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Callable, TypeVar

import torch

from ._version import __version__
from .paths import build_dir, cache_dir

T = TypeVar("T")
log = logging.getLogger(__name__)   # cache hits: quiet in a lesson, visible with logging at INFO


def key_hash(key, length: int = 16) -> str:
    """Stable hash of a JSON-serialisable description (dict keys sorted, package version added)."""
    blob = json.dumps({"key": key, "nbsupport": __version__}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:length]


@contextlib.contextmanager
def atomic_path(path: Path):
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def cached_file(name: str, key, build: Callable[[Path], None], load: Callable[[Path], T],
                suffix: str = "", folder: Path | None = None) -> T:
    """Return ``load(path)`` of the entry for ``key``, building it with ``build(tmp_path)`` first
    if it is missing or cannot be loaded."""
    folder = Path(folder or cache_dir())
    path = folder / f"{name}-{key_hash(key)}{suffix}"
    if path.exists():
        try:
            return load(path)
        except Exception as err:  # a corrupt entry is rebuilt, not trusted
            # not unlinked: the atomic rename below replaces it, and an unlink could remove the
            # complete entry another process has just renamed into place
            print(f"cache: rebuilding {path} ({type(err).__name__}: {err})")
    with atomic_path(path) as tmp:
        build(tmp)
    return load(path)


def non_default(config) -> dict:
    """The settings of a dataclass that differ from their defaults: the cache key, so that a
    new option added with a default does not invalidate every cached model."""
    from dataclasses import fields
    return {f.name: getattr(config, f.name) for f in fields(config) if getattr(config, f.name) != f.default}


def models_dir() -> Path:
    """Where trained models are cached."""
    return build_dir() / "models"


def cached_model(name: str, key, make: Callable, fit: Callable):
    """(model, history) of the trained model described by ``key``: loaded into ``make()`` (a new
    model of the right family) from the cache, or trained by ``fit(partial_path) -> (model,
    history)`` (resumable from ``partial_path`` after every epoch) and cached atomically first."""
    trained = {}                                           # the model trained here, returned as it is

    def build(tmp: Path) -> None:
        partial = models_dir() / f"{name}-{key_hash(key)}.partial.pt"
        model, history = fit(partial)
        torch.save({"model": model.state_dict(), "history": history, "key": key}, tmp)
        partial.unlink(missing_ok=True)
        trained.update(model=model, history=history)

    def load(file: Path):
        if trained:
            return trained["model"], trained["history"]
        state = torch.load(file, map_location="cpu", weights_only=False)
        model = make()
        model.load_state_dict(state["model"])
        log.info("loaded cached model %s (trained in %.0f s)", file.name, state["history"].train_seconds)
        return model, state["history"]

    return cached_file(name, key, build, load, suffix=".pt", folder=models_dir())
