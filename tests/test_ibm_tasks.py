"""Notebooks 08-09's helpers around the synthetic IBM-3 tasks: which sentences exact search runs on,
which of them every comparison may use, and when a training run counts as converged."""
import pytest

from nbsupport.lessons import ibm_tasks
from nbsupport.train import History


def test_short_sources_keeps_the_order_and_the_length_limit():
    sources = ["a b c", "a b c d e", "a b", "a, b c", "a b c d"]
    # "a, b c" is four tokens: the comma is a word of its own
    assert ibm_tasks.short_sources(sources, 3, 5) == [0, 2]
    assert ibm_tasks.short_sources(sources, 4, 2) == [0, 2]
    assert ibm_tasks.short_sources(sources, 4, 10) == [0, 2, 3, 4]
    with pytest.raises(ValueError):
        ibm_tasks.short_sources(sources, 1, 3)


def test_proven_everywhere_is_the_intersection():
    runs = [[True, True, False, True], [True, False, False, True], [True, True, True, True]]
    assert ibm_tasks.proven_everywhere(runs) == [0, 3]
    with pytest.raises(ValueError):
        ibm_tasks.proven_everywhere([[True], [True, False]])


def test_nmt_jobs_add_the_training_to_the_papers_settings():
    jobs = ibm_tasks.nmt_jobs({"softmax": None, "scones_0.2": 0.2}, 3, {"epochs": 20, "warmup": 100})
    assert jobs["softmax"]["training_overrides"] == {"label_smoothing": 0.0, "epochs": 20, "warmup": 100}
    assert jobs["scones_0.2"]["model_overrides"] == {"output": "scones", "scones_alpha": 0.2}
    assert jobs["scones_0.2"]["seed"] == 3 and jobs["softmax"]["model_overrides"] == {}
    sized = ibm_tasks.nmt_jobs({"softmax": None, "scones_0.2": 0.2}, 0, {}, {"d_model": 64})
    assert sized["softmax"]["model_overrides"] == {"d_model": 64}
    assert sized["scones_0.2"]["model_overrides"] == {"d_model": 64, "output": "scones", "scones_alpha": 0.2}


def history(valid):
    h = History()
    for i, v in enumerate(valid):
        h.epochs.append({"epoch": i + 1, "valid_nll": v})
    h.best_epoch = min(range(len(valid)), key=valid.__getitem__) + 1
    return h


def test_convergence_by_the_last_epochs_relative_improvement():
    # 2.0 -> 1.99 is 0.5% better: converged at 1%; 2.0 -> 1.9 is 5%: still improving
    assert ibm_tasks.convergence(history([3.0, 2.0, 1.99]), 0.01)["converged"]
    assert not ibm_tasks.convergence(history([3.0, 2.0, 1.9]), 0.01)["converged"]
    rose = ibm_tasks.convergence(history([3.0, 2.0, 2.1]), 0.01)       # the dev loss rose: converged, best epoch 2
    assert rose["converged"] and rose["best_epoch"] == 2 and rose["epochs"] == 3
    assert not ibm_tasks.convergence(history([3.0]), 0.01)["converged"]  # one epoch says nothing
    # patience 2: two such epochs in a row; a blip followed by an improvement is not a plateau
    assert not ibm_tasks.convergence(history([3.0, 2.0, 2.01, 1.5]), 0.01, 2)["converged"]
    assert ibm_tasks.convergence(history([3.0, 2.0, 2.01, 1.5]), 0.01, 1)["converged"] is False      # 2.01 -> 1.5: 25% better
    assert ibm_tasks.convergence(history([3.0, 2.0, 2.01, 2.0]), 0.01, 2)["converged"]
    assert not ibm_tasks.convergence(history([3.0, 2.0]), 0.01, 2)["converged"]   # needs patience + 1 epochs


def test_patience_is_a_positive_integer_and_one_is_the_old_rule():
    from nbsupport.train import TrainConfig, converged
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            TrainConfig(patience=bad)
    # patience 1: the last epoch against the one before it, whatever came earlier
    assert converged(history([3.0, 2.0, 2.5, 2.49]), 0.01) and not converged(history([3.0, 2.0, 2.5, 2.0]), 0.01)
