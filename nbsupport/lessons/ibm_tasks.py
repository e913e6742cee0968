"""Synthetic language pairs sampled from IBM-3 at a temperature (Stahlberg & Kumar 2022
section 5): the real source sentences, targets sampled by :class:`nbsupport.ibm.Sampler`.

The training split has one sampled target per source; dev and test carry several
independent samples per source, so that the diversity metrics apply. Both the IBM model
and every synthetic corpus are cached, keyed by what determines them.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from .. import ibm
from ..cache import cached_file
from ..data import bible
from ..data.synthetic import Corpus, Split, ToyConfig, detokenize, toy
from ..data.vocab import WordVocab
from ..pipeline import Task
from ..profiles import Profile, profile
from ..pipeline import host_work
from ..train import Encoded

TOKENIZE = WordVocab.tokenize       # word level, punctuation split off (the toy's own tokens)
BIBLE_MAX_WORDS = 50                # verses longer than this (either side) are left out of IBM training


def fit(pairs, iterations: int, name: str, key: dict) -> ibm.IBMModel:
    """IBM Models 1 -> 2 -> 3 on tokenised pairs, ``iterations`` EM iterations each, cached."""
    def build(tmp: Path) -> None:
        torch.save(ibm.train(pairs, iterations), tmp)
    return cached_file(name, {**key, "iterations": iterations}, build,
                       lambda p: torch.load(p, weights_only=False), suffix=".pt")


def sample_corpus(sampler: ibm.Sampler, sources: dict[str, list[str]], gamma: float, test_refs: int,
                  seed: int, name: str, key: dict) -> Corpus:
    """Targets for every source at temperature ``gamma``: one per training source,
    ``test_refs`` per dev/test source."""
    def build(tmp: Path) -> None:
        rng = np.random.default_rng([seed, int(round(gamma * 1000))])
        out = {}
        for split, srcs in sources.items():
            k = 1 if split == "train" else test_refs
            out[split] = [[detokenize(" ".join(sampler.sample(TOKENIZE(s), gamma, rng).words)) for _ in range(k)]
                          for s in srcs]
        tmp.write_text(json.dumps(out))

    def load(path: Path) -> Corpus:
        refs = json.loads(path.read_text())
        splits = {s: Split({"src": sources[s]}, refs[s], [list(range(len(r))) for r in refs[s]]) for s in sources}
        return Corpus(f"ibm3-{name}-g{gamma}", splits["train"], splits["dev"], splits["test"],
                      {"gamma": gamma, "base": name})

    return cached_file(f"ibm3-{name}-g{gamma}", {**key, "gamma": gamma, "test_refs": test_refs, "seed": seed, "detokenized": True,
                                                 "sources": {s: len(v) for s, v in sources.items()}},
                       build, load, suffix=".json")


def capped(cfg: Profile | str) -> dict:
    """What a step-capped profile adds to the IBM model's and the sampled corpora's cache keys
    (their IBM model had fewer EM iterations): they never share a real run's entries."""
    cfg = profile(cfg)              # a profile name is accepted too
    return {} if cfg.max_steps is None else {"max_steps": cfg.max_steps}


def toy_base(cfg: Profile | str, seed: int = 0):
    """The toy corpus the IBM model is trained on (one style, low ambiguity: its optional
    phrases give IBM-3 NULL words and fertilities to learn) and the trained model."""
    cfg = profile(cfg)              # a profile name is accepted too
    tc = ToyConfig(n_styles=1, ambiguity="low", n_train=cfg.ibm["toy_train"], n_dev=cfg.toy_test,
                   n_test=cfg.toy_test, seed=seed)
    corpus = toy(tc)
    pairs = [(TOKENIZE(s), TOKENIZE(r)) for s, rs in zip(corpus.train.src, corpus.train.refs) for r in rs]
    key = {"dataset": "toy", "config": asdict(tc), **capped(cfg)}
    return corpus, fit(pairs, cfg.ibm["iterations"], "ibm3-toy", key), key


def bible_base(cfg: Profile | str, src: str = "e", tgt: str = "4"):
    """German (Elberfelder) -> English (WEB) verses, word level, IBM-3 trained on the
    training books (verses of at most BIBLE_MAX_WORDS words)."""
    cfg = profile(cfg)              # a profile name is accepted too
    corpus = bible.corpus(sources=(src,), targets=(tgt,), **cfg.bible_limits())
    pairs = [(TOKENIZE(s.lower()), TOKENIZE(r[0].lower())) for s, r in zip(corpus.train.src, corpus.train.refs)]
    pairs = [p for p in pairs if 0 < len(p[0]) <= BIBLE_MAX_WORDS and 0 < len(p[1]) <= BIBLE_MAX_WORDS]
    key = {"dataset": "bible", "src": src, "tgt": tgt, "verses": len(corpus.train), "max_words": BIBLE_MAX_WORDS,
           **({"dev_limit": cfg.bible_dev} if cfg.bible_dev else {}), **capped(cfg)}
    return corpus, fit(pairs, cfg.ibm["iterations"], "ibm3-bible", key), key


def synthetic_task(cfg: Profile | str, base, gamma: float, seed: int = 0) -> Task:
    """A :class:`~nbsupport.pipeline.Task` on the synthetic pair at temperature ``gamma``
    (the first ``cfg.ibm["nmt_train"]`` training sources)."""
    cfg = profile(cfg)              # a profile name is accepted too
    corpus, model, key = base
    lower = key["dataset"] == "bible"
    prep = (lambda s: s.lower()) if lower else (lambda s: s)
    limits = {"train": cfg.ibm["nmt_train"], "dev": None, "test": None}
    sources = {s: [prep(x) for x in corpus.split(s).src[:limits[s]]] for s in ("train", "dev", "test")}
    t0 = time.perf_counter()
    syn = sample_corpus(ibm.Sampler(model), sources, gamma, cfg.ibm["test_refs"], seed, key["dataset"], key)
    host_work(f"IBM-3 sampling, {key['dataset']}, gamma {gamma}", time.perf_counter() - t0,
                      done=len(sources["train"]), full=len(corpus.train.src), task=f"ibm3-{key['dataset']}-g{gamma}")
    src_vocab = WordVocab.build(syn.train.src)
    tgt_vocab = WordVocab.build(r for rs in syn.train.refs for r in rs)
    task_key = {"dataset": syn.name, "base": key, "gamma": gamma, "seed": seed, "train_sources": len(syn.train)}
    sizes, training = (cfg.bible_model, cfg.bible_training) if lower else (cfg.toy_model, cfg.toy_training)
    return Task(syn.name, syn, src_vocab, tgt_vocab, Encoded.from_split(syn.train, src_vocab, tgt_vocab),
                Encoded.from_split(syn.dev, src_vocab, tgt_vocab), task_key, sizes, training, "src")


def short_sources(sources, max_words: int, n: int) -> list[int]:
    """Indices of the first ``n`` of ``sources`` with at most ``max_words`` words: short sources
    keep exact search's space small enough to prove its answer (the paper's appendix A budget
    is 1M states on a GPU)."""
    picked = [i for i, s in enumerate(sources) if len(TOKENIZE(s)) <= max_words][:n]
    if not picked:
        raise ValueError(f"no source has at most {max_words} words")
    return picked


def proven_everywhere(proven: list[list[bool]]) -> list[int]:
    """The sentence indices proven optimal in every one of several exact-search runs over the same
    sentences (per run, one flag per sentence): the sentences every exact-search comparison uses."""
    if len({len(p) for p in proven}) != 1:
        raise ValueError("every run must cover the same sentences")
    return [i for i in range(len(proven[0])) if all(p[i] for p in proven)]


def nmt_jobs(alphas: dict, seed: int, training: dict, model: dict | None = None) -> dict[str, dict]:
    """:func:`~nbsupport.lessons.beam_curse.softmax_and_scones_jobs` (no label smoothing, as the
    paper) with ``training`` (e.g. epochs, warm-up, the convergence criterion) and ``model`` (sizes)
    on top."""
    from .beam_curse import softmax_and_scones_jobs
    return softmax_and_scones_jobs(alphas, seed, training=training, model=model)


def convergence(history, converged_below: float, patience: int = 1) -> dict:
    """A training run's validation loss per epoch, its best epoch, and whether it converged on the
    dev set: each of its last ``patience`` epochs lowered the validation loss by less than
    ``converged_below`` of the epoch before (the rule ``TrainConfig.converged_below`` stops at,
    :func:`nbsupport.train.converged`; a run that reached its epoch cap still improving did not)."""
    from ..train import converged
    valid = [e["valid_nll"] for e in history.epochs]
    return {"valid_nll": valid, "best_epoch": history.best_epoch, "epochs": len(valid),
            "converged": converged(history, converged_below, patience)}
