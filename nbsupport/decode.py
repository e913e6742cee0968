"""Decoding a model: :func:`decode`, the one entry point (a model, its sources, a method: every
source's hypotheses), and :func:`token_scores` (teacher forcing: what a model thinks of given
hypotheses, token by token). The searches and the loop they share are in
:mod:`nbsupport.strategies` (their names are here too, as ``nbs.decode.Beam`` and so on); the
methods by name in :data:`nbsupport.registry.METHODS`; strings in :mod:`nbsupport.translation`.
"""
from __future__ import annotations

import numbers
from typing import Sequence

import torch

from .data.vocab import PAD
from .registry import search_for
from .strategies import (MAX_LEN_A, MAX_LEN_B, Beam, Candidates, DiverseBeam, Greedy, Hypothesis,  # noqa: F401
                         LatentGreedy, PriorSample, Sampling, Search, StackedStepper, TableStepper, beam_search,
                         check_int, check_real, generate, greedy_or_sample, max_lengths, nucleus, select,
                         token_ids, top_k_filter)


# --------------------------------------------------------------------------- the entry point
def as_latent(z, batch: int, device) -> torch.Tensor | None:
    """``z`` as a tensor on ``device``: None stays None; an int is the same latent value for
    every one of the ``batch`` sentences."""
    if z is None:
        return None
    if isinstance(z, bool) or not isinstance(z, (numbers.Integral, torch.Tensor)):
        raise TypeError(f"z must be None, an int (the same latent for every sentence) or a tensor "
                        f"with one entry per sentence, got {type(z).__name__}")
    if isinstance(z, numbers.Integral):
        return torch.full((batch,), int(z), dtype=torch.long, device=device)
    return z.to(device)


@torch.no_grad()
def decode(model, src, method: Search | str = "greedy", n: int = 1, *, z: torch.Tensor | int | None = None,
           max_len_a: float = MAX_LEN_A, max_len_b: int = MAX_LEN_B, use_cache: bool = True, seed: int = 0,
           generator: torch.Generator | None = None, **options) -> list[list[Hypothesis]]:
    """The hypotheses of every source (a list over sources of :class:`Hypothesis` lists: tokens,
    sentence score, per-token scores).

    ``method``: a search object, or the name of a method of :data:`nbsupport.registry.METHODS`
    ("greedy", "beam", "sampling", "topk", "nucleus", "diverse_beam", "latent_greedy", "hard_moe",
    "vnmt", ...) with ``n`` hypotheses per source and ``options`` (``beam``, ``temperature``,
    ``top_k``, ``top_p``, ``groups``, ``diversity``, ``length_norm``) over its defaults.
    ``z``: the latent value of each source (a tensor of B indices, or B x K probabilities for
    target conditioning), or an int for the same value for every source. Outputs are at most
    ``max_len_a`` x source length + ``max_len_b`` tokens (and the model's ``max_len``).
    Sampling draws from ``generator`` when given (it advances, so successive calls continue
    its stream), else from a new generator seeded with ``seed``. Bad arguments raise a
    ValueError naming the valid range."""
    if isinstance(method, str):
        search = search_for(method, model, n, **options)
    elif options or n != 1:
        raise TypeError("pass n and options with a method's name; a search object carries its own settings")
    else:
        search = method
    check_int("max_len_b", max_len_b, 1)
    check_real("max_len_a", max_len_a, 0, "a finite number >= 0")
    check_int("seed", seed, 0)
    if isinstance(search, LatentGreedy):
        search = search.for_model(model)
    model.eval()
    first = src if torch.is_tensor(src) else src[0]      # a multi-source model takes a tuple of sources
    z = as_latent(z, first.shape[0], first.device)
    limits = max_lengths(first, max_len_a, max_len_b, model.config.max_len)
    generator = generator if generator is not None else torch.Generator().manual_seed(seed)
    stepper = search.stepper(model, src, z, use_cache, generator)
    return generate(stepper, search, first.shape[0], limits, generator)


@torch.no_grad()
def token_scores(model, src, hyps: Sequence[Sequence[int]], z: torch.Tensor | int | None = None) -> list[list[float]]:
    """The log score of every token of ``hyps[i]`` (token ids, as :func:`token_ids` gives them)
    given source row i and the tokens before it: teacher forcing (``model.score_tokens``: one
    pass for a Transformer, the stepper position by position for any other family; ``z``: the
    latent value, as in :func:`decode`). Their sum is the hypothesis' score; per token, they
    show *where* a model (or a latent value) prefers it."""
    model.eval()
    first = src if torch.is_tensor(src) else src[0]
    if len(hyps) != first.shape[0]:
        raise ValueError(f"one hypothesis per source row: {first.shape[0]} rows, {len(hyps)} hypotheses")
    if any(len(h) == 0 for h in hyps):
        raise ValueError("a hypothesis is empty: it has no tokens to score (an EOS at least)")
    steps = max(map(len, hyps))
    tokens = torch.tensor([list(h) + [PAD] * (steps - len(h)) for h in hyps], device=first.device)
    table = model.score_tokens(src, tokens, as_latent(z, first.shape[0], first.device)).cpu().tolist()
    return [row[:len(h)] for row, h in zip(table, hyps)]
