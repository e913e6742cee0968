"""The mixture-model design space of Shen et al. 2019 (sections 3.1-3.4): 16 variants.

* EM: **hard** (the E-step gives all responsibility to argmax_z p(y, z | x)) or **soft**
  (responsibilities r_z = p(z | x, y), computed without gradient; the M-step follows the
  gradients of each expert's log-joint weighted by them: eq. 3);
* prior: **uniform** (up) or **learned** (lp: mean of the top encoder states -> a tanh
  hidden layer -> K logits);
* parameters: **shared** (one decoder, the latent embedding replaces BOS) or
  **independent** (one decoder per expert, one shared encoder);
* schedule: **online** (responsibilities for each mini-batch) or **offline** (an E-step over
  the whole training set, then one epoch of M-steps with those responsibilities, repeat).

And where dropout acts (section 3.4, Table 1): ``none`` (no dropout at all), ``E&M`` (also
while computing responsibilities), ``M`` (only in the M-step: the paper's fix).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn as nn

from ..data.vocab import PAD
from .protocol import Batch, Cost, Family
from .transformer import Transformer, TransformerConfig

EM_KINDS = ("hard", "soft")
PRIORS = ("uniform", "learned")
PARAMS = ("shared", "independent")
SCHEDULES = ("online", "offline")
DROPOUT_IN = ("none", "E&M", "M")


@dataclass(frozen=True)
class MixtureConfig:
    em: str = "hard"
    prior: str = "uniform"
    params: str = "shared"
    schedule: str = "online"
    dropout_in: str = "M"

    def __post_init__(self):
        for name, valid in (("em", EM_KINDS), ("prior", PRIORS), ("params", PARAMS), ("schedule", SCHEDULES),
                            ("dropout_in", DROPOUT_IN)):
            if getattr(self, name) not in valid:
                raise ValueError(f"unknown {name} {getattr(self, name)!r}; valid: {', '.join(valid)}")

    @property
    def loss_name(self) -> str:
        """Shen et al.'s names: hMup, sMup, hMlp, sMlp."""
        return f"{self.em[0]}M{'up' if self.prior == 'uniform' else 'lp'}"

    @property
    def name(self) -> str:
        """Like ``online.shared.hMup``."""
        return f"{self.schedule}.{self.params}.{self.loss_name}"

    @classmethod
    def from_name(cls, name: str, dropout_in: str = "M") -> "MixtureConfig":
        try:
            schedule, params, loss = name.split(".")
            em = {"h": "hard", "s": "soft"}[loss[0]]
            prior = {"up": "uniform", "lp": "learned"}[loss[2:]]
        except (ValueError, KeyError):
            raise ValueError(f"bad mixture name {name!r}: expected schedule.params.loss, e.g. online.shared.hMup") from None
        return cls(em, prior, params, schedule, dropout_in)


def all_variants(dropout_in: str = "M") -> list[MixtureConfig]:
    """The 16 configurations of Shen et al. Table 7, in its order."""
    return [MixtureConfig(em, prior, params, schedule, dropout_in)
            for schedule in SCHEDULES for params in PARAMS
            for prior, em in (("learned", "soft"), ("uniform", "soft"), ("learned", "hard"), ("uniform", "hard"))]


class MixtureModel(nn.Module, Family):
    """K experts over one encoder. ``config`` is the TransformerConfig with n_latent = K (so
    the shared training loop sees a K-way latent model); ``mixture`` the design choices."""

    family = "mixture"
    default_method = "latent_greedy"

    def __init__(self, config: TransformerConfig, mixture: MixtureConfig):
        super().__init__()
        if config.n_latent < 1:
            raise ValueError("a mixture needs K >= 1 experts (n_latent)")
        if mixture.dropout_in == "none":
            config = replace(config, dropout=0.0)
        self.config, self.mixture = config, mixture
        k = config.n_latent
        if mixture.params == "shared":
            self.experts = nn.ModuleList([Transformer(config)])
        else:
            single = replace(config, n_latent=1)
            first = Transformer(single)
            others = [Transformer(single) for _ in range(k - 1)]
            for e in others:   # one encoder (and source embedding) shared by all experts
                e.src_emb, e.encoder, e.enc_ln = first.src_emb, first.encoder, first.enc_ln
            self.experts = nn.ModuleList([first, *others])
        d = config.d_model
        self.prior_net = nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Linear(d, k)) if mixture.prior == "learned" else None
        self.register_buffer("stored", torch.zeros(0, k), persistent=False)   # offline responsibilities
        self.refreshes = 0

    @property
    def k(self) -> int:
        return self.config.n_latent

    def encode(self, src):
        return self.experts[0].encode(src)

    def log_prior(self, memory, mask) -> torch.Tensor:
        """log p(z | x), (B, K)."""
        b = memory.shape[0]
        if self.prior_net is None:
            return memory.new_full((b, self.k), -math.log(self.k))
        keep = mask[:, 0, 0, :, None].to(memory.dtype)             # (B, S, 1)
        mean = (memory * keep).sum(1) / keep.sum(1)
        return torch.log_softmax(self.prior_net(mean), dim=-1)

    def expert_nll(self, memory, mask, tgt_in, tgt_out) -> torch.Tensor:
        """-log p(y | z, x) for every expert, (B, K), with gradients (one batched pass when shared)."""
        if self.mixture.params == "shared":
            return self.experts[0].latent_nll(memory, mask, tgt_in, tgt_out)
        return torch.stack([e.sentence_nll(e.decode(tgt_in, memory, mask), tgt_out) for e in self.experts], dim=1)

    def log_joint(self, src, tgt_in, tgt_out) -> torch.Tensor:
        """log p(y, z | x) = log p(z | x) - NLL_z, (B, K)."""
        memory, mask = self.encode(src)
        return self.log_prior(memory, mask) - self.expert_nll(memory, mask, tgt_in, tgt_out)

    @torch.no_grad()
    def responsibilities(self, src, tgt_in, tgt_out) -> torch.Tensor:
        """The E-step, (B, K): one-hot argmax (hard) or the posterior (soft). Dropout is on
        only in the E&M mode. Scored in fp32 with autocast off, also inside a training step's
        bf16 autocast: at initialisation the experts differ by under a nat, and bf16 rounding
        would decide the argmax."""
        was = self.training
        self.train(self.mixture.dropout_in == "E&M")
        with torch.autocast(tgt_in.device.type, enabled=False):
            lj = self.log_joint(src, tgt_in, tgt_out).float()
        self.train(was)
        if self.mixture.em == "hard":
            return nn.functional.one_hot(lj.argmax(dim=1), self.k).to(lj.dtype)
        return torch.softmax(lj, dim=1)

    def refresh(self, data, max_tokens: int, device) -> None:
        """Offline schedule: the E-step over the whole training set (once per epoch)."""
        stored = torch.zeros(len(data), self.k, device=device)
        for src, tgt_in, tgt_out, idx in data.batches(max_tokens, shuffle=False, seed=0, device=device):
            stored[torch.as_tensor(idx, device=device)] = self.responsibilities(src, tgt_in, tgt_out)
        self.stored = stored
        self.refreshes += 1

    def mixture_loss(self, src, tgt_in, tgt_out, idx=None):
        """The M-step loss per target token: -sum_z r_z log p(y, z | x) / tokens, r from the
        E-step (online) or from the last refresh (offline). Returns (loss, usage): hard EM the
        chosen z per sentence, (B,); soft EM the responsibilities r, (B, K), whose sum over the
        sentences is each expert's usage (its posterior mass, as the authors' code counts it)."""
        if self.mixture.schedule == "offline":
            if idx is None or len(self.stored) == 0:
                raise ValueError("offline schedule: call refresh() before the epoch and pass the batch's indices")
            r = self.stored[torch.as_tensor(idx, device=self.stored.device)]
        else:
            r = self.responsibilities(src, tgt_in, tgt_out)
        self.train()
        tokens = (tgt_out != PAD).sum()
        memory, mask = self.encode(src)
        log_prior = self.log_prior(memory, mask)
        if self.mixture.em == "hard":                 # one-hot r: only each sentence's chosen expert runs
            z = r.argmax(dim=1)
            return (self.chosen_nll(memory, mask, tgt_in, tgt_out, z) - log_prior.gather(1, z[:, None]).sum()) / tokens, z
        lj = log_prior - self.expert_nll(memory, mask, tgt_in, tgt_out)
        return -(r * lj).sum() / tokens, r

    def chosen_nll(self, memory, mask, tgt_in, tgt_out, z) -> torch.Tensor:
        """Hard EM's M-step: sum_i NLL_{z_i}(y_i), each sentence under the expert the E-step chose,
        with gradients. The shared decoder takes z as its latent in one pass; independent experts
        each decode only their own sentences. This is the one-hot-weighted sum over all K experts'
        passes (a sentence's other experts get weight 0) at ~1/K of their decoder cost. An
        independent expert that got no sentence still gets a zero gradient, as it would from the K
        passes: Adam then steps it on its momentum, as before (a None gradient would freeze it)."""
        if self.mixture.params == "shared":
            e = self.experts[0]
            return e.sentence_nll(e.decode(tgt_in, memory, mask, z), tgt_out).sum()
        total = memory.new_zeros(())
        for j, e in enumerate(self.experts):
            rows = (z == j).nonzero().squeeze(1)
            if len(rows) == 0:
                total = total + 0.0 * sum(p.sum() for p in e.parameters())
                continue
            total = total + e.sentence_nll(e.decode(tgt_in[rows], memory[rows], mask[rows]), tgt_out[rows]).sum()
        return total

    @torch.no_grad()
    def marginal_nll(self, src, tgt_in, tgt_out) -> torch.Tensor:
        """-log p(y | x) = -log sum_z p(y, z | x), (B,)."""
        return -torch.logsumexp(self.log_joint(src, tgt_in, tgt_out), dim=1)

    # ------------------------------------------------------------------ the protocol (.protocol)
    @staticmethod
    def cache_key(options: MixtureConfig) -> dict:
        # soft EM's cached training history records usage as posterior mass (not argmax counts)
        return {"mixture": options.name + "/" + options.dropout_in, **({"usage": "posterior mass"} if options.em == "soft" else {})}

    def before_epoch(self, data, cfg, device) -> None:
        if self.mixture.schedule == "offline":
            self.refresh(data, cfg.max_tokens, device)     # the offline E-step, once per epoch

    def training_loss(self, batch: Batch, progress: float, cfg):
        return self.mixture_loss(batch.src, batch.tgt_in, batch.tgt_out, batch.idx)

    def validation_nll(self, batch: Batch, cfg) -> torch.Tensor:
        return self.marginal_nll(batch.src, batch.tgt_in, batch.tgt_out)

    def stepper(self, src, z=None, use_cache: bool = True):
        """Shared parameters: the one decoder with latent z. Independent experts: expert z, when
        every sentence of the batch asks for the same z (an int)."""
        if self.mixture.params == "shared":
            return self.experts[0].stepper(src, z, use_cache)
        zs = torch.as_tensor(z).flatten().unique().tolist() if z is not None else []
        if len(zs) != 1:
            raise ValueError("a mixture of independent experts decodes one expert at a time: pass z as one int "
                             "(the same expert for every sentence), or decode with method 'latent_greedy'")
        if not 0 <= int(zs[0]) < self.k:
            raise ValueError(f"latent index out of range: z must be in 0..{self.k - 1}, got {int(zs[0])}")
        return self.experts[int(zs[0])].stepper(src, None, use_cache)

    @torch.no_grad()
    def score_tokens(self, src, tokens: torch.Tensor, z=None) -> torch.Tensor:
        """(B, T) log scores of ``tokens`` under latent ``z`` (one per row): the shared decoder's one
        pass, or each row scored by its own expert."""
        if self.mixture.params == "shared":
            return self.experts[0].score_tokens(src, tokens, z)
        if z is None or not 0 <= int(z.min()) <= int(z.max()) < self.k:
            raise ValueError(f"pass z in 0..{self.k - 1}, one per row, got {None if z is None else z.tolist()}")
        out = torch.zeros(tokens.shape, device=tokens.device)
        for e in z.unique().tolist():
            rows = (z == e).nonzero().squeeze(1)
            out[rows] = self.experts[e].score_tokens(src[rows], tokens[rows])
        return out

    def latent_stepper(self, src, use_cache: bool = True):
        """One row per (source, expert): the shared decoder under each z, or each independent
        expert's own stepper, stacked."""
        from ..strategies import StackedStepper
        if self.mixture.params == "shared":
            return self.experts[0].latent_stepper(src, use_cache)
        return StackedStepper([e.stepper(src, None, use_cache) for e in self.experts])

    def cost(self) -> Cost:
        if self.mixture.em == "soft":        # every expert forward and backward
            return Cost(self.experts[0], train_target_passes=self.k, valid_target_passes=self.k)
        return Cost(self.experts[0], extra_target_forwards=self.k, valid_target_passes=self.k)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
