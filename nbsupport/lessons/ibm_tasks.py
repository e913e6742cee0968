"""Synthetic language pairs sampled from IBM-3 at a temperature (Stahlberg & Kumar 2022
section 5): the real source sentences, targets sampled by :class:`nbsupport.ibm.Sampler`.

The training split has one sampled target per source; dev and test carry several
independent samples per source, so that the diversity metrics apply. Both the IBM model
and every synthetic corpus are cached, keyed by what determines them.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from .. import ibm, stats
from ..cache import cached_file
from ..data import bible
from ..data.synthetic import Corpus, Split, ToyConfig, detokenize, toy
from ..data.vocab import BOS, WordVocab
from ..pipeline import Task, train_many_in_parallel, train_model
from ..profiles import Profile, profile
from ..pipeline import host_work
from ..train import Encoded, converged
from ..decode import token_scores
from ..search import ModelScorer
from ..views.live import source_tensor
from .beam_curse import beam_sweep, candidates, exact_sweep, quality_stats, resampled_quality, softmax_and_scones_jobs

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
                      done=len(sources["train"]), full=min(len(corpus.train.src), profile(cfg.name).ibm["nmt_train"] or math.inf),
                      task=f"ibm3-{key['dataset']}-g{gamma}")     # full: the sources the unsmoked profile samples
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
    return softmax_and_scones_jobs(alphas, seed, training=training, model=model)


def pairs_and_models(cfg: Profile | str, base, gammas, alphas: dict, seed: int, device, training: dict,
                     model: dict | None = None) -> tuple[dict, dict, dict]:
    """Lessons 08-09's synthetic pairs and models: per gamma the pair (:func:`synthetic_task`) and every model of
    ``alphas`` trained on it (:func:`nmt_jobs`; the uncached ones at once). Returns ({gamma: task},
    {(gamma, name): model}, {(gamma, name): history}), gamma by gamma."""
    cfg = profile(cfg)              # a profile name is accepted too
    jobs = nmt_jobs(alphas, seed, training, model)
    tasks = {g: synthetic_task(cfg, base, g, seed) for g in gammas}
    train_many_in_parallel([(tasks[g], jobs[n]) for n in alphas for g in gammas], device)
    models, histories = {}, {}
    for g, task in tasks.items():
        for name, job in jobs.items():
            models[g, name], histories[g, name] = train_model(task, device=device, progress=False, **job)
    return tasks, models, histories


def convergence(history, converged_below: float, patience: int = 1) -> dict:
    """A training run's validation loss per epoch, its best epoch, and whether it converged on the
    dev set: each of its last ``patience`` epochs lowered the validation loss by less than
    ``converged_below`` of the epoch before (the rule ``TrainConfig.converged_below`` stops at,
    :func:`nbsupport.train.converged`; a run that reached its epoch cap still improving did not)."""
    valid = [e["valid_nll"] for e in history.epochs]
    return {"valid_nll": valid, "best_epoch": history.best_epoch, "epochs": len(valid),
            "converged": converged(history, converged_below, patience)}


# --------------------------------------------------------------------------- notebooks 08-09's tables, figure and records
def quality_by_model(tasks: dict, raw: dict, gammas, models, exact: list[int], proven: list[int], n_beam: int,
                     start_beams, seed: int = 0, bleu: str = "multi_ref_bleu") -> dict:
    """{"beam4", "exact", "beam4_on_proven", "states", "by_beam", "rel"}: per (gamma, model), the resampled
    quality of beam 4 (first ``n_beam`` test sources) and, on the ``proven`` sentences of ``exact``, of the
    mode, each start beam, log2 prefixes expanded, and the mode's BLEU as % of softmax's beam 4."""
    boot_p = stats.Resamples(max(len(proven), 1), seed=seed)
    quality = lambda hyps, refs, b, on=None: resampled_quality(quality_stats(hyps, refs), b, on)
    q = {k: {} for k in ("exact", "beam4_on_proven", "states", "by_beam", "rel")}
    q["beam4"] = beam_quality(tasks, {(g, n): raw[g][n]["beam4"] for g in gammas for n in models}, gammas, models, n_beam, seed)
    for g in gammas:
        t = tasks[g].corpus.test
        ex_refs = [t.refs[i] for i in exact]
        for n in models:
            r = raw[g][n]
            if proven:                  # the mode, and the start beams beside it, on the sentences proven everywhere
                q["exact"][g, n] = quality(r["exact"]["hyps"], ex_refs, boot_p, proven)
                q["beam4_on_proven"][g, n] = quality(r["beam4_exact_sources"]["hyps"], ex_refs, boot_p, proven)
                q["by_beam"][g, n] = {**{f"beam {b}": quality(r["seeds"][b]["hyps"], ex_refs, boot_p, proven) for b in start_beams},
                                      "mode": q["exact"][g, n]}
                log_states = np.log2(np.maximum(np.array(r["exact"]["expansions"], dtype=float), 1))[proven]
                q["states"][g, n] = stats.Resampled(float(log_states.mean()), boot_p.mean(log_states))
    if proven:
        q["rel"] = {(g, n): stats.ratio(q["exact"][g, n][bleu], q["beam4_on_proven"][g, "softmax"][bleu], 100)
                    for g in gammas for n in models}
    return q


def plot_by_gamma(ax, series: dict, gammas, ylabel: str):
    """Draw one line per model (``series``: model -> one Resampled per gamma) with its 95% interval on
    ``ax``, the gammas evenly spaced, and return ``ax``."""
    for k, (n, rs) in enumerate(series.items()):
        est, low, high = (np.array(v) for v in zip(*[(i.estimate, i.ci_low, i.ci_high) for i in (r.interval() for r in rs)]))
        x = np.arange(len(gammas)) + 0.08 * (k - 1)           # models side by side
        ax.errorbar(x, est, yerr=[est - low, high - est], marker="o", ls=":", capsize=3, label=n)
    ax.set(xlabel="IBM-3 sampling temperature gamma (not to scale)", ylabel=ylabel, xticks=range(len(gammas)), xticklabels=gammas)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return ax


def the_and_full(model, src_vocab, tgt_vocab, source: str, hyps):
    """(full, the, entropy): the token scores of the highest-scoring of ``hyps`` that is neither empty nor
    "the" (the first of ``hyps`` if none is), those of "the" + EOS, and -sum p log p (nats) over the next token
    after "the", all given ``source``. That is the next token's entropy only for a softmax model: SCONES's
    log-sigmoid scores do not sum to 1 over the vocabulary, so for it the number is no entropy."""
    fulls = [h for h in hyps if TOKENIZE(h) not in ([], ["the"])] or list(hyps[:1])
    x = source_tensor([source], src_vocab, model).expand(len(fulls) + 1, -1)
    the_ids = tgt_vocab.encode("the")                     # "the", EOS
    the, *scored = token_scores(model, x, [the_ids] + [tgt_vocab.encode(h) for h in fulls])
    lp = ModelScorer(model, x[:1])([BOS] + the_ids[:-1]).double()   # log P(w | x, the), every w
    return max(scored, key=sum), the, float(-(lp.exp() * lp).sum())


def beam_records(gammas, models, beam4: dict, ibm3, sampler, test_sources, seed: int = 0,
                 bleu: str = "multi_ref_bleu"):
    """(records, summary): notebook 08's result entries (key: value, for ``run.record``), from
    ``beam4`` (per (gamma, model): :func:`beam_quality`'s or :func:`quality_by_model`'s ``"beam4"``),
    EM's tables and the tempered tables' entropy and uniform-distortion share."""
    iv = lambda r: r.interval().to_dict()
    records = {str(g): {f"{n}.{k}": v for n in models for k, v in {
        "beam4_bleu": iv(beam4[g, n]["bleu"]), "beam4_multi_ref_bleu": iv(beam4[g, n][bleu]),
        "beam4_len_ratio": iv(beam4[g, n]["len_ratio"])}.items()} for g in gammas}
    records["ibm"] = {"p1": ibm3.p1, "log_likelihood": ibm3.log_likelihood}      # EM's tables
    grid, rng = [0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5], np.random.default_rng(seed)   # the tempered tables' entropy
    records["entropy"] = {str(g): sampler.task_entropy(test_sources, g) for g in grid}
    records["uniform_distortion_share"] = {str(g): float(np.mean([sampler.sample(s, g, rng).uniform_distortion
                                                                  for s in test_sources])) for g in grid}
    summary = {f"gamma {g} {n} beam4 multi-ref BLEU": beam4[g, n][bleu].estimate for g in gammas for n in models}
    return records, summary


def exact_records(gammas, models, q: dict, raw: dict, share: dict, proven: list[int], n_exact: int, ic: dict,
                  bleu: str = "multi_ref_bleu"):
    """(records, summary): notebook 09's result entries (key: value, for ``run.record``), from
    :func:`quality_by_model`'s ``q`` and the exact-search sweeps ``raw``: per gamma and model the proven
    share, exact search's time and, on the ``proven`` sentences, the mode's quality; the search's settings."""
    iv = lambda r: r.interval().to_dict()
    records = {}
    for g in gammas:
        records[str(g)] = {f"{n}.{k}": v for n in models for k, v in {
            "proven_fraction": share[g, n], "exact_s_per_sentence": raw[g][n]["exact"]["seconds_per_sentence"],
            **({"exact_bleu": iv(q["exact"][g, n][bleu]), "exact_rel": iv(q["rel"][g, n]),
                "beam4_bleu_on_proven": iv(q["beam4_on_proven"][g, n][bleu]),
                "exact_len_ratio": iv(q["exact"][g, n]["len_ratio"]),
                "beam4_len_ratio_on_proven": iv(q["beam4_on_proven"][g, n]["len_ratio"]),
                "exact_empty_rate": iv(q["exact"][g, n]["empty_rate"]),
                "exact_log2_states": iv(q["states"][g, n])} if proven else {})}.items()}
    records["exact_search"] = {"sentences": n_exact, "max_words": ic["exact_max_words"], "budget": ic["exact_budget"],
                               "proven_everywhere": len(proven), "smallest_proven_share": min(share.values())}
    summary = {f"gamma {g} {n} exact_rel": q["rel"][g, n].estimate for g in gammas for n in models if proven}
    summary["exact search: proven for all"] = f"{len(proven)} of {n_exact}"
    return records, summary


def beam_quality(tasks: dict, beam4: dict, gammas, models, n_beam: int, seed: int = 0) -> dict:
    """Per (gamma, model): the resampled quality (BLEU, multi-reference BLEU, length ratio ...) of ``beam4``'s
    sweep (:func:`measure_beam`) on the first ``n_beam`` test sources, as :func:`quality_by_model`'s "beam4"."""
    boot = stats.Resamples(n_beam, seed=seed)
    return {(g, n): resampled_quality(quality_stats(beam4[g, n]["hyps"], tasks[g].corpus.test.refs[:n_beam]), boot)
            for g in gammas for n in models}


def measure_beam(task: Task, model, n_beam: int) -> dict:
    """Beam 4 on the first ``n_beam`` test sources: :func:`measure`'s ``"beam4"`` sweep alone (no exact search)."""
    t = task.corpus.test
    return beam_sweep(model, task.src_vocab, task.tgt_vocab, t.src[:n_beam], t.refs[:n_beam], [4])[4]


def measure(task: Task, model, exact: list[int], n_beam: int, start_beams, budget: int, batch_size: int) -> dict:
    """{"beam4", "beam4_exact_sources", "seeds", "exact"}: beam 4 on the first ``n_beam`` test sources and,
    on the test sources ``exact``, each of the ``start_beams`` then exact search (at most ``budget`` prefixes
    expanded) bounded by their best output (:mod:`~nbsupport.lessons.beam_curse`'s sweeps)."""
    t = task.corpus.test
    ex_src, ex_refs = [t.src[i] for i in exact], [t.refs[i] for i in exact]
    seeds = beam_sweep(model, task.src_vocab, task.tgt_vocab, ex_src, ex_refs, start_beams)
    beam4 = measure_beam(task, model, n_beam)
    found = exact_sweep(model, task.src_vocab, task.tgt_vocab, ex_src, ex_refs, budget,
                        candidates=candidates(seeds, len(exact)), batch_size=batch_size)
    return {"beam4": beam4, "beam4_exact_sources": seeds[4], "seeds": seeds, "exact": found}
