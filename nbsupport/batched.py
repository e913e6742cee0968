"""Many small models of one configuration trained at once: the seeds of one model, stacked.

A GPU runs one toy model's step in a few small kernels, each too small to fill it: the step is
bound by launches, not by arithmetic. N models of the same shape trained as one model with a
leading model dimension (``torch.func``: :func:`~torch.func.stack_module_state` stacks their
weights, :func:`~torch.func.functional_call` runs the family's own ``training_loss`` with them,
:func:`~torch.func.vmap` over the models) launch the kernels once for all N.

Each model is trained exactly as :func:`nbsupport.train.train` trains it alone: its own data
order (its seed's batches, padded to the step's common shape with rows that hold no target
token), its own dropout masks (``vmap(randomness="different")``), its own Adam moments and
bias correction, its own gradient-norm clip (never one norm over all N), its own warm-up and
inverse-square-root schedule, its own validation and stopping rule: a model that stops keeps its
best epoch's weights while the others go on. With dropout 0 the N models end where training them
one by one ends them (``tests/test_batched.py``: losses and weights within float tolerance).

Which families stack: those whose training step has no data-dependent Python control flow (the
plain Transformer, softmax or SCONES, and Hard-MoE: its E-step is an argmin); :func:`stackable`
says. Whether it pays depends on the device (``benchmarks/README.md``): the pipeline trains
seeds together on a GPU and one model per CPU core on a CPU.
"""
from __future__ import annotations

import copy
import time

import torch
from torch.func import functional_call, grad, stack_module_state, vmap

from .data.vocab import BOS, EOS, PAD
from .models.protocol import Batch
from .train import History, TrainConfig, _autocast, converged, lr_factor
from .runtime import seed_everything

STACKABLE = ("transformer",)     # families whose training step vmap can batch


def stackable(models, cfgs) -> bool:
    """Whether ``models`` can train as one: one stackable family, one configuration, one training
    configuration apart from the seed."""
    first, cfg0 = models[0], cfgs[0]
    same_cfg = all(type(m) is type(first) and m.config == first.config for m in models)
    same_training = all(_but_seed(c) == _but_seed(cfg0) for c in cfgs)
    return getattr(first, "family", None) in STACKABLE and same_cfg and same_training


def _but_seed(cfg: TrainConfig) -> TrainConfig:
    from dataclasses import replace
    return replace(cfg, seed=0)


class _Loss(torch.nn.Module):
    """The family's own training loss as a module call, so that functional_call can swap weights."""

    def __init__(self, model, cfg):
        super().__init__()
        self.model, self.cfg = model, cfg

    def forward(self, src, tgt_in, tgt_out, progress):
        self.model.train()
        loss, z = self.model.training_loss(Batch(src, tgt_in, tgt_out, None), progress, self.cfg)
        z = z if z is not None else torch.zeros(src.shape[0], dtype=torch.long, device=src.device)
        return loss, (loss.detach(), z)            # grad's output, and what it hands back besides the gradients


def pad_to(batches: list[Batch]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The N models' batches as (N, B, S), (N, B, T), (N, B, T) tensors of one shape. A filler row
    has the source EOS (no all-padding row: attention over nothing is undefined) and no target
    token, so it adds nothing to a loss averaged over target tokens."""
    n = len(batches)
    rows = max(b.src.shape[0] for b in batches)
    s_len = max(b.src.shape[1] for b in batches)
    t_len = max(b.tgt_out.shape[1] for b in batches)
    dev = batches[0].src.device
    src = torch.full((n, rows, s_len), PAD, dtype=torch.long, device=dev)
    src[:, :, 0] = EOS
    tgt_in = torch.full((n, rows, t_len), PAD, dtype=torch.long, device=dev)
    tgt_in[:, :, 0] = BOS
    tgt_out = torch.full((n, rows, t_len), PAD, dtype=torch.long, device=dev)
    for i, b in enumerate(batches):
        r = b.src.shape[0]
        src[i, :r] = PAD
        src[i, :r, :b.src.shape[1]] = b.src
        tgt_in[i, :r] = PAD
        tgt_in[i, :r, :b.tgt_in.shape[1]] = b.tgt_in
        tgt_out[i, :r, :b.tgt_out.shape[1]] = b.tgt_out
    return src, tgt_in, tgt_out


def clip_per_model(grads: dict, max_norm: float) -> torch.Tensor:
    """Scale each model's gradient to at most ``max_norm`` (torch's clip_grad_norm_, per model);
    returns the N norms before clipping."""
    norms = torch.sqrt(sum(g.pow(2).flatten(1).sum(1) for g in grads.values()))
    scale = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for g in grads.values():
        g.mul_(scale.view(-1, *[1] * (g.dim() - 1)))
    return norms


class StackedAdam:
    """Adam (0.9, 0.98), eps 1e-9, as ``torch.optim.Adam`` computes it, on weights with a leading
    model dimension: each model has its own moments, its own step count and its own learning rate."""

    def __init__(self, params: dict, n: int, betas=(0.9, 0.98), eps=1e-9):
        self.betas, self.eps = betas, eps
        self.m = {k: torch.zeros_like(p) for k, p in params.items()}
        self.v = {k: torch.zeros_like(p) for k, p in params.items()}
        self.steps = torch.zeros(n, dtype=torch.long)

    @torch.no_grad()
    def step(self, params: dict, grads: dict, lrs: torch.Tensor, active: torch.Tensor) -> None:
        b1, b2 = self.betas
        self.steps += active.long()
        t = self.steps.clamp(min=1).double()
        step_size = (lrs.double() / (1 - b1 ** t)).float()
        root_bc2 = torch.sqrt(1 - b2 ** t).float()
        for k, p in params.items():
            shape = (-1, *[1] * (p.dim() - 1))
            on = active.to(p.device).view(shape)
            g = grads[k]
            m = torch.where(on, self.m[k] * b1 + g * (1 - b1), self.m[k])
            v = torch.where(on, self.v[k] * b2 + g * g * (1 - b2), self.v[k])
            self.m[k], self.v[k] = m, v
            denom = v.sqrt() / root_bc2.to(p.device).view(shape) + self.eps
            p.copy_(torch.where(on, p - step_size.to(p.device).view(shape) * m / denom, p))


def train_together(models: list, train_data, valid_data, cfgs: list[TrainConfig], device,
                   watchers=None, progress: bool = False) -> list[History]:
    """Train ``models`` (one configuration, :func:`stackable`) at once, each with its own
    ``cfgs[i]`` (its seed: data order and dropout), in place; each ends with its best epoch's
    weights. ``watchers(i)``: model i's epoch observers, as :func:`nbsupport.train.train` takes
    them. Returns the N histories (``seconds``: the shared epoch's wall time)."""
    if not stackable(models, cfgs):
        raise ValueError("train_together trains models of one stackable family and one configuration, "
                         f"apart from the seed; stackable families: {', '.join(STACKABLE)}")
    device = torch.device(device)
    n, cfg = len(models), cfgs[0]
    for m in models:
        m.to(device).train()
    params, buffers = stack_module_state(models)
    params = {k: p.detach().clone() for k, p in params.items()}
    loss_module = _Loss(copy.deepcopy(models[0]).to("meta"), cfg)
    names = {k: "model." + k for k in params}

    def loss_of(p, b, src, tgt_in, tgt_out, progress_):
        return functional_call(loss_module, ({names[k]: v for k, v in p.items()},
                                             {"model." + k: v for k, v in b.items()}),
                               (src, tgt_in, tgt_out, progress_))

    step_grads = vmap(grad(loss_of, has_aux=True), in_dims=(0, 0, 0, 0, 0, None), randomness="different")
    adam = StackedAdam(params, n)
    histories = [History() for _ in range(n)]
    best = [None] * n
    active = torch.ones(n, dtype=torch.bool)
    for epoch in range(cfg.epochs):
        if not bool(active.any()):
            break
        seed_everything(cfg.seed * 1000 + epoch)
        watching = [list(watchers(i)) if watchers else [] for i in range(n)]
        orders = [list(train_data.batches(c.max_tokens, shuffle=True, seed=c.seed * 1000 + epoch, device=device))
                  for c in cfgs]
        steps = max(len(o) for o in orders)
        t0 = time.time()
        loss_sum, tokens = torch.zeros(n, dtype=torch.float64), torch.zeros(n, dtype=torch.float64)
        for s in range(steps):
            here = torch.tensor([bool(active[i]) and s < len(orders[i]) for i in range(n)])
            batches = [orders[i][min(s, len(orders[i]) - 1)] for i in range(n)]
            src, tgt_in, tgt_out = pad_to(batches)
            done = (epoch + s / steps) / cfg.epochs
            with _autocast(device):
                grads, (loss, z) = step_grads(params, buffers, src, tgt_in, tgt_out, done)
            clip_per_model(grads, cfg.clip_norm)
            lrs = torch.tensor([cfg.lr * lr_factor(cfg, int(k)) for k in adam.steps])
            adam.step(params, grads, lrs, here)
            for i in range(n):
                if here[i]:
                    b = batches[i]
                    n_tok = int((b.tgt_out != PAD).sum())
                    loss_sum[i] += float(loss[i]) * n_tok
                    tokens[i] += n_tok
                    for w in watching[i]:
                        w.on_step(b, z[i, :b.src.shape[0]] if models[i].config.n_latent > 1 else None)
        seconds = time.time() - t0
        valid = _validate(loss_module, params, buffers, valid_data, cfg, device, n)
        for i in range(n):
            if not active[i]:
                continue
            h = histories[i]
            record = {"epoch": epoch + 1, "train_loss": float(loss_sum[i] / max(tokens[i], 1)), "valid_nll": valid[i],
                      "seconds": seconds, "tokens_per_s": float(tokens[i]) / seconds}
            for w in watching[i]:
                record.update(w.on_epoch_end())
            h.epochs.append(record)
            h.train_seconds += seconds
            if valid[i] < h.best_valid:
                h.best_valid, h.best_epoch = valid[i], epoch + 1
                best[i] = {k: p[i].detach().clone() for k, p in params.items()}
            if cfg.converged_below is not None and converged(h, cfg.converged_below, cfg.patience):
                active[i] = False                               # converged: it keeps its best epoch
        if progress:
            print(f"epoch {epoch + 1}: valid NLL/token " + ", ".join(f"{v:.3f}" for v in valid)
                  + f"; {int(active.sum())} of {n} still training")
    for i, m in enumerate(models):
        state = best[i] if best[i] is not None else {k: p[i] for k, p in params.items()}
        m.load_state_dict({**m.state_dict(), **state})
        m.eval()
    return histories


@torch.no_grad()
def _validate(loss_module, params, buffers, valid_data, cfg, device, n) -> list[float]:
    """Each model's validation loss per target token (the same batches for all: no shuffling)."""
    valid = _Valid(loss_module.model, cfg)

    def nll(p, b, src, tgt_in, tgt_out):
        return functional_call(valid, ({"model." + k: v for k, v in p.items()}, {"model." + k: v for k, v in b.items()}),
                               (src, tgt_in, tgt_out))

    batched = vmap(nll, in_dims=(0, 0, 0, 0, 0), randomness="same")
    # each model gets the batch as its own (expanded, not copied): a GPU's fused attention rejects a
    # padding mask that vmap has not batched like the queries ("attn_bias: wrong shape")
    each = lambda t: t.expand(n, *t.shape)
    total, tokens = torch.zeros(n, dtype=torch.float64), 0
    for batch in valid_data.batches(cfg.max_tokens, shuffle=False, seed=0, device=device):
        with _autocast(device):
            total += batched(params, buffers, each(batch.src), each(batch.tgt_in), each(batch.tgt_out)).double().cpu()
        tokens += int((batch.tgt_out != PAD).sum())
    return (total / max(tokens, 1)).tolist()


class _Valid(torch.nn.Module):
    """The family's per-sentence validation NLL, summed, as a module call (eval mode: no dropout)."""

    def __init__(self, model, cfg):
        super().__init__()
        self.model, self.cfg = model, cfg

    def forward(self, src, tgt_in, tgt_out):
        self.model.eval()
        return self.model.validation_nll(Batch(src, tgt_in, tgt_out, None), self.cfg).sum()
