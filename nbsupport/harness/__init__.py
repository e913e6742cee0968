"""The harness: what runs the lessons around the engine, which knows nothing of it.

* :mod:`.run`: ``nbs.start(PROFILE, SEED)``, the run a notebook starts (profile, device, seed,
  results), and the one reader of the ``NBS_*`` settings;
* :mod:`.workers`: uncached models trained one per CPU core in worker processes;
* :mod:`.smoke`: the full-size smoke run's caps, its ledger and the projected GPU time;
* :mod:`.devicecheck`: a simulated second device that finds host tensors on a CPU-only machine;
* :mod:`.run_notebooks`: ``make notebooks``, papermill over every notebook.
"""
from . import run, workers
from .run import Environment, Run, read_environment


def start(profile_name="lab", seed: int = 0, quiet: bool = False) -> Run:
    """:func:`.run.start` (the profile, the device, the seed, the results record), with the harness's
    worker processes handed to the training code (:func:`.workers.install`): the pipeline and the
    lessons then train their uncached models several at once without importing the harness."""
    workers.install()
    return run.start(profile_name, seed, quiet)


__all__ = ["Environment", "Run", "read_environment", "start"]
