"""Measurements of the beam search curse (Stahlberg & Kumar 2022 section 4.3-4.4):
quality, length and empty outputs against beam size; exact search within a budget; the
log score of the empty translation; search errors; decoding speed.

Beam search here has no length normalisation: a hypothesis scores the plain sum of its
token log scores, eq. 9's decision rule (the paper decodes with "vanilla beam search" and
does not mention a length penalty). Exact search searches the same space as beam search:
translations of at most ``max_len_a * source length + max_len_b`` tokens (and at most the
model's ``max_len``), so its "global best" is the best within that length cap."""
from __future__ import annotations

import statistics
import time
from typing import Sequence

import numpy as np
import torch

from .. import stats
from ..data.batching import pad_batch
from ..data.vocab import BOS, EOS
from ..decode import MAX_LEN_A, MAX_LEN_B, decode, max_lengths, token_ids
from ..metrics import _tokens as metric_tokens
from ..metrics import bleu_and_length
from ..pipeline import train_many_in_parallel, train_model
from ..search import BatchScorer, ModelScorer, best_first_search, exact_search, sequence_score

PAPER_LABEL_SMOOTHING = 0.0   # section 3 and appendix C: softmax and SCONES trained without it


def softmax_and_scones_jobs(alphas: dict, seed: int = 0, epochs: int | None = None, training: dict | None = None,
                            model: dict | None = None) -> dict[str, dict]:
    """The :func:`~nbsupport.pipeline.train_model` arguments of a softmax (alpha ``None``) or
    SCONES model per entry of ``alphas`` (name -> alpha), trained as the paper trains both:
    without label smoothing, whatever the task's default training (the Bible's is 0.1);
    ``training`` (e.g. the epoch cap and the convergence rule) and ``model`` (sizes) on top of the
    task's; ``epochs`` overrides the task's."""
    jobs = {}
    for name, alpha in alphas.items():
        overrides = {"label_smoothing": PAPER_LABEL_SMOOTHING, **(training or {})}
        if epochs is not None:
            overrides["epochs"] = epochs
        output = {} if alpha is None else {"output": "scones", "scones_alpha": alpha}
        jobs[name] = {"name": name, "seed": seed, "training_overrides": overrides,
                      "model_overrides": {**(model or {}), **output}}
    return jobs


def train_softmax_and_scones(task, alphas: dict, device, seed: int = 0, epochs: int | None = None,
                             progress: bool = False, training: dict | None = None,
                             model: dict | None = None) -> tuple[dict, dict]:
    """Softmax and SCONES models on ``task`` (see :func:`softmax_and_scones_jobs`). Returns
    ({name: model}, {name: training history}); models are cached by
    :func:`nbsupport.pipeline.train_model`."""
    models, histories = {}, {}
    for name, job in softmax_and_scones_jobs(alphas, seed, epochs, training, model).items():
        models[name], histories[name] = train_model(task, device=device, progress=progress, **job)
    return models, histories


def prefetch_softmax_and_scones(runs, alphas: dict, device, seed: int = 0, more_jobs=()) -> list[str]:
    """Train the uncached models of :func:`train_softmax_and_scones` for every (task, options) of
    ``runs`` (options: its keyword arguments ``epochs``, ``training``, ``model``), and the (task, job)
    pairs of ``more_jobs``, several at once on a CPU (one process per core, see
    :func:`nbsupport.pipeline.train_many_in_parallel`) for the notebook's own calls to load; nothing
    on a GPU. Returns the names trained."""
    jobs = list(more_jobs) + [(task, job) for task, options in runs
                              for job in softmax_and_scones_jobs(alphas, seed, **options).values()]
    return train_many_in_parallel(jobs, device)


def _quality(hyps: list[str], refs) -> dict:
    single = bleu_and_length(hyps, [[r[0]] for r in refs])   # the paper's setting: one reference
    multi = bleu_and_length(hyps, refs)
    return {"bleu": single["bleu"], "multi_ref_bleu": multi["bleu"], "len_ratio": multi["len_ratio"],
            "empty_rate": sum(not h.strip() for h in hyps) / len(hyps)}


def beam_sweep(model, src_vocab, tgt_vocab, sources: Sequence[str], refs, beams: Sequence[int],
               batch_size: int = 50) -> dict[int, dict]:
    """For each beam size: single-reference BLEU (first reference), multi-reference BLEU,
    length ratio (against the mean reference length), share of empty outputs, the token ids
    and strings of the 1-best."""
    out = {}
    encoded = [src_vocab.encode(s) for s in sources]
    for beam in beams:
        ids = []
        for lo in range(0, len(encoded), batch_size):
            src = pad_batch(encoded[lo:lo + batch_size]).to(next(model.parameters()).device)
            ids += [hs[0].tokens for hs in decode(model, src, "beam", beam=beam)]
        hyps = [tgt_vocab.decode(t) for t in ids]
        out[beam] = {**_quality(hyps, refs), "tokens": ids, "hyps": hyps}
    return out


def candidates(sweep: dict[int, dict], n: int) -> list[list[list[int]]]:
    """Per sentence (the first ``n``), the 1-best of every beam size of a :func:`beam_sweep`."""
    return [[by_beam["tokens"][i] for by_beam in sweep.values()] for i in range(n)]


def exact_sweep(model, src_vocab, tgt_vocab, sources: Sequence[str], refs, max_expansions: int,
                candidates: Sequence[Sequence[list[int]]] | None = None, max_len_a: float = MAX_LEN_A,
                max_len_b: int = MAX_LEN_B, batch_size: int | None = None) -> dict:
    """Exact search for every source within ``max_expansions`` model calls. ``candidates``
    (per source, token-id hypotheses: e.g. :func:`candidates` of a beam sweep over every beam
    size, greedy included as beam 1) seed it: the best-scoring one is the lower bound, so the
    result scores at least as high as every candidate even where the budget runs out (then the
    best hypothesis found so far is used, as in the paper's appendix A). Also returns the log
    score of the empty translation of the *same* sources (Fig. 6 compares the two). With
    ``batch_size``, :func:`~nbsupport.search.best_first_search` expands that many prefixes per
    model call (the same optimum and proof, far fewer calls on a CPU); ``expansions`` counts
    prefixes either way. ``proven`` says per sentence whether the result is proven optimal."""
    device = next(model.parameters()).device
    results, seconds, seeds, empties = [], [], [], []
    for i, s in enumerate(sources):
        src = torch.tensor([src_vocab.encode(s)], device=device)
        scorer = ModelScorer(model, src)
        max_len = max_lengths(src, max_len_a, max_len_b, model.config.max_len)[0]   # beam search's space
        empties.append(float(scorer([BOS])[EOS]))
        bound = None
        if candidates is not None:
            scored = [(sequence_score(scorer, toks), toks) for toks in candidates[i]]
            score, toks = max(scored, key=lambda st: st[0])
            bound = (toks, score)
        seeds.append(bound[1] if bound else None)
        t0 = time.perf_counter()
        if batch_size is None:
            res = exact_search(scorer, max_len=max_len, lower_bound=bound, max_expansions=max_expansions)
        else:
            res = best_first_search(BatchScorer(model, src), max_len=max_len, lower_bound=bound,
                                    max_expansions=max_expansions, batch_size=batch_size)
        seconds.append(time.perf_counter() - t0)
        results.append(res)
    hyps = [tgt_vocab.decode(r.tokens or []) for r in results]
    return {**_quality(hyps, refs), "proven_fraction": sum(r.proven for r in results) / len(results),
            "proven": [r.proven for r in results],
            "seconds_per_sentence": statistics.mean(seconds), "expansions": [r.expansions for r in results],
            "scores": [r.score for r in results], "seed_scores": seeds, "empty_scores": empties,
            "hyps": hyps, "tokens": [r.tokens for r in results]}


def search_errors(model, src_vocab, sources: Sequence[str], beam_tokens: Sequence[list[int]],
                  best_scores: Sequence[float], tol: float = 1e-4) -> float:
    """Share of sentences whose beam output scores below the best exact-search score (the mean of
    :func:`search_error_flags`)."""
    flags = search_error_flags(model, src_vocab, sources, beam_tokens, best_scores, tol)
    return sum(flags) / len(flags)


def search_error_flags(model, src_vocab, sources: Sequence[str], beam_tokens: Sequence[list[int]],
                       best_scores: Sequence[float], tol: float = 1e-4) -> list[bool]:
    """Per sentence, whether the beam output scores below the best exact-search score (a search
    error; :func:`search_errors` is their share). A beam output scoring above the "best" is an error
    of the caller: exact search was not seeded with it."""
    device = next(model.parameters()).device
    flags = []
    for i, (s, toks, best) in enumerate(zip(sources, beam_tokens, best_scores)):
        score = sequence_score(ModelScorer(model, torch.tensor([src_vocab.encode(s)], device=device)), toks)
        if score > best + tol:
            raise ValueError(f"sentence {i}: the beam output scores {score:.4f}, above the best score {best:.4f}; "
                             "seed exact search with every beam's output (exact_sweep(candidates=...))")
        flags.append(score < best - tol)
    return flags


def quality_stats(hyps: Sequence[str], refs) -> dict[str, np.ndarray]:
    """Per-source statistics of one hypothesis per source, for bootstrap intervals
    (:func:`resampled_quality`): BLEU statistics against all references (``multi_ref_bleu``) and
    against the first (``bleu``, the paper's single-reference setting), the hypothesis length and
    the mean reference length (13a tokens, as ``metrics.bleu_and_length``), empty (0/1)."""
    return {"multi_ref_bleu": stats.corpus_stats(hyps, refs), "bleu": stats.corpus_stats(hyps, [[r[0]] for r in refs]),
            "hyp_len": np.array([len(metric_tokens(h).split()) for h in hyps], dtype=float),
            "ref_len": np.array([sum(len(metric_tokens(r).split()) for r in rs) / len(rs) for rs in refs], dtype=float),
            "empty": np.array([not h.strip() for h in hyps], dtype=float)}


def resampled_quality(per_source: dict[str, np.ndarray], boot, subset: Sequence[int] | None = None) -> dict:
    """{metric: :class:`~nbsupport.stats.Resampled`} of :func:`quality_stats` (on the sources
    ``subset``, default all; ``boot`` resamples that many): corpus BLEU (multi- and first-reference),
    the length ratio (total hypothesis length / total mean reference length) and the share of empty
    outputs, on those sources and in every resample."""
    pick = (lambda a: a) if subset is None else (lambda a: a[list(subset)])
    d = {k: pick(v) for k, v in per_source.items()}
    if len(d["hyp_len"]) != boot.n:
        raise ValueError(f"{len(d['hyp_len'])} sources, but the resamples are of {boot.n}")
    out = {m: stats.Resampled(float(stats.bleu_of(d[m].sum(0))[0]), boot.bleu(d[m])) for m in ("multi_ref_bleu", "bleu")}
    out["len_ratio"] = stats.Resampled(float(d["hyp_len"].sum() / max(d["ref_len"].sum(), 1)),
                                       boot.mean(d["hyp_len"]) / np.maximum(boot.mean(d["ref_len"]), 1e-9))
    out["empty_rate"] = stats.Resampled(float(d["empty"].mean()), boot.mean(d["empty"]))
    return out


def sentences_per_second(model, src_vocab, sources: Sequence[str], method: str, batch_size: int,
                         repeats: int = 3, **kwargs) -> float:
    """Decoding speed (median of ``repeats`` runs) at a given batch size."""
    device = next(model.parameters()).device
    encoded = [src_vocab.encode(s) for s in sources]
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for lo in range(0, len(encoded), batch_size):
            decode(model, pad_batch(encoded[lo:lo + batch_size]).to(device), method, **kwargs)
        if device.type == "cuda":
            torch.cuda.synchronize()
        runs.append(time.perf_counter() - t0)
    return len(sources) / statistics.median(runs)
