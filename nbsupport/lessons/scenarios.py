"""Hand-made hypothesis sets for the four scenarios of the seed paper Fig. 1 (Shen et al. Fig. 1),
built from real references so the metrics can be watched on them."""
from __future__ import annotations

import random
from typing import Sequence
import numpy as np

from ..metrics import _check, human_scores, sentence_bleu
from .. import data
from ..data import bible
from ..views.plots import error_bars, plt, quality_diversity, stars_and_dots
from ..views.tables import dict_table, table

DAMAGE = 0.5      # scenario A: the share of a reference's words replaced
SCENARIOS = {
    "A": "spread around the references: K damaged copies of K different references (each word "
         f"replaced, with probability {DAMAGE:g}, by a word of another verse)",
    "B": "clustered near one reference: K near-copies of reference 0, each missing one word",
    "C": "one poor hypothesis: K-1 references plus one unrelated sentence",
    "D": "match the references: the K references themselves, shuffled",
}


def _drop_word(text: str, position: int) -> str:
    words = text.split()
    if len(words) < 2:
        return text
    del words[position % len(words)]
    return " ".join(words)


def damaged_copy(text: str, pool: Sequence[str], share: float, rng: random.Random) -> str:
    """``text`` with each word replaced, with probability ``share``, by a word drawn from ``pool``
    (words of unrelated sentences): a hypothesis near its reference, but not on it."""
    if not 0 <= share <= 1:
        raise ValueError(f"share must be in [0, 1], got {share}")
    if share and not pool:
        raise ValueError("a damaged copy needs a non-empty pool of replacement words")
    return " ".join(rng.choice(pool) if rng.random() < share else w for w in text.split())


def scenario_sets(refs: Sequence[Sequence[str]], seed: int = 0, damage: float = DAMAGE) -> dict[str, list[list[str]]]:
    """Hypothesis sets (one list of K = M strings per source) for scenarios A-D.

    ``refs`` are the M references of each source; unrelated sentences are references of
    other sources of the same list, so their language and style are realistic. Scenario A
    (Fig. 1: hypotheses spread around the references) damages a *different* reference for each
    of its K hypotheses, in a random order, replacing a share ``damage`` of the words.
    """
    m = _check(refs, "refs")
    rng = random.Random(seed)
    n = len(refs)
    if n < m + 1:
        raise ValueError(f"need at least {m + 1} sources to draw unrelated sentences, got {n}")

    def unrelated(i: int, count: int) -> list[str]:
        others = rng.sample([j for j in range(n) if j != i], count)
        return [refs[j][rng.randrange(m)] for j in others]

    sets = {"A": [], "B": [], "C": [], "D": []}
    for i, rs in enumerate(refs):
        pool = [w for s in unrelated(i, m) for w in s.split()]
        order = list(range(m))
        rng.shuffle(order)
        sets["A"].append([damaged_copy(rs[k], pool, damage, rng) for k in order])
        sets["B"].append([_drop_word(rs[0], rng.randrange(10_000)) for _ in range(m)])
        sets["C"].append(list(rs[:m - 1]) + unrelated(i, 1))
        shuffled = list(rs)
        rng.shuffle(shuffled)
        sets["D"].append(shuffled)
    return sets


def sentence_map(sentences: Sequence[str]):
    """2-D points for ``sentences`` whose distances approximate 100 - sentence BLEU (the mean of
    both directions, so that the distance is symmetric): classical multidimensional scaling, the
    picture of the seed paper Fig. 1 drawn from real sentences. Identical sentences get the same point.
    Returns an (n, 2) numpy array, its sign fixed so that the first sentence has x >= 0, y >= 0."""

    n = len(sentences)
    if n < 2:
        raise ValueError(f"a map needs at least 2 sentences, got {n}")
    bleu = np.array([[sentence_bleu(h, r) for r in sentences] for h in sentences])
    d = 100 - (bleu + bleu.T) / 2
    np.fill_diagonal(d, 0)
    j = np.eye(n) - 1 / n
    vals, vecs = np.linalg.eigh(-0.5 * j @ (d ** 2) @ j)
    top = np.argsort(vals)[::-1][:2]
    xy = vecs[:, top] * np.sqrt(np.clip(vals[top], 0, None))
    xy[:, xy[0] < 0] *= -1
    return xy


# --- Notebook 00's tables, figures and printed readings (the lesson keeps its metrics inline) ---

SHORT = {"A": "damaged, off every star", "B": "clustered near one", "C": "one poor hypothesis", "D": "on the references"}
METRICS = ("pairwise_bleu", "multi_ref_bleu", "avg_oracle_bleu", "ref_coverage")      # one column order everywhere


def sentences_table(refs: Sequence[str], hyps: Sequence[str]) -> str:
    """A table of one source's references (y^1..y^M) and hypotheses (ŷ^1..ŷ^K), one per row."""
    return table([[f"y^{m + 1}", r] for m, r in enumerate(refs)] + [[f"ŷ^{k + 1}", h] for k, h in enumerate(hyps)],
                 ["", "sentence"])


def score_grid(hyps: Sequence[str], refs: Sequence[str], score, name: str = "sentence BLEU") -> str:
    """A table of ``score(hypothesis, reference)``: one row per hypothesis ŷ^k, one column per reference y^m."""
    return table([[f"ŷ^{k + 1}"] + [score(h, r) for r in refs] for k, h in enumerate(hyps)],
                 [name] + [f"y^{m + 1}" for m in range(len(refs))], ".0f")


def map_labels(refs: Sequence[str], hyps: Sequence[str]) -> tuple[list[str], list[str]]:
    """(reference labels, hypothesis labels) for :func:`one_source_map`: a hypothesis equal to a
    reference is named in that reference's label ("$y^1 = \\hat y^1$") and gets an empty label."""
    ref_labels, hyp_labels = [f"$y^{m + 1}$" for m in range(len(refs))], []
    for k, h in enumerate(hyps):
        m = next((m for m, r in enumerate(refs) if r == h), None)
        if m is None:
            hyp_labels.append(f"$\\hat y^{k + 1}$")
        else:
            ref_labels[m] = ref_labels[m][:-1] + f" = \\hat y^{k + 1}$"
            hyp_labels.append("")
    return ref_labels, hyp_labels


def one_source_map(refs: Sequence[str], hyps: Sequence[str], caption: str | None = None):
    """The figure of one source's references (stars) and hypotheses (dots) placed by :func:`sentence_map`,
    labelled; a star that a hypothesis copies has its label on the left, clear of its neighbours."""
    xy = sentence_map(list(refs) + list(hyps))
    labels = map_labels(refs, hyps)
    fig = stars_and_dots({f"one source: M = {len(refs)} references, K = {len(hyps)} hypotheses":
                          (xy[:len(refs)], xy[len(refs):])}, labels=labels, caption=caption)
    for text in fig.axes[0].texts[:len(refs)]:
        if "=" in text.get_text():
            text.set(x=-10, horizontalalignment="right")
    return fig


def toy_human_points(n_test: int, seed: int = 0) -> dict:
    """{style strength: {ambiguity: human point (``metrics.human_scores``) and ``entropy_nats``, the mean
    entropy that ambiguity adds to a sentence}} of every toy variant, on ``n_test`` test sources."""
    out = {}
    for strength in data.STYLE_STRENGTHS:
        for ambiguity in data.AMBIGUITY_LEVELS:
            c = data.toy(n_train=0, n_dev=0, n_test=n_test, style_strength=strength, ambiguity=ambiguity, seed=seed)
            h = human_scores(c.test.refs)
            h["entropy_nats"] = sum(data.entropy_nats(m, ambiguity) for m in c.test.meanings) / len(c.test)
            out.setdefault(strength, {})[ambiguity] = h
    return out


def toy_table(results: dict) -> str:
    """A table of :func:`toy_human_points`' results, one row per "strength / ambiguity"."""
    return dict_table({f"{s} / {a}": h for s, r in results.items() for a, h in r.items()}, "styles / ambiguity")


def verse_table(verse, title: str) -> str:
    """A table of a Bible verse's English references, one row each: short name, version, text (column ``title``)."""
    return table([[bible.SHORT_NAMES[c], bible.VERSIONS[c][1], verse.text[c]] for c in bible.ENGLISH_REFERENCES],
                 ["", "version", title])


def _name(metric: str) -> str:
    return "ref_coverage" if metric == "coverage" else metric


def estimates(resampled: dict) -> dict:
    """{set: {metric: estimate}} of {set: {metric: Resampled}} (``stats.resampled_metrics``), in the order
    of METRICS, its "coverage" named "ref_coverage" as ``metrics.diversity_report`` names it."""
    return {n: {m: rs[k].estimate for m in METRICS for k in rs if _name(k) == m} for n, rs in resampled.items()}


def interval_table(resampled: dict, first: str, skip: Sequence[str] = ()) -> str:
    """A table of {row: {metric: Resampled}}: each metric's estimate [95% interval], less the metrics in ``skip``."""
    return dict_table({n: {_name(m): r.interval().format(".1f") for m, r in rs.items() if _name(m) not in skip}
                       for n, rs in resampled.items()}, first)


LEVELS = {"0": "low", "1": "medium", "2": "high", "=": "human"}


def signature_table(scores: dict, signatures: dict, human: dict) -> str:
    """A table of the paper's level of each set (rows, in the order of ``scores``) on each metric
    (``signatures[metric]``: one level per set, "0" low, "1" medium, "2" high, "=" inside the human
    interval, ``human[metric]``), with this run's rank (1 = highest) and ✓ where the rank fits the level
    (above every set of a lower level, below every set of a higher one), then how many fit."""
    names = list(scores)
    rows, fits = [], 0
    for i, s in enumerate(names):
        row = [s]
        for m, levels in signatures.items():
            lv, x = levels[i], scores[s][m]
            if lv == "=":
                iv = human[m].interval()
                ok = iv.ci_low <= x <= iv.ci_high
            else:
                ok = all((x > scores[t][m]) == (lv > l) for t, l in zip(names, levels) if l not in ("=", lv))
            rank = 1 + sorted(names, key=lambda t: -scores[t][m]).index(s)
            row.append(f"{LEVELS[lv]}: {rank} {'✓' if ok else '✗'}")
            fits += ok
        rows.append(row)
    headers = ["paper's level: rank"] + [m.replace("_", " ").replace("bleu", "BLEU").replace("ref ", "")
                                         for m in signatures]
    return table(rows, headers) + f"\n{fits} of {len(rows) * len(signatures)} levels fit this run's ranks"


def fig1_map(refs, sets: dict, index: int = 0):
    """The seed paper's Fig. 1 on one test verse: its references (stars, named by Bible version) and each
    scenario's hypotheses (dots), one panel per scenario; panel B's cluster is pointed out."""
    m = len(refs[index])
    xy = sentence_map(list(refs[index]) + [h for s in SHORT for h in sets[s][index]])
    panels = {f"{s}: {name}": (xy[:m], xy[m + m * i:m + m * (i + 1)]) for i, (s, name) in enumerate(SHORT.items())}
    names = [bible.SHORT_NAMES[c] for c in bible.ENGLISH_REFERENCES][:m]
    fig = stars_and_dots(panels, labels=(names, []),
                         title=f"test verse {index}: its {m} references (stars) and each scenario's {m} hypotheses (dots)")
    fig.axes[1].annotate(f"all {m} hypotheses", xy[2 * m:3 * m].mean(axis=0), xytext=(-70, 55), textcoords="offset points",
                         ha="center", fontsize=8, color="royalblue", arrowprops={"arrowstyle": "->", "color": "royalblue"})
    return fig


def widest(*resampled: dict, metrics=("pairwise_bleu", "avg_oracle_bleu")) -> float:
    """The width of the widest 95% interval of ``metrics`` among the dicts {metric: Resampled} given."""
    return max(rs[m].interval().ci_high - rs[m].interval().ci_low for rs in resampled for m in metrics)


def fig1_quality_diversity(resampled: dict, human: dict, caption: str):
    """The four scenarios (one colour each, 95% intervals as error bars) and the human star (its interval in
    crimson) in the plane of pairwise BLEU and average oracle BLEU; the caption ends with the widest interval."""
    fig, ax = plt.subplots(figsize=(7.5, 5.5))
    for (s, rs), colour in zip(resampled.items(), ("C0", "C1", "C2", "C4")):      # no red: the human star is red
        x, y = rs["pairwise_bleu"].interval(), rs["avg_oracle_bleu"].interval()
        ax.errorbar(x.estimate, y.estimate, xerr=error_bars([x]), yerr=error_bars([y]), fmt="o", ms=8, capsize=3, color=colour,
                    label=f"{s}: {SHORT.get(s, s)}")
    x, y = human["pairwise_bleu"].interval(), human["avg_oracle_bleu"].interval()
    ax.errorbar(x.estimate, y.estimate, xerr=error_bars([x]), yerr=error_bars([y]), fmt="none", ecolor="crimson", capsize=3)
    w = widest(*resampled.values(), human)
    size = ", about a marker's width" if w < 2.5 else ""       # a marker spans about 2 BLEU here
    return quality_diversity({}, human=(x.estimate, y.estimate), ax=ax,
                             caption=f"{caption} 95% intervals at most {w:.1f} BLEU wide{size}.")


def summary(human: dict, toy_results: dict, fig1: dict, gap: float) -> dict:
    """The lesson's main numbers for the results file's closing table."""
    toy = lambda s, a, m: toy_results[s][a][m]
    return {"bible human pairwise BLEU": human["pairwise_bleu"],
            "bible human avg oracle BLEU": human["avg_oracle_bleu"],
            "bible human multi-ref BLEU": human["multi_ref_bleu"],
            "toy strong pairwise BLEU": toy("strong", "none", "pairwise_bleu"),
            "toy subtle pairwise BLEU": toy("subtle", "none", "pairwise_bleu"),
            "toy entropy nats (low / high)": f'{toy("strong", "low", "entropy_nats"):.2f} / {toy("strong", "high", "entropy_nats"):.2f}',
            "fig1 coverage B / C / A": " / ".join(f'{fig1[s]["ref_coverage"]:.2f}' for s in "BCA"),
            "fig1 D - human multi-ref BLEU": gap}
