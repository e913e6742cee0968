"""Device, threads, seeds, and the CPU's memory and denormal settings: the engine's part of starting
a run. Nothing here reads the environment: :func:`nbsupport.harness.start` does, and passes its
choices in."""
from __future__ import annotations

import ctypes
import os
import platform
import random

import numpy as np
import torch

# glibc malloc: blocks up to MMAP_THRESHOLD come from the heap, and up to TRIM_THRESHOLD of freed
# heap is kept instead of being handed back to the kernel (mallopt's M_MMAP_THRESHOLD, M_TRIM_THRESHOLD).
MMAP_THRESHOLD, TRIM_THRESHOLD = 32 << 20, 512 << 20
DEVICES = ("cuda", "mps", "cpu")


def _available(kind: str) -> bool:
    if kind == "cuda":
        return torch.cuda.is_available()
    if kind == "mps":
        return getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    return True


def choose_device(prefer: str | None = None, source: str = "the device argument",
                  fix: str = "leave the device out to choose automatically, or pass 'cpu'") -> torch.device:
    """cuda > mps > cpu, unless ``prefer`` names one; a named device that this machine does not have
    is an error (``source`` says where the name came from, ``fix`` what to do)."""
    if prefer is not None:
        if prefer not in DEVICES:
            raise ValueError(f"unknown device {prefer!r} (from {source}); valid devices: {', '.join(DEVICES)}")
        if not _available(prefer):
            raise RuntimeError(f"{source} asks for {prefer!r} but no {prefer.upper()} device is available "
                               f"(torch {torch.__version__}); {fix}")
        return torch.device(prefer)
    return torch.device(next(kind for kind in DEVICES if _available(kind)))


def cores() -> int:
    return max(1, os.cpu_count() or 1)


def keep_freed_memory() -> bool:
    """Let glibc reuse freed activation buffers instead of returning them to the kernel and
    page-faulting them back in on the next batch (what jemalloc/tcmalloc do for CPU torch; a
    batched E-step page-faulted on every call without it: benchmarks/README.md). Returns whether
    they were set (only on Linux with glibc)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3    # from <malloc.h>
    return bool(libc.mallopt(m_mmap_threshold, MMAP_THRESHOLD)) and bool(libc.mallopt(m_trim_threshold, TRIM_THRESHOLD))


def check_seed(seed) -> int:
    """``seed`` if it is an integer (Python or numpy), else a TypeError saying what SEED must be."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"the seed must be an integer (SEED = 0 in the parameters cell, papermill -p SEED 1), "
                        f"got {seed!r} ({type(seed).__name__})")
    return int(seed)


def seed_everything(seed: int) -> None:
    seed = check_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def avoid_cudnn_attention() -> None:
    """Take cuDNN out of scaled_dot_product_attention's backends (process-wide): with a padding mask,
    torch on Hopper GPUs tries cuDNN first, which plans anew for every (batch, length) shape, and our
    token-count batches are nearly all new shapes in the first epoch. Flash / memory-efficient
    attention need no per-shape plan."""
    if hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        torch.backends.cuda.enable_cudnn_sdp(False)


def setup(seed: int = 0, device: str | torch.device | None = None, threads: int | None = None) -> torch.device:
    """Seed torch/numpy/random, set ``threads`` CPU threads (default: every core), flush denormals
    and keep freed memory on CPU; return the device (``device``, else the best one here).

    Flushing denormals matters: tied embeddings initialised N(0, 1) made training twice as
    slow on CPU through denormal arithmetic. A notebook calls :func:`nbsupport.harness.start`
    instead, which reads the NBS_* settings (device, threads, smoke caps) and calls this."""
    seed = check_seed(seed)
    dev = device if isinstance(device, torch.device) else choose_device(device)
    torch.set_num_threads(threads or cores())
    if dev.type == "cpu":
        torch.set_flush_denormal(True)
        keep_freed_memory()
    if dev.type == "cuda":
        avoid_cudnn_attention()
    seed_everything(seed)
    return dev
