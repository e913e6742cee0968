"""The training loop: token-count batches, Adam with inverse-square-root warm-up, label
smoothing, gradient clipping, mixed precision on GPU, validation each epoch, the best epoch's
weights kept, a resumable checkpoint after every epoch. The loop knows no model family: each
step asks the model for its loss (``model.training_loss``: Hard-MoE's hard-EM step lives in
:mod:`nbsupport.models.hard_em`, the mixtures' EM in :mod:`nbsupport.models.mixture`, ...),
validation for its per-sentence NLL (see :mod:`nbsupport.models.protocol`). The model cache is
:func:`nbsupport.pipeline.train_or_load` (on :func:`nbsupport.cache.cached_model`).

Precision: on CUDA a training step's forward and loss, and the validation loss, run under bf16
autocast, or fp16 with a gradient scaler on GPUs without native bf16 (:func:`autocast_dtype`;
weights, gradients and Adam's state stay fp32); the E-steps of Hard-MoE and of the
mixtures score in fp32 with autocast off (an argmin over near-equal NLLs), and decoding and
search run in fp32. On CPU and MPS everything is fp32.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from tqdm.auto import tqdm

from .cache import atomic_path
from .data.encoded import Encoded  # noqa: F401  (nbs.train.Encoded, where the loop's data is described)
from .data.vocab import PAD
from .models.protocol import Batch
from .runtime import seed_everything

# the course's convergence rule: an epoch that lowers the validation loss by less than this fraction
CONVERGED_BELOW = 0.02


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 10
    max_tokens: int = 4096        # padded tokens per batch (source or target, the longer)
    lr: float = 1e-3              # peak learning rate, reached after `warmup` steps
    warmup: int = 300
    label_smoothing: float = 0.0
    clip_norm: float = 1.0
    seed: int = 0
    max_steps: int | None = None  # stop after this many optimiser steps in all (None: train every epoch)
    converged_below: float | None = None  # stop after an epoch that lowers the validation loss by less than this fraction
    patience: int = 1             # with converged_below: stop after this many such epochs in a row (a noisy epoch is not a plateau)

    def __post_init__(self):
        for name in ("epochs", "max_tokens", "warmup"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TrainConfig.{name} must be a positive integer, got {value!r}"
                                 + (" (warmup=1 is no warm-up: the learning rate starts at lr and decays as "
                                    "lr/sqrt(step); 0 would divide by zero)" if name == "warmup" else ""))
        if not self.lr > 0 or not self.clip_norm > 0:
            raise ValueError(f"TrainConfig.lr and clip_norm must be positive, got lr={self.lr!r}, "
                             f"clip_norm={self.clip_norm!r}")
        if not 0 <= self.label_smoothing < 1:
            raise ValueError(f"TrainConfig.label_smoothing must be in [0, 1), got {self.label_smoothing!r}")
        if self.max_steps is not None and (isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int)
                                           or self.max_steps < 1):
            raise ValueError(f"TrainConfig.max_steps must be a positive integer or None, got {self.max_steps!r}")
        if self.converged_below is not None and not 0 < self.converged_below < 1:
            raise ValueError(f"TrainConfig.converged_below must be a fraction in (0, 1) or None, got {self.converged_below!r}")
        if isinstance(self.patience, bool) or not isinstance(self.patience, int) or self.patience < 1:
            raise ValueError(f"TrainConfig.patience must be a positive integer, got {self.patience!r}")


@dataclass
class History:
    epochs: list[dict] = field(default_factory=list)   # per epoch: losses, usage, tokens/s, time
    best_epoch: int = -1
    best_valid: float = math.inf
    train_seconds: float = 0.0


def autocast_dtype(device) -> torch.dtype | None:
    """The training step's autocast dtype: bf16 on a GPU that computes it natively (Ampere and
    later), fp16 with a gradient scaler on one that does not (the T4s and P100s of free cloud
    notebooks: emulated bf16 is slow there), none (fp32) on a CPU or MPS."""
    if torch.device(device).type != "cuda":
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported(including_emulation=False) else torch.float16


def _autocast(device):
    dtype = autocast_dtype(device)
    if dtype is None:
        return torch.autocast("cpu", enabled=False)
    return torch.autocast("cuda", dtype=dtype)


def grad_scaler(device):
    """fp16 needs its loss scaled so that small gradients do not underflow; bf16 and fp32 do not."""
    return torch.amp.GradScaler("cuda") if autocast_dtype(device) == torch.float16 else None


# --------------------------------------------------------------------------- one step
@torch.no_grad()
def evaluate_loss(model, data: Encoded, max_tokens: int, device, cfg: "TrainConfig | None" = None) -> float:
    """Validation loss per target token: the model's per-sentence ``validation_nll`` (the NLL, a
    latent model's best-z NLL, a mixture's marginal, variational NMT's bound, SCONES's loss
    with the model's alpha) summed over ``data``, over its target tokens."""
    cfg, device = cfg or TrainConfig(), torch.device(device)
    model.eval()
    total, tokens = 0.0, 0
    for batch in data.batches(max_tokens, shuffle=False, seed=0, device=device):
        with _autocast(device):
            total += float(model.validation_nll(batch, cfg).sum())
        tokens += int((batch.tgt_out != PAD).sum())
    return total / max(tokens, 1)


def training_step(model, opt, sched, batch: Batch, cfg: TrainConfig, progress: float, scaler=None):
    """One update; returns (loss, target tokens, the latent value chosen per sentence or None).
    The loss is the model's own (``model.training_loss``; ``progress``, the fraction of training
    done, sets a schedule such as target conditioning's temperature or VNMT's KL weight).
    ``scaler``: fp16's gradient scaler (:func:`grad_scaler`), or None."""
    model.train()
    with _autocast(batch.tgt_in.device):
        loss, z = model.training_loss(batch, progress, cfg)
    opt.zero_grad(set_to_none=True)
    if scaler is None:
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
        opt.step()
    else:
        scaler.scale(loss).backward()
        scaler.unscale_(opt)                       # clip the true gradients
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
        scaler.step(opt)                           # skipped when a gradient overflowed
        scaler.update()
    sched.step()
    return loss, int((batch.tgt_out != PAD).sum()), z


def lr_factor(cfg: TrainConfig, step: int) -> float:
    """The learning rate of step ``step`` (0-based) as a fraction of ``cfg.lr``: linear warm-up over
    ``cfg.warmup`` steps, then inverse-square-root decay."""
    return min((step + 1) / cfg.warmup, math.sqrt(cfg.warmup / (step + 1)))


def make_optimizer(model, cfg: TrainConfig):
    """Adam (0.9, 0.98) with linear warm-up then inverse-square-root decay (:func:`lr_factor`)."""
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), eps=1e-9)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(cfg, step))


def converged(history: History, below: float, patience: int = 1) -> bool:
    """Whether each of the last ``patience`` epochs lowered the validation loss by less than the
    fraction ``below`` of the epoch before it (the stopping rule of ``TrainConfig.converged_below``)."""
    valid = [e["valid_nll"] for e in history.epochs]
    if len(valid) < patience + 1:
        return False
    return all(valid[i - 1] - valid[i] < below * abs(valid[i - 1]) for i in range(len(valid) - patience, len(valid)))


# --------------------------------------------------------------------------- the loop
def train(model, train_data: Encoded, valid_data: Encoded, cfg: TrainConfig, device,
          checkpoint: Path | None = None, progress: bool = True, watchers: Callable = lambda: ()) -> History:
    """Train ``model`` (any family of :mod:`nbsupport.models.protocol`) in place; keep the
    weights of the best validation epoch. ``checkpoint``: a file to resume from and to save to
    after every epoch. ``watchers()`` gives each epoch's observers: each hears ``on_step(batch, z)``
    after every step (z: what the model's E-step chose, or None) and adds ``on_epoch_end()``'s
    dict to the epoch's record (:class:`nbsupport.metrics.LatentUsage` counts the latent values)."""
    device = torch.device(device)
    model.to(device)
    opt, sched = make_optimizer(model, cfg)
    history, start_epoch, best_state = History(), 0, None
    if checkpoint is not None and checkpoint.exists():
        initial = {n: t.detach().clone() for n, t in model.state_dict().items()}
        try:
            state = torch.load(checkpoint, map_location=device, weights_only=False)
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["opt"])
            sched.load_state_dict(state["sched"])
            history, start_epoch, best_state = state["history"], state["epoch"] + 1, state["best_state"]
            print(f"resuming from epoch {start_epoch} ({checkpoint.name})")
        except Exception as err:  # corrupt: rebuilt like a corrupt finished model, from the same initial weights
            print(f"cache: deleting the unreadable resume checkpoint {checkpoint} ({type(err).__name__}: {err}); "
                  "training from the start")
            checkpoint.unlink(missing_ok=True)
            model.load_state_dict(initial)
            opt, sched = make_optimizer(model, cfg)
    scaler = grad_scaler(device)
    cap = cfg.max_steps
    for epoch in range(start_epoch, cfg.epochs):
        seed_everything(cfg.seed * 1000 + epoch)
        model.train()
        t0, tokens, loss_sum = time.time(), 0, 0.0
        watching = list(watchers())
        model.before_epoch(train_data, cfg, device)     # e.g. a mixture's offline E-step
        batches = list(train_data.batches(cfg.max_tokens, shuffle=True, seed=cfg.seed * 1000 + epoch, device=device))
        bar = tqdm(batches, desc=f"epoch {epoch + 1}/{cfg.epochs}", disable=not progress, leave=False)
        for step_in_epoch, batch in enumerate(bar):
            done = (epoch + step_in_epoch / len(batches)) / cfg.epochs     # fraction of training
            loss, n_tok, z = training_step(model, opt, sched, batch, cfg, done, scaler)
            for watcher in watching:
                watcher.on_step(batch, z)
            tokens += n_tok
            loss_sum += float(loss.detach()) * n_tok
            bar.set_postfix(loss=f"{loss_sum / tokens:.3f}")
            if cap is not None and sched.last_epoch >= cap:
                break
        seconds = time.time() - t0
        valid = evaluate_loss(model, valid_data, cfg.max_tokens, device, cfg)
        history.train_seconds += seconds
        record = {"epoch": epoch + 1, "train_loss": loss_sum / max(tokens, 1), "valid_nll": valid,
                  "seconds": seconds, "tokens_per_s": tokens / seconds}
        for watcher in watching:
            record.update(watcher.on_epoch_end())
        history.epochs.append(record)
        if valid < history.best_valid:
            history.best_valid, history.best_epoch = valid, epoch + 1
            best_state = {n: p.detach().clone() for n, p in model.state_dict().items()}
        if progress:
            usage_txt = f", expert usage {[round(c, 1) for c in record['usage']]}" if record.get("usage") else ""
            print(f"epoch {epoch + 1:2d}: train {loss_sum / max(tokens, 1):.3f}, valid NLL/token {valid:.3f}, "
                  f"{tokens / seconds:,.0f} tok/s{usage_txt}")
        if checkpoint is not None:
            with atomic_path(checkpoint) as tmp:
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                            "history": history, "epoch": epoch, "best_state": best_state}, tmp)
        if cap is not None and sched.last_epoch >= cap:
            print(f"max_steps={cap}: stopped after {sched.last_epoch} steps, in epoch {epoch + 1}")
            break
        if cfg.converged_below is not None and converged(history, cfg.converged_below, cfg.patience):
            break                                                    # converged on the dev set: stop
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    return history
