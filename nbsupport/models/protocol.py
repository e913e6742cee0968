"""The one protocol every model family speaks (fairseq's split of model, criterion and
generator, in one small class): what the training loop, the validation loss, the decoders
and the model cache ask of a model. No part of ``train.py`` or ``decode.py`` knows a family
by name; a new family implements this class in its own module and adds one line to
:mod:`nbsupport.registry`.

====================================  ==================================================
``Family.build(config, options)``     a new model from its configuration (a class method)
``Family.cache_key(options)``         what ``options`` adds to the model cache's key
``training_loss(batch, progress,      the loss of one training step (per target token) and
cfg)``                                the latent value chosen per sentence (B,), or soft EM's
                                      responsibilities (B, K), or None
``before_epoch(data, cfg, device)``   work once per epoch (the offline E-step of a mixture)
``validation_nll(batch, cfg)``        per-sentence -log p(y | x), or its bound, (B,)
``stepper(src, z, use_cache)``        a :class:`Stepper`, the decoders' stepping interface
``latent_stepper(src, use_cache)``    a stepper with one row per (source, latent value)
``score_tokens(src, tokens, z)``      per-token log scores of given targets (teacher forcing)
``cost()``                            what one step costs, for the smoke run's projection
====================================  ==================================================

``training_loss`` and ``validation_nll`` get a :class:`Batch`; ``stepper``, ``latent_stepper`` and
``score_tokens`` a source tensor (a tuple of tensors for a multi-source model); all return
tensors on the model's device. Besides these methods the loop and the decoders read three
attributes: ``model.family`` (its registry name), ``model.config.n_latent`` (K, or 1 for no
latent variable) and ``model.config.max_len`` (the longest sentence, for the decoders' cap).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol

import torch
import torch.nn as nn


def check_dropout(value) -> None:
    """A ValueError naming the valid range unless ``value`` is a dropout probability in [0, 1)
    (1 would drop every unit)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"dropout must be a probability in [0, 1) (0: no dropout), got {value!r}")


def check_positive(**sizes) -> None:
    """A ValueError naming the first of ``sizes`` that is not a positive integer."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


class Batch(NamedTuple):
    """A training or validation batch: padded sources (a tensor, or a tuple of tensors for a
    multi-source model), decoder inputs (BOS + target[:-1]), targets (ending with EOS), and
    the examples' indices in their data set (for offline responsibilities)."""
    src: torch.Tensor | tuple
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    idx: list


class Stepper(Protocol):
    """What every decoder of :mod:`nbsupport.decode` asks of ``model.stepper(src, z)``: the scores
    of the next token for N rows of prefixes. A row starts as one source sentence; the decoders
    change the rows only through ``expand`` and ``reorder``, both *in place* (they return None and
    the decoders never use a return value), so a stepper may keep any per-row state: a key/value
    cache, a recurrent state, the latent value of each row."""

    device: torch.device

    def __call__(self, prefix: torch.Tensor) -> torch.Tensor:
        """(N, t) token prefixes, BOS first, one per current row -> (N, V) log scores of the next token."""

    def expand(self, n: int) -> None:
        """Repeat every row n times, in place: row i becomes rows i*n .. i*n+n-1 (called once, first)."""

    def reorder(self, index: torch.Tensor) -> None:
        """Keep rows ``index`` (N indices into the current rows, repeats allowed), in place: the new
        row r continues the old row index[r] (beam search re-ranks its hypotheses)."""


@dataclass(frozen=True)
class Cost:
    """One model's compute per token, for :mod:`nbsupport.harness.smoke`'s GPU-time projection:
    ``core`` is the network whose matrices a token passes through once (a mixture: one
    expert); a training step runs it forward and backward over the targets
    ``train_target_passes`` times plus ``extra_target_forwards`` gradient-free forwards (an
    E-step); validation runs it ``valid_target_passes`` times per target token."""
    core: nn.Module
    train_target_passes: int = 1
    extra_target_forwards: int = 0
    valid_target_passes: int = 1


class Family:
    """Mixin of every model family (see the module's table). Subclasses set ``family`` (the
    registry's name) and implement ``training_loss``, ``validation_nll`` and ``stepper``; the
    rest has defaults."""

    family: str = ""

    @classmethod
    def build(cls, config, options=None):
        """The model of ``config`` (and the family's ``options``, when it has them: the registry
        passes them only to the family their type selects)."""
        return cls(config) if options is None else cls(config, options)

    @staticmethod
    def cache_key(options) -> dict:
        return {}

    def before_epoch(self, data, cfg, device) -> None:
        pass

    def training_loss(self, batch: Batch, progress: float, cfg):
        raise NotImplementedError

    def validation_nll(self, batch: Batch, cfg) -> torch.Tensor:
        raise NotImplementedError

    def stepper(self, src, z=None, use_cache: bool = True):
        raise NotImplementedError

    #: the family's own way to get its hypotheses: a method of :data:`nbsupport.registry.METHODS`
    default_method: str = "beam"
    #: whether its K latent values are categories (False: a continuous latent of K dimensions)
    discrete_latent: bool = True

    def latent_stepper(self, src, use_cache: bool = True):
        """A stepper with one row per (source, latent value): row b * K + z decodes source b under
        latent value z (what :class:`nbsupport.decode.LatentGreedy` decodes)."""
        k = self.config.n_latent
        zs = torch.arange(k, device=src.device).repeat(src.shape[0])
        return self.stepper(src.repeat_interleave(k, 0), zs, use_cache)

    @torch.no_grad()
    def score_tokens(self, src, tokens: torch.Tensor, z=None) -> torch.Tensor:
        """(B, T) log scores of ``tokens`` (B, T; padded after EOS) given the source and the tokens
        before each: by default through the stepper, one position at a time (a family with a
        parallel decoder overrides it with one pass)."""
        from ..data.vocab import BOS
        stepper = self.stepper(src, z)
        prefix = torch.full((tokens.shape[0], 1), BOS, dtype=torch.long, device=tokens.device)
        scores = []
        for t in range(tokens.shape[1]):
            scores.append(stepper(prefix).gather(1, tokens[:, t:t + 1]).squeeze(1))
            prefix = torch.cat([prefix, tokens[:, t:t + 1]], dim=1)
        return torch.stack(scores, dim=1)

    def cost(self) -> Cost:
        return Cost(self)
