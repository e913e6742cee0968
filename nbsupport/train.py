"""Training: token-count batches, Adam with inverse-square-root warm-up, label smoothing,
gradient clipping, bf16 autocast on GPU, validation each epoch, best checkpoint kept;
the hard-EM step of Hard-MoE (seed 000 Algorithm 1); and the model cache.

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
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Sequence

import torch
from tqdm.auto import tqdm

from .cache import atomic_path, key_hash
from .data.batching import pad_batch, token_batches
from .data.vocab import PAD
from .losses import cross_entropy_loss, scones_loss
from .models.lstm import LSTMConfig, MultiSourceLSTM
from .models.mixture import MixtureConfig, MixtureModel
from .models.vnmt import VariationalNMT, VNMTConfig
from .models.target_encoder import ConditioningConfig, TargetConditionedTransformer
from .models.transformer import Transformer, TransformerConfig, shift_right
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

    def batches(self, max_tokens: int, shuffle: bool, seed: int, device):
        """Yield (src, tgt_in, tgt_out) tensors of token-count batches."""
        multi = bool(self.src) and isinstance(self.src[0], tuple)
        src_lens = [max(map(len, s)) if multi else len(s) for s in self.src]
        for idx in token_batches(src_lens, [len(t) for t in self.tgt], max_tokens, shuffle=shuffle, seed=seed):
            if multi:
                src = tuple(pad_batch([self.src[i][j] for i in idx]).to(device) for j in range(len(self.src[0])))
            else:
                src = pad_batch([self.src[i] for i in idx]).to(device)
            tgt = pad_batch([self.tgt[i] for i in idx]).to(device)
            yield src, shift_right(tgt), tgt, idx


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


# --------------------------------------------------------------------------- Hard-MoE
def estep_nll(model: Transformer, src, tgt_in, tgt_out, e_step_mode: str = "eval",
              chunk: int | None = None) -> torch.Tensor:
    """The E-step's scores: -log p(y | z, x) of every sentence under every latent value, (B, K),
    without gradients and in fp32 with autocast off, also inside a training step's bf16
    autocast (at initialisation the experts differ by under a nat: bf16 rounding would decide
    the argmin). The encoder runs once; the K latent values are scored in batched decoder
    passes. In "eval" mode dropout is off (the paper's fix); in "train" mode dropout noise
    enters the choice (the failure of seed 000 section 5.4)."""
    was_training = model.training
    model.train(e_step_mode == "train")
    with torch.no_grad(), torch.autocast(tgt_in.device.type, enabled=False):
        memory, mask = model.encode(src)
        nll = model.latent_nll(memory, mask, tgt_in, tgt_out, chunk).float()  # (B, K)
    model.train(was_training)
    return nll


def hard_em_assign(model: Transformer, src, tgt_in, tgt_out, e_step_mode: str = "eval",
                   chunk: int | None = None) -> torch.Tensor:
    """E-step of Hard-MoE (seed 000 Algorithm 1): the argmin over z of :func:`estep_nll`."""
    return estep_nll(model, src, tgt_in, tgt_out, e_step_mode, chunk).argmin(dim=1)


def objective(model: Transformer, logits, tgt_out, label_smoothing: float = 0.0, alpha: float = 1.0,
              reduction: str = "mean") -> torch.Tensor:
    """The model's training loss: cross-entropy for softmax models, SCONES for SCONES models."""
    if model.config.output == "scones":
        return scones_loss(logits, tgt_out, pad_id=PAD, alpha=alpha, label_smoothing=label_smoothing,
                           reduction=reduction)
    return cross_entropy_loss(logits, tgt_out, pad_id=PAD, label_smoothing=label_smoothing, reduction=reduction)


def token_loss(model: Transformer, src, tgt_in, tgt_out, z, cfg: "TrainConfig") -> tuple[torch.Tensor, int]:
    """Mean token loss of a train-mode forward; returns (loss, number of target tokens)."""
    if cfg.chunked_loss:
        from .kernels import chunked_linear_loss   # imported lazily: an optional fast path
        model.check_latent(z, src.shape[0])
        memory, mask = model.encode(src)
        hidden = model.decode_hidden(tgt_in, memory, mask, z)
        loss = chunked_linear_loss(hidden, model.output_weight, tgt_out, pad_id=PAD, loss=model.config.output,
                                   alpha=cfg.scones_alpha, label_smoothing=cfg.label_smoothing)
    else:
        loss = objective(model, model(src, tgt_in, z), tgt_out, cfg.label_smoothing, cfg.scones_alpha)
    return loss, int((tgt_out != PAD).sum())


@torch.no_grad()
def evaluate_loss(model: Transformer, data: Encoded, max_tokens: int, device, alpha: float = 1.0) -> float:
    """Validation loss per target token: the NLL (for a latent model, of the best z of each
    sentence), or for a SCONES model the SCONES loss with its training alpha."""
    model.eval()
    total, tokens = 0.0, 0
    for src, tgt_in, tgt_out, _ in data.batches(max_tokens, shuffle=False, seed=0, device=device):
        with _autocast(device):
            if isinstance(model, (MixtureModel, VariationalNMT)):    # -log p(y|x), or its bound -ELBO
                nll = model.marginal_nll if isinstance(model, MixtureModel) else model.negative_elbo
                total += float(nll(src, tgt_in, tgt_out).sum())
                tokens += int((tgt_out != PAD).sum())
                continue
            memory, mask = model.encode(src)
            if isinstance(model, TargetConditionedTransformer):   # the target encoder's (hard) domain
                z = model.domain_scores(src, tgt_out).argmax(dim=-1)
                nll = model.sentence_nll(model.decode(tgt_in, memory, mask, z), tgt_out)
            elif model.config.n_latent > 1:
                nll = model.latent_nll(memory, mask, tgt_in, tgt_out).min(dim=1).values
            elif model.config.output == "scones":
                nll = objective(model, model.decode(tgt_in, memory, mask), tgt_out, alpha=alpha, reduction="sum")
            else:
                nll = model.sentence_nll(model.decode(tgt_in, memory, mask), tgt_out)
        total += float(nll.sum())
        tokens += int((tgt_out != PAD).sum())
    return total / max(tokens, 1)


def training_step(model: Transformer, opt, sched, src, tgt_in, tgt_out, cfg: TrainConfig, done: float, idx=None):
    """One update; returns (loss, target tokens, the latent value chosen per sentence or None).

    A plain model minimises its loss; a latent model does Algorithm 1 (E-step, then a
    train-mode step with the chosen z); a mixture model (Shen et al.) its variant's EM step
    (``idx``: the batch's example indices, for offline responsibilities); a target-conditioned
    model lets its target encoder choose the domain (``done``, the fraction of training done,
    sets the temperature)."""
    model.train()
    z = None
    with _autocast(tgt_in.device):
        if isinstance(model, MixtureModel):
            loss, z = model.mixture_loss(src, tgt_in, tgt_out, idx)
            n_tok = int((tgt_out != PAD).sum())
        elif isinstance(model, VariationalNMT):
            loss, n_tok = model.vnmt_loss(src, tgt_in, tgt_out, done), int((tgt_out != PAD).sum())
        elif isinstance(model, TargetConditionedTransformer):
            loss, z, _ = model.conditioning_loss(src, tgt_in, tgt_out, done, cfg.label_smoothing)
            n_tok = int((tgt_out != PAD).sum())
        else:
            if model.config.n_latent > 1:
                z = hard_em_assign(model, src, tgt_in, tgt_out, cfg.e_step_mode, cfg.e_step_chunk)
            loss, n_tok = token_loss(model, src, tgt_in, tgt_out, z, cfg)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
    opt.step()
    sched.step()
    return loss, n_tok, z


def make_optimizer(model: Transformer, cfg: TrainConfig):
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
        for src, tgt_in, tgt_out, _ in batches[:warmup_steps]:
            training_step(m, *opts[name], src, tgt_in, tgt_out, cfg, 0.0)
    cuda = batches[0][1].device.type == "cuda"
    seconds = {name: [] for name in models}
    for _ in range(rounds):
        for name, m in models.items():
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for src, tgt_in, tgt_out, _ in batches[warmup_steps:]:
                training_step(m, *opts[name], src, tgt_in, tgt_out, cfg, 0.0)
            if cuda:
                torch.cuda.synchronize()
            seconds[name].append(time.perf_counter() - t0)
    return seconds


def training_speed(model: Transformer, batches: list, cfg: TrainConfig, warmup_steps: int = 2) -> float:
    """Target tokens per second of ``training_step`` over ``batches`` (after a few untimed steps)."""
    tokens = sum(int((tgt_out != PAD).sum()) for _, _, tgt_out, _ in batches[warmup_steps:])
    return tokens / step_seconds({"model": model}, batches, cfg, 1, warmup_steps)["model"][0]


# --------------------------------------------------------------------------- the loop
def train(model: Transformer, train_data: Encoded, valid_data: Encoded, cfg: TrainConfig, device,
          checkpoint: Path | None = None, progress: bool = True) -> History:
    """Train ``model`` in place; keep the weights of the best validation epoch.

    With ``n_latent`` K > 1 every step is Algorithm 1: E-step (hard_em_assign), then a
    train-mode forward/backward with the chosen z. ``checkpoint``: a file to resume from and
    to save to after every epoch.
    """
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
        if isinstance(model, MixtureModel) and model.mixture.schedule == "offline":
            model.refresh(train_data, cfg.max_tokens, device)     # the offline E-step, once per epoch
        batches = list(train_data.batches(cfg.max_tokens, shuffle=True, seed=cfg.seed * 1000 + epoch, device=device))
        bar = tqdm(batches, desc=f"epoch {epoch + 1}/{cfg.epochs}", disable=not progress, leave=False)
        for step_in_epoch, (src, tgt_in, tgt_out, idx) in enumerate(bar):
            done = (epoch + step_in_epoch / len(batches)) / cfg.epochs     # fraction of training
            loss, n_tok, z = training_step(model, opt, sched, src, tgt_in, tgt_out, cfg, done, idx)
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
        valid = evaluate_loss(model, valid_data, cfg.max_tokens, device, cfg.scones_alpha)
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
def non_default(config) -> dict:
    """The settings of a dataclass that differ from their defaults: the cache key, so that a
    new option added with a default does not invalidate every cached model."""
    return {f.name: getattr(config, f.name) for f in fields(config) if getattr(config, f.name) != f.default}


def models_dir() -> Path:
    return build_dir() / "models"


def train_or_load(name: str, model_cfg: TransformerConfig, train_cfg: TrainConfig, data_key: dict,
                  train_data: Encoded, valid_data: Encoded, device, progress: bool = True,
                  conditioning: ConditioningConfig | None = None, mixture: MixtureConfig | None = None,
                  vnmt: VNMTConfig | None = None):
    """Return (model, history): loaded from the cache if this exact model was trained before,
    else trained (resuming an interrupted run) and cached.

    ``data_key`` must describe the data completely (data set, its configuration and split,
    vocabularies): it is part of the cache key, with both configurations and the package
    version."""
    key = {"model": non_default(model_cfg), "train": non_default(train_cfg), "data": data_key}
    if conditioning is not None:
        # lam is on the paper's scale (summed NLL) since issue 14: models of the per-token lam retrain
        key["conditioning"] = {"lam_scale": "paper", **non_default(conditioning)}
    if mixture is not None:
        key["mixture"] = mixture.name + "/" + mixture.dropout_in
    if vnmt is not None:
        key["vnmt"] = non_default(vnmt)
    key.update(smoke.cache_tag())        # a step-capped (smoke) model never shares a real model's key
    path = models_dir() / f"{name}-{key_hash(key)}.pt"
    if mixture:
        build = lambda: MixtureModel(model_cfg, mixture)
    elif vnmt:
        build = lambda: VariationalNMT(model_cfg, vnmt)
    elif conditioning:
        build = lambda: TargetConditionedTransformer(model_cfg, conditioning)
    elif isinstance(model_cfg, LSTMConfig):
        build = lambda: MultiSourceLSTM(model_cfg)
    else:
        build = lambda: Transformer(model_cfg)
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
