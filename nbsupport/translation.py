"""Strings in, strings out: :func:`translate` encodes sentences with a vocabulary, decodes them
with :func:`nbsupport.decode.decode` a batch at a time, and writes the hypotheses back as text.
A word the vocabulary does not know is an error naming it, unless asked to read it as <unk>."""
from __future__ import annotations

from typing import Sequence

import torch

from .data.batching import pad_batch
from .decode import check_int, decode, token_ids

UNKNOWN = ("error", "unk")   # what translate does with a word the vocabulary does not know


def check_sentences(sentences: Sequence[str]) -> list[str]:
    """``sentences`` as a list, or a TypeError/ValueError naming the first bad one (a bare
    string, a non-string, an empty or whitespace-only sentence)."""
    if isinstance(sentences, str):
        raise TypeError("sentences must be a list of strings, got a bare string; wrap it in a list: [sentence]")
    sentences = list(sentences)
    for i, s in enumerate(sentences):
        if not isinstance(s, str):
            raise TypeError(f"source sentence {i} must be a string, got {type(s).__name__}")
        if not s.strip():
            raise ValueError(f"source sentence {i} is empty: nothing to translate")
    return sentences


def check_known_words(sentences: Sequence[str], vocab, unknown: str = "error") -> None:
    """A ValueError naming the first sentence's unknown words, when ``unknown`` is "error"."""
    if unknown not in UNKNOWN:
        raise ValueError(f"unknown={unknown!r}; valid: 'error' (name unknown words) or 'unk' (translate them as <unk>)")
    if unknown == "unk":
        return
    for i, sentence in enumerate(sentences):
        words = vocab.unknown_words(sentence)
        if words:
            raise ValueError(f"source sentence {i} has words the source vocabulary ({len(vocab)} entries) does not "
                             f"know: {', '.join(map(repr, words))}; pass unknown='unk' to translate them as <unk>")


def translate(model, src_vocab, tgt_vocab, sentences: Sequence[str], method="greedy", n: int = 1, *,
              batch_size: int = 64, device=None, z: torch.Tensor | int | None = None, seed: int = 0,
              unknown: str = "error", **options) -> list[list[str]]:
    """``n`` hypotheses (strings) for every sentence by ``method`` (a name of
    :data:`nbsupport.registry.METHODS` or a search object; ``options`` as :func:`~nbsupport.decode.decode`
    takes them), decoded ``batch_size`` sentences at a time on the model's device.

    ``sentences`` is a list of strings; a bare string is rejected (wrap it: ``[sentence]``).
    A word the source vocabulary does not know is an error naming it, unless ``unknown="unk"``
    (translate it as <unk>, as evaluation on a test set does). ``z`` is an int (the same latent
    for every sentence) or one entry per sentence, cut per batch. Sampling uses one generator
    seeded once with ``seed`` whose stream runs on across the batches: the whole call is
    reproducible, and no two sentences share random draws."""
    sentences = check_sentences(sentences)
    check_int("batch_size", batch_size, 1)
    check_int("seed", seed, 0)
    if getattr(model.config, "n_sources", 1) > 1:
        raise ValueError("translate reads one source language; a two-source model translates with "
                         "nbs.multisource.translate (one vocabulary per source)")
    if isinstance(z, torch.Tensor) and (z.dim() == 0 or z.shape[0] != len(sentences)):
        raise ValueError(f"z must have one entry per sentence ({len(sentences)}), got shape {tuple(z.shape)}; "
                         "pass an int for the same latent for every sentence")
    check_known_words(sentences, src_vocab, unknown)
    device = device or next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    out: list[list[str]] = []
    for lo in range(0, len(sentences), batch_size):
        src = pad_batch([src_vocab.encode(s) for s in sentences[lo:lo + batch_size]]).to(device)
        batch_z = z[lo:lo + len(src)] if isinstance(z, torch.Tensor) else z
        hyps = decode(model, src, method, n, z=batch_z, seed=seed, generator=generator, **options)
        out.extend([[tgt_vocab.decode(h) for h in hs] for hs in token_ids(hyps)])
    return out
