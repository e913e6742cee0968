"""Parallel data as token ids, and its token-count batches (what the training loop consumes)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..models.protocol import Batch
from .batching import pad_batch, shift_right, token_batches


@dataclass
class Encoded:
    """Token ids of parallel data: ``src[i]`` and ``tgt[i]`` (targets end with EOS), and
    optionally each pair's latent label (the toy style), used only for analysis. For a
    multi-source model ``src[i]`` is a tuple (one id list per source language) and batches
    carry a tuple of source tensors."""
    src: list
    tgt: list[list[int]]
    labels: list[int] | None = None

    @classmethod
    def from_pairs(cls, pairs: Sequence[tuple[str, str]], src_vocab, tgt_vocab, labels=None) -> "Encoded":
        return cls([src_vocab.encode(s) for s, _ in pairs], [tgt_vocab.encode(t) for _, t in pairs],
                   None if labels is None else list(labels))

    @classmethod
    def from_split(cls, split, src_vocab, tgt_vocab, lang: str | None = None) -> "Encoded":
        """Every (source, reference) pair of a corpus split, with the references' labels."""
        labels = [l for ls in split.labels for l in ls]
        return cls.from_pairs(split.pairs(lang), src_vocab, tgt_vocab,
                              labels if all(isinstance(l, int) for l in labels) else None)

    @classmethod
    def multi_source(cls, split, langs: Sequence[str], src_vocabs, tgt_vocab) -> "Encoded":
        """Every (sources, reference) example of a split, ``src[i]`` one id list per language."""
        srcs = [[v.encode(s) for s in split.sources[lang]] for lang, v in zip(langs, src_vocabs)]
        src, tgt = [], []
        for i, refs in enumerate(split.refs):
            for r in refs:
                src.append(tuple(s[i] for s in srcs))
                tgt.append(tgt_vocab.encode(r))
        return cls(src, tgt)

    def __len__(self) -> int:
        return len(self.src)

    def index_batches(self, max_tokens: int, shuffle: bool = False, seed: int = 0) -> list[list[int]]:
        """The example indices of each token-count batch (a multi-source example counts its
        longest source)."""
        multi = bool(self.src) and isinstance(self.src[0], tuple)
        src_lens = [max(map(len, s)) if multi else len(s) for s in self.src]
        return token_batches(src_lens, [len(t) for t in self.tgt], max_tokens, shuffle=shuffle, seed=seed)

    def batches(self, max_tokens: int, shuffle: bool, seed: int, device):
        """Yield :class:`~nbsupport.models.protocol.Batch` es (src, tgt_in, tgt_out, idx) of
        token-count batches."""
        multi = bool(self.src) and isinstance(self.src[0], tuple)
        for idx in self.index_batches(max_tokens, shuffle, seed):
            if multi:
                src = tuple(pad_batch([self.src[i][j] for i in idx]).to(device) for j in range(len(self.src[0])))
            else:
                src = pad_batch([self.src[i] for i in idx]).to(device)
            tgt = pad_batch([self.tgt[i] for i in idx]).to(device)
            yield Batch(src, shift_right(tgt), tgt, idx)
