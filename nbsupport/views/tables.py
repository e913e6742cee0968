"""Plain-text tables, so every number a notebook shows also survives as text."""
from __future__ import annotations

from typing import Mapping, Sequence


def _fmt(value, floatfmt: str) -> str:
    if isinstance(value, float):
        return format(value, floatfmt)
    return str(value)


def table(rows: Sequence[Sequence], headers: Sequence[str], floatfmt: str = ".1f") -> str:
    """Format rows as an aligned text table."""
    cells = [[str(h) for h in headers]] + [[_fmt(v, floatfmt) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def dict_table(data: Mapping[str, Mapping[str, object]], first: str = "", floatfmt: str = ".1f") -> str:
    """Rows from the outer keys, columns from the inner keys of the first row."""
    columns = list(next(iter(data.values())))
    rows = [[name] + [values.get(c, "") for c in columns] for name, values in data.items()]
    return table(rows, [first] + columns, floatfmt)


def mean_std(values) -> str:
    """'mean ± sample standard deviation' of a list of numbers; one number has no spread ("± n/a")."""
    import statistics
    values = list(values)
    spread = f"{statistics.stdev(values):.2f}" if len(values) > 1 else "n/a"
    return f"{statistics.mean(values):.2f} ± {spread}"


def markdown(text: str):
    """``text`` rendered as markdown in a notebook (a table of claims, say); plain text elsewhere."""
    from IPython.display import Markdown
    return Markdown(text)
