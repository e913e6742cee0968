"""The run a notebook starts in its setup cell: ``run = nbs.start(PROFILE, SEED)``.

A :class:`Run` holds what every notebook cell needs besides the lesson: the profile's settings
(``run.profile``), the device (``run.device``), the seed, and the results record that ends up in
``build/notebooks/<notebook>.json`` (``run.results``). :func:`read_environment` is the one place
the package reads its ``NBS_*`` settings (where files live aside: :mod:`nbsupport.paths`); the
engine gets them as plain arguments.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from .. import runtime
from ..profiles import Profile, profile
from . import devicecheck, smoke

DEVICE_ENV, THREADS_ENV, PARALLEL_ENV = "NBS_DEVICE", "NBS_THREADS", "NBS_PARALLEL"


@dataclass(frozen=True)
class Environment:
    """The ``NBS_*`` settings of this process."""
    device: str | None = None       # NBS_DEVICE: cuda, mps or cpu (unset: the best one here)
    threads: int | None = None      # NBS_THREADS: CPU threads for torch (unset: every core)
    parallel: bool = True           # NBS_PARALLEL=0: train uncached models one at a time
    check_devices: bool = False     # NBS_CHECK_DEVICES=1: the device checker (harness.devicecheck)
    smoke: bool = False             # NBS_SMOKE=1: the smoke run's evaluation sizes (harness.smoke)
    max_steps: int | None = None    # NBS_MAX_STEPS: every training run stops after this many steps
    ledger: Path | None = None      # NBS_LEDGER: the smoke run's record of models and FLOPs


def _threads(raw: str | None) -> int | None:
    if raw is None:
        return None
    n = smoke.positive_int(raw)
    if n is None:
        raise ValueError(f"${THREADS_ENV} must be a positive integer, got {raw!r}")
    return n


def _check_devices(raw: str | None) -> bool:
    value = (raw or "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"${devicecheck.ENV} must be 1 (check devices) or 0/unset (do not), got {value!r}")
    return value == "1"


def read_environment(env=None) -> Environment:
    """The ``NBS_*`` settings of ``env`` (default: this process's environment); a bad value is
    an error naming the valid ones. An empty variable counts as unset."""
    env = os.environ if env is None else env
    return Environment(device=env.get(DEVICE_ENV) or None, threads=_threads(env.get(THREADS_ENV)),
                       parallel=env.get(PARALLEL_ENV, "1").strip() != "0",
                       check_devices=_check_devices(env.get(devicecheck.ENV)),
                       smoke=smoke.parse_smoke(env.get(smoke.SMOKE_ENV)),
                       max_steps=smoke.parse_max_steps(env.get(smoke.MAX_STEPS_ENV)),
                       ledger=Path(env[smoke.LEDGER_ENV]) if env.get(smoke.LEDGER_ENV) else None)


@dataclass
class Run:
    """One notebook run: its settings, its device and seed, and what it measured."""
    profile: Profile
    device: torch.device
    seed: int
    environment: Environment
    results: dict

    def record(self, key, value):
        """Write ``value`` into the results under ``key`` (a tuple of keys for a nested entry, whose
        parents exist) and return it: what the run measured, written to the results file by
        :meth:`save`."""
        *parents, last = key if isinstance(key, tuple) else (key,)
        entry = self.results
        for k in parents:
            entry = entry[k]
        entry[last] = value
        return value

    def save(self, notebook: str, summary: dict | None = None):
        """Write the results to ``build/notebooks/<notebook>.json`` (with ``summary``, the few numbers
        `make notebooks` prints in its closing table)."""
        from ..results import save_results
        return save_results(notebook, self.results, summary)

    def __str__(self) -> str:
        return (f"{self.profile}, seed {self.seed}, device {self.device}, torch {torch.__version__}, "
                f"{torch.get_num_threads()} CPU threads" + (", device checker on" if self.environment.check_devices else ""))


def run_profile(name: str | Profile, env: Environment) -> Profile:
    """The profile ``name`` as this environment runs it: the smoke run's evaluation sizes
    (NBS_SMOKE) and its cap on training steps (NBS_MAX_STEPS) applied."""
    p = profile(name)
    if env.smoke:
        p = smoke.smoke_profile(p)
    if env.max_steps is not None:
        p = smoke.capped_profile(p, env.max_steps)
    return p


def start(profile_name: str | Profile = "lab", seed: int = 0, quiet: bool = False) -> Run:
    """Start a notebook's run: the profile (an unknown name is an error naming the valid ones),
    the device and CPU threads, every random generator seeded with ``seed``, the device checker
    and the smoke run's ledger when the environment asks for them; prints one line saying so."""
    env = read_environment()
    cfg = run_profile(profile_name, env)
    seed = runtime.check_seed(seed)
    if env.check_devices:
        devicecheck.enable()
    source = f"${DEVICE_ENV}"
    fix = (f"unset {DEVICE_ENV} (`unset {DEVICE_ENV}` in the shell, `del os.environ['{DEVICE_ENV}']` in Python) "
           "to choose automatically, or set it to cpu")
    device = runtime.setup(seed, runtime.choose_device(env.device, source, fix) if env.device else None, env.threads)
    if env.ledger is not None:
        smoke.install_ledger(env.ledger)
    run = Run(cfg, device, seed, env, {"profile": cfg.name, "seed": seed})
    if not quiet:
        print(run)
    return run
