"""Measurements of the beam search curse (Stahlberg & Kumar 2022 section 4.3-4.4):
quality, length and empty outputs against beam size; exact search within a budget; the
log score of the empty translation; search errors; decoding speed."""
from __future__ import annotations

import statistics
import time
from typing import Sequence

import torch

from .data.batching import pad_batch
from .decode import MAX_LEN_A, MAX_LEN_B, generate, max_lengths
from .metrics import bleu_and_length
from .search import ModelScorer, empty_scores, exact_search, sequence_score


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
            ids += [h[0] for h in generate(model, src, "beam", n=1, beam=beam)]
        hyps = [tgt_vocab.decode(t) for t in ids]
        out[beam] = {**_quality(hyps, refs), "tokens": ids, "hyps": hyps}
    return out


def exact_sweep(model, src_vocab, tgt_vocab, sources: Sequence[str], refs, max_expansions: int,
                lower_bounds: Sequence[list[int]] | None = None, max_len_a: float = MAX_LEN_A,
                max_len_b: int = MAX_LEN_B) -> dict:
    """Exact search for every source within ``max_expansions`` model calls, seeded with a
    lower bound (token ids, e.g. beam search's output) when given; where the budget runs out
    the best hypothesis found so far is used, as in the paper's appendix A."""
    device = next(model.parameters()).device
    results, seconds = [], []
    for i, s in enumerate(sources):
        src = torch.tensor([src_vocab.encode(s)], device=device)
        scorer = ModelScorer(model, src)
        max_len = max_lengths(src, max_len_a, max_len_b, model.config.max_len)[0]   # beam search's space
        bound = None
        if lower_bounds is not None:
            toks = lower_bounds[i]
            bound = (toks, sequence_score(scorer, toks))
        t0 = time.perf_counter()
        res = exact_search(scorer, max_len=max_len, lower_bound=bound,
                           max_expansions=max_expansions)
        seconds.append(time.perf_counter() - t0)
        results.append(res)
    hyps = [tgt_vocab.decode(r.tokens or []) for r in results]
    return {**_quality(hyps, refs), "proven_fraction": sum(r.proven for r in results) / len(results),
            "seconds_per_sentence": statistics.mean(seconds), "expansions": [r.expansions for r in results],
            "scores": [r.score for r in results], "hyps": hyps, "tokens": [r.tokens for r in results]}


def empty_logprobs(model, src_vocab, sources: Sequence[str]) -> list[float]:
    device = next(model.parameters()).device
    src = pad_batch([src_vocab.encode(s) for s in sources]).to(device)
    return empty_scores(model, src).tolist()


def search_errors(model, src_vocab, sources: Sequence[str], beam_tokens: Sequence[list[int]],
                  best_scores: Sequence[float], tol: float = 1e-4) -> float:
    """Share of sentences whose beam output scores below the best exact-search score."""
    device = next(model.parameters()).device
    errors = 0
    for s, toks, best in zip(sources, beam_tokens, best_scores):
        scorer = ModelScorer(model, torch.tensor([src_vocab.encode(s)], device=device))
        errors += sequence_score(scorer, toks) < best - tol
    return errors / len(sources)


def sentences_per_second(model, src_vocab, sources: Sequence[str], method: str, batch_size: int,
                         repeats: int = 3, **kwargs) -> float:
    """Decoding speed (median of ``repeats`` runs) at a given batch size."""
    device = next(model.parameters()).device
    encoded = [src_vocab.encode(s) for s in sources]
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for lo in range(0, len(encoded), batch_size):
            generate(model, pad_batch(encoded[lo:lo + batch_size]).to(device), method, **kwargs)
        if device.type == "cuda":
            torch.cuda.synchronize()
        runs.append(time.perf_counter() - t0)
    return len(sources) / statistics.median(runs)
