# `make lab` and `make test` each set up .venv from nothing first (CPU PyTorch before anything else).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# A CPU build of torch. Where this pin would pull a CUDA build, point pip at a CPU index:
#   make lab TORCH_PIP_ARGS="torch --index-url <PyTorch's CPU wheel index>"
TORCH_PIP_ARGS ?= torch==2.13.0
CHROMIUM ?= /usr/bin/chromium
LAB_ARGS ?=
STAMP := $(VENV)/.setup-done
LAB_SETTINGS := $(VENV)/.lab-settings-done
# `make lab` keeps JupyterLab's settings and workspaces in the project, never in your own ~/.jupyter: what
# Deck mode remembers (its "active" flag) stays with this series. Delete the folder to start afresh.
LAB_STATE ?= .lab-state
# One OpenMP thread per process (every kernel, every test worker): thirty kernels on one server, or two test workers
# beside a browser on 2 cores, each spinning up a thread per core only wait on each other. Three notebooks run side
# by side on 2 cores took 89 s with the default, 76 s with one thread each. The notebooks' outputs are made so too.
export OMP_NUM_THREADS ?= 1

.PHONY: zh-sync setup browser lab lab-zh check test slides lint html sheet messages api binder-links hub hub-stop hub-link clean

setup: $(STAMP) $(LAB_SETTINGS)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install $(TORCH_PIP_ARGS)
	$(BIN)/pip install -e ".[test,dev,hub]"
	touch $@

# The classroom JupyterLab defaults go into the venv (overrides.d, a small extension), never into the
# user's own settings: news check off, projector type sizes, Chinese font, Deck-mode keys (Alt+R, a clicker's
# PageDown/PageUp), idle kernels culled.
$(LAB_SETTINGS): $(STAMP) tools/install_lab_settings.py $(shell find jupyterlab-settings -type f)
	$(BIN)/python tools/install_lab_settings.py
	touch $@

# The browser test drives Debian's Chromium (Playwright's own browser download is not used).
browser:
	@test -x $(CHROMIUM) || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "Chromium is missing: install it (Debian/Ubuntu: sudo apt-get install chromium)" \
	         "or pass CHROMIUM=/path/to/chromium"; exit 1; \
	  fi; }

# As root (containers, these CI machines) Jupyter refuses to start without --allow-root.
# Idle kernels are culled by the shipped server settings (jupyterlab-settings/jupyter_server_config.json).
# The first import after a machine starts reads PyTorch (~750 MB) from disk and builds matplotlib's font cache:
# paid here, once, rather than by the first Run All in class.
# $(call run_lab,STATE_DIR,NOTEBOOK_DIR)
define run_lab
	$(BIN)/python -c "import walkthrough.classroom.widgets, walkthrough.classroom.viz as viz; viz.use_cjk_font()"
	JUPYTERLAB_SETTINGS_DIR="$(abspath $(1))/settings" \
	JUPYTERLAB_WORKSPACES_DIR="$(abspath $(1))/workspaces" \
	  $(BIN)/jupyter lab $(2) $(LAB_ARGS) $$([ "$$(id -u)" = 0 ] && echo --allow-root)
endef

lab: setup
	$(call run_lab,$(LAB_STATE),notebooks/)

# The Chinese edition (notebooks/zh/) with JupyterLab's own menus in Chinese (the zh-CN language pack), in its own
# project-local settings folder: the interface language written there leaves `make lab` in English.
LAB_STATE_ZH ?= $(LAB_STATE)/zh
lab-zh: setup
	$(BIN)/python tools/install_lab_settings.py --locale zh_CN "$(LAB_STATE_ZH)/settings"
	$(call run_lab,$(LAB_STATE_ZH),notebooks/zh/)

# Tests run in parallel on JOBS workers (pytest-xdist). What must share a process stays together, in order
# (tests/nbval_patience.py, unit): a notebook's nbval cells and the checks on its kernel, and each edition's deck walks.
# JOBS=1 runs everything in this one process.
JOBS ?= 2
PARALLEL = $(if $(filter 1,$(JOBS)),,-n $(JOBS))

# Between edits (under 2 minutes on 2 cores): ruff and the package's own tests. The classroom tier (kernels,
# JupyterLab, Chromium, torchrun, a hub: tests/conftest.py's CLASSROOM_TIER) and nbval are left to `make test`.
check: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q $(PARALLEL) -m "not classroom" tests

# Everything, the README's command and CI's (.ci/run): ruff, both tiers, and nbval over both editions, each notebook
# executed once (its kernel's peak memory and the scrambled re-runs are checked on nbval's run:
# tests/nbval_patience.py), the deck walk (every slide of both editions at 1366x768) and JupyterLab in Chromium.
# No tight timeouts: on a loaded machine a slow cell is not a failure. The slowest 15 tests are listed at the end.
test: setup browser
	$(BIN)/ruff check .
	WALKTHROUGH_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest $(PARALLEL) -p tests.nbval_patience --nbval \
	  --nbval-current-env --nbval-kernel-startup-timeout=600 --durations=15 tests notebooks

# Only the deck walk: every slide of every notebook (and Chinese twin) in Deck mode at 1366x768, its height printed.
slides: setup browser
	WALKTHROUGH_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest tests/test_slides_fit.py -v -s

lint: setup
	$(BIN)/ruff check .

# The site shows the committed notebooks (git HEAD), not the working copies JupyterLab autosaves.
html: setup
	$(BIN)/python tools/build_site.py _site

# The Chinese edition (notebooks/zh/) in step with the English notebooks: missing twins created, code cells copied
# where their code drifted, new cells inserted (marked for translation), Chinese prose left alone.
# `make zh-sync ZH_SYNC_ARGS=--check` only reports drift; ZH_SYNC_ARGS="03 12" syncs those notebooks.
ZH_SYNC_ARGS ?=
zh-sync: setup
	$(BIN)/python tools/zh_sync.py $(ZH_SYNC_ARGS)

# The one-page shape sheet (A4 landscape), traced from the model, never typed, in English and Chinese:
# docs/shape-sheet.html and docs/shape-sheet.zh.html (committed; a test checks they are up to date) and a PDF of
# each (printed by headless Chromium, one page or it fails).
sheet: setup browser
	WALKTHROUGH_CHROMIUM=$(CHROMIUM) $(BIN)/python tools/shape_sheet.py --pdf

# The Chinese catalog in step with the code (issue 20), in one command: every _("...") and N_("...") in walkthrough/
# (and the shape sheet's tool) extracted (babel.cfg), merged into walkthrough/locale/zh/LC_MESSAGES/walkthrough.po (a new message arrives empty,
# a changed one fuzzy with its old English, a lost one dropped) and compiled to the .mo the package reads.
# Translate the empty and fuzzy entries, then run it again: tests/test_i18n.py fails while one has no Chinese.
messages: setup
	mkdir -p build
	$(BIN)/pybabel -q extract -F babel.cfg -k N_ --add-location=file --sort-output --no-wrap --project=walkthrough \
	  -o build/walkthrough.pot walkthrough tools/shape_sheet.py
	$(BIN)/pybabel -q update -i build/walkthrough.pot -d walkthrough/locale -D walkthrough -l zh --ignore-obsolete \
	  --previous --no-wrap --ignore-pot-creation-date
	$(BIN)/pybabel compile -d walkthrough/locale -D walkthrough -l zh --statistics

# The API reference from the docstrings (pdoc) into _api/ (git-ignored): open _api/index.html.
api: setup
	$(BIN)/python -m pdoc walkthrough -o _api

# The README's Binder links come from binder/repository (owner/name): this sets it from `git remote get-url origin`.
binder-links:
	$(BIN)/python tools/binder_links.py --from-remote

# A local JupyterHub (tools/hub: dummy login, local processes, this venv's JupyterLab and settings for
# everyone, 127.0.0.1 only), for trying the series as a class would; state in .hub/. docs/serving.md.
HUB_PORT ?= 8765
hub: setup
	$(BIN)/python tools/hub/hub.py start --port $(HUB_PORT)

hub-stop:
	$(BIN)/python tools/hub/hub.py stop

# The nbgitpuller link that gives every student the notebooks in one click: make hub-link HUB=https://hub.example.org
hub-link:
	@$(BIN)/python tools/hub/hub.py link "$(HUB)"

clean:
	rm -rf $(VENV) _site _api
