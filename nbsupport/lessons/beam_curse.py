"""Measurements of the beam search curse (Stahlberg & Kumar 2022 section 4.3-4.4):
quality, length and empty outputs against beam size; exact search within a budget; the
log score of the empty translation; search errors; decoding speed.

Beam search here has no length normalisation: a hypothesis scores the plain sum of its
token log scores, eq. 9's decision rule (the paper decodes with "vanilla beam search" and
does not mention a length penalty). Exact search searches the same space as beam search:
translations of at most ``max_len_a * source length + max_len_b`` tokens (and at most the
model's ``max_len``), so its "global best" is the best within that length cap."""
from __future__ import annotations

import math
import statistics
import time
from typing import Sequence

import numpy as np
import torch

from .. import stats
from ..data.synthetic import OPTIONAL as _OPTIONAL
from ..data.synthetic import PREPOSITIONS as _PREPOSITIONS
from ..data.synthetic import token_shares as _token_shares
from ..data.batching import pad_batch
from ..data.vocab import BOS, EOS
from ..decode import MAX_LEN_A, MAX_LEN_B, decode, max_lengths
from ..metrics import _tokens as metric_tokens
from ..metrics import bleu_and_length
from ..pipeline import train_many_in_parallel, train_model
from ..search import BatchScorer, ModelScorer, best_first_search, exact_search, sequence_score
from ..views import plots, tables

PAPER_LABEL_SMOOTHING = 0.0   # section 3 and appendix C: softmax and SCONES trained without it


def softmax_and_scones_jobs(alphas: dict, seed: int = 0, epochs: int | None = None, training: dict | None = None,
                            model: dict | None = None) -> dict[str, dict]:
    """The :func:`~nbsupport.pipeline.train_model` arguments of a softmax (alpha ``None``) or
    SCONES model per entry of ``alphas`` (name -> alpha), trained as the paper trains both:
    without label smoothing, whatever the task's default training (the Bible's is 0.1);
    ``training`` (e.g. the epoch cap and the convergence rule) and ``model`` (sizes) on top of the
    task's; ``epochs`` overrides the task's."""
    jobs = {}
    for name, alpha in alphas.items():
        overrides = {"label_smoothing": PAPER_LABEL_SMOOTHING, **(training or {})}
        if epochs is not None:
            overrides["epochs"] = epochs
        output = {} if alpha is None else {"output": "scones", "scones_alpha": alpha}
        jobs[name] = {"name": name, "seed": seed, "training_overrides": overrides,
                      "model_overrides": {**(model or {}), **output}}
    return jobs


def train_softmax_and_scones(task, alphas: dict, device, seed: int = 0, epochs: int | None = None,
                             progress: bool = False, training: dict | None = None,
                             model: dict | None = None) -> tuple[dict, dict]:
    """Softmax and SCONES models on ``task`` (see :func:`softmax_and_scones_jobs`). Returns
    ({name: model}, {name: training history}); models are cached by
    :func:`nbsupport.pipeline.train_model`."""
    models, histories = {}, {}
    for name, job in softmax_and_scones_jobs(alphas, seed, epochs, training, model).items():
        models[name], histories[name] = train_model(task, device=device, progress=progress, **job)
    return models, histories


def prefetch_softmax_and_scones(runs, alphas: dict, device, seed: int = 0, more_jobs=()) -> list[str]:
    """Train the uncached models of :func:`train_softmax_and_scones` for every (task, options) of
    ``runs`` (options: its keyword arguments ``epochs``, ``training``, ``model``), and the (task, job)
    pairs of ``more_jobs``, several at once on a CPU (one process per core, see
    :func:`nbsupport.pipeline.train_many_in_parallel`) for the notebook's own calls to load; nothing
    on a GPU. Returns the names trained."""
    jobs = list(more_jobs) + [(task, job) for task, options in runs
                              for job in softmax_and_scones_jobs(alphas, seed, **options).values()]
    return train_many_in_parallel(jobs, device)


def train_for_levels(tasks: dict, alphas: dict, device, seed: int, settings) -> tuple[dict, dict]:
    """Lessons 06-07's models: every model of ``alphas`` on every level of ``tasks`` ("low", "high", "bible"),
    the toys' with ``settings``' training rule and model, the Bible's for its epochs; the uncached ones trained
    at once (:func:`prefetch_softmax_and_scones`). Returns ({(level, name): model}, {(level, name): history})."""
    options = {level: {"epochs": settings["bible_epochs"]} if level == "bible" else
               {"training": settings["training"], "model": settings["model"]} for level in tasks}
    prefetch_softmax_and_scones([(task, options[level]) for level, task in tasks.items()], alphas, device, seed)
    models, histories = {}, {}
    for level, task in tasks.items():
        trained, runs = train_softmax_and_scones(task, alphas, device, seed, **options[level])
        for name in trained:
            models[level, name], histories[level, name] = trained[name], runs[name]
    return models, histories


def _quality(hyps: list[str], refs) -> dict:
    single = bleu_and_length(hyps, [[r[0]] for r in refs])   # the paper's setting: one reference
    multi = bleu_and_length(hyps, refs)
    return {"bleu": single["bleu"], "multi_ref_bleu": multi["bleu"], "len_ratio": multi["len_ratio"],
            "empty_rate": sum(not h.strip() for h in hyps) / len(hyps)}


def beam_sweep(model, src_vocab, tgt_vocab, sources: Sequence[str], refs, beams: Sequence[int],
               batch_size: int = 50) -> dict[int, dict]:
    """For each beam size: single-reference BLEU (first reference), multi-reference BLEU,
    length ratio (against the mean reference length), share of empty outputs, the token ids
    and strings of the 1-best."""
    out = {}
    encoded = [src_vocab.encode(s) for s in sources]
    for beam in beams:
        ids = []
        for lo in range(0, len(encoded), batch_size):
            src = pad_batch(encoded[lo:lo + batch_size]).to(next(model.parameters()).device)
            ids += [hs[0].tokens for hs in decode(model, src, "beam", beam=beam)]
        hyps = [tgt_vocab.decode(t) for t in ids]
        out[beam] = {**_quality(hyps, refs), "tokens": ids, "hyps": hyps}
    return out


def candidates(sweep: dict[int, dict], n: int) -> list[list[list[int]]]:
    """Per sentence (the first ``n``), the 1-best of every beam size of a :func:`beam_sweep`."""
    return [[by_beam["tokens"][i] for by_beam in sweep.values()] for i in range(n)]


def exact_sweep(model, src_vocab, tgt_vocab, sources: Sequence[str], refs, max_expansions: int,
                candidates: Sequence[Sequence[list[int]]] | None = None, max_len_a: float = MAX_LEN_A,
                max_len_b: int = MAX_LEN_B, batch_size: int | None = None) -> dict:
    """Exact search for every source within ``max_expansions`` model calls. ``candidates``
    (per source, token-id hypotheses: e.g. :func:`candidates` of a beam sweep over every beam
    size, greedy included as beam 1) seed it: the best-scoring one is the lower bound, so the
    result scores at least as high as every candidate even where the budget runs out (then the
    best hypothesis found so far is used, as in the paper's appendix A). Also returns the log
    score of the empty translation of the *same* sources (Fig. 6 compares the two). With
    ``batch_size``, :func:`~nbsupport.search.best_first_search` expands that many prefixes per
    model call (the same optimum and proof, far fewer calls on a CPU); ``expansions`` counts
    prefixes either way. ``proven`` says per sentence whether the result is proven optimal."""
    device = next(model.parameters()).device
    results, seconds, seeds, empties = [], [], [], []
    for i, s in enumerate(sources):
        src = torch.tensor([src_vocab.encode(s)], device=device)
        scorer = ModelScorer(model, src)
        max_len = max_lengths(src, max_len_a, max_len_b, model.config.max_len)[0]   # beam search's space
        empties.append(float(scorer([BOS])[EOS]))
        bound = None
        if candidates is not None:
            scored = [(sequence_score(scorer, toks), toks) for toks in candidates[i]]
            score, toks = max(scored, key=lambda st: st[0])
            bound = (toks, score)
        seeds.append(bound[1] if bound else None)
        t0 = time.perf_counter()
        if batch_size is None:
            res = exact_search(scorer, max_len=max_len, lower_bound=bound, max_expansions=max_expansions)
        else:
            res = best_first_search(BatchScorer(model, src), max_len=max_len, lower_bound=bound,
                                    max_expansions=max_expansions, batch_size=batch_size)
        seconds.append(time.perf_counter() - t0)
        results.append(res)
    hyps = [tgt_vocab.decode(r.tokens or []) for r in results]
    return {**_quality(hyps, refs), "proven_fraction": sum(r.proven for r in results) / len(results),
            "proven": [r.proven for r in results],
            "seconds_per_sentence": statistics.mean(seconds), "expansions": [r.expansions for r in results],
            "scores": [r.score for r in results], "seed_scores": seeds, "empty_scores": empties,
            "hyps": hyps, "tokens": [r.tokens for r in results]}


def search_errors(model, src_vocab, sources: Sequence[str], beam_tokens: Sequence[list[int]],
                  best_scores: Sequence[float], tol: float = 1e-4) -> float:
    """Share of sentences whose beam output scores below the best exact-search score (the mean of
    :func:`search_error_flags`)."""
    flags = search_error_flags(model, src_vocab, sources, beam_tokens, best_scores, tol)
    return sum(flags) / len(flags)


def search_error_flags(model, src_vocab, sources: Sequence[str], beam_tokens: Sequence[list[int]],
                       best_scores: Sequence[float], tol: float = 1e-4) -> list[bool]:
    """Per sentence, whether the beam output scores below the best exact-search score (a search
    error; :func:`search_errors` is their share). A beam output scoring above the "best" is an error
    of the caller: exact search was not seeded with it."""
    device = next(model.parameters()).device
    flags = []
    for i, (s, toks, best) in enumerate(zip(sources, beam_tokens, best_scores)):
        score = sequence_score(ModelScorer(model, torch.tensor([src_vocab.encode(s)], device=device)), toks)
        if score > best + tol:
            raise ValueError(f"sentence {i}: the beam output scores {score:.4f}, above the best score {best:.4f}; "
                             "seed exact search with every beam's output (exact_sweep(candidates=...))")
        flags.append(score < best - tol)
    return flags


def quality_stats(hyps: Sequence[str], refs) -> dict[str, np.ndarray]:
    """Per-source statistics of one hypothesis per source, for bootstrap intervals
    (:func:`resampled_quality`): BLEU statistics against all references (``multi_ref_bleu``) and
    against the first (``bleu``, the paper's single-reference setting), the hypothesis length and
    the mean reference length (13a tokens, as ``metrics.bleu_and_length``), empty (0/1)."""
    return {"multi_ref_bleu": stats.corpus_stats(hyps, refs), "bleu": stats.corpus_stats(hyps, [[r[0]] for r in refs]),
            "hyp_len": np.array([len(metric_tokens(h).split()) for h in hyps], dtype=float),
            "ref_len": np.array([sum(len(metric_tokens(r).split()) for r in rs) / len(rs) for rs in refs], dtype=float),
            "empty": np.array([not h.strip() for h in hyps], dtype=float)}


def resampled_quality(per_source: dict[str, np.ndarray], boot, subset: Sequence[int] | None = None) -> dict:
    """{metric: :class:`~nbsupport.stats.Resampled`} of :func:`quality_stats` (on the sources
    ``subset``, default all; ``boot`` resamples that many): corpus BLEU (multi- and first-reference),
    the length ratio (total hypothesis length / total mean reference length) and the share of empty
    outputs, on those sources and in every resample."""
    pick = (lambda a: a) if subset is None else (lambda a: a[list(subset)])
    d = {k: pick(v) for k, v in per_source.items()}
    if len(d["hyp_len"]) != boot.n:
        raise ValueError(f"{len(d['hyp_len'])} sources, but the resamples are of {boot.n}")
    out = {m: stats.Resampled(float(stats.bleu_of(d[m].sum(0))[0]), boot.bleu(d[m])) for m in ("multi_ref_bleu", "bleu")}
    out["len_ratio"] = stats.Resampled(float(d["hyp_len"].sum() / max(d["ref_len"].sum(), 1)),
                                       boot.mean(d["hyp_len"]) / np.maximum(boot.mean(d["ref_len"]), 1e-9))
    out["empty_rate"] = stats.Resampled(float(d["empty"].mean()), boot.mean(d["empty"]))
    return out


def sentences_per_second(model, src_vocab, sources: Sequence[str], method: str, batch_size: int,
                         repeats: int = 3, **kwargs) -> float:
    """Decoding speed (median of ``repeats`` runs) at a given batch size."""
    device = next(model.parameters()).device
    encoded = [src_vocab.encode(s) for s in sources]
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for lo in range(0, len(encoded), batch_size):
            decode(model, pad_batch(encoded[lo:lo + batch_size]).to(device), method, **kwargs)
        if device.type == "cuda":
            torch.cuda.synchronize()
        runs.append(time.perf_counter() - t0)
    return len(sources) / statistics.median(runs)


# --------------------------------------------------------------------------- lessons 06-07's tables, figure and records
_NAMES = ["manner adverb", "time phrase", "feeling", "frequency word"]     # the toy's optional phrases, in order
# the word that opens each optional phrase (an adverb, "at", "with") -> its index; then the tokens that
# settle how many optional phrases came before them: a place preposition (the manner adverb), "." (all)
_OPENS = {w if template == "{}" else template.split()[0]: j for j, (_, template, words) in enumerate(_OPTIONAL) for w in words}
_UPTO = {**_OPENS, **{p: 1 for p in _PREPOSITIONS}, ".": len(_NAMES)}
OPTIONAL_WORDS = {w for _, template, words in _OPTIONAL if template == "{}" for w in words} | {"at", "with"}


def _words(translation: str) -> list[str]:
    return translation.replace(".", " .").split()


def shares_why(translation: str) -> list[tuple[str, float, str]]:
    """(token, q_i, why) of every token of a high-ambiguity toy translation, EOS last: q_i is the
    product of the factors named in why (:func:`nbsupport.data.token_shares` computes q_i alone)."""
    rows, decided, prev = [], 0, None                 # decided: optional phrases written or skipped so far
    for tok in _words(translation) + ["EOS"]:
        upto = _UPTO.get(tok, decided)
        why = [f"{_NAMES[j]} skipped 0.5" for j in range(decided, upto)]           # left out just before this token
        if tok in _OPENS:                                                           # it opens optional phrase `upto`
            why, upto = why + ["written 0.5"] + ["its word 1/4"] * (_OPTIONAL[upto][1] == "{}"), upto + 1
        elif prev in ("at", "with"):
            why.append("its word 1/4")
        elif tok not in _UPTO and tok not in ("the", "EOS"):                        # a content word
            why.append("one of 4 forms")
        decided, prev = max(decided, upto), tok
        q = math.prod(0.5 if w.endswith("0.5") else 1 / 4 for w in why)
        rows.append((tok, q, " x ".join(why) or "the only valid next token"))
    return rows


def share_table(translation: str) -> str:
    """The table (token, q_i, why) of :func:`shares_why`, checked against ``token_shares`` at high ambiguity."""
    rows = shares_why(translation)
    if not np.allclose([r[1] for r in rows], _token_shares(translation, "high")):
        raise ValueError("the why column's factors do not multiply to token_shares' q_i")
    return tables.table([[tok, f"{q:.3f}", why] for tok, q, why in rows], ["token", "q_i", "why"])


@torch.no_grad()
def next_token_rank(model, x, tokens: Sequence[int]) -> tuple[int, list[int]]:
    """(rank of ``tokens[-1]`` among all tokens after ``tokens[:-1]``, 1 the best; the token ids above it)."""
    prefix = torch.tensor([[BOS] + list(tokens[:-1])], device=x.device)
    f = model.eval()(x, prefix)[0, -1]
    above = (f > f[tokens[-1]]).nonzero().flatten().tolist()
    return len(above) + 1, above


def sweep_models(models: dict, tasks: dict, beams: Sequence[int], n: int, boot) -> tuple[dict, dict]:
    """({(level, name): :func:`beam_sweep`}, {(level, name, beam): :func:`resampled_quality` plus
    ``one_word``, the share of outputs of at most one word}) on the first ``n`` test sentences."""
    sweeps, Q = {}, {}
    for (level, name), model in models.items():
        task, test = tasks[level], tasks[level].corpus.test
        sweeps[level, name] = beam_sweep(model, task.src_vocab, task.tgt_vocab, test.src[:n], test.refs[:n], beams)
        for b in beams:
            hyps = sweeps[level, name][b]["hyps"]
            Q[level, name, b] = resampled_quality(quality_stats(hyps, test.refs[:n]), boot)
            one = np.array([len(h.split()) <= 1 for h in hyps], dtype=float)
            Q[level, name, b]["one_word"] = stats.Resampled(float(one.mean()), boot.mean(one))
    return sweeps, Q


def sweep_table(Q: dict, level: str, models: Sequence[str], b4: int, big: int) -> str:
    """Per model: multi-reference BLEU and length ratio (with intervals) at beams ``b4`` and ``big``, and
    the share of outputs of at most one word at ``big``."""
    iv = lambda name, b, metric, spec: Q[level, name, b][metric].interval().format(spec)
    rows = [[name, iv(name, b4, "multi_ref_bleu", ".1f"), iv(name, big, "multi_ref_bleu", ".1f"),
             iv(name, b4, "len_ratio", ".2f"), iv(name, big, "len_ratio", ".2f"),
             f"{Q[level, name, big]['one_word'].estimate:.0%}"] for name in models]
    return tables.table(rows, ["model", f"BLEU beam {b4}", f"BLEU beam {big}", f"length ratio beam {b4}",
                               f"length ratio beam {big}", f"<= 1 word at beam {big}"])


_KEYS = (("multi_ref_bleu", "multi-reference BLEU"), ("len_ratio", "length ratio"), ("one_word", "share of outputs of <= 1 word"))
_STYLE = [("o", "-"), ("s", "--"), ("^", "-."), ("x", ":")]          # marker, line: overlapping lines stay visible


def _title(level: str) -> str:
    return "the Bible (German → English)" if level == "bible" else f"{level} ambiguity"


def curse_caption(Q: dict) -> str:
    """The figure's caption: what to see, whether any output is empty, the levels with no one-word output (for
    low ambiguity, why: it is the control)."""
    levels = list(dict.fromkeys(k[0] for k in Q))
    empties = "no output is empty at any beam" if max(q["empty_rate"].estimate for q in Q.values()) == 0 else "some are empty"
    flat = [lv for lv in levels if max(q["one_word"].estimate for k, q in Q.items() if k[0] == lv) == 0]
    why = {"low": " (too little ambiguity for 'the' to win: the control)"}
    return (f"the three measures against the beam size ({empties}), 95% intervals shaded.\n"
            "The curse: the one-word share rises with the beam and BLEU falls; a falling length ratio alone is "
            "shortening." + "".join(f"\n{_title(lv).capitalize()}: no output has <= 1 word at any beam{why.get(lv, '')}."
                                             for lv in flat))


def curse_figure(Q: dict, beams: Sequence[int], levels: Sequence[str], models: Sequence[str]):
    """Figs. 3-4: BLEU, length ratio and one-word share against the beam, a row per level, a line per
    model with its 95% interval shaded (of :func:`sweep_models`' ``Q``)."""
    curves = {(lv, m, k): [Q[lv, m, b][k].estimate for b in beams] for lv in levels for m in models for k, _ in _KEYS}
    fig = plots.beam_curves(curves, beams, levels=list(levels), models=list(models), metrics=list(_KEYS),
                            caption=curse_caption({k: q for k, q in Q.items() if k[0] in levels and k[1] in models}))
    for row, level in enumerate(levels):
        panels = fig.axes[3 * row: 3 * row + 3]
        panels[0].set_ylim(0, max(panels[0].get_ylim()[1], 40))
        panels[2].set_ylim(-0.02, 1)                                       # a share: the whole 0..1
        for ax, (key, _) in zip(panels, _KEYS):
            for line, name, (marker, style) in zip(ax.get_lines(), models, _STYLE * len(models)):
                line.set_marker(marker), line.set_linestyle(style)
                band = [Q[level, name, b][key].interval() for b in beams]
                ax.fill_between(beams, [i.ci_low for i in band], [i.ci_high for i in band], color=line.get_color(), alpha=0.15)
    fig.axes[0].get_legend().remove()
    fig.legend(fig.axes[0].get_lines(), list(models), loc="lower center", ncol=len(models), bbox_to_anchor=(0.5, 1.0))
    return fig


def records(sweeps: dict, Q: dict, beams: Sequence[int], models: Sequence[str]) -> dict[str, dict]:
    """The results to record per level ("toy_low", "toy_high", "bible"): per model, BLEU and the share of
    empty outputs by beam, multi-reference BLEU and the length ratio by beam with their intervals."""
    out = {}
    for level in dict.fromkeys(k[0] for k in sweeps):
        out["bible" if level == "bible" else f"toy_{level}"] = {name: {
            "bleu_by_beam": {b: sweeps[level, name][b]["bleu"] for b in beams},
            **{f"{m}_by_beam": {b: Q[level, name, b][m].interval().to_dict() for b in beams} for m in ("multi_ref_bleu", "len_ratio")},
            "empty_rate_by_beam": {b: sweeps[level, name][b]["empty_rate"] for b in beams}} for name in models}
    return out
