"""Training: token-count batches, Adam with inverse-square-root warm-up, label smoothing,
gradient clipping, bf16 autocast on GPU, validation each epoch, best checkpoint kept; and
the model cache. The loop knows no model family: each step asks the model for its loss
(``model.training_loss``: Hard-MoE's hard-EM step lives in :mod:`nbsupport.models.hard_em`,
the mixtures' EM in :mod:`nbsupport.models.mixture`, ...), validation for its per-sentence NLL,
and the cache builds models through :mod:`nbsupport.registry` (see
:mod:`nbsupport.models.protocol`).

The model cache keys a trained model on everything that affects its weights (model and
training configuration, the data's description, the seed, the package version): a
notebook run twice, or a baseline shared by several notebooks, trains once. The finished
model and, after every epoch, a resumable checkpoint are written atomically; an
interrupted run resumes from its last epoch.

Precision: on CUDA a training step's forward and loss, and the validation loss, run under bf16
autocast (weights, gradients and Adam's state stay fp32); the E-steps of Hard-MoE and of the
mixtures score in fp32 with autocast off (an argmin over near-equal NLLs), and decoding and
search run in fp32. On CPU and MPS everything is fp32.
"""
from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from tqdm.auto import tqdm

from . import registry
from .cache import atomic_path, cached_file, key_hash, non_default
from .data.encoded import Encoded  # noqa: F401  (nbs.train.Encoded, where the loop's data is described)
from .data.vocab import PAD
from .models.protocol import Batch
from .paths import build_dir
from .runtime import seed_everything

log = logging.getLogger(__name__)   # cache hits: quiet in a lesson, visible with logging at INFO


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
class Callbacks:
    """What code outside the training loop may watch or provide, without the loop knowing it (a ledger of
    the models a run used, say): ``on_model(name, model, train_cfg, train_data, valid_data)`` is called
    for every model :func:`train_or_load` trains or loads; each of ``training`` is a function
    returning a context manager entered around every training run; each of ``on_host(what, seconds,
    done, full, task)`` hears of host work a GPU does not speed up (sampling a synthetic corpus);
    ``parallel``, when set, trains several uncached models at once: ``parallel(fn, jobs, device, what)``
    runs ``fn(*job)`` for every job and returns False when the caller must train them itself (the
    harness sets it: worker processes, one per CPU core)."""
    on_model: list[Callable] = field(default_factory=list)
    training: list[Callable] = field(default_factory=list)
    on_host: list[Callable] = field(default_factory=list)
    parallel: Callable | None = None


CALLBACKS = Callbacks()


def train_several(fn, jobs: list[tuple], device, what: str) -> bool:
    """``fn(*job)`` for every job (each trains one model into the cache) with the runner the harness
    installed (:attr:`Callbacks.parallel`); False when there is none or it declines: the caller then
    trains each model when it first asks for it."""
    return bool(jobs) and CALLBACKS.parallel is not None and bool(CALLBACKS.parallel(fn, jobs, device, what))


def host_work(what: str, seconds: float, done: int, full: int, task: str | None = None) -> None:
    """Tell the watchers (:attr:`Callbacks.on_host`) of host work measured on ``done`` items of ``full``."""
    for on_host in CALLBACKS.on_host:
        on_host(what, seconds, done, full, task)


class LatentUsage:
    """How much of an epoch's training pairs each of the K latent values took, overall and by each
    training pair's true label (the toy's style: it shows what the E-step discovered). A step
    reports either the latent it chose per sentence, (B,) indices, or the E-step's
    responsibilities, (B, K) rows summing to 1 (soft EM): then a latent's usage is its summed
    posterior mass, as the authors' code logs it (fairseq ``translation_moe``:
    ``prob_z_xy.float().sum(dim=0)``), not the count of sentences where it is the argmax (a near
    uniform posterior would hand all of them to whichever latent is ahead by a hair)."""

    def __init__(self, k: int, labels: list[int] | None):
        self.k, self.labels = k, labels
        self.n_labels = 1 + max(labels) if labels else 0
        self.counts = torch.zeros(k, dtype=torch.float64)
        self.by_label = torch.zeros(k, max(self.n_labels, 1), dtype=torch.float64)   # latent x true label

    def add(self, z: torch.Tensor, idx: list[int]) -> None:
        z = z.detach().cpu()
        mass = z.double() if z.dim() == 2 else torch.nn.functional.one_hot(z.long(), self.k).double()   # (B, K)
        self.counts += mass.sum(0)
        if self.n_labels:
            self.by_label.index_add_(1, torch.tensor([self.labels[i] for i in idx]), mass.T)

    @staticmethod
    def _plain(t: torch.Tensor):
        """Whole numbers as ints (counts of sentences), posterior mass as floats."""
        return t.long().tolist() if bool((t == t.round()).all()) else t.tolist()

    def record(self) -> dict:
        latent = self.k > 1
        return {"usage": self._plain(self.counts) if latent else None,
                "latent_by_label": self._plain(self.by_label) if latent and self.n_labels else None}


@dataclass
class History:
    epochs: list[dict] = field(default_factory=list)   # per epoch: losses, usage, tokens/s, time
    best_epoch: int = -1
    best_valid: float = math.inf
    train_seconds: float = 0.0


def _autocast(device):
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


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


def training_step(model, opt, sched, batch: Batch, cfg: TrainConfig, progress: float):
    """One update; returns (loss, target tokens, the latent value chosen per sentence or None).
    The loss is the model's own (``model.training_loss``; ``progress``, the fraction of training
    done, sets a schedule such as target conditioning's temperature or VNMT's KL weight)."""
    model.train()
    with _autocast(batch.tgt_in.device):
        loss, z = model.training_loss(batch, progress, cfg)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
    opt.step()
    sched.step()
    return loss, int((batch.tgt_out != PAD).sum()), z


def make_optimizer(model, cfg: TrainConfig):
    """Adam (0.9, 0.98) with linear warm-up then inverse-square-root decay."""
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), eps=1e-9)
    inv_sqrt = lambda step: min((step + 1) / cfg.warmup, math.sqrt(cfg.warmup / (step + 1)))
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, inv_sqrt)


def converged(history: History, below: float, patience: int = 1) -> bool:
    """Whether each of the last ``patience`` epochs lowered the validation loss by less than the
    fraction ``below`` of the epoch before it (the stopping rule of ``TrainConfig.converged_below``)."""
    valid = [e["valid_nll"] for e in history.epochs]
    if len(valid) < patience + 1:
        return False
    return all(valid[i - 1] - valid[i] < below * abs(valid[i - 1]) for i in range(len(valid) - patience, len(valid)))


# --------------------------------------------------------------------------- the loop
def train(model, train_data: Encoded, valid_data: Encoded, cfg: TrainConfig, device,
          checkpoint: Path | None = None, progress: bool = True) -> History:
    """Train ``model`` (any family of :mod:`nbsupport.models.protocol`) in place; keep the
    weights of the best validation epoch. ``checkpoint``: a file to resume from and to save to
    after every epoch."""
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
    k = model.config.n_latent
    cap = cfg.max_steps
    for epoch in range(start_epoch, cfg.epochs):
        seed_everything(cfg.seed * 1000 + epoch)
        model.train()
        t0, tokens, loss_sum = time.time(), 0, 0.0
        usage = LatentUsage(k, train_data.labels)
        model.before_epoch(train_data, cfg, device)     # e.g. a mixture's offline E-step
        batches = list(train_data.batches(cfg.max_tokens, shuffle=True, seed=cfg.seed * 1000 + epoch, device=device))
        bar = tqdm(batches, desc=f"epoch {epoch + 1}/{cfg.epochs}", disable=not progress, leave=False)
        for step_in_epoch, batch in enumerate(bar):
            done = (epoch + step_in_epoch / len(batches)) / cfg.epochs     # fraction of training
            loss, n_tok, z = training_step(model, opt, sched, batch, cfg, done)
            if z is not None:
                usage.add(z, batch.idx)
            tokens += n_tok
            loss_sum += float(loss.detach()) * n_tok
            bar.set_postfix(loss=f"{loss_sum / tokens:.3f}")
            if cap is not None and sched.last_epoch >= cap:
                break
        seconds = time.time() - t0
        valid = evaluate_loss(model, valid_data, cfg.max_tokens, device, cfg)
        history.train_seconds += seconds
        history.epochs.append({"epoch": epoch + 1, "train_loss": loss_sum / max(tokens, 1), "valid_nll": valid,
                               "seconds": seconds, "tokens_per_s": tokens / seconds, **usage.record()})
        if valid < history.best_valid:
            history.best_valid, history.best_epoch = valid, epoch + 1
            best_state = {n: p.detach().clone() for n, p in model.state_dict().items()}
        if progress:
            usage_txt = f", expert usage {[round(c, 1) for c in usage.counts.tolist()]}" if k > 1 else ""
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


# --------------------------------------------------------------------------- the cache
def models_dir() -> Path:
    return build_dir() / "models"


def model_key_and_path(name: str, model_cfg, train_cfg: TrainConfig, data_key: dict, options=None) -> tuple[dict, Path]:
    """The cache key of a model (both configurations, the options, the data, the package version)
    and the file it is cached in."""
    key = {"model": non_default(model_cfg), "train": non_default(train_cfg), "data": data_key}
    key.update(registry.cache_key(model_cfg, options))
    return key, models_dir() / f"{name}-{key_hash(key)}.pt"


def train_or_load(name: str, model_cfg, train_cfg: TrainConfig, data_key: dict, train_data: Encoded,
                  valid_data: Encoded, device, progress: bool = True, options=None):
    """Return (model, history): loaded from the cache if this exact model was trained before,
    else trained (resuming an interrupted run) and cached.

    The family is the one ``model_cfg`` and ``options`` select (:func:`nbsupport.registry.build`:
    a ``TransformerConfig`` or ``LSTMConfig`` alone; with a ``MixtureConfig``, ``VNMTConfig`` or
    ``ConditioningConfig`` as ``options``, that family). ``data_key`` must describe the data
    completely (data set, its configuration and split, vocabularies): it is part of the cache
    key, with both configurations, the options and the package version."""
    key, path = model_key_and_path(name, model_cfg, train_cfg, data_key, options)
    model = registry.build(model_cfg, options)
    for on_model in CALLBACKS.on_model:
        on_model(name, model, train_cfg, train_data, valid_data)
    trained = {}                                           # the model trained here, returned as it is

    def build(tmp: Path) -> None:
        seed_everything(train_cfg.seed)
        fresh = registry.build(model_cfg, options)        # the same initial weights for the same seed
        partial = path.with_suffix(".partial.pt")          # resumable after every epoch
        with contextlib.ExitStack() as watched:
            for context in CALLBACKS.training:
                watched.enter_context(context())
            history = train(fresh, train_data, valid_data, train_cfg, device, checkpoint=partial, progress=progress)
        torch.save({"model": fresh.state_dict(), "history": history, "key": key}, tmp)
        partial.unlink(missing_ok=True)
        trained.update(model=fresh, history=history)

    def load(file: Path):
        if trained:
            return trained["model"], trained["history"]
        state = torch.load(file, map_location="cpu", weights_only=False)
        model.load_state_dict(state["model"])
        log.info("loaded cached model %s (trained in %.0f s)", file.name, state["history"].train_seconds)
        return model.to(device).eval(), state["history"]

    return cached_file(name, key, build, load, suffix=".pt", folder=models_dir())
