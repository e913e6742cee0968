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

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import torch
from tqdm.auto import tqdm

from . import registry
from .cache import atomic_path, key_hash, non_default
from .data.batching import pad_batch, shift_right, token_batches
from .data.vocab import PAD
from .models.protocol import Batch
from .paths import build_dir
from .runtime import seed_everything
from . import smoke

E_STEP_MODES = ("eval", "train")


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 10
    max_tokens: int = 4096        # padded tokens per batch (source or target, the longer)
    lr: float = 1e-3              # peak learning rate, reached after `warmup` steps
    warmup: int = 300
    label_smoothing: float = 0.0
    scones_alpha: float = 1.0     # SCONES models only: weight of the negative loss (eq. 6)
    clip_norm: float = 1.0
    e_step_mode: str = "eval"     # Hard-MoE: "eval" = Algorithm 1; "train" = dropout in the E-step
    e_step_chunk: int | None = None  # score at most this many latent values per decoder pass (memory)
    chunked_loss: bool = False    # output projection + loss chunk by chunk (never all logits at once)
    seed: int = 0

    def __post_init__(self):
        if self.e_step_mode not in E_STEP_MODES:
            raise ValueError(f"unknown e_step_mode {self.e_step_mode!r}; valid: {', '.join(E_STEP_MODES)}")
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
    with its training alpha from ``cfg``) summed over ``data``, over its target tokens."""
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


def step_seconds(models: dict, batches: list, cfg: TrainConfig, rounds: int = 1, warmup_steps: int = 2) -> dict:
    """Seconds of ``training_step`` over ``batches[warmup_steps:]``, per model and round (after
    ``warmup_steps`` untimed steps each). The models take turns round after round, so that drift
    on a shared machine hits them alike."""
    opts = {name: make_optimizer(m, cfg) for name, m in models.items()}
    for name, m in models.items():
        for batch in batches[:warmup_steps]:
            training_step(m, *opts[name], batch, cfg, 0.0)
    cuda = batches[0][1].device.type == "cuda"
    seconds = {name: [] for name in models}
    for _ in range(rounds):
        for name, m in models.items():
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for batch in batches[warmup_steps:]:
                training_step(m, *opts[name], batch, cfg, 0.0)
            if cuda:
                torch.cuda.synchronize()
            seconds[name].append(time.perf_counter() - t0)
    return seconds


def training_speed(model, batches: list, cfg: TrainConfig, warmup_steps: int = 2) -> float:
    """Target tokens per second of ``training_step`` over ``batches`` (after a few untimed steps)."""
    tokens = sum(int((tgt_out != PAD).sum()) for _, _, tgt_out, _ in batches[warmup_steps:])
    return tokens / step_seconds({"model": model}, batches, cfg, 1, warmup_steps)["model"][0]


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
    cap = smoke.max_steps()   # NBS_MAX_STEPS: stop after this many optimiser steps (the smoke run)
    for epoch in range(start_epoch, cfg.epochs):
        seed_everything(cfg.seed * 1000 + epoch)
        model.train()
        t0, tokens, loss_sum = time.time(), 0, 0.0
        usage = torch.zeros(k, dtype=torch.long)
        n_labels = 1 + max(train_data.labels) if train_data.labels else 0
        confusion = torch.zeros(k, max(n_labels, 1), dtype=torch.long)   # latent x true label
        model.before_epoch(train_data, cfg, device)     # e.g. a mixture's offline E-step
        batches = list(train_data.batches(cfg.max_tokens, shuffle=True, seed=cfg.seed * 1000 + epoch, device=device))
        bar = tqdm(batches, desc=f"epoch {epoch + 1}/{cfg.epochs}", disable=not progress, leave=False)
        for step_in_epoch, batch in enumerate(bar):
            done = (epoch + step_in_epoch / len(batches)) / cfg.epochs     # fraction of training
            loss, n_tok, z = training_step(model, opt, sched, batch, cfg, done)
            idx = batch.idx
            if z is not None:
                usage += torch.bincount(z.cpu(), minlength=k)
                if n_labels:
                    confusion.index_put_((z.cpu(), torch.tensor([train_data.labels[i] for i in idx])),
                                         torch.ones(len(idx), dtype=torch.long), accumulate=True)
            tokens += n_tok
            loss_sum += float(loss.detach()) * n_tok
            bar.set_postfix(loss=f"{loss_sum / tokens:.3f}")
            if cap is not None and sched.last_epoch >= cap:
                break
        seconds = time.time() - t0
        valid = evaluate_loss(model, valid_data, cfg.max_tokens, device, cfg)
        history.train_seconds += seconds
        history.epochs.append({"epoch": epoch + 1, "train_loss": loss_sum / max(tokens, 1), "valid_nll": valid,
                               "seconds": seconds, "tokens_per_s": tokens / seconds,
                               "usage": usage.tolist() if k > 1 else None,
                               "latent_by_label": confusion.tolist() if k > 1 and n_labels else None})
        if valid < history.best_valid:
            history.best_valid, history.best_epoch = valid, epoch + 1
            best_state = {n: p.detach().clone() for n, p in model.state_dict().items()}
        if progress:
            usage_txt = f", expert usage {usage.tolist()}" if k > 1 else ""
            print(f"epoch {epoch + 1:2d}: train {loss_sum / max(tokens, 1):.3f}, valid NLL/token {valid:.3f}, "
                  f"{tokens / seconds:,.0f} tok/s{usage_txt}")
        if checkpoint is not None:
            with atomic_path(checkpoint) as tmp:
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                            "history": history, "epoch": epoch, "best_state": best_state}, tmp)
        if cap is not None and sched.last_epoch >= cap:
            print(f"{smoke.MAX_STEPS_ENV}={cap}: stopped after {sched.last_epoch} steps, in epoch {epoch + 1}")
            break
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
    key.update(smoke.cache_tag())        # a step-capped (smoke) model never shares a real model's key
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
    build = lambda: registry.build(model_cfg, options)
    model = build()
    smoke.record_training(name, model, train_cfg, train_data, valid_data)   # only while NBS_LEDGER is set
    if path.exists():
        try:
            state = torch.load(path, map_location="cpu", weights_only=False)
            model.load_state_dict(state["model"])
            print(f"loaded cached model {path.name} (trained in {state['history'].train_seconds:.0f} s)")
            return model.to(device).eval(), state["history"]
        except Exception as err:  # corrupt: rebuild
            # not unlinked: the atomic rename below replaces it (an unlink could remove the
            # complete model another process has just renamed into place)
            print(f"cache: retraining {path} ({type(err).__name__}: {err})")
    seed_everything(train_cfg.seed)
    model = build()                      # same initial weights for the same seed
    partial = path.with_suffix(".partial.pt")
    with smoke.training_phase():
        history = train(model, train_data, valid_data, train_cfg, device, checkpoint=partial, progress=progress)
    with atomic_path(path) as tmp:
        torch.save({"model": model.state_dict(), "history": history, "key": key}, tmp)
    partial.unlink(missing_ok=True)
    return model, history
