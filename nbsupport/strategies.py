"""The searches and the one generator loop (fairseq's ``search.py`` and ``sequence_generator.py``):
a *search* chooses, one *loop* generates. :mod:`nbsupport.decode` runs them on a model.

A search (:class:`Greedy`, :class:`Sampling`, :class:`Beam`, :class:`DiverseBeam`,
:class:`LatentGreedy`, :class:`PriorSample`) has one method that matters, ``step``: given one
step's log scores of the next token and the running scores of the live hypotheses, it returns
its candidates, best first (their running scores, their tokens, and the hypotheses they extend).
:func:`generate` is the one loop: it asks the model for log scores, forces an end at the length
limit, lets the search choose, ends the hypotheses whose candidate is EOS, keeps the others, and
stops. The one entry point, :func:`nbsupport.decode.decode`, takes a model, its sources and a
method (a search object, or a method's name from :data:`nbsupport.registry.METHODS`) and gives
every source's :class:`Hypothesis` objects. Strings in and out: :mod:`nbsupport.translation`.

A search sees its live hypotheses as ``groups`` groups of ``width`` (beam search: one group of
``beam``; diverse beam search: ``groups`` groups; sampling: ``n`` groups of one, each an
independent sample). Every group keeps its own finished hypotheses and stops on its own.

The loop drives a *stepper* (:class:`nbsupport.models.protocol.Stepper`): ``stepper(prefix)``
takes the (N, t) prefixes (BOS first) and returns (N, V) log scores of the next token;
``stepper.expand(n)`` repeats every source n times in place; ``stepper.reorder(index)`` keeps
rows ``index`` of its state. Each model family gives one with ``model.stepper(src, z)``;
:class:`TableStepper` wraps any function of the prefix (the tests use hand-made tables). Scores are
the model's ``log_scores``: log-softmax or, for SCONES, log-sigmoid: the same loop decodes both.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Sequence

import torch

from .data.vocab import BOS, EOS, PAD

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


class StackedStepper:
    """K steppers over the same B sources as one of B x K rows (row b * K + i is stepper i's row b):
    K separately trained experts, or one model under K sampled latent vectors, decoded together."""

    def __init__(self, steppers: Sequence):
        self.steppers = list(steppers)
        self.device = self.steppers[0].device

    def expand(self, n: int) -> None:
        if n != 1:
            raise ValueError("a stacked stepper already holds one row per stepper and source")

    def __call__(self, prefix: torch.Tensor) -> torch.Tensor:
        k = len(self.steppers)
        rows = [s(prefix[i::k]) for i, s in enumerate(self.steppers)]
        return torch.stack(rows, dim=1).reshape(prefix.shape[0], -1)

    def reorder(self, index: torch.Tensor) -> None:
        raise ValueError("a stacked stepper decodes one hypothesis per row (greedy): it cannot reorder rows")


@dataclass
class Hypothesis:
    """One output of any decoding method."""
    tokens: list[int]      # without BOS, ending with EOS (unless cut at max_len)
    score: float           # summed log score of the tokens: the model's score of the sentence
    normalized: float      # score used for ranking (divided by length when length-normalised)
    token_scores: list[float] = field(default_factory=list)   # one log score per token; they sum to score
    penalty: float = 0.0   # diverse beam search: the Hamming penalties this search charged along the way
                           # (the peers count and carry them differently: see DiverseBeam)


def token_ids(hypotheses: Sequence[Sequence[Hypothesis]]) -> list[list[list[int]]]:
    """The token lists of :func:`decode`'s hypotheses, source by source."""
    return [[h.tokens for h in hs] for hs in hypotheses]


# --------------------------------------------------------------------------- filters
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


# --------------------------------------------------------------------------- argument checks
def check_int(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def check_real(name: str, value, low: float, valid: str, low_open: bool = False, high: float = math.inf) -> None:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and value < high
    ok = ok and (value > low if low_open else value >= low)
    if not ok:
        raise ValueError(f"{name} must be {valid}, got {value!r}")


# --------------------------------------------------------------------------- searches
class Candidates(NamedTuple):
    """A step's candidates per (source, group), best first, each (B, G, C): running scores
    (-inf: no candidate), tokens, the slot of the live hypothesis each extends, and (diverse
    beam search) the penalty each is charged at this step."""
    scores: torch.Tensor
    tokens: torch.Tensor
    beams: torch.Tensor
    penalty: torch.Tensor | None = None


def select(cand: Candidates, width: int, closed: torch.Tensor):
    """What the loop does with a group's candidates: an EOS among the first ``width`` ends a
    hypothesis; the other candidates fill the ``width`` slots in order; a closed group takes
    nothing. Returns (ends, keeps, slot), each (B, G, C)."""
    valid = (cand.scores > float("-inf")) & ~closed[..., None]
    is_eos = cand.tokens == EOS
    rank = torch.arange(cand.scores.shape[-1], device=cand.scores.device)
    ends = valid & is_eos & (rank < width)
    extends = valid & ~is_eos
    slot = extends.long().cumsum(-1) - extends.long()
    return ends, extends & (slot < width), slot


class Search:
    """What every search shares: ``n`` hypotheses per source from ``groups`` x ``width`` live rows."""
    n: int = 1
    length_norm = False              # rank finished hypotheses by score / length
    reorders = True                  # False: every row keeps its own hypothesis (greedy, sampling)

    @property
    def groups(self) -> int:
        return self.n

    @property
    def width(self) -> int:
        return 1

    def stepper(self, model, src, z, use_cache: bool, generator):
        """The model's stepper with ``groups * width`` rows per source."""
        k = model.config.n_latent
        if z is None and k > 1:
            raise ValueError(f"the model has K={k} latent values: pass z, or use method='latent_greedy'")
        stepper = model.stepper(src, z, use_cache)
        if self.groups * self.width > 1:
            stepper.expand(self.groups * self.width)
        return stepper

    def initial_scores(self, batch: int, device) -> torch.Tensor:
        """(B, G, W) running scores before the first token: every row live."""
        return torch.zeros((batch, self.groups, self.width), device=device, dtype=torch.float64)

    def step(self, t: int, lprobs: torch.Tensor, scores: torch.Tensor, closed: torch.Tensor,
             generator=None) -> Candidates:
        raise NotImplementedError

    def search(self, stepper, batch: int, limits: Sequence[int], generator=None) -> list[list[Hypothesis]]:
        """:func:`generate` with this search on a stepper of ``batch`` sources (expanded here)."""
        if self.groups * self.width > 1:
            stepper.expand(self.groups * self.width)
        return generate(stepper, self, batch, limits, generator)


def _one_per_row(tokens: torch.Tensor, lprobs: torch.Tensor, scores: torch.Tensor) -> Candidates:
    picked = lprobs.gather(-1, tokens[..., None]).squeeze(-1).to(torch.float64)
    return Candidates(scores + picked, tokens, torch.zeros_like(tokens))


@dataclass(frozen=True)
class Greedy(Search):
    """The best token at every step: one hypothesis per source."""
    n: int = 1
    reorders = False

    def __post_init__(self):
        if self.n != 1:
            raise ValueError(f"greedy decoding gives one hypothesis per source (n=1), got n={self.n}: "
                             "use beam, sampling, topk, nucleus or diverse_beam for n > 1")

    def step(self, t, lprobs, scores, closed, generator=None) -> Candidates:
        return _one_per_row(lprobs.argmax(-1), lprobs, scores)


@dataclass(frozen=True)
class Sampling(Search):
    """``n`` samples per source from the scores divided by ``temperature``: among the ``top_k``
    best tokens when given (Fan et al. 2018), from the nucleus of probability ``top_p`` when
    given (Holtzman et al. 2020), else from every token (ancestral sampling)."""
    n: int = 1
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    reorders = False

    def __post_init__(self):
        check_int("n", self.n, 1)
        check_real("temperature", self.temperature, 0, "a finite number > 0 (greedy decoding is the limit at 0: "
                    "use method='greedy')", low_open=True)
        if self.top_k is not None:
            check_int("top_k", self.top_k, 1)
        if self.top_p is not None:
            check_real("top_p", self.top_p, 0, "a number in (0, 1] (1 keeps every token: plain sampling)",
                        low_open=True, high=1 + 1e-12)

    def step(self, t, lprobs, scores, closed, generator=None) -> Candidates:
        logits = lprobs.reshape(-1, lprobs.shape[-1]) / self.temperature
        if self.top_k is not None:
            logits = top_k_filter(logits, self.top_k)
        probs = torch.softmax(logits, dim=-1)
        if self.top_p is not None:
            probs = nucleus(probs, self.top_p)
        tokens = torch.multinomial(probs.cpu(), 1, generator=generator).to(lprobs.device)
        return _one_per_row(tokens.view(lprobs.shape[:-1]), lprobs, scores)


@dataclass(frozen=True)
class Beam(Search):
    """The ``n`` best hypotheses of a beam of ``beam`` (ranked by score / length when ``length_norm``).
    A hypothesis ends when EOS is among its group's ``beam`` best candidates; the search stops when
    its ``beam`` best finished hypotheses cannot be beaten by a live one (scores only fall; with
    length normalisation, as soon as it holds that many), or at the length limit, where EOS is forced."""
    n: int = 1
    beam: int = 4
    length_norm: bool = False

    def __post_init__(self):
        check_int("n", self.n, 1)
        check_int("beam", self.beam, 1)
        if self.n > self.beam:
            raise ValueError(f"n ({self.n}) cannot exceed the beam ({self.beam})")

    @property
    def groups(self) -> int:
        return 1

    @property
    def width(self) -> int:
        return self.beam

    def initial_scores(self, batch, device):
        scores = torch.full((batch, self.groups, self.width), float("-inf"), device=device, dtype=torch.float64)
        scores[:, :, 0] = 0.0            # the other slots would repeat slot 0
        return scores

    def step(self, t, lprobs, scores, closed, generator=None, penalty=None) -> Candidates:
        """The ``2 * width`` best extensions of each group's live hypotheses, by running score
        (minus ``penalty`` (B, G, V) per token when given: diverse beam search)."""
        batch, groups, width, vocab = lprobs.shape
        cand = (scores[..., None] + lprobs).reshape(batch, groups, -1)                    # running scores
        ranked = cand if penalty is None else cand - penalty.repeat(1, 1, width)
        _, flat = ranked.topk(min(2 * width, cand.shape[-1]), dim=-1)
        return Candidates(cand.gather(-1, flat), flat % vocab, flat // vocab)


@dataclass(frozen=True)
class DiverseBeam(Beam):
    """Diverse beam search (Vijayakumar et al. 2018): a beam of ``beam`` in ``groups`` groups that
    choose in turn. Group g ranks its candidates by their running score minus ``diversity`` times
    the number of hypotheses of groups 0..g-1 of the same source that took the candidate's token at
    this step (EOS included): the Hamming diversity term of their eq. 3. Hypotheses keep their true
    scores, so the penalty decides only this step's choice; the ``n`` best come back each group's
    best first, then each group's second, and so on.

    The peers differ in two ways: fairseq's ``DiverseBeamSearch`` counts every candidate an
    earlier group considered (its 2 x width, chosen or not), and both fairseq and Hugging Face
    (``HammingDiversityLogitsProcessor``) add the penalty into the running scores, so it keeps
    weighing on later steps. Each :class:`Hypothesis` carries ``penalty``, the penalties it paid,
    so ``score - penalty`` is the score those libraries would report for it."""
    n: int = 1
    beam: int = 4
    length_norm: bool = False
    groups: int = 1
    diversity: float = 0.5

    def __post_init__(self):
        super().__post_init__()
        check_int("groups", self.groups, 1)
        check_real("diversity", self.diversity, 0, "a finite number >= 0")
        if self.groups > self.beam or self.beam % self.groups:
            raise ValueError(f"the beam ({self.beam}) must be a multiple of the groups ({self.groups}): "
                             f"each group needs at least one hypothesis, so groups can be 1..{self.beam}")

    @property
    def width(self) -> int:
        return self.beam // self.groups

    def step(self, t, lprobs, scores, closed, generator=None) -> Candidates:
        batch, groups, width, vocab = lprobs.shape
        taken = torch.zeros((batch, 1, vocab), device=lprobs.device, dtype=torch.float64)   # tokens chosen so far
        parts = []
        for g in range(groups):
            penalised = bool(self.diversity and g)
            penalty = self.diversity * taken if penalised else None
            c = Beam.step(self, t, lprobs[:, g:g + 1], scores[:, g:g + 1], closed, penalty=penalty)
            charged = penalty.gather(-1, c.tokens) if penalised else torch.zeros_like(c.scores)
            parts.append(c._replace(penalty=charged))
            ends, keeps, _ = select(c, width, closed[:, g:g + 1])
            taken.scatter_add_(-1, c.tokens, (ends | keeps).to(taken.dtype))
        return Candidates(*(torch.cat(p, dim=1) for p in zip(*parts)))


@dataclass(frozen=True)
class LatentGreedy(Greedy):
    """Greedy decoding under each latent value 0..K-1 of a latent-variable model, all K as one
    batch: one hypothesis per latent value (``n`` is K; 1 means "K" too)."""
    n: int = 1

    def __post_init__(self):
        check_int("n", self.n, 1)

    def for_model(self, model) -> "LatentGreedy":
        k = model.config.n_latent
        if k < 2:
            raise ValueError("latent_greedy needs a model with a latent variable (n_latent > 1)")
        if self.n not in (1, k):
            raise ValueError(f"latent_greedy returns one hypothesis per latent value: n is K={k}, got n={self.n}")
        return LatentGreedy(k)

    def stepper(self, model, src, z, use_cache, generator):
        if z is not None:
            raise ValueError("latent_greedy decodes every latent value 0..K-1: do not pass z")
        return model.latent_stepper(src, use_cache)


@dataclass(frozen=True)
class PriorSample(Greedy):
    """A continuous latent drawn ``n`` times from the model's prior p(z | x), then greedy
    decoding under each draw (variational NMT's way to get n hypotheses)."""
    n: int = 1

    def __post_init__(self):
        check_int("n", self.n, 1)

    def stepper(self, model, src, z, use_cache, generator):
        if z is not None:
            raise ValueError("prior_sample draws z from the model's prior: do not pass z")
        return model.prior_stepper(src, self.n, generator, use_cache)


# --------------------------------------------------------------------------- the loop
def max_lengths(src: torch.Tensor, a: float, b: int, cap: int) -> list[int]:
    """Per-source maximum output length: a * source length + b, at most ``cap``."""
    lens = (src != PAD).sum(dim=1).tolist()
    return [min(cap, int(a * n + b)) for n in lens]


@torch.no_grad()
def generate(stepper, search: Search, batch: int, limits: Sequence[int], generator=None) -> list[list[Hypothesis]]:
    """The one generator loop: every search, every model. ``stepper`` holds ``search.groups *
    search.width`` rows per source (row = source, group, slot); ``limits[b]`` is source b's
    longest output. Returns each source's ``search.n`` best hypotheses (interleaved over groups)."""
    groups, width, dev = search.groups, search.width, stepper.device
    rows = batch * groups * width
    limits = torch.as_tensor(list(limits), device=dev)
    prefix = torch.full((rows, 1), BOS, dtype=torch.long, device=dev)
    token_scores = torch.zeros((rows, 0), device=dev, dtype=torch.float64)
    live = search.initial_scores(batch, dev)                          # (B, G, W) running scores
    paid = torch.zeros_like(live)                                     # diverse beam search's penalties
    closed = torch.zeros((batch, groups), dtype=torch.bool, device=dev)
    finished: list[list[list[Hypothesis]]] = [[[] for _ in range(groups)] for _ in range(batch)]
    kth_best = torch.full((batch, groups), float("-inf"), device=dev, dtype=torch.float64)
    first_row = torch.arange(batch * groups, device=dev).view(batch, groups, 1) * width   # a group's row 0

    for t in range(int(limits.max())):
        lprobs = stepper(prefix).view(batch, groups, width, -1)
        at_limit = (t + 1 >= limits)[:, None, None, None]              # only EOS is left
        lprobs = torch.where(at_limit & (torch.arange(lprobs.shape[-1], device=dev) != EOS), float("-inf"), lprobs)
        cand = search.step(t, lprobs, live, closed, generator)
        ends, keeps, slot = select(cand, width, closed)
        src_rows = first_row + cand.beams                              # (B, G, C) the rows extended
        charged = paid.gather(-1, cand.beams) + cand.penalty if cand.penalty is not None else None
        step_scores = lprobs.reshape(batch, groups, -1).gather(-1, cand.beams * lprobs.shape[-1] + cand.tokens)

        # end the hypotheses whose candidate is EOS
        ended = ends.nonzero().tolist()
        if ended:
            history, tails = prefix[:, 1:].tolist(), step_scores.tolist()
            past = token_scores.tolist()
            penalties = charged.tolist() if charged is not None else None
            for b, g, c in ended:
                row = src_rows[b, g, c].item()
                tokens, per_token = history[row] + [EOS], past[row] + [tails[b][g][c]]
                score = math.fsum(per_token)
                finished[b][g].append(Hypothesis(tokens, score, score / len(tokens) if search.length_norm else score,
                                                 per_token, penalties[b][g][c] if penalties else 0.0))
            for b, g in {(b, g) for b, g, _ in ended}:
                done = sorted((h.normalized for h in finished[b][g]), reverse=True)
                kth_best[b, g] = done[width - 1] if len(done) >= width else float("-inf")

        # the others fill the slots in order; a slot left empty repeats its group's first row
        if width == 1 and not search.reorders:                          # one row, one candidate: no slots to fill
            new_live = torch.where(keeps, cand.scores, float("-inf"))
            new_rows, new_tokens = first_row, torch.where(keeps, cand.tokens, PAD)
            new_step = torch.where(keeps, step_scores.to(torch.float64), 0.0)
            new_paid = paid
        else:
            slot = torch.where(keeps, slot, width)                      # width: a discarded candidate
            new_live = torch.full((batch, groups, width + 1), float("-inf"), device=dev, dtype=torch.float64)
            new_live.scatter_(-1, slot, torch.where(keeps, cand.scores, float("-inf")))
            new_rows = first_row.expand(-1, -1, width + 1).clone().scatter_(-1, slot, src_rows)
            new_tokens = torch.full_like(new_rows, PAD).scatter_(-1, slot, cand.tokens)
            new_step = torch.zeros_like(new_live).scatter_(-1, slot, step_scores.to(torch.float64))
            new_paid = torch.zeros_like(new_live)
            if charged is not None:
                new_paid.scatter_(-1, slot, charged)
            new_live, new_rows, new_tokens, new_step, new_paid = (x[..., :width] for x in
                                                                  (new_live, new_rows, new_tokens, new_step, new_paid))

        # a group stops when nothing is left, or when none of its live hypotheses can beat its
        # `width`-th best finished one (with length normalisation: once it holds `width`)
        kept = keeps.sum(-1)
        enough = kth_best > float("-inf")
        beaten = new_live.amax(-1) <= kth_best         # amax: max(dim) with indices is slow on a CPU
        closed = closed | (kept == 0) | (enough & (beaten | search.length_norm))
        if bool(closed.all()):
            break
        live = new_live.masked_fill(closed[..., None], float("-inf"))
        paid = new_paid
        index = new_rows.reshape(-1)
        if search.reorders:
            stepper.reorder(index)
            prefix, token_scores = prefix[index], token_scores[index]
        prefix = torch.cat([prefix, new_tokens.reshape(-1, 1)], dim=1)
        token_scores = torch.cat([token_scores, new_step.reshape(-1, 1)], dim=1)

    out = []
    for b in range(batch):
        per_group = [sorted(f, key=lambda h: h.normalized, reverse=True) for f in finished[b]]
        out.append([grp[rank] for rank in range(width) for grp in per_group if rank < len(grp)][:search.n])
    return out


# shorthands of the peers' tests: the loop with one search on a stepper
def beam_search(stepper, batch: int, beam: int, max_len, n_best: int = 1, length_norm: bool = False,
                groups: int = 1, diversity: float = 0.0) -> list[list[Hypothesis]]:
    """Beam search (``groups`` = 1) or diverse beam search on a stepper (see :class:`DiverseBeam`)."""
    limits = [max_len] * batch if isinstance(max_len, int) else max_len
    search = (Beam(n_best, beam, length_norm) if groups == 1 else
              DiverseBeam(n_best, beam, length_norm, groups=groups, diversity=diversity))
    return search.search(stepper, batch, limits)


def greedy_or_sample(stepper, batch: int, max_len, temperature: float = 1.0, top_k: int | None = None,
                     sample: bool = False, generator=None, top_p: float | None = None) -> list[Hypothesis]:
    """One hypothesis per row: greedy, or a sample (see :class:`Sampling`)."""
    limits = [max_len] * batch if isinstance(max_len, int) else max_len
    search = Sampling(1, temperature, top_k, top_p) if sample else Greedy()
    return [hs[0] for hs in search.search(stepper, batch, limits, generator)]
