"""nbsupport: the support package of the course on ambiguity and diversity in NMT.

Notebooks use one import line, ``import nbsupport as nbs``, then for example::

    cfg = nbs.profile(PROFILE)
    device = nbs.setup(SEED)
    corpus = nbs.data.load("toy", ambiguity="low")
    nbs.metrics.pairwise_bleu(hyps)
"""
__version__ = "0.1.0"

import torch  # noqa: E402  (re-exported: notebooks show key algorithms inline with nbs.torch)

from . import analysis, beam_curse, data, decode, ibm, ibm_tasks, losses, metrics, mixture_runs, models, multisource, pipeline, plots, scenarios, search, tables, train, widgets  # noqa: E402
from .profiles import PROFILE_NAMES, Profile, profile  # noqa: E402
from .results import load_results, save_results  # noqa: E402
from .runtime import choose_device, num_threads, seed_everything, setup  # noqa: E402

__all__ = ["PROFILE_NAMES", "Profile", "analysis", "beam_curse", "choose_device", "data", "decode", "ibm", "ibm_tasks", "load_results", "losses", "metrics", "mixture_runs", "models", "multisource",
           "num_threads", "pipeline", "plots", "profile", "save_results", "scenarios", "search", "seed_everything", "setup", "tables", "torch", "train",
           "widgets"]
