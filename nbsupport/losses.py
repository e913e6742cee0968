"""Training losses: softmax cross-entropy and SCONES (Stahlberg & Kumar 2022).

SCONES replaces the softmax by one sigmoid per vocabulary entry: sigma(f_w) is the
probability that the prefix extended by w is still a prefix of *a* valid translation
(eqs. 2-4). Trained on single references with (eqs. 5-8, label smoothing eqs. 11-12):

    L+ = -(1 - lam) log sigma(f_y) - lam log(1 - sigma(f_y))                (gold token y)
    L- = -sum_{w != y} [(1 - lam) log(1 - sigma(f_w)) + lam log sigma(f_w)]  (every other token)
    L  = L+ + alpha * L-

Numerically stable through log sigma(f) = -softplus(-f) and log(1 - sigma(f)) = -softplus(f):
no log(1 - sigmoid) is ever formed (the paper's JAX code clips 1 - sigma at e^-30 instead).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .data.vocab import PAD

REDUCTIONS = ("mean", "sum", "none")


def _reduce(per_token: torch.Tensor, mask: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction not in REDUCTIONS:
        raise ValueError(f"unknown reduction {reduction!r}; valid: {', '.join(REDUCTIONS)}")
    per_token = per_token * mask
    if reduction == "none":
        return per_token
    total = per_token.sum()
    return total / mask.sum().clamp(min=1) if reduction == "mean" else total


def scones_loss(logits: torch.Tensor, targets: torch.Tensor, *, pad_id: int, alpha: float = 1.0,
                label_smoothing: float = 0.0, reduction: str = "mean") -> torch.Tensor:
    """SCONES loss. ``logits`` (..., V), ``targets`` (...) token ids; positions where
    ``targets == pad_id`` contribute 0. ``reduction="none"`` returns the per-token loss with
    the shape of ``targets``; ``"mean"`` averages over non-pad tokens (as the paper's code)."""
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"logits {tuple(logits.shape)} do not match targets {tuple(targets.shape)}")
    if alpha < 0 or not 0 <= label_smoothing <= 1:
        raise ValueError(f"need alpha >= 0 and 0 <= label_smoothing <= 1, got {alpha}, {label_smoothing}")
    f = logits.to(torch.promote_types(logits.dtype, torch.float32))   # bf16/fp16 -> fp32, fp64 kept
    lam = label_smoothing
    neg_true = F.softplus(-f)    # -log sigma(f)
    neg_false = F.softplus(f)    # -log (1 - sigma(f))
    gold = targets.clamp(min=0).unsqueeze(-1)
    # every token as a negative, then the gold token's negative term swapped for its positive one
    negative_all = ((1 - lam) * neg_false + lam * neg_true).sum(-1)
    negative_gold = ((1 - lam) * neg_false + lam * neg_true).gather(-1, gold).squeeze(-1)
    positive = ((1 - lam) * neg_true + lam * neg_false).gather(-1, gold).squeeze(-1)
    per_token = positive + alpha * (negative_all - negative_gold)
    return _reduce(per_token, (targets != pad_id).to(per_token.dtype), reduction)


def cross_entropy_loss(logits: torch.Tensor, targets: torch.Tensor, *, pad_id: int,
                       label_smoothing: float = 0.0, reduction: str = "mean") -> torch.Tensor:
    """Softmax cross-entropy with the same interface as :func:`scones_loss`. The logits are
    flattened to (tokens, V), never transposed to (B, V, T): on a GPU the (B, V, T) layout runs
    a "spatial" softmax kernel that was ~30% of a Bible training step on an H100."""
    flat = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.clamp(min=0).reshape(-1),
                           reduction="none", label_smoothing=label_smoothing)
    per_token = flat.view(targets.shape)
    return _reduce(per_token, (targets != pad_id).to(per_token.dtype), reduction)


def model_objective(model, logits, tgt_out, label_smoothing: float = 0.0, alpha: float = 1.0,
                    reduction: str = "mean") -> torch.Tensor:
    """A Transformer's training loss: cross-entropy for softmax models, SCONES for SCONES models."""
    if model.config.output == "scones":
        return scones_loss(logits, tgt_out, pad_id=PAD, alpha=alpha, label_smoothing=label_smoothing,
                           reduction=reduction)
    return cross_entropy_loss(logits, tgt_out, pad_id=PAD, label_smoothing=label_smoothing, reduction=reduction)


def token_loss(model, src, tgt_in, tgt_out, z, cfg) -> torch.Tensor:
    """Mean token loss of a Transformer's train-mode forward (``cfg``: the TrainConfig; with
    ``chunked_loss`` the output projection and the loss run chunk by chunk)."""
    c = model.config
    if c.chunked_loss:
        from .kernels import chunked_linear_loss   # imported lazily: an optional fast path
        model.check_latent(z, src.shape[0])
        memory, mask = model.encode(src)
        hidden = model.decode_hidden(tgt_in, memory, mask, z)
        return chunked_linear_loss(hidden, model.output_weight, tgt_out, pad_id=PAD, loss=model.config.output,
                                   alpha=c.scones_alpha, label_smoothing=cfg.label_smoothing)
    return model_objective(model, model(src, tgt_in, z), tgt_out, cfg.label_smoothing, c.scones_alpha)
