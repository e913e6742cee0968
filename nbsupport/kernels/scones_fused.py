"""Fused SCONES loss: the loss and its gradient with respect to the logits in one pass.

For logits f of one target position with gold token y (Stahlberg & Kumar eqs. 6-8, 11-12):

    loss = (1-lam) softplus(-f_y) + lam softplus(f_y)
           + alpha * sum_{w != y} [(1-lam) softplus(f_w) + lam softplus(-f_w)]
    d loss / d f_y = sigma(f_y) - (1 - lam)
    d loss / d f_w = alpha * (sigma(f_w) - lam)        (w != y)

The plain torch composition (:func:`nbsupport.losses.scones_loss`) keeps several
tokens x vocabulary intermediates alive for autograd; the fused version keeps only the
gradient it computed in the forward pass. On CUDA with Triton installed a Triton kernel
does the pass (one program per row, the vocabulary in blocks); elsewhere a torch fallback
processes rows in chunks. Both agree with ``scones_loss`` (fp32, 1e-5).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

try:  # optional: the `kernels` extra
    import triton
    import triton.language as tl
    HAVE_TRITON = True
except ImportError:  # pragma: no cover - depends on the environment
    HAVE_TRITON = False


def _rows_loss_and_grad(f: torch.Tensor, gold: torch.Tensor, alpha: float, lam: float):
    """Torch reference of one chunk: f (R, V) float32, gold (R,) -> loss (R,), grad (R, V)."""
    sig = torch.sigmoid(f)
    neg = (1 - lam) * F.softplus(f) + lam * F.softplus(-f)          # every token as a negative
    f_gold = f.gather(1, gold[:, None]).squeeze(1)
    pos = (1 - lam) * F.softplus(-f_gold) + lam * F.softplus(f_gold)
    loss = pos + alpha * (neg.sum(1) - neg.gather(1, gold[:, None]).squeeze(1))
    grad = alpha * (sig - lam)
    grad.scatter_(1, gold[:, None], (sig.gather(1, gold[:, None]) - (1 - lam)))
    return loss, grad


if HAVE_TRITON:
    @triton.jit
    def _scones_fwd_bwd_kernel(f_ptr, gold_ptr, loss_ptr, grad_ptr, n_vocab, stride_f, stride_g,
                               alpha, lam, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        gold = tl.load(gold_ptr + row)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, n_vocab, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            valid = cols < n_vocab
            f = tl.load(f_ptr + row * stride_f + cols, mask=valid, other=0.0).to(tl.float32)
            # stable softplus(x) = max(x, 0) + log(1 + exp(-|x|))
            sp_pos = tl.maximum(f, 0.0) + tl.log(1.0 + tl.exp(-tl.abs(f)))     # softplus(f)
            sp_neg = sp_pos - f                                                 # softplus(-f)
            sig = 1.0 / (1.0 + tl.exp(-f))
            is_gold = cols == gold
            term = tl.where(is_gold, (1.0 - lam) * sp_neg + lam * sp_pos,
                            alpha * ((1.0 - lam) * sp_pos + lam * sp_neg))
            grad = tl.where(is_gold, sig - (1.0 - lam), alpha * (sig - lam))
            acc += tl.where(valid, term, 0.0)
            tl.store(grad_ptr + row * stride_g + cols, grad, mask=valid)
        tl.store(loss_ptr + row, tl.sum(acc, axis=0))

    def _triton_loss_and_grad(f: torch.Tensor, gold: torch.Tensor, alpha: float, lam: float):
        rows, n_vocab = f.shape
        loss = torch.empty(rows, device=f.device, dtype=torch.float32)
        grad = torch.empty((rows, n_vocab), device=f.device, dtype=torch.float32)
        block = min(4096, triton.next_power_of_2(n_vocab))
        _scones_fwd_bwd_kernel[(rows,)](f, gold, loss, grad, n_vocab, f.stride(0), grad.stride(0),
                                        float(alpha), float(lam), BLOCK=block)
        return loss, grad


def use_triton(x: torch.Tensor) -> bool:
    """The Triton kernel runs on CUDA tensors (or anywhere under TRITON_INTERPRET=1)."""
    import os
    return HAVE_TRITON and (x.is_cuda or os.environ.get("TRITON_INTERPRET") == "1")


class _FusedScones(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, targets, pad_id, alpha, lam, backend, chunk_rows):
        shape = targets.shape
        f = logits.reshape(-1, logits.shape[-1])
        gold = targets.reshape(-1).clamp(min=0)
        keep = (targets.reshape(-1) != pad_id)
        losses, grads = [], []
        for lo in range(0, f.shape[0], chunk_rows):
            chunk = f[lo:lo + chunk_rows].float().contiguous()
            g = gold[lo:lo + chunk_rows].contiguous()
            loss, grad = (_triton_loss_and_grad if backend == "triton" else _rows_loss_and_grad)(chunk, g, alpha, lam)
            losses.append(loss)
            grads.append(grad.to(logits.dtype))
        loss = torch.cat(losses) * keep
        grad = torch.cat(grads) * keep[:, None].to(logits.dtype)
        ctx.save_for_backward(grad)
        ctx.logits_shape = logits.shape
        return loss.view(shape)

    @staticmethod
    def backward(ctx, grad_out):
        (grad,) = ctx.saved_tensors
        g = grad * grad_out.reshape(-1, 1).to(grad.dtype)
        return g.view(ctx.logits_shape), None, None, None, None, None, None


def fused_scones_loss(logits: torch.Tensor, targets: torch.Tensor, *, pad_id: int, alpha: float = 1.0,
                      label_smoothing: float = 0.0, reduction: str = "mean", backend: str | None = None,
                      chunk_rows: int = 4096) -> torch.Tensor:
    """Same interface and numerics as :func:`nbsupport.losses.scones_loss`; ``backend`` is
    "triton" or "torch" (default: Triton when :func:`use_triton` says so)."""
    valid = ("triton", "torch")
    backend = backend or ("triton" if use_triton(logits) else "torch")
    if backend not in valid:
        raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(valid)}")
    if backend == "triton" and not HAVE_TRITON:
        raise RuntimeError("the triton backend needs the `kernels` extra: pip install -e '.[kernels]'")
    per_token = _FusedScones.apply(logits, targets, pad_id, alpha, label_smoothing, backend, chunk_rows)
    if reduction == "none":
        return per_token
    total = per_token.sum()
    if reduction == "sum":
        return total
    if reduction == "mean":
        return total / (targets != pad_id).sum().clamp(min=1)
    raise ValueError(f"unknown reduction {reduction!r}; valid: mean, sum, none")
