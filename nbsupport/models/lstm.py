"""Multi-source LSTM encoder-decoder (Zoph & Knight 2016, seed 001 section 2).

One stacked-LSTM encoder per source language (sources fed reversed, Sutskever et al.),
a *combiner* per layer that merges the encoders' final hidden and cell states into the
decoder's initial state, and optionally attention (section 2.3): Luong's local-p
attention with input feeding, one predicted position, alignment and context per encoder,
combined as h~ = tanh(W_c [h_t; c_t^1; c_t^2]) (eq. 14).

With one source there is no combiner: the decoder starts from the encoder's state (the
paper's single-source baselines). Dropout is applied to non-recurrent connections only
(Zaremba et al. 2014): embeddings, between layers, before the output layer.

The model speaks the families' protocol (:mod:`.protocol`: training loss, validation NLL,
the decoders' stepper); a source batch is one tensor or, for several sources, a tuple of
tensors.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..data.vocab import BOS, PAD
from .protocol import Batch, Family, check_dropout, check_positive

COMBINERS = ("basic", "childsum")
ATTENTIONS = ("none", "local", "global")


@dataclass(frozen=True)
class LSTMConfig:
    src_vocab_sizes: tuple[int, ...]   # one per source language (1 or 2)
    tgt_vocab_size: int
    d_model: int = 256                 # embedding and hidden size (the paper: 1000)
    layers: int = 2                    # stacked layers, encoders and decoder alike (the paper: 4)
    dropout: float = 0.2
    combiner: str = "basic"            # two sources: "basic" (eqs. 1-2) or "childsum" (eqs. 3-8)
    attention: str = "none"            # "none", "local" (local-p, eqs. 9-12) or "global"
    window: int = 10                   # D: local-p looks at 2D+1 source positions, sigma = D/2
    reverse_source: bool = True
    init_range: float = 0.1            # uniform initialisation in [-r, r] (section 3)
    max_len: int = 256
    # what the shared training loop and decoders read
    output = "softmax"
    n_latent = 1

    def __post_init__(self):
        if self.combiner not in COMBINERS:
            raise ValueError(f"unknown combiner {self.combiner!r}; valid: {', '.join(COMBINERS)}")
        if self.attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {self.attention!r}; valid: {', '.join(ATTENTIONS)}")
        if len(self.src_vocab_sizes) not in (1, 2):
            raise ValueError(f"1 or 2 sources are supported, got {len(self.src_vocab_sizes)}")
        check_dropout(self.dropout)
        check_positive(d_model=self.d_model, layers=self.layers, window=self.window, max_len=self.max_len)
        if not self.init_range > 0:
            raise ValueError(f"init_range must be > 0 (uniform in [-r, r]), got {self.init_range!r}")

    @property
    def n_sources(self) -> int:
        return len(self.src_vocab_sizes)


# --------------------------------------------------------------------------- combiners
class BasicCombiner(nn.Module):
    """Eqs. 1-2: h = tanh(W_c [h1; h2]), c = c1 + c2."""

    def __init__(self, d: int):
        super().__init__()
        self.w_c = nn.Linear(2 * d, d, bias=False)

    def forward(self, h1, c1, h2, c2):
        return torch.tanh(self.w_c(torch.cat([h1, h2], dim=-1))), c1 + c2


class ChildSumCombiner(nn.Module):
    """Eqs. 3-8 (Child-Sum Tree-LSTM): input gate, output gate and candidate from both
    hidden states; one forget gate per incoming cell, each from its own encoder's h."""

    def __init__(self, d: int):
        super().__init__()
        # W^i, W^o, W^u for each source (3 x 2 matrices) and W^f_1, W^f_2: the paper's eight.
        self.w1 = nn.Linear(d, 3 * d, bias=False)     # [W^i_1; W^o_1; W^u_1]
        self.w2 = nn.Linear(d, 3 * d, bias=False)     # [W^i_2; W^o_2; W^u_2]
        self.wf1 = nn.Linear(d, d, bias=False)
        self.wf2 = nn.Linear(d, d, bias=False)

    def forward(self, h1, c1, h2, c2):
        i, o, u = (self.w1(h1) + self.w2(h2)).chunk(3, dim=-1)
        i, o, u = torch.sigmoid(i), torch.sigmoid(o), torch.tanh(u)        # eqs. 3, 5, 6
        f1, f2 = torch.sigmoid(self.wf1(h1)), torch.sigmoid(self.wf2(h2))  # eq. 4
        c = i * u + f1 * c1 + f2 * c2                                      # eq. 7
        return o * torch.tanh(c), c                                        # eq. 8


# --------------------------------------------------------------------------- attention
class Attention(nn.Module):
    """Luong attention over one encoder's top-layer states: local-p (eqs. 9-12) or global.

    local-p: p_t = S * sigmoid(v_p^T tanh(W_p h_t)) (S the source length); softmax of
    h_t^T W_a h_s over the window |s - p_t| <= D, times exp(-(s - p_t)^2 / (2 sigma^2)),
    sigma = D/2. Weights are >= 0, sum to at most 1 and are 0 outside the window.

    Parametrisation: ``w_a`` is an ``nn.Linear``, which applies its stored matrix, w_a(h) =
    weight @ h; the score w_a(h_t) . h_s = h_t^T weight^T h_s, so eq. 12's W_a is ``w_a.weight.T``
    (a transpose of the same learned matrix: the same model family). W_p = ``w_p.weight``,
    v_p = ``v_p.weight[0]``."""

    def __init__(self, d: int, kind: str, window: int):
        super().__init__()
        self.kind, self.window = kind, window
        self.w_a = nn.Linear(d, d, bias=False)
        if kind == "local":
            self.w_p = nn.Linear(d, d, bias=False)
            self.v_p = nn.Linear(d, 1, bias=False)

    def forward(self, h_t, states, mask, lengths):
        """h_t (B, d), states (B, S, d), mask (B, S) true at real tokens, lengths (B,).
        Returns the context (B, d) and the weights a_t (B, S)."""
        scores = torch.einsum("bd,bsd->bs", self.w_a(h_t), states)          # eq. 12
        if self.kind == "global":
            a = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        else:
            p_t = lengths.to(h_t.dtype) * torch.sigmoid(self.v_p(torch.tanh(self.w_p(h_t)))).squeeze(-1)  # eq. 9
            pos = torch.arange(states.shape[1], device=h_t.device, dtype=h_t.dtype)
            dist = pos[None, :] - p_t[:, None]
            inside = mask & (dist.abs() <= self.window)
            align = torch.softmax(scores.masked_fill(~inside, float("-inf")), dim=-1)   # eq. 11
            sigma = self.window / 2
            a = align * torch.exp(-dist.pow(2) / (2 * sigma ** 2))                     # eq. 10
        return torch.einsum("bs,bsd->bd", a, states), a


# --------------------------------------------------------------------------- the model
@dataclass
class Memory:
    """What the decoder reads from the encoders: per source, the top-layer states, the mask
    of real tokens and the lengths; the decoder's initial (h, c)."""
    states: list[torch.Tensor]
    masks: list[torch.Tensor]
    lengths: list[torch.Tensor]
    init: tuple[torch.Tensor, torch.Tensor]      # (layers, B, d) each

    def index(self, idx) -> "Memory":
        return Memory([s[idx] for s in self.states], [m[idx] for m in self.masks],
                      [l[idx] for l in self.lengths], (self.init[0][:, idx], self.init[1][:, idx]))


def reverse_padded(src: torch.Tensor) -> torch.Tensor:
    """Reverse every row's real tokens in place of the padding-right layout: [a b c PAD] -> [c b a PAD]."""
    lengths = (src != PAD).sum(dim=1, keepdim=True)
    pos = torch.arange(src.shape[1], device=src.device)[None, :]
    idx = torch.where(pos < lengths, lengths - 1 - pos, pos)
    return src.gather(1, idx)


class MultiSourceLSTM(nn.Module, Family):
    family = "lstm"

    def __init__(self, config: LSTMConfig):
        super().__init__()
        self.config = c = config
        d = c.d_model
        self.src_embed = nn.ModuleList(nn.Embedding(v, d, padding_idx=PAD) for v in c.src_vocab_sizes)
        between = c.dropout if c.layers > 1 else 0.0        # nn.LSTM drops out between layers only
        self.encoders = nn.ModuleList(nn.LSTM(d, d, c.layers, batch_first=True, dropout=between)
                                      for _ in c.src_vocab_sizes)
        combiner = BasicCombiner if c.combiner == "basic" else ChildSumCombiner
        self.combiners = nn.ModuleList(combiner(d) for _ in range(c.layers)) if c.n_sources == 2 else None
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, d, padding_idx=PAD)
        feed = d if c.attention != "none" else 0                   # input feeding: h~_{t-1} enters the input
        self.decoder = nn.LSTM(d + feed, d, c.layers, batch_first=True, dropout=between)
        if c.attention != "none":
            self.attention = nn.ModuleList(Attention(d, c.attention, c.window) for _ in c.src_vocab_sizes)
            self.w_c = nn.Linear(d * (1 + c.n_sources), d, bias=False)   # eqs. 13-14
        self.drop = nn.Dropout(c.dropout)
        self.out = nn.Linear(d, c.tgt_vocab_size)
        for p in self.parameters():
            nn.init.uniform_(p, -c.init_range, c.init_range)
        with torch.no_grad():
            for emb in [*self.src_embed, self.tgt_embed]:
                emb.weight[PAD].zero_()

    # ---------------------------------------------------------------- encoding
    def _sources(self, src) -> tuple[torch.Tensor, ...]:
        srcs = (src,) if torch.is_tensor(src) else tuple(src)
        if len(srcs) != self.config.n_sources:
            raise ValueError(f"the model has {self.config.n_sources} source(s), got {len(srcs)}")
        for s in srcs:
            if bool(((s != PAD).sum(dim=1) == 0).any()):
                raise ValueError("empty source sentence in the batch")
        return srcs

    def encode(self, src):
        """Run every encoder; returns (Memory, None) (None: the mask lives in Memory)."""
        states, masks, lengths, finals = [], [], [], []
        for j, s in enumerate(self._sources(src)):
            if self.config.reverse_source:
                s = reverse_padded(s)
            lens = (s != PAD).sum(dim=1)
            packed = nn.utils.rnn.pack_padded_sequence(self.drop(self.src_embed[j](s)), lens.cpu(),
                                                       batch_first=True, enforce_sorted=False)
            out, (h, c) = self.encoders[j](packed)
            out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=s.shape[1])
            states.append(out)
            masks.append(s != PAD)
            lengths.append(lens)
            finals.append((h, c))
        if self.combiners is None:
            init = finals[0]
        else:
            (h1, c1), (h2, c2) = finals
            hc = [comb(h1[l], c1[l], h2[l], c2[l]) for l, comb in enumerate(self.combiners)]
            init = (torch.stack([h for h, _ in hc]), torch.stack([c for _, c in hc]))
        return Memory(states, masks, lengths, init), None

    # ---------------------------------------------------------------- decoding
    def initial_state(self, memory: Memory) -> dict:
        h, c = memory.init
        state = {"hc": (h.contiguous(), c.contiguous())}
        if self.config.attention != "none":
            state["feed"] = h.new_zeros(h.shape[1], self.config.d_model)
        return state

    def attend(self, h_top, memory: Memory):
        """h~_t (eq. 13/14) from the top decoder state, and each source's weights."""
        ctx, weights = [], []
        for att, st, m, l in zip(self.attention, memory.states, memory.masks, memory.lengths):
            c_t, a = att(h_top, st, m, l)
            ctx.append(c_t)
            weights.append(a)
        return torch.tanh(self.w_c(torch.cat([h_top, *ctx], dim=-1))), weights

    def recurrent_weights(self) -> list[torch.Tensor]:
        """Per decoder layer, the matrix applied to [h~_{t-1}; h_{t-1}] (layer 0 with input
        feeding) or to h_{t-1}: the feed's columns of W_ih beside W_hh, transposed. Sliced once
        per sequence, not per step (a slice's backward fills a full-size zero gradient)."""
        lstm, d, feed = self.decoder, self.config.d_model, self.config.attention != "none"
        return [torch.cat([lstm.weight_ih_l0[:, -d:], lstm.weight_hh_l0], dim=1).t() if layer == 0 and feed
                else getattr(lstm, f"weight_hh_l{layer}").t() for layer in range(lstm.num_layers)]

    def decoder_cell(self, gates_in: torch.Tensor, feed, hc, weights=None):
        """One time step of the decoder LSTM (``self.decoder``'s parameters, its gate order i, f, g, o
        and its dropout between layers), written out: faster than a single-step ``nn.LSTM`` call on
        a CPU (benchmarks/README.md, "Profile sizing and other measurements"). ``gates_in`` is layer
        0's input contribution W_ih x_t + b_ih, computed for every position at once; ``feed`` the previous h~ (input feeding: the rest of
        layer 0's input) or None; ``weights`` :meth:`recurrent_weights` (computed when None).
        Returns the top h and the new (h, c), (layers, B, d) each."""
        lstm = self.decoder
        weights = weights if weights is not None else self.recurrent_weights()
        h_prev, c_prev = hc
        hs, cs, gates = [], [], gates_in
        for layer in range(lstm.num_layers):
            if layer > 0:
                gates = F.linear(F.dropout(hs[-1], lstm.dropout, self.training),
                                 getattr(lstm, f"weight_ih_l{layer}"), getattr(lstm, f"bias_ih_l{layer}"))
            recurrent = torch.cat([feed, h_prev[layer]], dim=-1) if layer == 0 and feed is not None else h_prev[layer]
            gates = torch.addmm(gates + getattr(lstm, f"bias_hh_l{layer}"), recurrent, weights[layer])
            i, f, g, o = gates.chunk(4, dim=-1)
            c = torch.sigmoid(f) * c_prev[layer] + torch.sigmoid(i) * torch.tanh(g)
            hs.append(torch.sigmoid(o) * torch.tanh(c))
            cs.append(c)
        return hs[-1], (torch.stack(hs), torch.stack(cs))

    def input_gates(self, x: torch.Tensor) -> torch.Tensor:
        """Layer 0's gate contribution of embedded target tokens x (..., d): W_ih[:, :d] x + b_ih."""
        return F.linear(x, self.decoder.weight_ih_l0[:, :self.config.d_model], self.decoder.bias_ih_l0)

    def step(self, tokens: torch.Tensor, memory: Memory, state: dict, recurrent=None):
        """One decoder step: tokens (B,) -> logits (B, V), new state, attention weights
        (``recurrent``: :meth:`recurrent_weights`, computed when None)."""
        h_tilde, state, weights = self._recur(self.input_gates(self.drop(self.tgt_embed(tokens))), memory, state,
                                              recurrent)
        return self.out(self.drop(h_tilde)), state, weights

    def _recur(self, gates_in, memory: Memory, state: dict, weights=None):
        """The recurrent part of a step: the LSTM, then (with attention) h~_t (eq. 13/14), which
        is fed to the next step. Returns the output before the softmax layer, state, weights."""
        h_top, hc = self.decoder_cell(gates_in, state.get("feed"), state["hc"], weights)
        if self.config.attention == "none":
            return h_top, {"hc": hc}, None
        h_tilde, weights = self.attend(h_top, memory)
        return h_tilde, {"hc": hc, "feed": h_tilde}, weights

    def decode(self, tgt_in, memory: Memory, mask=None, z=None, return_attention: bool = False):
        """Teacher-forced logits (B, T, V). Without attention the decoder runs over the whole
        sequence at once; with input feeding it must go step by step, but only the recurrence
        does: the embeddings, their share of the gates, the output layer and the dropouts
        around them run over all positions at once."""
        state = self.initial_state(memory)
        x = self.drop(self.tgt_embed(tgt_in))
        if self.config.attention == "none":
            out, _ = self.decoder(x, state["hc"])
            logits = self.out(self.drop(out))
            return (logits, None) if return_attention else logits
        gates_in, recurrent = self.input_gates(x), self.recurrent_weights()
        outs, maps = [], []
        for t in range(tgt_in.shape[1]):
            h_tilde, state, weights = self._recur(gates_in[:, t], memory, state, recurrent)
            outs.append(h_tilde)
            maps.append(weights)
        logits = self.out(self.drop(torch.stack(outs, dim=1)))
        if return_attention:    # per source: (B, T, S) in the encoder's (reversed) order
            return logits, [torch.stack([m[j] for m in maps], dim=1) for j in range(self.config.n_sources)]
        return logits

    def forward(self, src, tgt_in, z=None):
        memory, _ = self.encode(src)
        return self.decode(tgt_in, memory)

    @staticmethod
    def sentence_nll(logits, tgt_out) -> torch.Tensor:
        logp = F.log_softmax(logits.float(), dim=-1).gather(-1, tgt_out[..., None]).squeeze(-1)
        return -(logp * (tgt_out != PAD)).sum(dim=-1)

    @staticmethod
    def log_scores(logits) -> torch.Tensor:
        return F.log_softmax(logits.float(), dim=-1)

    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    # ---------------------------------------------------------------- the protocol (.protocol)
    def training_loss(self, batch: Batch, progress: float, cfg):
        """Cross-entropy per target token (label smoothing from ``cfg``)."""
        from ..losses import cross_entropy_loss
        return cross_entropy_loss(self(batch.src, batch.tgt_in), batch.tgt_out, pad_id=PAD,
                                  label_smoothing=cfg.label_smoothing), None

    def validation_nll(self, batch: Batch, cfg) -> torch.Tensor:
        memory, _ = self.encode(batch.src)
        return self.sentence_nll(self.decode(batch.tgt_in, memory), batch.tgt_out)

    def stepper(self, src, z=None, use_cache: bool = True) -> "LSTMStepper":
        if z is not None:
            raise ValueError("the multi-source LSTM has no latent variable: pass z=None")
        return LSTMStepper(self, src)


class LSTMStepper:
    """The decoders' stepper protocol (see :mod:`nbsupport.decode`) for :class:`MultiSourceLSTM`:
    the recurrent state is the cache, so a step costs one position."""

    def __init__(self, model: MultiSourceLSTM, src):
        self.model = model
        self.memory, _ = model.encode(src)
        self.state = model.initial_state(self.memory)
        self.recurrent = model.recurrent_weights()           # once per search, not per step
        self.device = self.memory.states[0].device
        self.weights: list = []

    def expand(self, n: int) -> None:
        self._index(torch.arange(self.memory.states[0].shape[0], device=self.device).repeat_interleave(n))

    def _index(self, idx) -> None:
        self.memory = self.memory.index(idx)
        self.state = {"hc": (self.state["hc"][0][:, idx], self.state["hc"][1][:, idx]),
                      **({"feed": self.state["feed"][idx]} if "feed" in self.state else {})}

    def __call__(self, prefix: torch.Tensor) -> torch.Tensor:
        logits, self.state, _ = self.model.step(prefix[:, -1], self.memory, self.state, self.recurrent)
        return self.model.log_scores(logits)

    def reorder(self, index: torch.Tensor) -> None:
        self._index(index)

