# tests/book/test_pages.py reads the site `make test-book` builds (from ci runs) in Chromium: `make test`
# does not collect it (the Makefile sets NBS_BOOK_SITE to the built site). test_build.py needs only
# book/build.py and the notebooks, so `make test` runs it.
import os

collect_ignore_glob = [] if os.environ.get("NBS_BOOK_SITE") else ["test_pages.py"]
