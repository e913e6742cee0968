"""The hard-EM step of Hard-MoE (the seed paper Algorithm 1): score every sentence under every
latent value, give each sentence to the value that explains it best (the E-step), then train
that value on it (the M-step, :meth:`Transformer.training_loss`)."""
from __future__ import annotations

import torch


def estep_nll(model, src, tgt_in, tgt_out, e_step_mode: str = "eval", chunk: int | None = None) -> torch.Tensor:
    """The E-step's scores: -log p(y | z, x) of every sentence under every latent value, (B, K),
    without gradients and in fp32 with autocast off, also inside a training step's bf16
    autocast (at initialisation the experts differ by under a nat: bf16 rounding would decide
    the argmin). The encoder runs once; the K latent values are scored in batched decoder
    passes. In "eval" mode dropout is off (the paper's fix); in "train" mode dropout noise
    enters the choice (the failure of the seed paper section 5.4)."""
    was_training = model.training
    model.train(e_step_mode == "train")
    with torch.no_grad(), torch.autocast(tgt_in.device.type, enabled=False):
        memory, mask = model.encode(src)
        nll = model.latent_nll(memory, mask, tgt_in, tgt_out, chunk).float()  # (B, K)
    model.train(was_training)
    return nll


def hard_em_assign(model, src, tgt_in, tgt_out, e_step_mode: str = "eval", chunk: int | None = None) -> torch.Tensor:
    """E-step of Hard-MoE (the seed paper Algorithm 1): the argmin over z of :func:`estep_nll`."""
    return estep_nll(model, src, tgt_in, tgt_out, e_step_mode, chunk).argmin(dim=1)
