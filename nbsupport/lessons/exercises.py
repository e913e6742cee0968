"""Exercises: a numbered task in a notebook cell tagged ``exercise``, a check cell after it that
says right or wrong and why, and the solution in ``notebooks/solutions/<notebook>.py``.

A solutions file holds one block per exercise, each opened by a line ``# %% exercise N``::

    # %% exercise 1
    flipped = (z_dropout != z_eval).float().mean().item()

The tests run every notebook with its exercise cells replaced by these blocks, so every check
is tested with a right answer; ``make notebooks`` runs the cells as a student first sees them.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..paths import repo_root

MARKER = re.compile(r"^# %% exercise (\d+)\s*$", re.M)


def solutions_file(notebook: str) -> Path:
    return repo_root() / "notebooks" / "solutions" / f"{Path(notebook).stem}.py"


def solutions(notebook: str) -> dict[int, str]:
    """{exercise number: solution source} of one notebook (``"02_hard_moe"``)."""
    path = solutions_file(notebook)
    if not path.exists():
        raise FileNotFoundError(f"no solutions for {notebook!r}: {path} is missing")
    text = path.read_text(encoding="utf-8")
    marks = list(MARKER.finditer(text))
    return {int(m.group(1)): text[m.end():(marks[i + 1].start() if i + 1 < len(marks) else len(text))].strip("\n")
            for i, m in enumerate(marks)}


def solution(notebook: str, number: int) -> None:
    """Print the solution of exercise ``number`` (paste it into the exercise cell and run it)."""
    found = solutions(notebook)
    if number not in found:
        raise ValueError(f"{notebook} has exercises {sorted(found)}, not {number}")
    print(found[number])


def check(number: int, ok: bool, right: str, wrong: str) -> bool:
    """Say whether exercise ``number`` is solved: ``right`` explains the answer, ``wrong`` gives a hint."""
    ok = bool(ok)
    print(f"Exercise {number}: {'right' if ok else 'not yet'}. {right if ok else wrong}")
    return ok
