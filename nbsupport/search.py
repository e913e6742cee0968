"""Exact search: the translation with the highest score among all translations of at most
``max_len`` tokens, or a proof that none beats what was found (Stahlberg & Byrne 2019, used by
Stahlberg & Kumar 2022 section 4.3). "Global best" here always means: within that length cap
(the notebooks use beam search's cap, so both search the same space).

Depth-first search over a next-token scoring function. Every token's log score is <= 0
(log-softmax or log-sigmoid), so extending a prefix can only lower its score: a branch is
pruned as soon as its prefix score cannot beat the best complete hypothesis found so far.
Children are visited best-first, so good hypotheses are found early and prune the rest;
a lower bound (a beam search result) can prune from the start. The number of expansions
(model calls) can be capped, as the paper caps explored states (appendix A); the best
hypothesis found so far is then returned with ``proven=False``.

:func:`best_first_search` finds the same optimum with the same proof, expanding the best open
prefixes a batch at a time, so that a model scores many prefixes in one call (:class:`BatchScorer`).
"""
from __future__ import annotations

import heapq
import itertools
import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from .data.vocab import BOS, EOS, PAD


@dataclass
class SearchResult:
    tokens: list[int] | None   # without BOS, ending with EOS (None if nothing beat the lower bound)
    score: float
    proven: bool               # True: no hypothesis scores higher (search completed)
    expansions: int            # calls of the scoring function


def exact_search(score_fn: Callable[[list[int]], Sequence[float]], *, bos: int = BOS, eos: int = EOS,
                 max_len: int, lower_bound: float | tuple[list[int], float] | None = None,
                 max_expansions: int | None = None) -> SearchResult:
    """Highest-scoring sequence that ends with ``eos`` within ``max_len`` tokens.

    ``score_fn(prefix)`` gets the prefix (starting with ``bos``) and returns log scores <= 0
    for every next token. ``lower_bound`` is a score, or ``(tokens, score)`` of a known
    hypothesis (e.g. from beam search): only strictly better hypotheses are searched for.
    """
    best_tokens, best = None, -math.inf
    if lower_bound is not None:
        best_tokens, best = (None, float(lower_bound)) if isinstance(lower_bound, (int, float)) else \
            (list(lower_bound[0]), float(lower_bound[1]))
    stack: list[tuple[list[int], float]] = [([bos], 0.0)]
    expansions = 0
    while stack:
        prefix, score = stack.pop()
        if score <= best:                      # the bound improved since this node was pushed
            continue
        if max_expansions is not None and expansions >= max_expansions:
            return SearchResult(best_tokens, best, False, expansions)
        scores = torch.as_tensor(score_fn(prefix), dtype=torch.float64)
        expansions += 1
        order = torch.argsort(scores, descending=True).tolist()
        children = []
        for w in order:
            child = score + float(scores[w])
            if child <= best:                  # sorted: no later child can beat the best either
                break
            if w == eos:
                best, best_tokens = child, prefix[1:] + [eos]
            elif len(prefix) < max_len:        # room left for at least EOS
                children.append((prefix + [w], child))
        stack.extend(reversed(children))       # best child on top: explored first
    return SearchResult(best_tokens, best, True, expansions)


def best_first_search(score_batch: Callable[[list[list[int]]], Sequence[Sequence[float]]], *, bos: int = BOS,
                      eos: int = EOS, max_len: int, lower_bound: float | tuple[list[int], float] | None = None,
                      max_expansions: int | None = None, batch_size: int = 64) -> SearchResult:
    """:func:`exact_search`'s optimum (same space, same bound, same ``proven`` meaning), found by
    expanding the highest-scoring open prefixes ``batch_size`` at a time: ``score_batch(prefixes)``
    returns one row of next-token log scores (<= 0) per prefix, so a model scores a whole batch in one
    call (:class:`BatchScorer`). Every prefix scoring above the optimum must be expanded by any search
    that proves it; best-first order expands few others. ``expansions`` counts prefixes scored, as
    :func:`exact_search` counts calls, and ``max_expansions`` caps them."""
    best_tokens, best = None, -math.inf
    if lower_bound is not None:
        best_tokens, best = (None, float(lower_bound)) if isinstance(lower_bound, (int, float)) else \
            (list(lower_bound[0]), float(lower_bound[1]))
    tie = itertools.count()                       # heap order among equal scores: first pushed first
    heap: list[tuple[float, int, list[int]]] = [(-0.0, next(tie), [bos])]
    expansions = 0
    while heap and -heap[0][0] > best:
        if max_expansions is not None and expansions >= max_expansions:
            return SearchResult(best_tokens, best, False, expansions)
        room = batch_size if max_expansions is None else min(batch_size, max_expansions - expansions)
        batch = []
        while heap and len(batch) < room and -heap[0][0] > best:
            neg, _, prefix = heapq.heappop(heap)
            batch.append((prefix, -neg))
        rows = torch.as_tensor(score_batch([p for p, _ in batch]), dtype=torch.float64)
        expansions += len(batch)
        totals = rows + torch.tensor([s for _, s in batch], dtype=torch.float64)[:, None]
        for (prefix, _), row in zip(batch, totals):             # complete hypotheses first: a higher bound
            if float(row[eos]) > best:
                best, best_tokens = float(row[eos]), prefix[1:] + [eos]
        for (prefix, _), row in zip(batch, totals):
            if len(prefix) >= max_len:                           # room left for at least EOS
                continue
            for w in torch.nonzero(row > best).flatten().tolist():
                if w != eos:
                    heapq.heappush(heap, (-float(row[w]), next(tie), prefix + [w]))
    return SearchResult(best_tokens, best, True, expansions)


class BatchScorer:
    """``score_batch`` for one source sentence: the model's next-token log scores after each of a
    list of prefixes (each starting with BOS), in one decoder pass over the right-padded prefixes
    (the causal mask keeps a prefix's scores independent of the padding after it)."""

    def __init__(self, model, src: torch.Tensor, z: torch.Tensor | None = None):
        self.model = model.eval()
        with torch.no_grad():
            self.memory, self.mask = model.encode(src)
        self.z, self.calls = z, 0

    @torch.no_grad()
    def __call__(self, prefixes: list[list[int]]) -> torch.Tensor:
        self.calls += 1
        n, longest = len(prefixes), max(len(p) for p in prefixes)
        inp = torch.full((n, longest), PAD, dtype=torch.long)
        for i, p in enumerate(prefixes):
            inp[i, :len(p)] = torch.tensor(p)
        inp = inp.to(self.memory.device)
        z = None if self.z is None else self.z.expand(n, *self.z.shape[1:])
        logits = self.model.decode(inp, self.memory.expand(n, -1, -1), self.mask.expand(n, -1, -1, -1), z)
        last = logits[torch.arange(n, device=inp.device), torch.tensor([len(p) - 1 for p in prefixes], device=inp.device)]
        return self.model.log_scores(last).cpu()


class ModelScorer:
    """``score_fn`` for one source sentence: the model's log scores of the next token, reusing
    the key/value cache of the prefix's parent (kept in a bounded LRU; a miss recomputes)."""

    def __init__(self, model, src: torch.Tensor, z: torch.Tensor | None = None, cache_size: int = 512):
        self.model = model.eval()
        with torch.no_grad():
            self.memory, self.mask = model.encode(src)
        self.z, self.cache_size = z, cache_size
        self.caches: OrderedDict[tuple, list[dict]] = OrderedDict()
        self.calls = 0

    @torch.no_grad()
    def __call__(self, prefix: list[int]) -> torch.Tensor:
        self.calls += 1
        key = tuple(prefix)
        parent = self.caches.get(key[:-1])
        if parent is not None:
            cache = [dict(layer) for layer in parent]   # siblings share the parent's tensors
            inp = torch.tensor([prefix[-1:]], device=self.memory.device)
            logits = self.model.decode(inp, self.memory, self.mask, self.z, cache, start=len(prefix) - 1)
        else:
            cache = self.model.new_cache()
            inp = torch.tensor([prefix], device=self.memory.device)
            logits = self.model.decode(inp, self.memory, self.mask, self.z, cache)
        self.caches[key] = cache
        if len(self.caches) > self.cache_size:
            self.caches.popitem(last=False)
        return self.model.log_scores(logits[0, -1]).cpu()


@torch.no_grad()
def empty_scores(model, src: torch.Tensor, z: torch.Tensor | None = None) -> torch.Tensor:
    """Log score of the empty translation (EOS first) for every source of a batch."""
    model.eval()
    memory, mask = model.encode(src)
    bos = torch.full((src.shape[0], 1), BOS, dtype=torch.long, device=src.device)
    return model.log_scores(model.decode(bos, memory, mask, z)[:, 0])[:, EOS]


def sequence_score(score_fn: Callable[[list[int]], Sequence[float]], tokens: list[int], bos: int = BOS) -> float:
    """Sum of the log scores of ``tokens`` (ending with EOS) under ``score_fn``."""
    prefix, total = [bos], 0.0
    for t in tokens:
        total += float(score_fn(prefix)[t])
        prefix.append(t)
    return total
