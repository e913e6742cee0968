# tests/book is `make test-book`'s (the book built from ci runs, then read in Chromium); `make test`
# neither collects nor imports it: the Makefile sets NBS_BOOK_SITE to the built site.
import os

collect_ignore_glob = [] if os.environ.get("NBS_BOOK_SITE") else ["test_*.py"]
