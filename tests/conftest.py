"""Every test starts with the training code as a notebook's ``nbs.start`` leaves it: the harness's
worker-process runner handed over (``pipeline.CALLBACKS.parallel``), whatever an earlier test did."""
import pytest

from nbsupport import pipeline
from nbsupport.harness import workers


@pytest.fixture(autouse=True)
def parallel_runner_as_nbs_start_installs_it(monkeypatch):
    monkeypatch.setattr(pipeline.CALLBACKS, "parallel", workers.train_in_worker_processes)
