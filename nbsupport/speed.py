"""Training speed measured side by side: models take turns, round after round, so that drift on a
shared machine hits them alike (the speed claims of the lessons and ``make bench``)."""
from __future__ import annotations

import time

import torch

from .data.vocab import PAD
from .train import TrainConfig, make_optimizer, training_step


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


def round_ratio(seconds: dict, a, b):
    """Model ``a``'s tokens/s over model ``b``'s from :func:`step_seconds` (the same batches, so b's
    seconds over a's), round by round: an Interval of the median round and the range of rounds
    (not a confidence interval)."""
    from .stats import Interval
    per_round = sorted(tb / ta for ta, tb in zip(seconds[a], seconds[b]))
    return Interval(per_round[len(per_round) // 2], per_round[0], per_round[-1])
