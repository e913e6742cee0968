"""From a data set to a trained, cached model in two calls, the same way in every notebook.

``task = toy_task(cfg, seed, ambiguity="low")`` builds the corpus, its vocabularies and the
encoded training and validation data; ``train_model(task, cfg, n_latent=4, ...)`` returns a
model from the cache, or trains it there.
"""
from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch

from . import registry
from .cache import cached_model, key_hash, models_dir, non_default
from .data import bible
from .data.synthetic import Corpus, ToyConfig, toy, toy_config, toy_trilingual
from .data.vocab import WordVocab, train_sentencepiece
from .models.transformer import TransformerConfig
from .profiles import Profile, profile
from .metrics import LatentUsage
from .runtime import check_seed, seed_everything, setup
from .train import Encoded, TrainConfig, train


# --------------------------------------------------------------------------- training runs, and who watches them
@dataclass
class Callbacks:
    """What code outside the training loop may watch or provide, without the loop knowing it (a ledger of
    the models a run used, say): ``on_model(name, model, train_cfg, train_data, valid_data)`` is called
    for every model :func:`train_or_load` trains or loads; each of ``training(names)`` returns a
    context manager entered around every training run (``names``: the models it trains, one per model); each of ``on_host(what, seconds,
    done, full, task)`` hears of host work a GPU does not speed up (sampling a synthetic corpus);
    ``parallel``, when set, trains several uncached models at once: ``parallel(fn, jobs, device, what)``
    runs ``fn(*job)`` for every job and returns False when the caller must train them itself (the
    harness sets it: worker processes, one per CPU core)."""
    on_model: list[Callable] = field(default_factory=list)
    training: list[Callable] = field(default_factory=list)
    on_host: list[Callable] = field(default_factory=list)
    parallel: Callable | None = None


CALLBACKS = Callbacks()


def train_several(fn, jobs: list[tuple], device, what: str) -> bool:
    """``fn(*job)`` for every job (each trains one model into the cache) with the runner the harness
    installed (:attr:`Callbacks.parallel`); False when there is none or it declines: the caller then
    trains each model when it first asks for it."""
    return bool(jobs) and CALLBACKS.parallel is not None and bool(CALLBACKS.parallel(fn, jobs, device, what))


def host_work(what: str, seconds: float, done: int, full: int, task: str | None = None) -> None:
    """Tell the watchers (:attr:`Callbacks.on_host`) of host work measured on ``done`` items of ``full``."""
    for on_host in CALLBACKS.on_host:
        on_host(what, seconds, done, full, task)


def model_key_and_path(name: str, model_cfg, train_cfg: TrainConfig, data_key: dict, options=None):
    """The cache key of a model (both configurations, the options, the data, the package version)
    and the file it is cached in."""
    key = {"model": non_default(model_cfg), "train": non_default(train_cfg), "data": data_key}
    key.update(registry.cache_key(model_cfg, options))
    return key, models_dir() / f"{name}-{key_hash(key)}.pt"


def train_or_load(name: str, model_cfg, train_cfg: TrainConfig, data_key: dict, train_data: Encoded,
                  valid_data: Encoded, device, progress: bool = True, options=None):
    """Return (model, history): loaded from the model cache if this exact model was trained before,
    else trained (resuming an interrupted run) and cached. The cache keys a trained model on
    everything that affects its weights: a notebook run twice, or a baseline shared by several
    notebooks, trains once.

    The family is the one ``model_cfg`` and ``options`` select (:func:`nbsupport.registry.build`:
    a ``TransformerConfig`` or ``LSTMConfig`` alone; with a ``MixtureConfig``, ``VNMTConfig`` or
    ``ConditioningConfig`` as ``options``, that family). ``data_key`` must describe the data
    completely (data set, its configuration and split, vocabularies): it is part of the cache
    key, with both configurations, the options and the package version."""
    key, _ = model_key_and_path(name, model_cfg, train_cfg, data_key, options)
    model = registry.build(model_cfg, options)
    for on_model in CALLBACKS.on_model:
        on_model(name, model, train_cfg, train_data, valid_data)

    def fit(partial):
        seed_everything(train_cfg.seed)
        fresh = registry.build(model_cfg, options)        # the same initial weights for the same seed
        usage = lambda: [LatentUsage(fresh.config.n_latent, train_data.labels)]
        with contextlib.ExitStack() as watched:
            for context in CALLBACKS.training:
                watched.enter_context(context([name]))
            history = train(fresh, train_data, valid_data, train_cfg, device, partial, progress, watchers=usage)
        return fresh, history

    model, history = cached_model(name, key, lambda: model, fit)
    return model.to(device).eval(), history


@dataclass
class Task:
    name: str
    corpus: Corpus
    src_vocab: object
    tgt_vocab: object
    train: Encoded
    valid: Encoded
    key: dict          # a complete description of the data, for the model cache
    model_sizes: dict
    training: dict
    src_lang: str | None = None


def toy_task(cfg: Profile | str, seed: int = 0, trilingual: bool = False, src_lang: str | None = None,
             model: dict | None = None, training: dict | None = None, **toy_kwargs) -> Task:
    """The toy task at the profile's size (``cfg``: a :class:`Profile` or its name); ``toy_kwargs``
    go to :class:`ToyConfig`; ``src_lang`` picks the trilingual toy's source ("xa" or "xb");
    ``model`` and ``training`` change some of the profile's toy model sizes and training settings."""
    cfg = profile(cfg)
    tc = ToyConfig(n_train=cfg.toy_train, n_dev=cfg.toy_test, n_test=cfg.toy_test, seed=check_seed(seed))
    tc = toy_config(tc, **{**({"n_styles": 1} if trilingual else {}), **toy_kwargs})
    corpus = (toy_trilingual if trilingual else toy)(tc)
    corpus.train.source(src_lang)                 # an unknown language names the valid ones
    lang = src_lang or next(iter(corpus.train.sources))
    src_vocab = WordVocab.build(corpus.train.sources[lang])
    tgt_vocab = WordVocab.build(r for rs in corpus.train.refs for r in rs)
    key = {"dataset": corpus.name, "config": asdict(tc), "src_lang": lang}
    return Task(corpus.name, corpus, src_vocab, tgt_vocab,
                Encoded.from_split(corpus.train, src_vocab, tgt_vocab, lang),
                Encoded.from_split(corpus.dev, src_vocab, tgt_vocab, lang),
                key, {**cfg.toy_model, **(model or {})}, {**cfg.toy_training, **(training or {})}, lang)


def bible_task(cfg: Profile | str, src: str = "e", targets=bible.ENGLISH_REFERENCES) -> Task:
    """The Bible, ``src`` -> English, every target version a separate training pair
    (the seed paper section 5.1), sentencepiece vocabularies trained on the training books. ``cfg``:
    a :class:`Profile` or its name; ``src``: a Bible version code (see ``bible.VERSIONS``)."""
    cfg = profile(cfg)
    corpus = bible.corpus(sources=(src,), targets=targets, **cfg.bible_limits())
    train_src = corpus.train.sources[src][:cfg.spm_sentences]
    train_tgt = [r for rs in corpus.train.refs[:cfg.spm_sentences] for r in rs]
    src_vocab = train_sentencepiece(train_src, cfg.spm_vocab, name=f"spm-{src}")
    tgt_vocab = train_sentencepiece(train_tgt, cfg.spm_vocab, name="spm-" + "".join(targets))
    key = {"dataset": "bible", "src": src, "targets": list(targets), "spm": [src_vocab.path.name, tgt_vocab.path.name],
           "verses": len(corpus.train), "test_limit": cfg.bible_test,
           **({"dev_limit": cfg.bible_dev} if cfg.bible_dev else {})}
    return Task("bible", corpus, src_vocab, tgt_vocab,
                Encoded.from_split(corpus.train, src_vocab, tgt_vocab, src),
                Encoded.from_split(corpus.dev, src_vocab, tgt_vocab, src),
                key, cfg.bible_model, cfg.bible_training, src)


def train_model(task: Task, name: str, device, n_latent: int = 1, seed: int = 0, progress: bool = True,
                model_overrides: dict | None = None, training_overrides: dict | None = None, options=None):
    """A cached Transformer-based model for ``task`` (sizes and training from the profile,
    overrides on top): without ``options`` the baseline (K = 1) or Hard-MoE (K = n_latent);
    with ``options``, the family they configure (:mod:`nbsupport.registry`): a
    ``ConditioningConfig`` gives a target-conditioned model with K = n_latent domains, a
    ``MixtureConfig`` a K-expert mixture, a ``VNMTConfig`` variational NMT with dz = n_latent."""
    mc, tc = model_and_training_config(task, n_latent, seed, model_overrides, training_overrides)
    return train_or_load(f"{task.name}-{name}", mc, tc, task.key, task.train, task.valid, device, progress, options)


def is_cached(task: Task, name: str, n_latent: int = 1, seed: int = 0, model_overrides: dict | None = None,
              training_overrides: dict | None = None, options=None) -> bool:
    """Would :func:`train_model` with these arguments load its model from the cache?"""
    mc, tc = model_and_training_config(task, n_latent, seed, model_overrides, training_overrides)
    return model_key_and_path(f"{task.name}-{name}", mc, tc, task.key, options)[1].exists()


def _train_in_worker(task: Task, job: dict) -> float:
    setup(job.get("seed", 0), "cpu", threads=torch.get_num_threads())   # the worker's share
    return train_model(task, device="cpu", progress=False, **job)[1].train_seconds


def train_in_parallel(task: Task, jobs: list[dict], device) -> list[str]:
    """Train the models of ``jobs`` (each the keyword arguments of :func:`train_model` but
    ``task``, ``device`` and ``progress``) that are not cached yet, several at once on a CPU (one
    process per core: the runner the harness installs, :func:`train_several`), into the cache, so that the
    notebook's own ``train_model`` calls then load them. In the order given (put the costliest
    first). On a GPU the seeds of one model train together (:func:`train_seeds_together`), the
    others when first asked for. Returns the names trained."""
    return train_many_in_parallel([(task, job) for job in jobs], device)


def train_many_in_parallel(jobs: list[tuple[Task, dict]], device) -> list[str]:
    """:func:`train_in_parallel` for models of several tasks: ``jobs`` is a list of (task, job).
    Where stacking pays (:data:`STACK_SEEDS`), the seeds of one model train together first."""
    todo = [(task, job) for task, job in jobs if not is_cached(task, **job)]
    stacked = train_seeds_together(todo, device) if STACK_SEEDS.get(torch.device(device).type) else []
    todo = [(task, job) for task, job in todo if job["name"] not in stacked or not is_cached(task, **job)]
    if not train_several(_train_in_worker, todo, device, "models"):
        return stacked
    return stacked + [job["name"] for _, job in todo]


# Train the seeds of one model as one stacked model (nbsupport.batched) on these devices: on a GPU a
# toy step is bound by kernel launches, which stacking shares; on the 2-core CPU one model per core in
# worker processes is as fast (benchmarks/README.md, "Many models at once").
STACK_SEEDS = {"cuda": True, "cpu": False}


def train_seeds_together(jobs: list[tuple[Task, dict]], device) -> list[str]:
    """Train the uncached jobs that differ only in their seed (same task, name, sizes and training;
    a family :mod:`nbsupport.batched` stacks) as one stacked model, and cache each under its own key,
    exactly as :func:`train_model` would. Returns the names of the models trained."""
    from .batched import stackable, train_together
    groups: dict = {}
    for task, job in jobs:
        if job.get("options") is None:
            rest = {k: v for k, v in job.items() if k != "seed"}
            groups.setdefault((id(task), repr(sorted(rest.items()))), []).append((task, job))
    trained = []
    for group in groups.values():
        if len(group) < 2:
            continue
        task, job = group[0]
        configs = [model_and_training_config(task, j.get("n_latent", 1), j.get("seed", 0), j.get("model_overrides"),
                                             j.get("training_overrides")) for _, j in group]
        models = []
        for mc, tc in configs:
            seed_everything(tc.seed)                       # the initial weights train_model would start from
            models.append(registry.build(mc))
        cfgs = [tc for _, tc in configs]
        if not stackable(models, cfgs):
            continue
        name = f"{task.name}-{job['name']}"
        for model, tc in zip(models, cfgs):
            for on_model in CALLBACKS.on_model:
                on_model(name, model, tc, task.train, task.valid)
        with contextlib.ExitStack() as watched:
            for context in CALLBACKS.training:
                watched.enter_context(context([name] * len(models)))
            histories = train_together(models, task.train, task.valid, cfgs, device,
                                       watchers=lambda i: [LatentUsage(models[i].config.n_latent, task.train.labels)])
        for model, history, (mc, tc) in zip(models, histories, configs):
            key, _ = model_key_and_path(name, mc, tc, task.key)
            cached_model(name, key, lambda: model, lambda partial, m=model, h=history: (m, h))
        trained += [j["name"] for _, j in group]
    return trained


def model_and_training_config(task: Task, n_latent: int = 1, seed: int = 0, model_overrides: dict | None = None,
                              training_overrides: dict | None = None) -> tuple[TransformerConfig, TrainConfig]:
    mc = TransformerConfig(len(task.src_vocab), len(task.tgt_vocab), n_latent=n_latent,
                           **{**task.model_sizes, **(model_overrides or {})})
    return mc, TrainConfig(seed=seed, **{**task.training, **(training_overrides or {})})
