# The two commands of the README: `make notebooks` and `make test`.
# Both create .venv if it is missing, install the pinned CPU torch and the package,
# prepare the data (cached under data/), then act. Re-running is fast and idempotent.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DATA_STAMP := data/.prepared-stamp
# papermill and JupyterLab find the venv's own python3 kernel first; nothing is registered globally.
export JUPYTER_PATH := $(CURDIR)/$(VENV)/share/jupyter

.PHONY: setup data test notebooks reproduce lab test-kernels test-browser bench gpu-check strip clean smoke-full

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (nbsupport .venv)" >/dev/null
	@touch $@

data: $(DATA_STAMP)

$(DATA_STAMP): $(STAMP) nbsupport/data/bible.py nbsupport/data/prepare.py
	$(PY) -m nbsupport.data.prepare
	@touch $@

test: data
	$(PY) -m pytest

notebooks: data
	$(PY) -m nbsupport.harness.run_notebooks --profile lab

# the five papers' reproductions (notebooks/reproductions/): every claim over 3 model seeds at lab,
# sharing the lessons' model cache (a lesson's model is seed 0); verdicts in build/notebooks/<paper>.json
reproduce: data
	$(PY) -m nbsupport.harness.run_notebooks --reproductions --profile lab

lab: data
	$(VENV)/bin/jupyter lab notebooks/

test-kernels: data
	$(PY) -m pip install --quiet -e '.[dev,kernels]'
	TRITON_INTERPRET=1 $(PY) -m pytest tests -k kernel

# every notebook's `full` code path on this CPU: real model sizes and Bible data, NBS_MAX_STEPS
# optimiser steps per model, evaluation sizes / 25 (nbsupport/harness/smoke.py); results, wall times and
# the projected GPU time per notebook in build/smoke-full/ (projection.json). Not part of `make test`.
# One notebook: make smoke-full NOTEBOOKS=notebooks/06_beam_search_curse.ipynb
smoke-full: data
	NBS_BUILD=$(CURDIR)/build/smoke-full $(PY) -c 'import sys, nbsupport.harness.smoke as s; sys.exit(s.main(sys.argv[1:]))' $(NOTEBOOKS)

# JupyterLab in headless Chromium (Debian's `chromium`, driven by playwright from PyPI; no browser
# download): every notebook at ci, Run All, each widget clicked or typed into; screenshots and what
# each step showed in build/screenshots/. Not part of `make test`. One notebook: make test-browser K=02_hard
CHROMIUM ?= $(firstword $(NBS_CHROMIUM) $(wildcard /usr/lib/chromium/chromium) $(shell command -v chromium chromium-browser google-chrome 2>/dev/null))
test-browser: data
	@test -n "$(CHROMIUM)" || { echo "make test-browser needs Chromium: apt-get install chromium (or NBS_CHROMIUM=/path/to/chromium)"; exit 1; }
	$(PY) -m pip install --quiet -e '.[dev,browser]'
	NBS_CHROMIUM=$(CHROMIUM) $(PY) -m pytest tests/browser -m browser $(if $(K),-k '$(K)')

bench: $(STAMP)
	$(PY) benchmarks/bench.py --size lab

# one command on a machine with a GPU: bench, kernel tests, every lesson at lab from an empty cache and one
# paper's reproduction seeds, within 8 minutes, into benchmarks/gpu-<device>/ (without a GPU: a rehearsal at ci)
gpu-check: data
	$(PY) -m pip install --quiet -e '.[dev,kernels]'
	$(PY) benchmarks/gpu_check.py

strip: $(STAMP)
	$(VENV)/bin/nbstripout notebooks/*.ipynb

clean:
	rm -rf build

# The course as a static website (Sphinx + myst-nb + sphinx-book-theme, MathJax from a PyPI package:
# nothing is fetched from the web): every lesson as executed at `lab` in build/notebooks (a lesson
# with no executed copy there is executed first), the README's course map as front page, a page per
# paper and the reproduction records. Open build/book/html/index.html. book/build.py prints the
# runs it shows and refuses failed or unfinished runs, runs at another profile and runs of another
# version of a notebook than notebooks/ holds (BOOK_ALLOW_STALE=1 shows those, marked on the page).
# Another folder of runs: make book NOTEBOOKS_DIR=/path/to/runs (BOOK_PROFILE=ci for ci runs).
NOTEBOOKS_DIR ?= $(or $(NBS_RESULTS),build/notebooks)
BOOK_PROFILE ?= lab
BOOK_DIR ?= build/book
BOOK_STAMP := $(VENV)/.book-stamp
BOOK_FLAGS = $(if $(filter 1,$(BOOK_ALLOW_STALE)),--allow-stale)
.PHONY: book test-book

$(BOOK_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet -e '.[book]'
	@touch $@

book: data $(BOOK_STAMP)
	@missing="$$($(PY) book/build.py --missing --notebooks $(NOTEBOOKS_DIR))"; \
	if [ -n "$$missing" ]; then \
	  echo "book: executing the lessons with no run in $(NOTEBOOKS_DIR): $$missing"; \
	  NBS_RESULTS=$(abspath $(NOTEBOOKS_DIR)) $(PY) -m nbsupport.harness.run_notebooks --profile $(BOOK_PROFILE) $$missing || exit 1; \
	fi
	$(PY) book/build.py --notebooks $(NOTEBOOKS_DIR) --profile $(BOOK_PROFILE) --out $(BOOK_DIR) $(BOOK_FLAGS)

# The book as a reader sees it (not part of `make test`): every lesson executed at ci, one at a
# time on one thread, into build/book-ci/notebooks; the book built from those runs into
# build/book-ci/html; then tests/book: book/build.py's checks, and every page opened from disk in
# headless Chromium (as test-browser: Debian's chromium driven by playwright): no console error, no
# request to the network, every image, link and anchor resolves, MathJax typeset every formula,
# each lesson's first figure is visible. Screenshots in build/screenshots/book/.
# BOOK_CI_RUN=0 reuses the ci runs already in build/book-ci/notebooks.
BOOK_CI_DIR ?= build/book-ci
BOOK_CI_RUN ?= 1
test-book: data
	@test -n "$(CHROMIUM)" || { echo "make test-book needs Chromium: apt-get install chromium (or NBS_CHROMIUM=/path/to/chromium)"; exit 1; }
	$(PY) -m pip install --quiet -e '.[book,browser]'
	$(if $(filter 0,$(BOOK_CI_RUN)),,rm -rf $(BOOK_CI_DIR)/notebooks && NBS_THREADS=1 NBS_RESULTS=$(abspath $(BOOK_CI_DIR))/notebooks $(PY) -m nbsupport.harness.run_notebooks --profile ci)
	$(PY) book/build.py --notebooks $(BOOK_CI_DIR)/notebooks --profile ci --out $(BOOK_CI_DIR) $(BOOK_FLAGS)
	NBS_BOOK_SITE=$(abspath $(BOOK_CI_DIR))/html NBS_BOOK_PROFILE=ci NBS_CHROMIUM=$(CHROMIUM) $(PY) -m pytest tests/book -o addopts=-ra
