"""Device, threads, seeds: chosen in one place."""
from __future__ import annotations

import ctypes
import os
import platform
import random

import numpy as np
import torch

from . import devicecheck

THREADS_ENV = "NBS_THREADS"
# glibc malloc: blocks up to MMAP_THRESHOLD come from the heap, and up to TRIM_THRESHOLD of freed
# heap is kept instead of being handed back to the kernel (mallopt's M_MMAP_THRESHOLD, M_TRIM_THRESHOLD).
MMAP_THRESHOLD, TRIM_THRESHOLD = 32 << 20, 512 << 20


DEVICE_ENV = "NBS_DEVICE"
DEVICES = ("cuda", "mps", "cpu")


def _available(kind: str) -> bool:
    if kind == "cuda":
        return torch.cuda.is_available()
    if kind == "mps":
        return getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    return True


def choose_device(prefer: str | None = None) -> torch.device:
    """cuda > mps > cpu, unless ``prefer`` (or $NBS_DEVICE) names one; a named device that this
    machine does not have is an error (an empty $NBS_DEVICE counts as unset)."""
    source = "the device argument" if prefer else f"${DEVICE_ENV}"
    prefer = prefer or os.environ.get(DEVICE_ENV) or None
    if prefer is not None:
        if prefer not in DEVICES:
            raise ValueError(f"unknown device {prefer!r} (from {source}); valid devices: {', '.join(DEVICES)}")
        if not _available(prefer):
            fix = (f"unset {DEVICE_ENV} (`unset {DEVICE_ENV}` in the shell, `del os.environ['{DEVICE_ENV}']` "
                   f"in Python) to choose automatically, or set it to cpu"
                   if source.startswith("$") else "leave the device out to choose automatically, or pass 'cpu'")
            raise RuntimeError(f"{source} asks for {prefer!r} but no {prefer.upper()} device is available "
                               f"(torch {torch.__version__}); {fix}")
        return torch.device(prefer)
    return torch.device(next(kind for kind in DEVICES if _available(kind)))


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


def keep_freed_memory() -> bool:
    """Let glibc reuse freed activation buffers instead of returning them to the kernel and
    page-faulting them back in on the next batch (what jemalloc/tcmalloc do for CPU torch).

    Measured on a 2-core VM: a batched K=10 E-step took 12k-31k minor page faults per call and
    140-180 ms; with these two settings 0 faults and 110-130 ms. Returns whether they were set
    (only on Linux with glibc)."""
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
    """Take cuDNN out of scaled_dot_product_attention's backends (process-wide). With a padding
    mask, torch sends attention on Hopper GPUs to cuDNN first, which builds an execution plan for
    every new (batch, length) shape: our token-count batches are nearly all new shapes in the first
    epoch, which ran ~10x slower than the later ones on an H100 (Bible baseline: 27.6k against
    ~270k target tokens/s). Flash / memory-efficient attention need no per-shape plan."""
    if hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        torch.backends.cuda.enable_cudnn_sdp(False)


def setup(seed: int = 0, device: str | None = None, quiet: bool = False) -> torch.device:
    """Seed torch/numpy/random, set CPU threads, flush denormals and keep freed memory on CPU;
    return the device.

    Flushing denormals matters: tied embeddings initialised N(0, 1) made training twice as
    slow on CPU through denormal arithmetic (measured on this project's machines).
    $NBS_CHECK_DEVICES=1 turns on the device checker (nbsupport.devicecheck).
    """
    seed = check_seed(seed)
    dev = choose_device(device)
    checking = devicecheck.enable_from_environment()
    torch.set_num_threads(num_threads())
    if dev.type == "cpu":
        torch.set_flush_denormal(True)
        keep_freed_memory()
    if dev.type == "cuda":
        avoid_cudnn_attention()
    seed_everything(seed)
    if not quiet:
        print(f"device: {dev}, torch {torch.__version__}, {torch.get_num_threads()} CPU threads, seed {seed}"
              + (", device checker on" if checking else ""))
    return dev


# --------------------------------------------------------------------------- several CPU jobs at once
PARALLEL_ENV = "NBS_PARALLEL"
MAX_WORKERS = 4


def cpu_workers(device, jobs: int) -> int:
    """How many processes should train ``jobs`` independent models at once: on a CPU with 2+ cores,
    one per core up to :data:`MAX_WORKERS` (a small model's step is overhead-bound, so two
    one-thread processes on 2 cores train about twice as much as one two-thread process: 01's
    systems, 986 s of training in 450 s); 1 on a GPU, on one core, or with $NBS_PARALLEL=0."""
    if torch.device(device).type != "cpu" or os.environ.get(PARALLEL_ENV, "1").strip() == "0":
        return 1
    return max(1, min(jobs, num_threads(), MAX_WORKERS))


def _exit_with(parent: int, every_s: float = 1.0) -> None:
    """Poll until ``parent`` is no longer this process's parent (it died: a restarted or killed
    notebook kernel), then exit at once instead of training on as an orphan."""
    import time
    while os.getppid() == parent:
        time.sleep(every_s)
    os._exit(1)


def _worker_init(threads: int, parent: int) -> None:
    import threading
    from . import smoke
    os.environ[THREADS_ENV] = str(threads)
    # the smoke run's ledger records each model once, from the parent's own (cache-hit) call
    os.environ.pop(smoke.LEDGER_ENV, None)
    torch.set_num_threads(threads)
    threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()


def run_in_processes(fn, jobs: list[tuple], workers: int) -> list:
    """``[fn(*job) for job in jobs]`` in ``workers`` fresh processes (spawned: safe from a notebook
    kernel), each with its share of the CPU threads; a worker exits when this process dies (a
    restarted kernel leaves no orphan training on). ``fn`` must be a module-level function."""
    import concurrent.futures
    import multiprocessing
    threads = max(1, num_threads() // workers)
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                                initializer=_worker_init, initargs=(threads, os.getpid())) as pool:
        return list(pool.map(fn, *zip(*jobs))) if jobs else []


def try_in_processes(fn, jobs: list[tuple], workers: int) -> bool:
    """:func:`run_in_processes`, or, if worker processes cannot run here (no process spawning in
    this environment, an object that does not pickle, a worker that died), a printed reason and
    False: the caller then trains one model at a time, as without workers."""
    try:
        run_in_processes(fn, jobs, workers)
        return True
    except Exception as err:           # noqa: BLE001 - any failure means: do it in this process
        print(f"training in {workers} processes failed ({type(err).__name__}: {err}); training one at a time instead",
              flush=True)
        return False


def train_in_worker_processes(fn, jobs: list[tuple], device, what: str) -> bool:
    """Run ``fn(*job)`` for every job (each trains one model into the cache) in worker processes
    when :func:`cpu_workers` says more than one pays here, printing what it does; False when the
    caller must train the models itself (one worker only, or workers that cannot run)."""
    workers = cpu_workers(device, len(jobs))
    if workers < 2:
        return False
    print(f"training {len(jobs)} {what}, {workers} at a time in {workers} processes", flush=True)
    return try_in_processes(fn, jobs, workers)

