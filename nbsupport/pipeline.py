"""From a data set to a trained, cached model in two calls, the same way in every notebook.

``task = toy_task(cfg, seed, ambiguity="low")`` builds the corpus, its vocabularies and the
encoded training and validation data; ``train_model(task, cfg, n_latent=4, ...)`` returns a
model from the cache, or trains it there.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from .data import bible
from .data.synthetic import Corpus, ToyConfig, toy, toy_config, toy_trilingual
from .data.vocab import WordVocab, train_sentencepiece
from .models.transformer import TransformerConfig
from .profiles import Profile, profile
from .runtime import check_seed, setup
from .train import Encoded, TrainConfig, model_key_and_path, train_or_load, train_several


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
    process per core: the runner the harness installs, :func:`nbsupport.train.train_several`), into the cache, so that the
    notebook's own ``train_model`` calls then load them. In the order given (put the costliest
    first). On a GPU or with one worker nothing happens here. Returns the names trained."""
    return train_many_in_parallel([(task, job) for job in jobs], device)


def train_many_in_parallel(jobs: list[tuple[Task, dict]], device) -> list[str]:
    """:func:`train_in_parallel` for models of several tasks: ``jobs`` is a list of (task, job)."""
    todo = [(task, job) for task, job in jobs if not is_cached(task, **job)]
    if not train_several(_train_in_worker, todo, device, "models"):
        return []
    return [job["name"] for _, job in todo]


def model_and_training_config(task: Task, n_latent: int = 1, seed: int = 0, model_overrides: dict | None = None,
                              training_overrides: dict | None = None) -> tuple[TransformerConfig, TrainConfig]:
    mc = TransformerConfig(len(task.src_vocab), len(task.tgt_vocab), n_latent=n_latent,
                           **{**task.model_sizes, **(model_overrides or {})})
    return mc, TrainConfig(seed=seed, **{**task.training, **(training_overrides or {})})
