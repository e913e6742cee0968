"""Device, threads, seeds: chosen in one place."""
from __future__ import annotations

import os
import random

import numpy as np
import torch

THREADS_ENV = "NBS_THREADS"


def choose_device(prefer: str | None = None) -> torch.device:
    """cuda > mps > cpu, unless ``prefer`` (or $NBS_DEVICE) names one."""
    prefer = prefer or os.environ.get("NBS_DEVICE")
    valid = ("cuda", "mps", "cpu")
    if prefer is not None:
        if prefer not in valid:
            raise ValueError(f"unknown device {prefer!r}; valid devices: {', '.join(valid)}")
        return torch.device(prefer)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def num_threads() -> int:
    """CPU threads for torch: $NBS_THREADS, else all cores."""
    value = os.environ.get(THREADS_ENV)
    if value is None:
        return max(1, os.cpu_count() or 1)
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"${THREADS_ENV} must be a positive integer, got {value!r}") from None
    if n < 1:
        raise ValueError(f"${THREADS_ENV} must be a positive integer, got {value!r}")
    return n


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def setup(seed: int = 0, device: str | None = None, quiet: bool = False) -> torch.device:
    """Seed torch/numpy/random, set CPU threads, flush denormals on CPU; return the device.

    Flushing denormals matters: tied embeddings initialised N(0, 1) made training twice as
    slow on CPU through denormal arithmetic (measured on this project's machines).
    """
    dev = choose_device(device)
    torch.set_num_threads(num_threads())
    if dev.type == "cpu":
        torch.set_flush_denormal(True)
    seed_everything(seed)
    if not quiet:
        print(f"device: {dev}, torch {torch.__version__}, {torch.get_num_threads()} CPU threads, seed {seed}")
    return dev
