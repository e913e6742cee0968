"""nbsupport: the support package of the course on ambiguity and diversity in NMT.

Notebooks use one import line, ``import nbsupport as nbs``, then for example::

    run = nbs.start(PROFILE, SEED)          # run.profile, run.device, run.results
    corpus = nbs.data.load("toy", ambiguity="low")
    nbs.metrics.pairwise_bleu(hyps)
"""
from ._version import __version__  # noqa: E402,F401

import torch  # noqa: E402  (re-exported: notebooks show key algorithms inline with nbs.torch)

# the engine: data, models (one family per module, the protocol and the registry), training, decoding,
# search, losses, metrics (kernels are imported where used)
from . import claims, data, decode, ibm, losses, metrics, models, pipeline, registry, search, speed, stats, train, translation  # noqa: E402
# the lesson helpers each notebook uses, and the presentation layer, at nbs.<name> as before
from .lessons import analysis, beam_curse, comparison, exercises, ibm_tasks, mixture_runs, multisource, scenarios  # noqa: E402
from .views import live, plots, tables, widgets  # noqa: E402
from .profiles import PROFILE_NAMES, Profile, profile  # noqa: E402
from .results import load_results, save_results  # noqa: E402
from .runtime import choose_device, seed_everything, setup  # noqa: E402
# the harness: the run a notebook starts (it reads the NBS_* settings), worker processes, smoke runs
from .harness import start  # noqa: E402

__all__ = ["PROFILE_NAMES", "Profile", "analysis", "beam_curse", "choose_device", "claims", "comparison", "data", "decode", "exercises", "ibm", "ibm_tasks", "live", "load_results", "losses", "metrics", "mixture_runs", "models", "multisource",
           "pipeline", "plots", "profile", "registry", "save_results", "scenarios", "search", "seed_everything", "setup", "speed", "start", "stats", "tables", "torch", "train", "translation",
           "widgets"]
