"""Several CPU jobs at once: independent models trained one per core in worker processes.

A small model's step is overhead-bound, so on a 2-core CPU two one-thread processes train about
twice as much as one two-thread process (benchmarks/README.md). The lessons hand their uncached
models here; each worker trains one model into the cache, and the notebook then loads it.
"""
from __future__ import annotations

import os
import pickle

import torch

MAX_WORKERS = 4


def cpu_workers(device, jobs: int, threads: int | None = None, parallel: bool | None = None) -> int:
    """How many processes should train ``jobs`` independent models at once: on a CPU, one per
    thread (``threads``, default this run's) up to :data:`MAX_WORKERS`; 1 on a GPU, on one
    thread, or when this run trains one model at a time (``parallel`` False: $NBS_PARALLEL=0)."""
    from .run import read_environment
    env = read_environment()
    parallel = env.parallel if parallel is None else parallel
    threads = threads or env.threads or max(1, os.cpu_count() or 1)
    if torch.device(device).type != "cpu" or not parallel:
        return 1
    return max(1, min(jobs, threads, MAX_WORKERS))


def _exit_with(parent: int, every_s: float = 1.0) -> None:
    """Poll until ``parent`` is no longer this process's parent (it died: a restarted or killed
    notebook kernel), then exit at once instead of training on as an orphan."""
    import time
    while os.getppid() == parent:
        time.sleep(every_s)
    os._exit(1)


def _worker_init(threads: int, parent: int) -> None:
    import threading
    from .run import THREADS_ENV
    os.environ[THREADS_ENV] = str(threads)            # the worker's share, for anything it starts in turn
    torch.set_num_threads(threads)
    threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()


def run_in_processes(fn, jobs: list[tuple], workers: int, threads: int | None = None) -> list:
    """``[fn(*job) for job in jobs]`` in ``workers`` fresh processes (spawned: safe from a notebook
    kernel), each with its share of the ``threads`` (default: torch's) CPU threads; a worker exits
    when this process dies (a restarted kernel leaves no orphan training on). ``fn`` must be a
    module-level function."""
    import concurrent.futures
    import multiprocessing
    per_worker = max(1, (threads or torch.get_num_threads()) // workers)
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                                initializer=_worker_init, initargs=(per_worker, os.getpid())) as pool:
        return list(pool.map(fn, *zip(*jobs))) if jobs else []


def try_in_processes(fn, jobs: list[tuple], workers: int) -> bool:
    """:func:`run_in_processes`, or, if worker processes cannot run here (no process spawning in
    this environment, an object that does not pickle, a worker that died), a printed reason and
    False: the caller then trains one model at a time, as without workers."""
    try:
        pickle.dumps((fn, jobs))       # refused here, not in the pool's feeder thread, where it can hang the pool's shutdown
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
    print(f"training {len(jobs)} {what} not yet in the model cache, {workers} at a time in {workers} processes", flush=True)
    return try_in_processes(fn, jobs, workers)


def install() -> None:
    """Hand :func:`train_in_worker_processes` to the training code (``pipeline.CALLBACKS.parallel``): the
    pipeline and the lessons train their uncached models through it without importing the harness."""
    from .. import pipeline
    pipeline.CALLBACKS.parallel = train_in_worker_processes
