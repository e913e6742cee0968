"""Every test starts with the training code as a notebook's ``nbs.start`` leaves it: the harness's
worker-process runner handed over (``train.CALLBACKS.parallel``), whatever an earlier test did."""
import pytest

from nbsupport import train
from nbsupport.harness import workers


@pytest.fixture(autouse=True)
def parallel_runner_as_nbs_start_installs_it(monkeypatch):
    monkeypatch.setattr(train.CALLBACKS, "parallel", workers.train_in_worker_processes)
