"""Content-addressed caching with atomic writes.

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
import os
import tempfile
from pathlib import Path
from typing import Callable, TypeVar

from ._version import __version__
from .paths import cache_dir

T = TypeVar("T")


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
