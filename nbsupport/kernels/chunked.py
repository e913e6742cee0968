"""Output projection and loss, chunk by chunk: the (tokens x vocabulary) logits never exist
all at once. Each chunk's logits are computed, turned into its loss and its gradient with
respect to the hidden states and the output weights, and freed; backward only rescales
the stored gradients. Works for softmax cross-entropy (with label smoothing) and SCONES.
"""
from __future__ import annotations

import torch

from .scones_fused import _rows_loss_and_grad

LOSSES = ("softmax", "scones")


def _softmax_rows(f: torch.Tensor, gold: torch.Tensor, lam: float):
    """Cross-entropy with label smoothing lam and its gradient, for rows of logits (R, V)."""
    logp = torch.log_softmax(f, dim=-1)
    v = f.shape[-1]
    loss = -(1 - lam) * logp.gather(1, gold[:, None]).squeeze(1) - lam / v * logp.sum(-1)
    grad = logp.exp()
    grad -= lam / v
    grad.scatter_add_(1, gold[:, None], torch.full_like(gold[:, None], -(1 - lam), dtype=grad.dtype))
    return loss, grad


class _ChunkedLinearLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, targets, pad_id, loss_kind, alpha, lam, chunk_rows):
        keep = targets != pad_id
        gold = targets.clamp(min=0)
        grad_h = torch.zeros_like(hidden, dtype=torch.float32)
        grad_w = torch.zeros_like(weight, dtype=torch.float32)
        total = hidden.new_zeros((), dtype=torch.float32)
        w = weight.float()
        for lo in range(0, hidden.shape[0], chunk_rows):
            h = hidden[lo:lo + chunk_rows].float()
            f = h @ w.t()
            if loss_kind == "softmax":
                loss, grad = _softmax_rows(f, gold[lo:lo + chunk_rows], lam)
            else:
                loss, grad = _rows_loss_and_grad(f, gold[lo:lo + chunk_rows], alpha, lam)
            k = keep[lo:lo + chunk_rows].to(grad.dtype)
            grad *= k[:, None]
            total += (loss * k).sum()
            grad_h[lo:lo + chunk_rows] = grad @ w
            grad_w += grad.t() @ h
        ctx.save_for_backward(grad_h.to(hidden.dtype), grad_w.to(weight.dtype))
        return total

    @staticmethod
    def backward(ctx, grad_out):
        grad_h, grad_w = ctx.saved_tensors
        return grad_h * grad_out, grad_w * grad_out, None, None, None, None, None, None


def chunked_linear_loss(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, *, pad_id: int,
                        loss: str = "softmax", alpha: float = 1.0, label_smoothing: float = 0.0,
                        reduction: str = "mean", chunk_rows: int = 1024) -> torch.Tensor:
    """Loss of ``hidden @ weight.T`` against ``targets`` without materialising all logits.

    ``hidden`` (..., d), ``weight`` (V, d), ``targets`` (...). ``reduction`` "mean" (over
    non-pad tokens) or "sum"."""
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; valid: {', '.join(LOSSES)}")
    if reduction not in ("mean", "sum"):
        raise ValueError(f"unknown reduction {reduction!r}; valid: mean, sum")
    h = hidden.reshape(-1, hidden.shape[-1])
    t = targets.reshape(-1)
    total = _ChunkedLinearLoss.apply(h, weight, t, pad_id, loss, alpha, label_smoothing, chunk_rows)
    return total / (t != pad_id).sum().clamp(min=1) if reduction == "mean" else total
