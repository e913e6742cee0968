"""Variational NMT (Zhang et al. 2016), the continuous-latent baseline of Shen et al. 2019.

A Gaussian latent z in R^dz: a prior p(z | x) = N(mu_p, sigma_p^2) from the mean of the
encoder states, a posterior q(z | x, y) = N(mu_q, sigma_q^2) from that mean and the mean of
the target embeddings. The decoder reads z through the latent slot of our Transformer: its
first input is W z instead of BOS (the Transformer is built with n_latent = dz and given z as
a real vector). Training maximises the ELBO, E_q[log p(y | x, z)] - beta KL(q || p), with one
reparameterised sample and beta annealed linearly from 0 to 1 over the first
``anneal_fraction`` of training (KL annealing, Bowman et al. 2016). Hypotheses: sample z from
the prior, then greedy decoding (Shen et al. section 5).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn

from ..cache import non_default
from ..data.vocab import PAD
from .protocol import Batch, Cost, Family
from .transformer import Transformer, TransformerConfig


@dataclass(frozen=True)
class VNMTConfig:
    anneal_fraction: float = 0.5     # beta reaches 1 after this fraction of training (0: no annealing)

    def __post_init__(self):
        if isinstance(self.anneal_fraction, bool) or not 0 <= self.anneal_fraction <= 1:
            raise ValueError(f"anneal_fraction must be in [0, 1] (0: no annealing), got {self.anneal_fraction!r}")


def gaussian_kl(mu_q, logvar_q, mu_p, logvar_p) -> torch.Tensor:
    """KL(N(mu_q, var_q) || N(mu_p, var_p)) summed over dimensions, (B,)."""
    return 0.5 * (logvar_p - logvar_q + (logvar_q.exp() + (mu_q - mu_p) ** 2) / logvar_p.exp() - 1).sum(-1)


class VariationalNMT(nn.Module, Family):
    family = "vnmt"
    default_method = "vnmt"
    discrete_latent = False

    def __init__(self, config: TransformerConfig, vnmt: VNMTConfig | None = None):
        super().__init__()
        if config.n_latent < 2:
            raise ValueError("n_latent is the latent dimension dz and must be >= 2")
        self.config, self.vnmt = config, vnmt or VNMTConfig()
        self.model = Transformer(config)
        d, dz = config.d_model, config.n_latent
        self.prior = nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Linear(d, 2 * dz))
        self.posterior = nn.Sequential(nn.Linear(2 * d, d), nn.Tanh(), nn.Linear(d, 2 * dz))

    @staticmethod
    def _mean(x, keep):
        keep = keep.to(x.dtype)[..., None]
        return (x * keep).sum(1) / keep.sum(1).clamp_min(1)

    def encode(self, src):
        return self.model.encode(src)

    def prior_params(self, memory, mask):
        return self.prior(self._mean(memory, mask[:, 0, 0, :])).chunk(2, dim=-1)

    def posterior_params(self, memory, mask, tgt_out):
        y = self._mean(self.model.tgt_emb(tgt_out), tgt_out != PAD)
        return self.posterior(torch.cat([self._mean(memory, mask[:, 0, 0, :]), y], dim=-1)).chunk(2, dim=-1)

    def beta(self, done: float) -> float:
        a = self.vnmt.anneal_fraction
        return 1.0 if a <= 0 else min(1.0, done / a)

    def elbo_terms(self, src, tgt_in, tgt_out, sample: bool = True):
        """(reconstruction NLL, KL), each (B,)."""
        memory, mask = self.encode(src)
        mu_p, lv_p = self.prior_params(memory, mask)
        mu_q, lv_q = self.posterior_params(memory, mask, tgt_out)
        z = mu_q + torch.randn_like(mu_q) * (0.5 * lv_q).exp() if sample else mu_q
        nll = self.model.sentence_nll(self.model.decode(tgt_in, memory, mask, z), tgt_out)
        return nll, gaussian_kl(mu_q, lv_q, mu_p, lv_p)

    def vnmt_loss(self, src, tgt_in, tgt_out, done: float) -> torch.Tensor:
        """Minus the (annealed) ELBO per target token."""
        nll, kl = self.elbo_terms(src, tgt_in, tgt_out)
        return (nll + self.beta(done) * kl).sum() / (tgt_out != PAD).sum()

    @torch.no_grad()
    def negative_elbo(self, src, tgt_in, tgt_out) -> torch.Tensor:
        nll, kl = self.elbo_terms(src, tgt_in, tgt_out, sample=False)
        return nll + kl

    # ------------------------------------------------------------------ the protocol (.protocol)
    @staticmethod
    def cache_key(options: VNMTConfig | None) -> dict:
        return {"vnmt": non_default(options or VNMTConfig())}

    def training_loss(self, batch: Batch, progress: float, cfg):
        return self.vnmt_loss(batch.src, batch.tgt_in, batch.tgt_out, progress), None

    def validation_nll(self, batch: Batch, cfg) -> torch.Tensor:
        """The bound -ELBO (z = the posterior mean), per sentence."""
        return self.negative_elbo(batch.src, batch.tgt_in, batch.tgt_out)

    def stepper(self, src, z=None, use_cache: bool = True):
        """Decoding with a given latent vector z (B, dz)."""
        if z is None or not z.is_floating_point():
            raise ValueError(f"variational NMT decodes with a latent vector z of shape (batch, {self.config.n_latent}); "
                             "method 'vnmt' samples it from the prior")
        return self.model.stepper(src, z, use_cache)

    def cost(self) -> Cost:
        return Cost(self.model)

    @torch.no_grad()
    def prior_stepper(self, src, n: int, generator: torch.Generator, use_cache: bool = True):
        """One row per (source, draw): z drawn ``n`` times from the prior p(z | x) (noise from the
        CPU ``generator``, so that successive batches draw fresh noise), one stepper per draw, stacked."""
        from ..strategies import StackedStepper
        self.eval()
        memory, mask = self.encode(src)
        mu_p, lv_p = self.prior_params(memory, mask)
        eps = torch.randn((n,) + tuple(mu_p.shape), generator=generator).to(mu_p.device)
        return StackedStepper([self.model.stepper(src, mu_p + eps[i] * (0.5 * lv_p).exp(), use_cache)
                               for i in range(n)])

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
