"""Notebook 10: every diversity method on one task, one metric set, one K sweep.

One toy task (the profile's ``compare`` settings: S styles, low ambiguity), for each seed the
models every method needs (a baseline shared by the decoding methods, one latent model per K
for Hard-MoE, the mixtures and target conditioning, one variational NMT for every K), the
decoding baselines' settings chosen on the dev set per K, then each method's K hypotheses on
the test set scored with the metrics of notebook 00 and timed.
"""
from __future__ import annotations

import math
import re
import statistics
import time

import numpy as np
import matplotlib.pyplot as plt

from .. import registry, translation
from ..metrics import diversity_report, human_scores, mbleu, sentence_bleu
from ..models.mixture import MixtureConfig
from ..models.target_encoder import LAMBDA_CANDIDATES, ConditioningConfig
from ..pipeline import Task, toy_task, train_model
from ..profiles import Profile, profile
from ..stats import Resampled
from .analysis import latents_used
from .mixture_runs import train_variant, train_vnmt
from ..views.live import compare_table, page, source_ids
from ..views.plots import error_bars, label_points
from ..views.tables import table

# registry method names, in the order of the tables (decoding methods on the baseline first)
COMPARED = ("sampling", "topk", "nucleus", "beam", "diverse_beam", "hard_moe", "hMlp", "sMup", "vnmt",
            "target_conditioning")
DECODING = ("sampling", "topk", "nucleus", "beam", "diverse_beam")       # the baseline, K hypotheses each
# the decoding baselines' grids, searched on the dev set for every K (the papers tune top-k and
# diverse beam by grid search: the seed paper section 5, Shen et al. section 5); sampling and beam have none.
# Top-k and nucleus reach close to plain sampling (k = 40 of the toy's 80 target words; p = 0.999), which they
# equal at k = the vocabulary or p = 1 and is a method of its own: a choice at the grid's largest value then
# says that the criterion prefers sampling itself, not that the grid was too short.
GRIDS = {"topk": {"top_k": (2, 3, 5, 10, 20, 40)},
         "nucleus": {"top_p": (0.5, 0.7, 0.9, 0.95, 0.99, 0.999)},
         "diverse_beam": {"diversity": (0.2, 0.5, 1.0, 2.0)}}
METRICS = ("pairwise_bleu", "avg_oracle_bleu", "multi_ref_bleu", "mbleu", "coverage", "distinct", "train_seconds",
           "decode_sent_per_s")
LAMBDAS = LAMBDA_CANDIDATES   # target conditioning's batch-entropy weights, chosen on the dev set (choose_lambda)


def task(cfg: Profile | str, seed: int = 0) -> Task:
    """The comparison's toy: the profile's ``compare`` size (S styles, low ambiguity), model
    sizes and training."""
    cfg = profile(cfg)
    c = cfg.compare
    return toy_task(cfg, seed, n_styles=c["styles"], ambiguity="low", n_train=c["toy_train"],
                    model=c.get("model"), training=c.get("training"))


def methods(cfg: Profile | str) -> tuple[str, ...]:
    """The methods the profile compares, in :data:`COMPARED`' order (all of them unless its
    ``compare["methods"]`` names fewer)."""
    cfg = profile(cfg)
    chosen = cfg.compare.get("methods") or COMPARED
    unknown = sorted(set(chosen) - set(COMPARED))
    if unknown:
        raise ValueError(f"compare['methods'] names {unknown}; valid: {', '.join(COMPARED)}")
    return tuple(m for m in COMPARED if m in chosen)


def uses_the_baseline(name: str) -> bool:
    """Is ``name`` a decoding method (a way to search the one plain Transformer, the baseline)?"""
    return registry.method(name).model == "baseline"


def model_key(name: str, k: int):
    """Which trained model method ``name`` uses at K = ``k`` (as the registry declares it):
    "baseline" for every decoding method and every K, "vnmt" for every K (K prior samples of one
    model), (name, k) for a latent-K model."""
    m = registry.method(name)
    return (m.model, k) if m.model_per_k else m.model


def one_model_for_every_k(name: str) -> bool:
    """The decoding methods (the baseline) and variational NMT (K prior samples) train one
    model whatever K; the latent-K methods one model per K."""
    return not isinstance(model_key(name, 0), tuple)


def train_target_conditioning(t: Task, k: int, device, seed: int, lam: float):
    """The target-conditioned model with K = ``k`` domains and batch-entropy weight ``lam``: (model, history)."""
    return train_model(t, f"target-encoder-k{k}", device, n_latent=k, seed=seed, progress=False,
                       options=ConditioningConfig(lam=lam))


def choose_lambda(t: Task, k: int, device, seed: int = 0) -> tuple[float, dict]:
    """Target conditioning's lambda as notebook 05 chooses it: of :data:`LAMBDAS`, the one whose
    model (K = ``k``) has the lowest validation NLL (the target encoder picking each reference's
    domain; a collapsed model gains nothing from its domain). Returns it and every candidate's
    {"valid_nll", "domains_used"}."""
    tried = {}
    for lam in LAMBDAS:
        hist = train_target_conditioning(t, k, device, seed, lam)[1]
        tried[lam] = {"valid_nll": hist.best_valid, "domains_used": latents_used(hist.epochs[-1]["usage"])}
    return min(LAMBDAS, key=lambda lam: tried[lam]["valid_nll"]), tried


def train_for(name: str, t: Task, k: int, device, seed: int = 0, lam: float | None = None):
    """(model, training seconds) for method ``name`` at K = ``k``: the decoding methods share
    the baseline, variational NMT one model for every K (K prior samples); the latent models
    have K values; target conditioning uses ``lam`` (:func:`choose_lambda`). Cached: a second
    run loads them (the seconds are those of the training)."""
    m = registry.method(name)
    if uses_the_baseline(name):
        model, hist = train_model(t, "baseline", device, n_latent=1, seed=seed, progress=False)
    elif name == "hard_moe":
        model, hist = train_model(t, f"hard-moe-k{k}", device, n_latent=k, seed=seed, progress=False)
    elif m.family == "mixture":                      # Shen et al.'s online shared variant, dropout in the M-step
        model, hist = train_variant(t, MixtureConfig.from_name(m.mixture), device, seed=seed, k=k)
    elif name == "vnmt":
        model, hist = train_vnmt(t, device, seed=seed)
    elif name == "target_conditioning":
        if lam is None:
            raise ValueError("target conditioning needs its lambda: lam=choose_lambda(...)[0] "
                             f"(candidates {', '.join(f'{c:g}' for c in LAMBDAS)})")
        model, hist = train_target_conditioning(t, k, device, seed, lam)
    else:
        raise ValueError(f"method {name!r} is not part of the comparison; valid: {', '.join(COMPARED)}")
    return model, hist.train_seconds


def train_all(t: Task, ks, device, seed: int = 0, names=COMPARED, lam: float | None = None) -> dict:
    """{(method, K): (model, training seconds)} for every method of ``names`` and K in ``ks``:
    the baseline and variational NMT are trained (or loaded) once and shared; target
    conditioning with batch-entropy weight ``lam`` (required when ``names`` has it)."""
    out, shared = {}, {}
    for name in names:
        for k in ks:
            key = model_key(name, k)
            if key not in shared:
                shared[key] = train_for(name, t, k, device, seed, lam=lam)
            out[name, k] = shared[key]
    return out


def scores(hyps, refs, seed: int = 0) -> dict:
    """The metric set of every method: notebook 00's four, Lachaux et al.'s mBLEU, and the distinct
    hypotheses per source."""
    r = diversity_report(hyps, refs, seed=seed)
    return {"pairwise_bleu": r["pairwise_bleu"], "avg_oracle_bleu": r["avg_oracle_bleu"],
            "multi_ref_bleu": r["multi_ref_bleu"], "mbleu": mbleu(hyps, refs), "coverage": r["ref_coverage"],
            "distinct": distinct(hyps)}


def distinct(hyps) -> float:
    """The mean number of distinct hypotheses per source."""
    return statistics.mean(len(set(hs)) for hs in hyps)


def full_sets(distinct_per_method: dict, k: int) -> tuple[str, ...]:
    """The methods (of ``{method: mean distinct hypotheses per source}``) that write at least
    K - 0.5 distinct hypotheses per source on average: a set of copies is not K translations, so
    only these may lead a ranking by quality."""
    if k < 1:
        raise ValueError(f"K must be a positive number of hypotheses, got {k!r}")
    return tuple(n for n, d in distinct_per_method.items() if d >= k - 0.5)


def at_grid_edge(name: str, setting: dict) -> bool:
    """Was ``name``'s tuned ``setting`` (:func:`tune`) the largest value of its grid (the closest to
    plain sampling for top-k and nucleus)?"""
    (option, values), = GRIDS[name].items()
    return setting[option] == max(values)


def human_point(refs) -> dict:
    h = human_scores(refs)
    return {"pairwise_bleu": h["pairwise_bleu"], "avg_oracle_bleu": h["avg_oracle_bleu"],
            "multi_ref_bleu": h["multi_ref_bleu"], "coverage": float(len(refs[0]))}


def distance(point: dict, human: dict, quality: str = "avg_oracle_bleu") -> float:
    """Distance to the human point in the (pairwise BLEU, ``quality``) plane, the ranking's and the
    dev-set tuning's criterion: the pairwise BLEU gap either way, the quality gap only where the
    point is *worse* than the human point. (The human point is leave-one-out, each reference scored
    against the others only: a system can rightly exceed it, the seed paper footnote 5, and is not
    penalised for that.) Notebook 10 uses ``quality="multi_ref_bleu"``, which scores the systems
    leave-one-out too (Shen et al. section 4)."""
    return math.hypot(point["pairwise_bleu"] - human["pairwise_bleu"],
                      max(0.0, human[quality] - point[quality]))


def resampled_distance(point: dict, human: dict, quality: str = "multi_ref_bleu") -> Resampled:
    """:func:`distance` of a method's resampled metrics ({metric: Resampled}) to the human point's
    (``stats.human_resampled``, on the same resamples of the test sources), in every resample."""
    values = np.hypot(point["pairwise_bleu"].values - human["pairwise_bleu"].values,
                      np.maximum(0.0, human[quality].values - point[quality].values))
    estimate = distance({m: point[m].estimate for m in ("pairwise_bleu", quality)},
                        {m: human[m].estimate for m in ("pairwise_bleu", quality)}, quality)
    return Resampled(estimate, values)


def translate(name: str, model, t: Task, sources, k: int, seed: int = 0, unknown: str = "unk", **options):
    """``k`` hypotheses per source; a test set's unseen words are translated as <unk>."""
    return translation.translate(model, t.src_vocab, t.tgt_vocab, sources, name, k, seed=seed, unknown=unknown, **options)


CRITERIA = ("human", "quality")


def tune(name: str, model, t: Task, k: int, dev_sentences: int, seed: int = 0,
         quality: str = "avg_oracle_bleu", criterion: str = "human") -> tuple[dict, list[dict]]:
    """The grid setting of ``name`` chosen on the dev set, and every setting's dev scores ({} and []
    for a method without a grid). ``criterion``: "human", the setting whose point lies closest to
    the dev set's human point (:func:`distance` with ``quality``); "quality", the setting with the
    highest ``quality`` (the seed paper's "grid search ... report the best result", section 5.2)."""
    if criterion not in CRITERIA:
        raise ValueError(f"unknown criterion {criterion!r}; valid criteria: {', '.join(CRITERIA)}")
    grid = GRIDS.get(name)
    if not grid:
        return {}, []
    dev = t.corpus.dev
    srcs, refs = dev.src[:dev_sentences], dev.refs[:dev_sentences]
    human = human_point(refs)
    (option, values), = grid.items()
    tried = []
    for v in values:
        point = scores(translate(name, model, t, srcs, k, seed, **{option: v}), refs, seed)
        tried.append({option: v, **point, "distance": distance(point, human, quality)})
    best = (min(tried, key=lambda r: r["distance"]) if criterion == "human"
            else max(tried, key=lambda r: r[quality]))
    return {option: best[option]}, tried


def decode(name: str, model, t: Task, k: int, test_sentences: int, seed: int = 0, **options) -> tuple[list, float]:
    """``name``'s K hypotheses of the first ``test_sentences`` test sources, and its decoding speed
    (sentences/s, one measurement)."""
    srcs = t.corpus.test.src[:test_sentences]
    t0 = time.perf_counter()
    hyps = translate(name, model, t, srcs, k, seed, **options)
    return hyps, len(srcs) / (time.perf_counter() - t0)


def evaluate(name: str, model, t: Task, k: int, test_sentences: int, seed: int = 0, **options) -> tuple[dict, list]:
    """The test-set scores of ``name``'s K hypotheses and its decoding speed (sentences/s)."""
    hyps, speed = decode(name, model, t, k, test_sentences, seed, **options)
    return {**scores(hyps, t.corpus.test.refs[:test_sentences], seed), "decode_sent_per_s": speed}, hyps


def spread(values) -> float:
    """The seeds' spread: the sample standard deviation (0 for a single value)."""
    values = list(values)
    return statistics.stdev(values) if len(values) > 1 else 0.0


def summarise(per_seed: list[dict]) -> dict:
    """Mean of every metric over the seeds, their sample standard deviations under ``std``
    (0 with one seed), and the values per seed."""
    out = {m: statistics.mean(r[m] for r in per_seed) for m in METRICS}
    out["std"] = {m: spread(r[m] for r in per_seed) for m in METRICS}
    out["per_seed"] = {m: [r[m] for r in per_seed] for m in METRICS}
    out["seeds"] = len(per_seed)
    return out


def method_view(name: str, model, t: Task, sentence: str, k: int, references=(), seed: int = 0, **options):
    """Live: method ``name``'s K hypotheses of one source (a test sentence or one the student
    wrote), the words that differ highlighted; against the source's references when it has
    them, each hypothesis's best-matching reference and its sentence BLEU."""
    source_ids(sentence, t.src_vocab, model.config.max_len)      # an empty or unknown-word source is named
    hyps = translate(name, model, t, [sentence], k, seed, unknown="error", **options)[0]
    setting = ", ".join(f"{o}={v}" for o, v in options.items()) or "no setting to tune"
    extra = {}
    if references:
        best = [max(range(len(references)), key=lambda i: sentence_bleu(h, references[i])) for h in hyps]
        extra = {"best reference": [f"ref {b}" for b in best],
                 "sentence BLEU": [f"{sentence_bleu(h, references[b]):.1f}" for h, b in zip(hyps, best)]}
    parts = [compare_table([f"{i + 1}" for i in range(k)], hyps, extra,
                           title=f"{name} ({setting}), K = {k}: {len(set(hyps))} distinct of {k}")]
    if references:
        parts.append(compare_table([f"ref {i}" for i in range(len(references))], list(references), column="reference"))
    return page(*parts)


# --- Notebook 10's tables, figure and printed readings (the lesson keeps its rules inline) ---

def _words(s: str) -> list[str]:
    return "".join(ch if ch.isalnum() else " " for ch in s).split()


def shared_words(hyps: list[str], refs) -> str:
    """The words in every hypothesis that are not in every reference, in order ("none" if none)."""
    common = lambda ss: [w for w in dict.fromkeys(_words(ss[0])) if all(w in _words(s) for s in ss)]
    return " ".join(w for w in common(hyps) if w not in common(refs)) or "none"


def _changes(first: str, h: str) -> list[str]:
    """The words ``h`` adds to ``first`` ("+w") and drops from it ("−w"), each as often as its count differs."""
    a, b = re.findall(r"\w+|[^\w\s]+", first), re.findall(r"\w+|[^\w\s]+", h)
    return [f"{s}{w}" for s, x, y in (("+", b, a), ("−", a, b)) for w in dict.fromkeys(x) for _ in range(x.count(w) - y.count(w))]


def shown(h: str, hs: list[str], k: int) -> str:
    """Hypothesis ``h`` = ``hs[k]`` (one source's K hypotheses) as lesson 10's example table prints it: "= j" for a copy of
    hypothesis j; "1 +a −b" for a near-copy of hypothesis 1 (at most 3 words a added, b dropped); else the whole sentence if
    it has at most 12 words, or is hypothesis 1 and a near-copy of it follows; else its first and last five words, joined by "[cut]"."""
    near = lambda j, x: hs.index(x) == j and len(_changes(hs[0], x)) <= 3      # noqa: E731  (a near-copy, not a copy)
    if hs.index(h) < k:
        return f"= {hs.index(h) + 1}"
    if k and near(k, h):
        return "1 " + " ".join(_changes(hs[0], h))
    if len(h.split()) <= 12 or k == 0 and any(near(j, x) for j, x in enumerate(hs[1:], 1)):
        return h
    return " ".join(h.split()[:5]) + " [cut] " + " ".join(h.split()[-5:])


def _grid_end(n: str, setting: dict) -> str:
    """Which end of its grid (GRIDS) ``n``'s tuned setting is, "smallest" or "largest"; "" inside it."""
    (option, grid), = GRIDS[n].items()
    return {min(grid): "smallest", max(grid): "largest"}.get(setting[option], "")


def grid_ends(settings: dict) -> list[str]:
    """Every tuned choice ({(method, K): setting}; top-k, nucleus, diverse beam) at an end of its grid, as
    "topk K=2 (largest)"."""
    return [f"{n} K={k} ({_grid_end(n, s)})" for (n, k), s in settings.items() if n in GRIDS and _grid_end(n, s)]


def tuning_reading(tuning: dict, human: dict, quality: str = "multi_ref_bleu") -> str:
    """How many of the settings tried on the dev set ({"name.K": [scores]}) fell below the dev references'
    quality (d's quality floor) and how many were more diverse than them; with none of either, d is the
    pairwise-BLEU gap alone and picks each method's setting with the lowest pairwise BLEU."""
    tried = [r for t in tuning.values() for r in t]
    low = sum(r[quality] < human[quality] for r in tried)
    wide = sum(r["pairwise_bleu"] < human["pairwise_bleu"] for r in tried)
    if tried and not low and not wide:
        return (f"No setting tried ({len(tried)}) scores below the dev references' quality or is more diverse than them, "
                "so d is the pairwise-BLEU gap alone: each method keeps its lowest-pairwise-BLEU setting.")
    return (f"Of the {len(tried)} settings tried, {low} score below the dev references' quality "
            f"and {wide} are more diverse than them.")


TAGS = {"sampling": "s", "beam": "b", "diverse_beam": "d", "hard_moe": "H", "hMlp": "M", "vnmt": "V",
        "target_conditioning": "T"}


def frontier(R: dict, names, ks, quality: str = "multi_ref_bleu") -> list[tuple[float, float]]:
    """The (pairwise BLEU, quality) points of ``names`` at every K that no other of them beats on both
    axes (lower pairwise BLEU, higher quality), by pairwise BLEU."""
    pts = [(R[n, k]["pairwise_bleu"].estimate, R[n, k][quality].estimate) for n in names for k in ks]
    return sorted(p for p in pts if not any(q != p and q[0] <= p[0] and q[1] >= p[1] for q in pts))


def above_frontier(point: tuple[float, float], line: list[tuple[float, float]]) -> bool:
    """Does (pairwise BLEU, quality) ``point`` lie above the piecewise-linear ``line`` where the line spans its x?"""
    x, y = point
    return any(a <= x <= b and y > ya + (yb - ya) * (x - a) / max(b - a, 1e-9)
               for (a, ya), (b, yb) in zip(line, line[1:]))


def plane_figure(R: dict, human: dict, decoding, latent, ks, quality: str = "multi_ref_bleu"):
    """Notebook 10's quality-diversity plane, decoding methods (sampling, beam, diverse beam) and latent
    models side by side, 95% bars, the human star and the decoding methods' frontier: (figure, frontier)."""

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), sharex=True, sharey=True)
    colour = dict(zip(COMPARED, ["C0", "C1", "C2", "C4", "C5", "C6", "C8", "C9", "k", "navy"]))   # no red, no grey
    shown = [n for n in ("sampling", "beam", "diverse_beam") if n in decoding]
    best = frontier(R, shown, ks, quality)
    labels = {ax: [] for ax in axes}
    for ax, (title, names) in zip(axes, (("decoding methods (one baseline)", shown),
                                         ("latent models", sorted(latent, key=lambda n: n == "hard_moe")))):
        if best:
            ax.plot(*zip(*best), color="0.7", ls="--", lw=2, zorder=1, label="decoding methods' best, any K")
        for n in names:
            ivs = [(R[n, k]["pairwise_bleu"].interval(), R[n, k][quality].interval()) for k in ks]
            ax.errorbar([a.estimate for a, _ in ivs], [b.estimate for _, b in ivs], xerr=error_bars([a for a, _ in ivs]),
                        yerr=error_bars([b for _, b in ivs]), lw=1, capsize=2, color=colour[n], marker="o", ms=5,
                        label=f"{n} ({TAGS.get(n, n)})", zorder=3 + (n == "hard_moe"))
            labels[ax] += [(a.estimate, b.estimate, f"{TAGS.get(n, n)}{k}", colour[n], (a.ci_low, a.ci_high, b.ci_low, b.ci_high))
                           for k, (a, b) in zip(ks, ivs)]
        ax.scatter(human["pairwise_bleu"], human[quality], marker="*", s=250, color="crimson", zorder=5,
                   label="human point (its pairwise BLEU is the target)")
        ax.set(title=title, xlabel="pairwise BLEU (reversed: right = more diverse)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    axes[0].set_ylabel("multi-reference BLEU (quality)")
    axes[0].invert_xaxis()
    fig.tight_layout()                      # the layout fixed, the K labels are placed in pixels
    for ax, pts in labels.items():
        label_points(ax, pts)
    return fig, best


def purity_table(found: dict, weakest: dict, k: int, s: int) -> str:
    """The latent models' purity ({model: (purity, Interval, styles owned, reading)}) and weakest value's BLEU."""
    return table([[n, f"{iv.format('.2f')} {side}", f"{o} of {s}", f"{weakest[n]:.1f}"] for n, (_, iv, o, side) in found.items()],
                 ["latent model", f"purity at K = {k} [95%]", "styles that are a value's main one", "weakest value's BLEU"])


def beaten_by(a: str, k: int, full, R: dict, latent, decoding, quality: str = "multi_ref_bleu"):
    """A method of ``full`` as cheap to train as ``a`` (a decoding method for a decoding ``a``) that is clearly
    (paired interval) more diverse and better than ``a`` at K = ``k``; None if none."""
    peers = [b for b in full if b != a and (a in latent or b in decoding)]
    return next((b for b in peers if (R[a, k]["pairwise_bleu"] - R[b, k]["pairwise_bleu"]).interval().ci_low > 0
                 and (R[b, k][quality] - R[a, k][quality]).interval().ci_low > 0), None)


def signed(v: float) -> str:
    """``v`` with its sign, two decimals (a bound near 0 in one significant digit, never "+0.00")."""
    return "0.00" if v == 0 else f"{v:+.2f}" if abs(v) >= 0.005 else f"{v:+.1g}"


def pick_text(p: dict) -> str:
    """One grid cell: "A +m [lo, hi] over B" for a clear pick ({"method", "runner_up", "margin", "tied"}: nothing tied),
    "A ≈ B ≈ C" for a tie, the pick first."""
    if p.get("tied"):
        return " ≈ ".join([p["method"], *p["tied"]])
    m = p["margin"]
    return p["method"] + (f" {signed(m['estimate'])} [{signed(m['ci_low'])}, {signed(m['ci_high'])}] over {p['runner_up']}"
                          if m else "")


def grid_table(recommendation: dict, ks, s: int) -> str:
    """The recommendation grid ({need: {"K<k>": pick}}): one row per need, one column per K."""
    return table([[need] + [pick_text(r[f"K{k}"]) for k in ks] for need, r in recommendation.items()],
                 ["need"] + [f"K={k}" + (" (= S)" if k == s else "") for k in ks])


def avoid_text(avoid: dict) -> str:
    """One line per K from {K: {method: "below the bar" | "<method> beats it"}}."""
    lines = []
    for k, why in avoid.items():
        low = [n for n, w in why.items() if w == "below the bar"]
        beat = [f"{n} ({w})" for n, w in why.items() if w != "below the bar"]
        parts = (["below the bar: " + ", ".join(low)] if low else []) + ([", ".join(beat)] if beat else [])
        lines.append(f"avoid at K={k}: " + ("; ".join(parts) or "none"))
    return "\n".join(lines)


# the opening answer's rows: (row, the grid's need it rests on, the methods it names; None: a latent model that
# found the styles)
ANSWER = (("cover the styles", "cover the styles", None), ("are the best", "quality first", None),
          ("vary the wording most", "most varied wording", ("sampling",)),
          ("one ordinary model, to cover", "no latent model: cover", ("diverse_beam",)),
          ("one ordinary model, for quality", "no latent model: quality", ("beam",)))


def named(pick: dict) -> list[str]:
    """The methods a grid cell names: its pick, and every method tied with it."""
    return [pick["method"], *pick.get("tied", [])]


def answer_reading(recommendation: dict, ks, found) -> str:
    """Whether the opening answer (ANSWER) holds in the grid ``recommendation`` ({need: {"K<k>": pick}}) at every K
    in ``ks``: a row holds where its cell names one of the row's methods (``found``, the latent models that found
    the styles, for the rows naming none); a tie with a method outside the row is said with its K."""
    off, tied = [], []
    for row, need, use in ANSWER:
        for k in ks:
            names, answer = named(recommendation[need][f"K{k}"]), set(use or found)   # the pick first
            if not answer.intersection(names):
                off.append(f"'{row}' at K={k}")
            elif set(names) - answer:
                tied.append(f"'{row}' at K={k} ({' ≈ '.join(names)})")
    if off:
        return "does not hold for " + ", ".join(off)
    return f"holds at K = {', '.join(map(str, ks))}" + (", tied with another method for " + ", ".join(tied) if tied else "")
