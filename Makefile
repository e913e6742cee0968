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

.PHONY: setup data test notebooks lab test-kernels test-browser bench strip clean smoke-full

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

lab: data
	$(VENV)/bin/jupyter lab notebooks/

test-kernels: data
	$(PY) -m pip install --quiet -e '.[dev,kernels]'
	TRITON_INTERPRET=1 $(PY) -m pytest tests -k kernel

# every notebook's `full` code path on this CPU: real model sizes and Bible data, NBS_MAX_STEPS
# optimiser steps per model, evaluation sizes / 25 (nbsupport/harness/smoke.py); results, wall times and
# the projected GPU time per notebook in build/smoke-full/ (projection.json). Not part of `make test`.
# One notebook: make smoke-full NOTEBOOKS=notebooks/06_scones_beam_curse.ipynb
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

strip: $(STAMP)
	$(VENV)/bin/nbstripout notebooks/*.ipynb

clean:
	rm -rf build
