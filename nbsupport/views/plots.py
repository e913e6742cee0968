"""The course's figures, one function per figure kind. Each returns the matplotlib figure
and prints its one-sentence caption, so that a papermill run keeps the caption as text."""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.text import Text
import numpy as np


def _caption(fig, caption: str | None):
    if caption:
        print(f"Figure: {caption}")
    return fig


def error_bars(intervals) -> list[list[float]]:
    """matplotlib's ``xerr``/``yerr`` for estimates with 95% intervals (objects with estimate, ci_low,
    ci_high): [[below...], [above...]], never negative (a percentile interval may sit beside its estimate)."""
    return [[max(0.0, i.estimate - i.ci_low) for i in intervals], [max(0.0, i.ci_high - i.estimate) for i in intervals]]


def quality_diversity(points: Mapping[str, tuple[float, float]], human: tuple[float, float] | None = None,
                      quality_label: str = "average oracle BLEU (quality)",
                      caption: str | None = None, ax=None, *, groups: Mapping[str, str] | None = None,
                      spread_labels: bool = False):
    """The seed paper's Fig. 2 / Shen Fig. 2: pairwise BLEU, reversed (right = more diverse), against a
    quality BLEU. ``points`` maps a system to (pairwise BLEU, quality BLEU).

    Optional, for crowded plots: ``groups`` maps a system to a group name; markers are then
    coloured by group, with one legend entry per group. ``spread_labels`` places each name where
    it overlaps no other name or marker (further out, with a thin leader line, when it must; where
    more than about six names crowd one spot, some may still overlap)."""
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(7.5, 5.5) if spread_labels else (5.5, 4))
    colours = {}
    if groups is not None:
        for g in dict.fromkeys(groups.get(n, "") for n in points):
            colours[g] = _GROUP_COLOURS[len(colours) % len(_GROUP_COLOURS)]
    for i, (name, (pw, q)) in enumerate(points.items()):
        g = groups.get(name, "") if groups is not None else None
        ax.scatter(pw, q, s=60, zorder=3, **({"color": colours[g], "label": g} if g is not None else {}))
        if not spread_labels:
            ax.annotate(name, (pw, q), textcoords="offset points", xytext=(6, 6 if i % 2 == 0 else -12))
    if human is not None:
        ax.scatter(*human, marker="*", s=250, color="crimson", zorder=4, label="human")
    if human is not None or groups is not None:
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))                 # one entry per group
        ax.legend(unique.values(), unique.keys(), loc="lower left", fontsize=8 if groups is not None else None)
    ax.set_xlabel("pairwise BLEU (reversed: right = more diverse)")
    ax.set_ylabel(quality_label)
    if spread_labels:
        ax.margins(x=0.2, y=0.08)                            # room for the names inside the axes
    ax.invert_xaxis()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    if spread_labels:                                        # highest first: the top of the plot is the most read
        label_points(ax, [(pw, q, name, "black", None) for name, (pw, q) in sorted(points.items(), key=lambda kv: -kv[1][1])],
                     obstacles=[(*human, 9.0)] if human is not None else (), fontsize=8)
    return _caption(fig, caption)


_GROUP_COLOURS = ["C0", "C1", "C2", "C4", "C5", "C6", "C7", "C8", "C9"]   # no red: the human star is crimson


_LABEL_OFFSETS = [(dx, dy) for dy in (0, 10, -10, 20, -20, 30, -30, 42, -42, 56, -56, 72, -72) for dx in (7, -7)]


def label_points(ax, points: Sequence[tuple], obstacles: Sequence[tuple[float, float, float]] = (), fontsize: int = 7):
    """Labels points, each at the first nearby offset whose text stays inside the axes and covers no marker, no
    error bar, no obstacle and no label placed before it (a thin leader line when it sits far off); where no offset
    is free, the one with fewest collisions. ``points`` are (x, y, text, colour, bars), bars (x_low, x_high, y_low,
    y_high) or None, labelled in that order; ``obstacles`` are (x, y, radius in pixels), e.g. a human star.
    Call after the layout is fixed."""
    fig = ax.figure
    fig.canvas.draw()
    renderer, px = fig.canvas.get_renderer(), ax.transData.transform
    marks = [(px((x, y)), 5.0) for x, y, *_ in points] + [(px((x, y)), r) for x, y, r in obstacles]
    for x, y, _, _, bars in points:                          # error bars, sampled every few pixels
        if bars is not None:
            xl, xh, yl, yh = bars
            marks += [(px(p), 0.5) for i in range(41) for p in ((xl + (xh - xl) * i / 40, y), (x, yl + (yh - yl) * i / 40))]
    placed = []
    for x, y, text, colour, _ in points:
        best = None
        for dx, dy in _LABEL_OFFSETS:
            t = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=fontsize, color=colour,
                            va="center", ha="left" if dx > 0 else "right", zorder=6,
                            bbox=dict(boxstyle="square,pad=0", fc="white", ec="none", alpha=0.8),
                            arrowprops=dict(arrowstyle="-", lw=0.5, color="grey") if abs(dy) > 12 else None)
            t.update_positions(renderer)
            box = Text.get_window_extent(t, renderer).padded(1)   # the text alone, not its leader line
            hits = (not (ax.bbox.contains(box.x0, box.y0) and ax.bbox.contains(box.x1, box.y1))) \
                + sum(box.overlaps(b) for b in placed) \
                + sum(box.x0 - r < p[0] < box.x1 + r and box.y0 - r < p[1] < box.y1 + r for p, r in marks)
            if best is None or hits < best[0]:
                if best is not None:
                    best[1].remove()
                best = (hits, t, box)
            else:
                t.remove()
            if hits == 0:
                break
        placed.append(best[2])


def quality_diversity_curves(curves: Mapping[str, Sequence[tuple[float, float, float, float]]],
                             ks: Sequence[int] | Mapping[str, Sequence[int]],
                             human: tuple[float, float] | None = None,
                             quality_label: str = "average oracle BLEU (quality)", caption: str | None = None):
    """One line per method through its points at each K: ``curves[name]`` is a list of
    (pairwise BLEU, quality BLEU, error of pairwise, error of quality), one per K in ``ks``; an
    error is a number (either side) or a pair (below, above) for an asymmetric interval. The first
    point is marked with its K, the last with the method's name. ``ks`` may also map each method to
    its own Ks (a method not run at every K)."""
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for name, pts in curves.items():
        its_ks = ks[name] if isinstance(ks, Mapping) else ks
        x, y, dx, dy = zip(*pts)
        dx, dy = (np.transpose([(e, e) if np.ndim(e) == 0 else tuple(e) for e in d]) for d in (dx, dy))   # (2, N): below, above
        line = ax.errorbar(x, y, xerr=dx, yerr=dy, marker="o", ms=4, capsize=2, lw=1.2, label=name)
        ax.annotate(f"K={its_ks[0]}", (x[0], y[0]), textcoords="offset points", xytext=(3, -10), fontsize=7,
                    color=line[0].get_color())
        ax.annotate(f"{name} K={its_ks[-1]}", (x[-1], y[-1]), textcoords="offset points", xytext=(4, 4), fontsize=7,
                    color=line[0].get_color())
    if human is not None:
        ax.scatter(*human, marker="*", s=250, color="crimson", zorder=4, label="human")
    ax.set_xlabel("pairwise BLEU (reversed: right = more diverse)")
    ax.set_ylabel(quality_label)
    ax.invert_xaxis()
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    return _caption(fig, caption)


def grouped_bars(table: Mapping[str, Mapping[str, float]], metrics: Sequence[str],
                 ylabel: str = "BLEU", caption: str | None = None):
    """One group of bars per row of ``table`` (row name -> metric -> value)."""
    rows = list(table)
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.2))
    axes = [axes] if len(metrics) == 1 else list(axes)
    for ax, metric in zip(axes, metrics):
        ax.bar(rows, [table[r][metric] for r in rows], color="steelblue")
        ax.set_title(metric)
        ax.set_xlabel("scenario")
        ax.set_ylabel(ylabel if "coverage" not in metric else "references matched")
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return _caption(fig, caption)


def heatmap(matrix, row_labels: Sequence[str], col_labels: Sequence[str], xlabel: str, ylabel: str,
            caption: str | None = None, fmt: str = "{:.0f}", cbar_label: str = ""):
    """A labelled heat map with the value written in every cell."""
    fig, ax = plt.subplots(figsize=(max(4.5, 1.5 + 0.8 * len(col_labels)), max(3.5, 1.2 + 0.6 * len(row_labels))))
    im = ax.imshow(matrix, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(col_labels)), col_labels, rotation=45, ha="right")
    ax.set_yticks(range(len(row_labels)), row_labels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    vmax = max(max(r) for r in matrix) if len(matrix) else 1
    for i, row in enumerate(matrix):
        for j, v in enumerate(row):
            ax.text(j, i, fmt.format(v), ha="center", va="center",
                    color="white" if v < 0.6 * vmax else "black", fontsize=9)
    fig.colorbar(im, ax=ax, label=cbar_label)
    fig.tight_layout()
    return _caption(fig, caption)


def histogram(values_by_name: Mapping[str, Sequence[float]], xlabel: str, ylabel: str = "sentences",
              caption: str | None = None, bins: int = 30):
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    for name, values in values_by_name.items():
        ax.hist(values, bins=bins, alpha=0.55, label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _caption(fig, caption)


BEAM_CURVE_METRICS = (("bleu", "BLEU (single reference)"), ("len_ratio", "length ratio"),
                      ("empty_rate", "share of empty outputs"))


def beam_curves(curves, beams, levels, models, caption: str | None = None, metrics=BEAM_CURVE_METRICS):
    """Stahlberg & Kumar Figs. 3-4: one column per metric, one row per task, a line per model.
    ``curves[(level, model, metric)]`` is the list of values over ``beams``; ``metrics``: the
    columns, (metric key, y-axis label) each."""
    fig, axes = plt.subplots(len(levels), len(metrics), figsize=(4 * len(metrics), 3 * len(levels)), squeeze=False)
    for r, level in enumerate(levels):
        for c, (metric, label) in enumerate(metrics):
            ax = axes[r][c]
            for model in models:
                ax.plot(beams, curves[level, model, metric], marker="o", label=model)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("beam size")
            ax.set_ylabel(label)
            ax.set_title("the Bible (German → English)" if level == "bible" else f"{level} ambiguity")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    return _caption(fig, caption)


def mean_std_bars(groups, series, ylabel: str, xlabel: str = "", caption: str | None = None):
    """Grouped bars with standard-deviation error bars (Stahlberg & Kumar Fig. 6).
    ``groups``: list of group names; ``series``: {label: [list of values per group]}."""
    import statistics
    fig, ax = plt.subplots(figsize=(max(5, 1.4 * len(groups)), 3.4))
    width = 0.8 / len(series)
    for i, (label, per_group) in enumerate(series.items()):
        means = [statistics.mean(v) for v in per_group]
        sds = [statistics.stdev(v) if len(v) > 1 else 0.0 for v in per_group]   # one value: no error bar
        ax.bar([g + i * width for g in range(len(groups))], means, width, yerr=sds, capsize=3, label=label)
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))], groups, rotation=20)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.axhline(0, color="black", lw=0.5)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return _caption(fig, caption)


def lines(x: Sequence[float], series: Mapping[str, Sequence[float]], xlabel: str, ylabel: str,
          caption: str | None = None, ax=None):
    """One line (with markers) per series against a shared x axis."""
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(5.5, 3.6))
    for label, ys in series.items():
        ax.plot(list(x), list(ys), marker="o", label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _caption(fig, caption)


def stars_and_dots(panels: Mapping[str, tuple], title: str | None = None, caption: str | None = None,
                   labels: tuple | None = None):
    """The seed paper's Fig. 1: one panel per entry ``name -> (reference points, hypothesis points)``,
    each an (n, 2) array (:func:`nbsupport.lessons.scenarios.sentence_map`): references as red
    stars, hypotheses as blue dots, on the same scale in every panel. ``labels``, optional:
    (reference names, hypothesis names), written beside the points of every panel."""
    fig, axes = plt.subplots(1, len(panels), figsize=(max(4.5, 3.3 * len(panels)), 3.6), squeeze=False)
    pts = np.concatenate([np.asarray(p) for pair in panels.values() for p in pair])
    lo, hi = pts.min(axis=0) - 8, pts.max(axis=0) + 8
    for ax, (name, (refs, hyps)) in zip(axes[0], panels.items()):
        refs, hyps = np.asarray(refs), np.asarray(hyps)
        ax.scatter(refs[:, 0], refs[:, 1], marker="*", s=300, color="crimson", label="reference", zorder=2)
        ax.scatter(hyps[:, 0], hyps[:, 1], s=45, color="royalblue", label="hypothesis", zorder=3)
        if labels is not None:
            for pts_, texts, color, dy in ((refs, labels[0], "crimson", 6), (hyps, labels[1], "royalblue", -12)):
                for (x, y), text in zip(pts_, texts):
                    ax.annotate(text, (x, y), xytext=(6, dy), textcoords="offset points", fontsize=8, color=color)
        ax.set_xlim(lo[0], hi[0])
        ax.set_ylim(lo[1], hi[1])
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        # multidimensional scaling's axes have no units: distances between points approximate 100 - BLEU
        ax.set_xlabel("MDS axis 1", fontsize=7)
        ax.set_ylabel("MDS axis 2", fontsize=7)
        ax.set_title(name, fontsize=10)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    if title:                                               # room between the overall title and the panels' own
        fig.subplots_adjust(top=0.85)
    fig.subplots_adjust(bottom=0.2)          # room for the legend below the axis labels, not on them
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=8,
               bbox_to_anchor=(0.5, 0.0))
    return _caption(fig, caption)
