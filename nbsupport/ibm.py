"""IBM Models 1, 2 and 3 trained by EM (vectorised with torch), and sampling synthetic
translations from IBM-3 with a temperature (Stahlberg & Kumar 2022 section 5, appendix B).

Notation (appendix B, Brown et al. 1993): a source sentence x_1..x_l (x_0 = NULL), a
target sentence e_1..e_m; t(e | x) translation, a(i | j, l, m) Model 2 alignment,
n(phi | x) fertility, d(j | i, l, m) distortion, p1 (p0 = 1 - p1) the NULL insertion.

Vectorisation: every (sentence, target position j, source position i) triple of the corpus
is one *link*; an E-step is a product over links, a normalisation per (sentence, j) with
``scatter_add``, and counts scattered into the parameter tables. The translation table is
sparse: one entry per (x, e) pair that co-occurs in some sentence.

**Model 3's E-step approximation.** Exact Model 3 EM sums over all alignments, which is
intractable; GIZA++ and nltk sum over the neighbourhood of a hill-climbed Viterbi
alignment. We use a factorised posterior instead, which vectorises: every target word
aligns independently, q_j(0) proportional to nu * t(e_j | NULL) with nu = p1 / (1 + p1) the
expected share of NULL words, and q_j(i) proportional to (1 - nu) * t(e_j | x_i) *
d(j | i, l, m) / sum_i' d(j | i', l, m). Fertility counts are then exact under q: the
distribution of phi_i = sum_j [a_j = i] is a Poisson-binomial, computed by dynamic
programming. The first Model 3 iteration uses Model 2's posterior (GIZA++'s "Model 2 to 3
transfer"). What this leaves out: the fertility model's influence on which alignments are
likely. The tests compare the tables with nltk's IBMModel3 within a stated tolerance.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

NULL = "<NULL>"
MAX_FERTILITY = 9   # n(phi | x) has entries phi = 0..9; the last holds phi >= 9 (sampled as exactly 9)


# --------------------------------------------------------------------------- the corpus
@dataclass
class Bitext:
    """Token ids: source ids start at 1 (0 is NULL), target ids at 0."""
    src: list[list[int]]
    tgt: list[list[int]]
    src_words: list[str]
    tgt_words: list[str]

    @classmethod
    def from_tokens(cls, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]) -> "Bitext":
        sw, tw = {NULL: 0}, {}
        src, tgt = [], []
        for s, t in pairs:
            if not s or not t:
                raise ValueError("IBM models need non-empty source and target sentences")
            src.append([sw.setdefault(w, len(sw)) for w in s])
            tgt.append([tw.setdefault(w, len(tw)) for w in t])
        return cls(src, tgt, list(sw), list(tw))

    @property
    def max_src_len(self) -> int:
        return max(map(len, self.src))

    @property
    def max_tgt_len(self) -> int:
        return max(map(len, self.tgt))


class _Links:
    """Every (sentence, j, i) of the corpus, i = 0..l (0: NULL), j = 1..m, as flat tensors."""

    def __init__(self, bt: Bitext):
        sent, jj, ii, ff, ee, ll, mm = [], [], [], [], [], [], []
        for s, (x, e) in enumerate(zip(bt.src, bt.tgt)):
            l, m = len(x), len(e)
            xs = np.array([0] + x)
            es = np.array(e)
            ii.append(np.tile(np.arange(l + 1), m))
            jj.append(np.repeat(np.arange(1, m + 1), l + 1))
            ff.append(np.tile(xs, m))
            ee.append(np.repeat(es, l + 1))
            n = (l + 1) * m
            sent.append(np.full(n, s))
            ll.append(np.full(n, l))
            mm.append(np.full(n, m))
        cat = lambda a: torch.from_numpy(np.concatenate(a).astype(np.int64))
        self.sent, self.j, self.i, self.f, self.e, self.l, self.m = map(cat, (sent, jj, ii, ff, ee, ll, mm))
        self.n_tgt = len(bt.tgt_words)
        # one row per (sentence, j): the normalisation group of an E-step
        offsets = torch.tensor([0] + [len(e) for e in bt.tgt]).cumsum(0)
        self.row = offsets[self.sent] + self.j - 1
        self.n_rows = int(offsets[-1])
        # the sparse translation table: one entry per co-occurring (f, e)
        self.pairs, self.pid = torch.unique(self.f * self.n_tgt + self.e, return_inverse=True)
        self.pair_f = self.pairs // self.n_tgt
        # flat indices into the dense a[l, m, j, i] (Model 2) and d[l, m, i, j] (Model 3) tables
        self.L, self.M = L, M = bt.max_src_len, bt.max_tgt_len
        self.a_index = ((self.l * (M + 1) + self.m) * (M + 1) + self.j) * (L + 1) + self.i
        self.d_index = ((self.l * (M + 1) + self.m) * (L + 1) + self.i) * (M + 1) + self.j
        # sum over sentences of m * log(l + 1): Model 1's uniform alignment term; the target words
        self.log_uniform = sum(len(e) * math.log(len(x) + 1) for x, e in zip(bt.src, bt.tgt))
        self.n_words = sum(len(e) for e in bt.tgt)

    def normalise_rows(self, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = torch.zeros(self.n_rows, dtype=w.dtype).scatter_add_(0, self.row, w)
        return w / z[self.row], z

    def t_from_counts(self, post: torch.Tensor, n_src: int) -> torch.Tensor:
        counts = torch.zeros(len(self.pairs), dtype=post.dtype).scatter_add_(0, self.pid, post)
        total = torch.zeros(n_src, dtype=post.dtype).scatter_add_(0, self.pair_f, counts)
        return counts / total[self.pair_f]


@dataclass
class IBMModel:
    """Trained tables. ``t`` is sparse over ``pairs`` (f * |E| + e); ``a`` is Model 2's
    a(i | j, l, m) as a dense [l, m, j, i] tensor; ``d`` Model 3's d(j | i, l, m) as [l, m, i, j];
    ``n`` the fertility table [f, phi]."""
    bitext: Bitext
    pairs: torch.Tensor
    t: torch.Tensor
    a: torch.Tensor | None = None
    d: torch.Tensor | None = None
    n: torch.Tensor | None = None
    p1: float = 0.5
    log_likelihood: dict = field(default_factory=dict)   # per model: one value per iteration

    def t_table(self) -> dict[str, dict[str, float]]:
        """t as nested dicts: t_table()[source word][target word]."""
        out: dict[str, dict[str, float]] = {}
        n_tgt = len(self.bitext.tgt_words)
        for p, v in zip(self.pairs.tolist(), self.t.tolist()):
            f, e = divmod(p, n_tgt)
            out.setdefault(self.bitext.src_words[f], {})[self.bitext.tgt_words[e]] = v
        return out


# --------------------------------------------------------------------------- Models 1 and 2
def train_model1(bt: Bitext, iterations: int = 5, links: _Links | None = None) -> IBMModel:
    """Model 1 EM from a uniform t. ``log_likelihood['model1'][k]`` is the corpus
    log-likelihood sum_s sum_j log( sum_i t(e_j | x_i) / (l + 1) ) under the parameters
    *before* update k (so it must not decrease)."""
    lk = links or _Links(bt)
    t = torch.full((len(lk.pairs),), 1.0 / len(bt.tgt_words), dtype=torch.float64)
    ll = []
    for _ in range(iterations):
        post, z = lk.normalise_rows(t[lk.pid])
        ll.append(float(z.log().sum()) - lk.log_uniform)
        t = lk.t_from_counts(post, len(bt.src_words))
    return IBMModel(bt, lk.pairs, t, log_likelihood={"model1": ll})


def train_model2(bt: Bitext, iterations: int = 5, model1: IBMModel | None = None,
                 links: _Links | None = None) -> IBMModel:
    """Model 2 EM, t initialised from Model 1 (trained with the same number of iterations
    unless given), a(i | j, l, m) uniform = 1 / (l + 1), as nltk does."""
    lk = links or _Links(bt)
    m1 = model1 or train_model1(bt, iterations, lk)
    t = m1.t.clone()
    L, M = lk.L, lk.M
    a = torch.zeros(L + 1, M + 1, M + 1, L + 1, dtype=torch.float64)
    for l in range(1, L + 1):
        a[l, :, :, :l + 1] = 1.0 / (l + 1)
    ll = []
    for _ in range(iterations):
        post, z = lk.normalise_rows(t[lk.pid] * a.view(-1)[lk.a_index])
        ll.append(float(z.log().sum()))
        t = lk.t_from_counts(post, len(bt.src_words))
        counts = torch.zeros(a.numel(), dtype=torch.float64).scatter_add_(0, lk.a_index, post).view(a.shape)
        total = counts.sum(-1, keepdim=True)
        a = torch.where(total > 0, counts / total.clamp_min(1e-300), a)
    return IBMModel(bt, lk.pairs, t, a=a, log_likelihood={**m1.log_likelihood, "model2": ll})


# --------------------------------------------------------------------------- Model 3
def poisson_binomial(q: torch.Tensor, max_k: int) -> torch.Tensor:
    """Rows of Bernoulli probabilities q (R, J) -> P(sum = k) for k = 0..max_k (the last
    entry holds P(sum >= max_k))."""
    P = torch.zeros(q.shape[0], max_k + 1, dtype=q.dtype)
    P[:, 0] = 1.0
    for j in range(q.shape[1]):
        p = q[:, j:j + 1]
        shifted = torch.cat([torch.zeros_like(P[:, :1]), P[:, :-1]], dim=1)
        overflow = P[:, -1:] * p                       # mass already at max_k stays there
        P = P * (1 - p) + shifted * p
        P[:, -1:] += overflow
    return P


def train_model3(bt: Bitext, iterations: int = 5, model2: IBMModel | None = None,
                 links: _Links | None = None) -> IBMModel:
    """Model 3 parameters by EM with the factorised E-step of the module docstring. t and a
    start from Model 2 (trained with the same number of iterations unless given)."""
    lk = links or _Links(bt)
    m2 = model2 or train_model2(bt, iterations, links=lk)
    t = m2.t.clone()
    L, M = lk.L, lk.M
    not_null = lk.i > 0
    # (sentence, i >= 1) rows for the fertility DP
    src_offsets = torch.tensor([0] + [len(x) for x in bt.src]).cumsum(0)
    frow = src_offsets[lk.sent] + lk.i - 1
    n_frows = int(src_offsets[-1])
    f_of_row = torch.tensor([w for x in bt.src for w in x])
    d = n = None
    p1 = 0.5
    for it in range(iterations):
        if it == 0:
            prior = m2.a.view(-1)[lk.a_index]                   # the transfer from Model 2
        else:
            nu = p1 / (1 + p1)
            dj = d.view(-1)[lk.d_index] * not_null
            dsum = torch.zeros(lk.n_rows, dtype=torch.float64).scatter_add_(0, lk.row, dj)
            prior = torch.where(not_null, (1 - nu) * dj / dsum[lk.row].clamp_min(1e-300), torch.full_like(dj, nu))
        post, _ = lk.normalise_rows(t[lk.pid] * prior)
        t = lk.t_from_counts(post, len(bt.src_words))
        # distortion d(j | i, l, m): counts normalised over j
        dc = torch.zeros((L + 1) * (M + 1) * (L + 1) * (M + 1), dtype=torch.float64)
        dc.scatter_add_(0, lk.d_index[not_null], post[not_null])
        dc = dc.view(L + 1, M + 1, L + 1, M + 1)
        total = dc.sum(-1, keepdim=True)
        d = torch.where(total > 0, dc / total.clamp_min(1e-300), torch.zeros_like(dc))
        # fertility: Poisson-binomial of each source word's alignment probabilities
        q = torch.zeros(n_frows * M, dtype=torch.float64)
        q.scatter_add_(0, (frow * M + lk.j - 1)[not_null], post[not_null])
        P = poisson_binomial(q.view(n_frows, M), MAX_FERTILITY)
        nc = torch.zeros(len(bt.src_words), MAX_FERTILITY + 1, dtype=torch.float64).index_add_(0, f_of_row, P)
        n = nc / nc.sum(-1, keepdim=True).clamp_min(1e-300)
        # p1 from the expected number of NULL-aligned words phi_0: p1 = E[phi0] / E[m - phi0]
        phi0 = float(post[~not_null].sum())
        p1 = phi0 / max(lk.n_words - phi0, 1e-12)
        p1 = min(max(p1, 1e-6), 0.99)
    return IBMModel(bt, lk.pairs, t, a=m2.a, d=d, n=n, p1=p1, log_likelihood=m2.log_likelihood)


def train(pairs: Sequence[tuple[Sequence[str], Sequence[str]]], iterations: int = 5) -> IBMModel:
    """Models 1 -> 2 -> 3, ``iterations`` each, on tokenised (source, target) pairs."""
    bt = Bitext.from_tokens(pairs)
    lk = _Links(bt)
    m1 = train_model1(bt, iterations, lk)
    m2 = train_model2(bt, iterations, m1, lk)
    return train_model3(bt, iterations, m2, lk)


# --------------------------------------------------------------------------- sampling (appendix B)
def temper(p: np.ndarray, gamma: float) -> np.ndarray:
    """Eq. 10: P_gamma(c) proportional to exp(log P(c) / gamma); gamma = 0 puts all the mass
    on the first argmax."""
    p = np.asarray(p, dtype=np.float64)
    if gamma < 0:
        raise ValueError(f"the temperature must be >= 0, got {gamma}")
    if gamma == 0:
        out = np.zeros_like(p)
        out[int(np.argmax(p))] = 1.0
        return out
    with np.errstate(divide="ignore"):
        logits = np.log(p) / gamma
    logits -= logits.max()
    w = np.exp(logits)
    return w / w.sum()


def entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


@dataclass
class Story:
    """One run of the generative story: fertilities (phi[0] for NULL), the words tau[i] each
    source position generated, their target positions pi[i] (1-based), and the output."""
    phi: list[int]
    tau: list[list[str]]
    pi: list[list[int]]
    words: list[str]
    uniform_distortion: bool = False   # (l, m) unseen in training: positions drawn uniformly


class Sampler:
    """Appendix B's seven steps, with temperature gamma on every categorical choice: the
    fertilities, the translations and the distortions (eq. 10, as the paper), and also the
    number of NULL words (so that gamma -> 0 is the argmax at every step). Distortion is
    sampled among the still vacant positions (IBM-3 is deficient: it may put two words in
    one place; we renormalise over the free ones). Unknown source words copy themselves.

    Two departures from the story that the temperature does not control:

    * where training never saw the pair (source length l, target length m) the distortion
      is uniform over the positions (:meth:`distortion`): such a sentence's word order is
      shuffled at random whatever gamma is; this happens more at high gamma, where sampled
      fertilities give unusual lengths m (``Story.uniform_distortion`` flags it);
    * the fertility table's last entry holds phi >= 9 (``MAX_FERTILITY``) and is sampled as
      exactly 9 (rare in practice)."""

    def __init__(self, model: IBMModel):
        if model.n is None or model.d is None:
            raise ValueError("sampling needs a Model 3 (train_model3)")
        self.model = model
        bt = model.bitext
        self.src_id = {w: i for i, w in enumerate(bt.src_words)}
        n_tgt = len(bt.tgt_words)
        f = (model.pairs // n_tgt).numpy()
        e = (model.pairs % n_tgt).numpy()
        t = model.t.numpy()
        order = np.argsort(f, kind="stable")
        bounds = np.searchsorted(f[order], np.arange(len(bt.src_words) + 1))
        self.options = {}
        for fid in range(len(bt.src_words)):
            idx = order[bounds[fid]:bounds[fid + 1]]
            keep = idx[t[idx] > 1e-9]
            self.options[fid] = (e[keep], t[keep] / t[keep].sum())
        self.tgt_words = bt.tgt_words
        self.n = model.n.numpy()
        self.d = model.d.numpy()

    def distortion(self, i: int, l: int, m: int) -> np.ndarray:
        """d(. | i, l, m) over j = 1..m; uniform where training never saw this (l, m) (so
        tempering it changes nothing: gamma does not control that reordering)."""
        if self.seen(l, m):
            row = self.d[l, m, i, 1:m + 1]
            if row.sum() > 0:
                return row / row.sum()
        return np.full(m, 1.0 / m)

    def seen(self, l: int, m: int) -> bool:
        """Did training see a sentence pair of source length l and target length m?"""
        L, M = self.d.shape[0] - 1, self.d.shape[1] - 1
        return l <= L and m <= M and self.d[l, m, 1:l + 1].sum() > 0

    def sample(self, source: Sequence[str], gamma: float, rng: np.random.Generator) -> Story:
        choose = lambda p: int(rng.choice(len(p), p=temper(p, gamma))) if gamma > 0 else int(np.argmax(p))
        ids = [self.src_id.get(w) for w in source]
        l = len(ids)
        # 1. fertilities
        phi = [0] + [choose(self.n[f]) if f is not None else 1 for f in ids]
        # 2. NULL words: phi_0 ~ Binomial(sum phi, p1)
        total = sum(phi)
        ks = np.arange(total + 1)
        binom = np.array([math.comb(total, k) for k in ks], dtype=np.float64) * \
            self.model.p1 ** ks * (1 - self.model.p1) ** (total - ks)
        phi[0] = choose(binom)
        # 3. the length
        m = sum(phi)
        # 4. translations, NULL included
        tau = []
        for i, f in enumerate([0] + ids):
            if f is None:
                tau.append([source[i - 1]] * phi[i])
                continue
            e, p = self.options[f]
            tau.append([self.tgt_words[e[choose(p)]] for _ in range(phi[i])])
        # 5. distortions among the vacant positions
        vacant = np.ones(m + 1, dtype=bool)
        vacant[0] = False
        pi: list[list[int]] = [[] for _ in range(l + 1)]
        for i in range(1, l + 1):
            for _ in range(phi[i]):
                p = self.distortion(i, l, m) * vacant[1:]
                if p.sum() == 0:
                    p = vacant[1:].astype(np.float64)
                j = 1 + choose(p / p.sum())
                vacant[j] = False
                pi[i].append(j)
        # 6. NULL words fill the remaining positions, in an order chosen uniformly
        free = list(np.flatnonzero(vacant))
        if gamma > 0:
            rng.shuffle(free)
        pi[0] = [int(j) for j in free[:phi[0]]]
        # 7. the output
        out = [""] * m
        for i in range(l + 1):
            for w, j in zip(tau[i], pi[i]):
                out[j - 1] = w
        return Story(phi, tau, pi, out, uniform_distortion=l > 0 and m > 0 and not self.seen(l, m))

    def task_entropy(self, sources: Sequence[Sequence[str]], gamma: float) -> dict[str, float]:
        """Per-token entropy (nats) of the tempered t, n and d: averaged over the source
        tokens of ``sources`` (t, n) and over their (i, l, m) with m = the argmax length."""
        h = {"t": [], "n": [], "d": []}
        for src in sources:
            ids = [self.src_id[w] for w in src if w in self.src_id]
            l = len(ids)
            m = max(1, sum(int(np.argmax(self.n[f])) for f in ids))
            for i, f in enumerate(ids, start=1):
                h["t"].append(entropy(temper(self.options[f][1], gamma)))
                h["n"].append(entropy(temper(self.n[f], gamma)))
                h["d"].append(entropy(temper(self.distortion(i, l, m), gamma)))
        return {k: float(np.mean(v)) for k, v in h.items()}
