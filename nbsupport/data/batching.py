"""Token-count batching: batches hold about the same number of (padded) tokens, not the
same number of sentences, so short sentences make big batches and long ones small."""
from __future__ import annotations

import random
from typing import Sequence

import torch


def shift_right(tgt: torch.Tensor) -> torch.Tensor:
    """Decoder inputs for targets ``tgt`` (which end with EOS): BOS followed by tgt[:-1]."""
    from .vocab import BOS
    bos = torch.full_like(tgt[:, :1], BOS)
    return torch.cat([bos, tgt[:, :-1]], dim=1)


def token_batches(src_lens: Sequence[int], tgt_lens: Sequence[int], max_tokens: int,
                  shuffle: bool = True, seed: int = 0) -> list[list[int]]:
    """Group example indices so that ``n * max(longest source, longest target) <= max_tokens``.

    Examples are sorted by length (ties broken at random when ``shuffle``) so that a batch
    wastes little padding; the order of the batches is then shuffled. An example longer than
    ``max_tokens`` on its own gets a batch of its own.
    """
    if len(src_lens) != len(tgt_lens):
        raise ValueError(f"{len(src_lens)} source lengths but {len(tgt_lens)} target lengths")
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    rng = random.Random(seed)
    order = list(range(len(src_lens)))
    if shuffle:
        rng.shuffle(order)
    order.sort(key=lambda i: (tgt_lens[i], src_lens[i]))  # stable: random among equal lengths
    batches, batch, longest = [], [], 0
    for i in order:
        size = max(src_lens[i], tgt_lens[i])
        if batch and max(longest, size) * (len(batch) + 1) > max_tokens:
            batches.append(batch)
            batch, longest = [], 0
        batch.append(i)
        longest = max(longest, size)
    if batch:
        batches.append(batch)
    if shuffle:
        rng.shuffle(batches)
    return batches


def pad_batch(seqs: Sequence[Sequence[int]], pad: int = 0) -> torch.Tensor:
    """Right-pad a list of id sequences into a (batch, longest) LongTensor."""
    longest = max((len(s) for s in seqs), default=0)
    out = torch.full((len(seqs), longest), pad, dtype=torch.long)
    for row, s in enumerate(seqs):
        out[row, :len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    return out
