"""A small pre-LayerNorm Transformer encoder-decoder with a latent variable as BOS.

The seed paper's section 3.2: the mixture's K "experts" share every parameter except a table of K
latent embeddings; the embedding of latent value z *replaces* the decoder's first input
(the BOS token). ``n_latent = 1`` is the plain baseline: no table, the BOS embedding.

Incremental decoding keeps a key/value cache per decoder layer, so each new token costs
one position of work instead of re-running the whole prefix.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..data.batching import shift_right  # noqa: F401  (re-exported: nbs.models.shift_right)
from ..data.vocab import BOS, PAD
from .protocol import Batch, Cost, Family, check_dropout, check_positive


OUTPUTS = ("softmax", "scones")
E_STEP_MODES = ("eval", "train")
CPU_ESTEP_TOKENS = 6000   # target tokens per batched E-step pass on a CPU (cache-friendly size)


@dataclass(frozen=True)
class TransformerConfig:
    src_vocab: int
    tgt_vocab: int
    d_model: int = 128
    n_heads: int = 4
    d_ff: int = 512
    enc_layers: int = 2
    dec_layers: int = 2
    dropout: float = 0.1
    max_len: int = 256            # longest source or target, in tokens
    n_latent: int = 1             # K: 1 = plain baseline; K > 1 = latent table replacing BOS
    tie_embeddings: bool = True   # decoder input embedding = output projection
    output: str = "softmax"       # "softmax" or "scones" (one sigmoid per token, Stahlberg & Kumar 2022)
    scones_alpha: float = 1.0     # SCONES only: weight of the negative loss (eq. 6)
    e_step: str = "eval"          # Hard-MoE: "eval" = Algorithm 1; "train" = dropout in the E-step
    e_step_chunk: int | None = None  # score at most this many latent values per decoder pass (memory)
    chunked_loss: bool = False    # output projection + loss chunk by chunk (never all logits at once)

    def __post_init__(self):
        if self.output not in OUTPUTS:
            raise ValueError(f"unknown output {self.output!r}; valid outputs: {', '.join(OUTPUTS)}")
        check_dropout(self.dropout)
        if self.e_step not in E_STEP_MODES:
            raise ValueError(f"unknown e_step {self.e_step!r}; valid: {', '.join(E_STEP_MODES)}")
        if not self.scones_alpha > 0:
            raise ValueError(f"scones_alpha must be > 0, got {self.scones_alpha!r}")
        check_positive(d_model=self.d_model, n_heads=self.n_heads, d_ff=self.d_ff, enc_layers=self.enc_layers,
                       dec_layers=self.dec_layers, max_len=self.max_len)
        if self.n_latent < 1:
            raise ValueError(f"n_latent (K) must be >= 1 (1 = no latent), got {self.n_latent}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if min(self.src_vocab, self.tgt_vocab) < 5:
            raise ValueError("vocabularies need the 4 special tokens and at least one word")

    def to_dict(self) -> dict:
        return asdict(self)


def sinusoids(n: int, d: int) -> torch.Tensor:
    pos = torch.arange(n, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe = torch.zeros(n, d)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe


def attention(q, k, v, mask=None, causal: bool = False, dropout: float = 0.0) -> torch.Tensor:
    """softmax(q k^T / sqrt(d_k)) v over the keys that ``mask`` (True = real) and, when
    ``causal``, the causal order allow (Vaswani et al. 2017, eq. 1); (B, h, T, d_k) tensors.

    PyTorch's fused kernel on a GPU and for one-query decoding steps; for teacher-forced passes
    on a CPU (training, E-step, scoring) the plain composition below, faster on short sentences
    (benchmarks/README.md, "Profile sizing and other measurements")."""
    if q.device.type != "cpu" or q.shape[-2] == 1:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, dropout_p=dropout)
    scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)
    if causal:   # query i sees keys 0..i (queries are the last T of the S keys)
        t, s = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(t, s, dtype=torch.bool, device=q.device).triu(s - t + 1), float("-inf"))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return (F.dropout(weights, dropout) if dropout else weights) @ v


class Attention(nn.Module):
    """Multi-head attention with an optional KV cache."""

    def __init__(self, d: int, h: int, dropout: float):
        super().__init__()
        self.h, self.dropout = h, dropout
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * d)
        self.out = nn.Linear(d, d)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, h, T, d/h)
        b, t, d = x.shape
        return x.view(b, t, self.h, d // self.h).transpose(1, 2)

    def project_kv(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k, v = self.kv(source).chunk(2, dim=-1)
        return self._heads(k), self._heads(v)

    def forward(self, x, source=None, mask=None, causal=False, cache=None, static_kv=None):
        """``source`` None means self-attention. ``cache`` (a dict) accumulates self-attention
        keys/values across decoding steps; ``static_kv`` holds precomputed cross-attention ones."""
        q = self._heads(self.q(x))
        if static_kv is not None:
            k, v = static_kv
        else:
            k, v = self.project_kv(x if source is None else source)
            if cache is not None:
                if "k" in cache:
                    k = torch.cat([cache["k"], k], dim=2)
                    v = torch.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
        y = attention(q, k, v, mask, causal=causal and q.shape[2] > 1, dropout=self.dropout if self.training else 0.0)
        b, h, t, dh = y.shape
        return self.out(y.transpose(1, 2).reshape(b, t, h * dh))


class FeedForward(nn.Sequential):
    def __init__(self, d: int, d_ff: int, dropout: float):
        super().__init__(nn.Linear(d, d_ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d_ff, d))


class EncoderLayer(nn.Module):
    def __init__(self, c: TransformerConfig):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(c.d_model), nn.LayerNorm(c.d_model)
        self.attn = Attention(c.d_model, c.n_heads, c.dropout)
        self.ff = FeedForward(c.d_model, c.d_ff, c.dropout)
        self.drop = nn.Dropout(c.dropout)

    def forward(self, x, mask):
        x = x + self.drop(self.attn(self.ln1(x), mask=mask))
        return x + self.drop(self.ff(self.ln2(x)))


class DecoderLayer(nn.Module):
    def __init__(self, c: TransformerConfig):
        super().__init__()
        self.ln1, self.ln2, self.ln3 = (nn.LayerNorm(c.d_model) for _ in range(3))
        self.self_attn = Attention(c.d_model, c.n_heads, c.dropout)
        self.cross_attn = Attention(c.d_model, c.n_heads, c.dropout)
        self.ff = FeedForward(c.d_model, c.d_ff, c.dropout)
        self.drop = nn.Dropout(c.dropout)

    def forward(self, x, memory, mem_mask, cache=None):
        x = x + self.drop(self.self_attn(self.ln1(x), causal=cache is None or "k" not in cache, cache=cache))
        static = cache.get("cross") if cache is not None else None
        if cache is not None and static is None:
            static = cache["cross"] = self.cross_attn.project_kv(memory)
        x = x + self.drop(self.cross_attn(self.ln2(x), memory, mask=mem_mask, static_kv=static))
        return x + self.drop(self.ff(self.ln3(x)))


class Transformer(nn.Module, Family):
    """The baseline (K = 1), Hard-MoE (K > 1, trained by hard EM: :mod:`.hard_em`) and, with
    ``output="scones"``, the SCONES model: one family, three configurations."""

    family = "transformer"

    def __init__(self, config: TransformerConfig):
        super().__init__()
        c = self.config = config
        self.src_emb = nn.Embedding(c.src_vocab, c.d_model, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(c.tgt_vocab, c.d_model, padding_idx=PAD)
        self.latent = nn.Embedding(c.n_latent, c.d_model) if c.n_latent > 1 else None
        self.register_buffer("pe", sinusoids(c.max_len + 1, c.d_model), persistent=False)
        self.encoder = nn.ModuleList(EncoderLayer(c) for _ in range(c.enc_layers))
        self.decoder = nn.ModuleList(DecoderLayer(c) for _ in range(c.dec_layers))
        self.enc_ln, self.dec_ln = nn.LayerNorm(c.d_model), nn.LayerNorm(c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.proj = None if c.tie_embeddings else nn.Linear(c.d_model, c.tgt_vocab, bias=False)
        # Scaled init: N(0, d^-1/2) embeddings, multiplied by sqrt(d) on input. Default N(0, 1)
        # embeddings with a tied output layer made CPU training 2x slower through denormals.
        for emb in (self.src_emb, self.tgt_emb) + ((self.latent,) if self.latent is not None else ()):
            nn.init.normal_(emb.weight, std=c.d_model ** -0.5)
        for emb in (self.src_emb, self.tgt_emb):
            with torch.no_grad():
                emb.weight[PAD].zero_()

    # ------------------------------------------------------------------ encoder
    def check_source(self, src: torch.Tensor) -> None:
        if src.dim() != 2 or src.shape[1] == 0:
            raise ValueError(f"source must be a (batch, length >= 1) tensor of ids, got shape {tuple(src.shape)}")
        if src.shape[1] > self.config.max_len:
            raise ValueError(f"source of {src.shape[1]} tokens is longer than the model's max_len "
                             f"{self.config.max_len}; truncate it or build the model with a larger max_len")

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """-> memory (B, S, d) and the attention mask (B, 1, 1, S), True where a key is real."""
        self.check_source(src)
        mask = (src != PAD)[:, None, None, :]
        x = self.drop(self.src_emb(src) * math.sqrt(self.config.d_model) + self.pe[:src.shape[1]])
        for layer in self.encoder:
            x = layer(x, mask)
        return self.enc_ln(x), mask

    # ------------------------------------------------------------------ decoder
    def check_latent(self, z: torch.Tensor | None, batch: int) -> None:
        k = self.config.n_latent
        if k == 1:
            if z is not None and bool((z != 0).any()):
                raise ValueError("this model has no latent variable (n_latent=1): pass z=None")
            return
        if z is None:
            raise ValueError(f"this model has a latent variable with K={k} values: pass z (one per sentence)")
        if z.is_floating_point():   # a probability vector over the K values per sentence (target conditioning)
            if z.shape != (batch, k):
                raise ValueError(f"latent probabilities must have shape ({batch}, {k}), got {tuple(z.shape)}")
            return
        if z.shape != (batch,):
            raise ValueError(f"z must have shape ({batch},), got {tuple(z.shape)}")
        try:
            out_of_range = bool(((z < 0) | (z >= k)).any())
        except RuntimeError:          # under vmap (nbsupport.batched): z is the E-step's argmin, in range
            return
        if out_of_range:
            raise ValueError(f"latent index out of range: z must be in 0..{k - 1}, got {z.tolist()}")

    def embed_target(self, tgt_in: torch.Tensor, z: torch.Tensor | None, start: int = 0) -> torch.Tensor:
        """Embed decoder inputs at positions start.. ; at position 0 the latent replaces BOS:
        the embedding of value z, or for a probability vector p the mixture E p (Lachaux et al.)."""
        scale = math.sqrt(self.config.d_model)
        x = self.tgt_emb(tgt_in) * scale
        if self.latent is not None and start == 0:
            first = z.to(self.latent.weight.dtype) @ self.latent.weight if z.is_floating_point() else self.latent(z)
            x = torch.cat([first[:, None, :] * scale, x[:, 1:]], dim=1)
        return self.drop(x + self.pe[start:start + tgt_in.shape[1]])

    def decode_hidden(self, tgt_in, memory, mem_mask, z=None, cache=None, start: int = 0) -> torch.Tensor:
        """Final decoder states (B, T, d) for inputs ``tgt_in`` (B, T) from position ``start``."""
        if start + tgt_in.shape[1] > self.config.max_len + 1:
            raise ValueError(f"target longer than the model's max_len {self.config.max_len}")
        x = self.embed_target(tgt_in, z, start)
        for i, layer in enumerate(self.decoder):
            x = layer(x, memory, mem_mask, None if cache is None else cache[i])
        return self.dec_ln(x)

    @property
    def output_weight(self) -> torch.Tensor:
        """The (V, d) output projection (the target embeddings when tied)."""
        return self.tgt_emb.weight if self.proj is None else self.proj.weight

    def decode(self, tgt_in, memory, mem_mask, z=None, cache=None, start: int = 0) -> torch.Tensor:
        """Logits (B, T, V) for decoder inputs ``tgt_in`` (B, T) starting at position ``start``."""
        return self.decode_hidden(tgt_in, memory, mem_mask, z, cache, start) @ self.output_weight.t()

    def forward(self, src, tgt_in, z=None) -> torch.Tensor:
        self.check_latent(z, src.shape[0])
        memory, mask = self.encode(src)
        return self.decode(tgt_in, memory, mask, z)

    def log_scores(self, logits: torch.Tensor) -> torch.Tensor:
        """Per-token log scores (<= 0) that every search maximises: log-softmax for softmax
        models, log-sigmoid for SCONES models (Stahlberg & Kumar eq. 9)."""
        if self.config.output == "scones":
            return F.logsigmoid(logits.float())
        return F.log_softmax(logits.float(), dim=-1)

    def new_cache(self) -> list[dict]:
        return [{} for _ in self.decoder]

    # ------------------------------------------------------------------ scores
    def sentence_nll(self, logits: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
        """Minus the summed log score of each target sentence (B,), pads ignored: the NLL for
        softmax models, -sum log sigma(f_y) for SCONES models."""
        logits = logits.float()
        gold = logits.gather(-1, tgt_out.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        if self.config.output == "scones":
            scores = F.logsigmoid(gold)
        else:   # log softmax of the gold token only: no (tokens x vocabulary) log-softmax copy
            scores = gold - torch.logsumexp(logits, dim=-1)
        return -(scores * (tgt_out != PAD)).sum(dim=1)

    def latent_nll(self, memory, mem_mask, tgt_in, tgt_out, chunk: int | None = None) -> torch.Tensor:
        """NLL of every sentence under every latent value, (B, K), in batched decoder passes:
        the batch is stacked K times (z = 0..K-1). Differentiable: the E-step calls it under
        ``torch.no_grad()``, soft EM's M-step with gradients. ``chunk`` latent values go into one pass;
        by default all K on a GPU, and on a CPU as many as fit about 6k target tokens (a pass
        larger than the CPU's caches is slower than a loop over the experts: benchmarks/README.md)."""
        b, k = tgt_in.shape[0], self.config.n_latent
        if chunk is None:
            chunk = k if tgt_in.is_cuda else max(1, min(k, CPU_ESTEP_TOKENS // max(1, tgt_in.numel())))
        # cross-attention keys/values depend on the source only: project them once, not K times
        cross = [layer.cross_attn.project_kv(memory) for layer in self.decoder]
        out = []
        for lo in range(0, k, chunk):
            zs = torch.arange(lo, min(k, lo + chunk), device=tgt_in.device)
            n = len(zs)
            cache = [{"cross": (kk.repeat(n, 1, 1, 1), vv.repeat(n, 1, 1, 1))} for kk, vv in cross]
            logits = self.decode(tgt_in.repeat(n, 1), memory.repeat(n, 1, 1), mem_mask.repeat(n, 1, 1, 1),
                                 zs.repeat_interleave(b) if self.latent is not None else None, cache=cache)
            out.append(self.sentence_nll(logits, tgt_out.repeat(n, 1)).view(n, b).t())
        return torch.cat(out, dim=1)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    # ------------------------------------------------------------------ the protocol (.protocol)
    @property
    def default_method(self) -> str:
        return "latent_greedy" if self.config.n_latent > 1 else "beam"

    def training_loss(self, batch: Batch, progress: float, cfg):
        """A plain model minimises its loss; a latent model does Algorithm 1 of the seed paper (the
        E-step, then a train-mode step with the chosen z). Returns (loss, z or None)."""
        from ..losses import token_loss
        from .hard_em import hard_em_assign
        src, tgt_in, tgt_out, _ = batch
        z = None
        if self.config.n_latent > 1:
            z = hard_em_assign(self, src, tgt_in, tgt_out, self.config.e_step, self.config.e_step_chunk)
        return token_loss(self, src, tgt_in, tgt_out, z, cfg), z

    def validation_nll(self, batch: Batch, cfg) -> torch.Tensor:
        """The NLL (a latent model: of each sentence's best z), or for a SCONES model the SCONES
        loss with its training alpha, per sentence."""
        from ..losses import model_objective
        src, tgt_in, tgt_out, _ = batch
        memory, mask = self.encode(src)
        if self.config.n_latent > 1:
            return self.latent_nll(memory, mask, tgt_in, tgt_out).min(dim=1).values
        logits = self.decode(tgt_in, memory, mask)
        if self.config.output == "scones":
            return model_objective(self, logits, tgt_out, alpha=self.config.scones_alpha, reduction="none").sum(dim=1)
        return self.sentence_nll(logits, tgt_out)

    @torch.no_grad()
    def score_tokens(self, src, tokens: torch.Tensor, z=None) -> torch.Tensor:
        """(B, T) log scores of ``tokens`` in one teacher-forced pass (what the stepper would give
        one position at a time)."""
        self.check_latent(z, src.shape[0])
        memory, mask = self.encode(src)
        logits = self.decode(shift_right(tokens), memory, mask, z)
        return self.log_scores(logits).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)

    def stepper(self, src, z=None, use_cache: bool = True) -> "TransformerStepper":
        return TransformerStepper(self, src, z, use_cache)

    def cost(self) -> Cost:
        k = self.config.n_latent
        return Cost(self, extra_target_forwards=k if k > 1 else 0, valid_target_passes=k)


class TransformerStepper:
    """Next-token log scores of a Transformer for a batch of sources, with a KV cache: the
    decoders' stepping interface (see :mod:`nbsupport.decode`)."""

    def __init__(self, model: Transformer, src: torch.Tensor, z: torch.Tensor | None = None, use_cache: bool = True):
        self.model, self.use_cache = model, use_cache
        self.memory, self.mask = model.encode(src)
        self.device = src.device
        self.z = z
        model.check_latent(z, src.shape[0])
        self.cache = model.new_cache() if use_cache else None

    def expand(self, n: int) -> None:
        """Repeat every source n times (row i becomes rows i*n .. i*n+n-1)."""
        self.memory = self.memory.repeat_interleave(n, 0)
        self.mask = self.mask.repeat_interleave(n, 0)
        if self.z is not None:
            self.z = self.z.repeat_interleave(n, 0)

    def __call__(self, prefix: torch.Tensor) -> torch.Tensor:
        if self.use_cache:
            t = prefix.shape[1] - 1
            logits = self.model.decode(prefix[:, -1:], self.memory, self.mask, self.z, self.cache, start=t)
        else:
            logits = self.model.decode(prefix, self.memory, self.mask, self.z)
        return self.model.log_scores(logits[:, -1])

    def reorder(self, index: torch.Tensor) -> None:
        self.memory, self.mask = self.memory[index], self.mask[index]
        if self.z is not None:
            self.z = self.z[index]
        if self.cache is not None:
            for layer in self.cache:
                for key in ("k", "v"):
                    if key in layer:
                        layer[key] = layer[key][index]
                if "cross" in layer:
                    k, v = layer["cross"]
                    layer["cross"] = (k[index], v[index])

