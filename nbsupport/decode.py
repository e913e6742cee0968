"""Batched decoding: greedy, beam search, sampling, top-k sampling, diverse beam search and
K-latent parallel greedy.

Every algorithm drives a *stepper* (the contract is :class:`nbsupport.models.protocol.Stepper`):
``stepper(prefix)`` takes the (N, t) token prefixes (BOS first) and returns (N, V) log scores
of the next token; ``stepper.expand(n)`` repeats every source n times *in place*;
``stepper.reorder(index)`` keeps rows ``index`` of its state, in place (beam search re-ranks
hypotheses). Every model family gives one with ``model.stepper(src, z)`` (the Transformer's
keeps a key/value cache, the LSTM's its recurrent state, so a step costs one position);
:class:`TableStepper` wraps any function of the prefix (the tests use hand-made score tables).
Nothing here knows a model family. Scores are the model's ``log_scores``: log-softmax for
softmax models, log-sigmoid for SCONES models: the same search code decodes both.

Each method is a small strategy object (fairseq's ``search.py`` pattern): :class:`Greedy`,
:class:`Sampling` (plain, top-k or nucleus), :class:`Beam`, :class:`DiverseBeam` and
:class:`LatentGreedy`; :func:`decode` runs one on a model and returns, for every source, its
:class:`Hypothesis` objects: tokens, sentence score and per-token scores, whatever the method.
:func:`generate` is the same by method name, returning token ids only.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from .data.batching import pad_batch
from .data.vocab import BOS, EOS, PAD

METHODS = ("greedy", "beam", "sample", "topk", "nucleus", "diverse_beam", "latent_greedy")
MAX_LEN_A, MAX_LEN_B = 1.5, 10   # default output length limit: a * source length + b


# --------------------------------------------------------------------------- steppers
class TableStepper:
    """Log scores from any function of the prefix: ``fn(prefix_list) -> list of V log scores``."""

    device = torch.device("cpu")

    def __init__(self, fn: Callable[[list[int]], Sequence[float]]):
        self.fn = fn

    def expand(self, n: int) -> None:
        pass                             # stateless: every row is scored from its prefix alone

    def __call__(self, prefix: torch.Tensor) -> torch.Tensor:
        return torch.tensor([list(self.fn(row)) for row in prefix.tolist()], dtype=torch.float64)

    def reorder(self, index: torch.Tensor) -> None:
        pass


@dataclass
class Hypothesis:
    """One output of any decoding method."""
    tokens: list[int]      # without BOS, ending with EOS (unless cut at max_len)
    score: float           # summed log score of the tokens: the model's score of the sentence
    normalized: float      # score used for ranking (divided by length when length-normalised)
    token_scores: list[float] = field(default_factory=list)   # one log score per token; they sum to score
    penalty: float = 0.0   # diverse beam search: the Hamming penalties this search charged along the way
                           # (the peers count and carry them differently: see beam_search)


def _finish_row(tokens: list[int]) -> list[int]:
    return tokens[:tokens.index(EOS) + 1] if EOS in tokens else tokens


# --------------------------------------------------------------------------- greedy and sampling
@torch.no_grad()
def greedy_or_sample(stepper, batch: int, max_len: int | Sequence[int], temperature: float = 1.0,
                     top_k: int | None = None, sample: bool = False,
                     generator: torch.Generator | None = None, top_p: float | None = None) -> list[Hypothesis]:
    """Left to right, one token per row per step: the argmax (greedy), a sample from the
    scores divided by ``temperature``, a sample among the ``top_k`` best tokens, or a sample
    from the nucleus: the fewest best tokens whose probability sums to ``top_p`` or more."""
    dev = stepper.device
    limits = torch.as_tensor(max_len if not isinstance(max_len, int) else [max_len] * batch, device=dev)
    prefix = torch.full((batch, 1), BOS, dtype=torch.long, device=dev)
    done = torch.zeros(batch, dtype=torch.bool, device=dev)
    steps = []                                             # (batch,) log score of each step's token
    for t in range(int(limits.max())):
        logp = stepper(prefix)
        if sample:
            logits = logp / temperature
            if top_k is not None:
                logits = top_k_filter(logits, top_k)
            probs = torch.softmax(logits, dim=-1)
            if top_p is not None:
                probs = nucleus(probs, top_p)
            nxt = torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(1).to(dev)
        else:
            nxt = logp.argmax(dim=-1)
        nxt = torch.where(t + 1 >= limits, torch.full_like(nxt, EOS), nxt)  # force an end at max_len
        nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)
        steps.append(logp.gather(1, nxt[:, None]).squeeze(1))
        prefix = torch.cat([prefix, nxt[:, None]], dim=1)
        done |= nxt == EOS
        if bool(done.all()):
            break
    out = []
    for row, per_token in zip(prefix[:, 1:].tolist(), torch.stack(steps, dim=1).tolist()):
        toks = _finish_row(row)
        per_token = per_token[:len(toks)]
        score = math.fsum(per_token)
        out.append(Hypothesis(toks, score, score, per_token))
    return out


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Top-k filtering (Fan et al. 2018): the ``k`` best scores of each row stay, the others
    become -inf (ties with the k-th best stay too). ``logits``: (B, V)."""
    kth = logits.topk(min(k, logits.shape[-1]), dim=-1).values[:, -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus (top-p) filtering, Holtzman et al. 2020 section 3.1: keep the smallest set of most
    probable tokens whose probabilities sum to at least ``top_p`` (the best token always),
    zero the rest and renormalise. ``probs``: (B, V) rows summing to 1."""
    sorted_p, order = probs.sort(dim=-1, descending=True)
    # the mass of the better tokens as an exclusive running sum: (cumsum - p) can round below top_p
    before = torch.cat([torch.zeros_like(sorted_p[:, :1]), sorted_p.cumsum(dim=-1)[:, :-1]], dim=-1)
    keep_sorted = before < top_p                           # still short of top_p before this token
    keep_sorted[:, 0] = True
    keep = torch.zeros_like(keep_sorted).scatter(1, order, keep_sorted)
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


# --------------------------------------------------------------------------- beam search
@torch.no_grad()
def beam_search(stepper, batch: int, beam: int, max_len: int | Sequence[int], n_best: int = 1,
                length_norm: bool = False, groups: int = 1, diversity: float = 0.0) -> list[list[Hypothesis]]:
    """Beam search, or diverse beam search (Vijayakumar et al. 2018) when ``groups`` > 1.

    Each source keeps ``beam`` live hypotheses in ``groups`` groups of ``beam // groups``.
    At every step the groups choose in order. Group g ranks its candidates by their true score
    (the summed log scores, Vijayakumar et al.'s Theta) minus ``diversity`` times the number of
    times the candidate's token was chosen at this step by groups 0..g-1 of the same source:
    the Hamming diversity term of their eq. 3. A token counts once for every hypothesis of an
    earlier group that took it, EOS included (a hypothesis that ends there). Hypotheses keep
    their true scores, so the penalty decides only this step's choice.

    The peers differ in two ways: fairseq's ``DiverseBeamSearch`` counts every candidate an
    earlier group considered (its 2 x width, chosen or not), and both fairseq and Hugging Face
    (``HammingDiversityLogitsProcessor``) add the penalty into the running scores, so it keeps
    weighing on later steps. Each :class:`Hypothesis` carries ``penalty``, the penalties it paid,
    so ``score - penalty`` is the score those libraries would report for it.

    With ``groups=1`` this is plain beam search. A hypothesis ends when it emits EOS among the
    top ``width`` candidates of its group; a group stops once it holds ``beam // groups``
    finished hypotheses that no live one can beat (scores only fall; with length
    normalisation, once it holds that many), or at ``max_len`` where EOS is forced. Returns
    the ``n_best`` hypotheses of each source, best first (score divided by length when
    ``length_norm``); diverse beam search returns each group's best in turn, then each group's
    second, and so on.
    """
    if beam < 1 or groups < 1 or beam % groups:
        raise ValueError(f"beam ({beam}) must be a positive multiple of groups ({groups})")
    width = beam // groups
    dev = stepper.device
    limits = torch.as_tensor(max_len if not isinstance(max_len, int) else [max_len] * batch, device=dev)
    stepper.expand(beam)                                   # in place: row = (source, group, slot)
    prefix = torch.full((batch * beam, 1), BOS, dtype=torch.long, device=dev)
    prefix_scores = torch.zeros((batch * beam, 0), device=dev, dtype=torch.float64)   # per-token scores
    live = torch.full((batch, groups, width), float("-inf"), device=dev, dtype=torch.float64)  # running scores
    live[:, :, 0] = 0.0                                    # the other slots would duplicate slot 0
    paid = torch.zeros((batch, groups, width), device=dev, dtype=torch.float64)  # diversity penalties so far
    finished: list[list[list[Hypothesis]]] = [[[] for _ in range(groups)] for _ in range(batch)]
    closed = [[False] * groups for _ in range(batch)]

    for t in range(int(limits.max())):
        logp = stepper(prefix).view(batch, groups, width, -1)
        n_vocab = logp.shape[-1]
        force_end = t + 1 >= limits
        if bool(force_end.any()):
            forced = torch.full_like(logp, float("-inf"))
            forced[..., EOS] = logp[..., EOS]
            logp = torch.where(force_end[:, None, None, None], forced, logp)
        chosen = torch.zeros(batch, n_vocab, device=dev, dtype=torch.float64)  # picked at this step
        # an empty slot repeats its own group's first row: the model is never asked about another sentence
        new_index = [[row * width] * width for row in range(batch * groups)]
        new_tokens = [[PAD] * width for _ in range(batch * groups)]
        new_live = [[float("-inf")] * width for _ in range(batch * groups)]
        new_paid = [[0.0] * width for _ in range(batch * groups)]
        prefix_rows = prefix[:, 1:].tolist()
        prefix_score_rows = prefix_scores.tolist()
        for g in range(groups):
            cand = (live[:, g, :, None] + logp[:, g]).reshape(batch, -1)       # true scores
            penalised = bool(diversity and g)
            penalty = diversity * chosen.repeat(1, width) if penalised else None
            values, flat = (cand - penalty if penalised else cand).topk(min(2 * width, cand.shape[1]), dim=1)
            trues = cand.gather(1, flat).tolist()
            token_logps = logp[:, g].reshape(batch, -1).gather(1, flat).tolist()
            penalties = ((paid[:, g, :, None] + penalty.view(batch, width, n_vocab)).reshape(batch, -1).gather(1, flat).tolist()
                         if penalised else [[0.0] * flat.shape[1]] * batch)
            picked_b, picked_w = [], []
            for b, (vals, flats, scores, logps, pens) in enumerate(zip(values.tolist(), flat.tolist(), trues,
                                                                       token_logps, penalties)):
                if closed[b][g]:
                    continue
                row, kept = b * groups + g, 0
                for rank, (v, f, score, lp, pen) in enumerate(zip(vals, flats, scores, logps, pens)):
                    if v == float("-inf") or kept == width:
                        break
                    j, w = divmod(f, n_vocab)
                    src_row = row * width + j
                    if w == EOS:
                        if rank >= width:  # only an EOS among the top `width` ends a hypothesis
                            continue
                        toks = prefix_rows[src_row] + [EOS]
                        finished[b][g].append(Hypothesis(toks, score, score / len(toks) if length_norm else score,
                                                         prefix_score_rows[src_row] + [lp], pen))
                        picked_b.append(b)        # EOS is a token too: a later group ending here pays
                        picked_w.append(w)
                    else:
                        new_index[row][kept], new_tokens[row][kept], new_live[row][kept] = src_row, w, score
                        new_paid[row][kept] = pen
                        picked_b.append(b)
                        picked_w.append(w)
                        kept += 1
                fin = finished[b][g]
                if kept == 0:
                    closed[b][g] = True
                elif len(fin) >= width:
                    worst_kept = sorted((h.normalized for h in fin), reverse=True)[width - 1]
                    closed[b][g] = length_norm or max(new_live[row]) <= worst_kept
                if closed[b][g]:
                    new_live[row] = [float("-inf")] * width
            if picked_b:
                chosen.index_put_((torch.tensor(picked_b, device=dev), torch.tensor(picked_w, device=dev)),
                                  torch.ones(len(picked_b), device=dev, dtype=torch.float64), accumulate=True)
        if all(all(c) for c in closed):
            break
        index = torch.tensor(new_index, device=dev).view(-1)
        stepper.reorder(index)
        tokens = torch.tensor(new_tokens, device=dev).view(-1, 1)
        prefix = torch.cat([prefix[index], tokens], dim=1)
        chosen_logp = logp.reshape(batch * beam, -1)[index, tokens.squeeze(1)].to(torch.float64)
        prefix_scores = torch.cat([prefix_scores[index], chosen_logp[:, None]], dim=1)
        live = torch.tensor(new_live, device=dev, dtype=torch.float64).view(batch, groups, width)
        paid = torch.tensor(new_paid, device=dev, dtype=torch.float64).view(batch, groups, width)
    out = []
    for b in range(batch):
        per_group = [sorted(f, key=lambda h: h.normalized, reverse=True) for f in finished[b]]
        ranked = [grp[rank] for rank in range(width) for grp in per_group if rank < len(grp)]
        out.append(ranked[:n_best] if groups > 1 else per_group[0][:n_best])
    return out


# --------------------------------------------------------------------------- high-level API
def max_lengths(src: torch.Tensor, a: float, b: int, cap: int) -> list[int]:
    """Per-source maximum output length: a * source length + b, at most ``cap``."""
    lens = (src != PAD).sum(dim=1).tolist()
    return [min(cap, int(a * n + b)) for n in lens]


def _check_int(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def check_decoding_args(n: int = 1, beam: int = 4, temperature: float = 1.0, top_k: int = 10,
                        groups: int | None = None, diversity: float = 0.0, max_len_a: float = MAX_LEN_A,
                        max_len_b: int = MAX_LEN_B, seed: int = 0, top_p: float = 0.9) -> None:
    """Raise a ValueError naming the valid range of the first bad decoding argument."""
    _check_int("n", n, 1)
    _check_int("beam", beam, 1)
    _check_int("top_k", top_k, 1)
    _check_int("max_len_b", max_len_b, 1)
    _check_int("seed", seed, 0)
    if groups is not None:
        _check_int("groups", groups, 1)
    if not (isinstance(temperature, numbers.Real) and 0 < temperature < math.inf):
        raise ValueError(f"temperature must be a finite number > 0 (greedy decoding is the limit at 0: "
                         f"use method='greedy'), got {temperature!r}")
    if isinstance(top_p, bool) or not (isinstance(top_p, numbers.Real) and 0 < top_p <= 1):
        raise ValueError(f"top_p must be a number in (0, 1] (1 keeps every token: plain sampling), got {top_p!r}")
    if not (isinstance(diversity, numbers.Real) and 0 <= diversity < math.inf):
        raise ValueError(f"diversity must be a finite number >= 0, got {diversity!r}")
    if not (isinstance(max_len_a, numbers.Real) and 0 <= max_len_a < math.inf):
        raise ValueError(f"max_len_a must be a finite number >= 0, got {max_len_a!r}")


def as_latent(z, batch: int, device) -> torch.Tensor | None:
    """``z`` as a tensor on ``device``: None stays None; an int is the same latent value for
    every one of the ``batch`` sentences."""
    if z is None:
        return None
    if isinstance(z, bool) or not isinstance(z, (numbers.Integral, torch.Tensor)):
        raise TypeError(f"z must be None, an int (the same latent for every sentence) or a tensor "
                        f"with one entry per sentence, got {type(z).__name__}")
    if isinstance(z, numbers.Integral):
        return torch.full((batch,), int(z), dtype=torch.long, device=device)
    return z.to(device)


# --------------------------------------------------------------------------- strategies
@dataclass(frozen=True)
class Greedy:
    """The best token at every step: one hypothesis per source."""
    n: int = 1

    def __post_init__(self):
        if self.n != 1:
            raise ValueError(f"greedy decoding gives one hypothesis per source (n=1), got n={self.n}: "
                             "use beam, sample, topk, nucleus or diverse_beam for n > 1")

    def search(self, stepper, batch: int, limits: list[int], generator=None) -> list[list[Hypothesis]]:
        return [[h] for h in greedy_or_sample(stepper, batch, limits)]


@dataclass(frozen=True)
class Sampling:
    """``n`` samples per source from the scores divided by ``temperature``: among the ``top_k``
    best tokens when given (Fan et al. 2018), from the nucleus of probability ``top_p`` when
    given (Holtzman et al. 2020), else from every token (ancestral sampling)."""
    n: int = 1
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self):
        check_decoding_args(n=self.n, temperature=self.temperature, top_k=self.top_k or 1,
                            top_p=1.0 if self.top_p is None else self.top_p)

    def search(self, stepper, batch: int, limits: list[int], generator=None) -> list[list[Hypothesis]]:
        stepper.expand(self.n)
        hyps = greedy_or_sample(stepper, batch * self.n, [m for m in limits for _ in range(self.n)],
                                temperature=self.temperature, top_k=self.top_k, sample=True,
                                generator=generator, top_p=self.top_p)
        return [hyps[i * self.n:(i + 1) * self.n] for i in range(batch)]


@dataclass(frozen=True)
class Beam:
    """The ``n`` best hypotheses of a beam of ``beam`` (ranked by score / length when ``length_norm``)."""
    n: int = 1
    beam: int = 4
    length_norm: bool = False

    def __post_init__(self):
        if self.n > self.beam:
            raise ValueError(f"n ({self.n}) cannot exceed the beam ({self.beam})")

    def search(self, stepper, batch: int, limits: list[int], generator=None) -> list[list[Hypothesis]]:
        return beam_search(stepper, batch, self.beam, limits, self.n, self.length_norm)


@dataclass(frozen=True)
class DiverseBeam:
    """Diverse beam search (Vijayakumar et al. 2018): a beam of ``beam`` in ``groups`` groups,
    Hamming penalty ``diversity``; the ``n`` best, each group's best first (see :func:`beam_search`)."""
    n: int = 1
    beam: int = 4
    groups: int = 1
    diversity: float = 0.5
    length_norm: bool = False

    def __post_init__(self):
        if self.groups > self.beam or self.beam % self.groups:
            raise ValueError(f"the beam ({self.beam}) must be a multiple of the groups ({self.groups}): "
                             f"each group needs at least one hypothesis, so groups can be 1..{self.beam}")
        if self.n > self.beam:
            raise ValueError(f"n ({self.n}) cannot exceed the beam ({self.beam})")

    def search(self, stepper, batch: int, limits: list[int], generator=None) -> list[list[Hypothesis]]:
        return beam_search(stepper, batch, self.beam, limits, self.n, self.length_norm,
                           groups=self.groups, diversity=self.diversity)


@dataclass(frozen=True)
class LatentGreedy:
    """Greedy decoding under each latent value 0..K-1 of a latent-variable model, all K as one
    batch: one hypothesis per latent value (``n`` is K; 1 means "K" too)."""
    n: int = 1


def strategy(method: str = "greedy", n: int = 1, beam: int = 4, temperature: float = 1.0, top_k: int = 10,
             groups: int | None = None, diversity: float = 0.5, top_p: float = 0.9, length_norm: bool = False):
    """The strategy object of ``method`` (one of :data:`METHODS`) with its settings; the settings
    another method uses are ignored. Bad settings raise a ValueError naming the valid range."""
    if method not in METHODS:
        raise ValueError(f"unknown decoding method {method!r}; valid methods: {', '.join(METHODS)}")
    check_decoding_args(n, beam, temperature, top_k, groups, diversity, top_p=top_p)
    if method == "greedy":
        return Greedy(n)
    if method in ("sample", "topk", "nucleus"):
        return Sampling(n, temperature, top_k if method == "topk" else None, top_p if method == "nucleus" else None)
    if method == "beam":
        return Beam(n, beam, length_norm)
    if method == "diverse_beam":
        groups = groups or n
        width = max(beam, n)
        if groups > width:
            raise ValueError(f"diverse beam search with {groups} groups needs a beam of at least {groups} "
                             f"(one hypothesis per group), got beam={beam}, n={n}")
        width += (-width) % groups                         # a beam the groups divide
        return DiverseBeam(n, width, groups, diversity, length_norm)
    return LatentGreedy(n)


@torch.no_grad()
def decode(model, src, search=None, z: torch.Tensor | int | None = None, max_len_a: float = MAX_LEN_A,
           max_len_b: int = MAX_LEN_B, use_cache: bool = True, seed: int = 0,
           generator: torch.Generator | None = None) -> list[list[Hypothesis]]:
    """The hypotheses of every source (a list over sources of :class:`Hypothesis` lists: tokens,
    sentence score, per-token scores) under the strategy ``search`` (default :class:`Greedy`; a
    method's name gives its strategy with default settings).

    ``z``: the latent value of each source (a tensor of B indices, or B x K probabilities for
    target conditioning), or an int for the same value for every source. Outputs are at most
    ``max_len_a`` x source length + ``max_len_b`` tokens (and the model's ``max_len``).
    Sampling draws from ``generator`` when given (it advances, so successive calls continue
    its stream), else from a new generator seeded with ``seed``."""
    search = Greedy() if search is None else strategy(search) if isinstance(search, str) else search
    check_decoding_args(max_len_a=max_len_a, max_len_b=max_len_b, seed=seed)
    model.eval()
    first = src if torch.is_tensor(src) else src[0]      # a multi-source model takes a tuple of sources
    batch = first.shape[0]
    z = as_latent(z, batch, first.device)
    limits = max_lengths(first, max_len_a, max_len_b, model.config.max_len)
    k = model.config.n_latent
    if isinstance(search, LatentGreedy):
        if k < 2:
            raise ValueError("latent_greedy needs a model with a latent variable (n_latent > 1)")
        if z is not None:
            raise ValueError("latent_greedy decodes every latent value 0..K-1: do not pass z")
        if search.n not in (1, k):
            raise ValueError(f"latent_greedy returns one hypothesis per latent value: n is K={k}, got n={search.n}")
        zs = torch.arange(k, device=first.device).repeat(batch)    # row i*K + z
        stepper = model.stepper(src.repeat_interleave(k, 0), zs, use_cache)
        hyps = greedy_or_sample(stepper, batch * k, [m for m in limits for _ in range(k)])
        return [hyps[i * k:(i + 1) * k] for i in range(batch)]
    if z is None and k > 1:
        raise ValueError(f"the model has K={k} latent values: pass z, or use method='latent_greedy'")
    generator = generator if generator is not None else torch.Generator().manual_seed(seed)
    return search.search(model.stepper(src, z, use_cache), batch, limits, generator)


@torch.no_grad()
def generate(model, src: torch.Tensor, method: str = "greedy", n: int = 1, beam: int = 4,
             temperature: float = 1.0, top_k: int = 10, groups: int | None = None,
             diversity: float = 0.5, top_p: float = 0.9, length_norm: bool = False, max_len_a: float = MAX_LEN_A,
             max_len_b: int = MAX_LEN_B, z: torch.Tensor | int | None = None, use_cache: bool = True,
             seed: int = 0, generator: torch.Generator | None = None) -> list[list[list[int]]]:
    """Token ids of ``n`` hypotheses per source (list over sources of lists of token lists):
    :func:`decode` with the strategy of ``method``, by name.

    methods: ``greedy`` (n=1), ``beam`` (n best of a beam of ``beam``), ``sample``
    (n ancestral samples at ``temperature``), ``topk`` (n samples among the top_k tokens),
    ``nucleus`` (n samples from the nucleus of probability ``top_p``, Holtzman et al. 2020),
    ``diverse_beam`` (``groups`` groups, default n, of a beam of max(beam, n), Hamming
    penalty ``diversity``), ``latent_greedy`` (greedy for each of the model's K latent
    values, all decoded as one batch: n is K).
    Bad arguments (n, beam, top_k, groups, max_len_b < 1; temperature <= 0; top_p outside
    (0, 1]; diversity or max_len_a < 0; more groups than beams) raise a ValueError naming the
    valid range. For scores as well as tokens, use :func:`decode`.
    """
    search = strategy(method, n, beam, temperature, top_k, groups, diversity, top_p, length_norm)
    hyps = decode(model, src, search, z, max_len_a, max_len_b, use_cache, seed, generator)
    return [[h.tokens for h in hs] for hs in hyps]


def check_sentences(sentences: Sequence[str]) -> list[str]:
    """``sentences`` as a list, or a TypeError/ValueError naming the first bad one (a bare
    string, a non-string, an empty or whitespace-only sentence)."""
    if isinstance(sentences, str):
        raise TypeError("sentences must be a list of strings, got a bare string; wrap it in a list: [sentence]")
    sentences = list(sentences)
    for i, s in enumerate(sentences):
        if not isinstance(s, str):
            raise TypeError(f"source sentence {i} must be a string, got {type(s).__name__}")
        if not s.strip():
            raise ValueError(f"source sentence {i} is empty: nothing to translate")
    return sentences


def translate(model, src_vocab, tgt_vocab, sentences: Sequence[str], method: str = "greedy",
              batch_size: int = 64, device=None, z: torch.Tensor | int | None = None, seed: int = 0,
              unknown: str = "error", **kwargs) -> list[list[str]]:
    """Translate strings: a list (one per source) of lists of hypothesis strings.

    ``sentences`` is a list of strings; a bare string is rejected (wrap it: ``[sentence]``).
    A word the source vocabulary does not know is an error naming it, unless ``unknown="unk"``
    (translate it as <unk>, as evaluation on a test set does).
    They are decoded ``batch_size`` at a time with :func:`generate` (``kwargs``); ``z`` is an
    int (the same latent for every sentence) or one entry per sentence, cut per batch.
    Sampling uses one generator seeded once with ``seed``, whose stream runs on across the
    batches: the whole call is reproducible, and no two sentences share random draws."""
    sentences = check_sentences(sentences)
    _check_int("batch_size", batch_size, 1)
    _check_int("seed", seed, 0)
    if isinstance(z, torch.Tensor) and (z.dim() == 0 or z.shape[0] != len(sentences)):
        raise ValueError(f"z must have one entry per sentence ({len(sentences)}), got shape {tuple(z.shape)}; "
                         "pass an int for the same latent for every sentence")
    return translate_batches(
        lambda src, lo, generator: generate(model, src, method, z=z[lo:lo + len(src)] if isinstance(z, torch.Tensor) else z,
                                            seed=seed, generator=generator, **kwargs),
        model, src_vocab, tgt_vocab, sentences, batch_size, device, seed, unknown)


UNKNOWN = ("error", "unk")   # what translate does with a word the vocabulary does not know


def check_known_words(sentences: Sequence[str], vocab, unknown: str = "error") -> None:
    """A ValueError naming the first sentence's unknown words, when ``unknown`` is "error"."""
    if unknown not in UNKNOWN:
        raise ValueError(f"unknown={unknown!r}; valid: 'error' (name unknown words) or 'unk' (translate them as <unk>)")
    if unknown == "unk":
        return
    for i, sentence in enumerate(sentences):
        words = vocab.unknown_words(sentence)
        if words:
            raise ValueError(f"source sentence {i} has words the source vocabulary ({len(vocab)} entries) does not "
                             f"know: {', '.join(map(repr, words))}; pass unknown='unk' to translate them as <unk>")


def translate_batches(decode_batch, model, src_vocab, tgt_vocab, sentences: Sequence[str], batch_size: int = 64,
                      device=None, seed: int = 0, unknown: str = "error") -> list[list[str]]:
    """Strings through ``decode_batch(src, first_index, generator) -> token ids per source``,
    ``batch_size`` sources at a time on the model's device; one generator seeded with ``seed``
    runs across the batches (the whole call is reproducible, no two sentences share draws).
    Unknown words are an error unless ``unknown="unk"`` (see :func:`translate`)."""
    sentences = check_sentences(sentences)
    _check_int("batch_size", batch_size, 1)
    _check_int("seed", seed, 0)
    check_known_words(sentences, src_vocab, unknown)
    device = device or next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    out: list[list[str]] = []
    for lo in range(0, len(sentences), batch_size):
        src = pad_batch([src_vocab.encode(s) for s in sentences[lo:lo + batch_size]]).to(device)
        out.extend([[tgt_vocab.decode(h) for h in hs] for hs in decode_batch(src, lo, generator)])
    return out


@torch.no_grad()
def token_scores(model, src, hyps: Sequence[Sequence[int]], z: torch.Tensor | int | None = None) -> list[list[float]]:
    """The log score of every token of ``hyps[i]`` (token ids, as :func:`generate` returns them)
    given source row i and the tokens before it: teacher forcing (``model.score_tokens``: one
    pass for a Transformer, the stepper position by position for any other family; ``z``: the
    latent value, as in :func:`generate`). Their sum is the
    hypothesis' score; per token, they show *where* a model (or a latent value) prefers it."""
    model.eval()
    first = src if torch.is_tensor(src) else src[0]
    if len(hyps) != first.shape[0]:
        raise ValueError(f"one hypothesis per source row: {first.shape[0]} rows, {len(hyps)} hypotheses")
    if any(len(h) == 0 for h in hyps):
        raise ValueError("a hypothesis is empty: it has no tokens to score (an EOS at least)")
    steps = max(map(len, hyps))
    tokens = torch.tensor([list(h) + [PAD] * (steps - len(h)) for h in hyps], device=first.device)
    table = model.score_tokens(src, tokens, as_latent(z, first.shape[0], first.device)).cpu().tolist()
    return [row[:len(h)] for row, h in zip(table, hyps)]
