# Two commands set everything up on a fresh machine: `make demo` and `make test`; `make help` lists every target.
# Each study's targets live in its folder (studies/NAME/NAME.mk), included at the end.
SHELL := bash
.SHELLFLAGS := -eo pipefail -c  # a recipe line fails when any command of its pipeline fails (tee included)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The torch requirement pip installs first (see the README's Install section for CPU and CUDA builds).
TORCH ?= torch==2.13.0
# The install marker names the torch choice, so `make demo TORCH=...` reinstalls after a first install.
MARKER := $(VENV)/.installed-$(shell printf '%s' '$(TORCH)' | md5sum | cut -c1-12)

$(MARKER): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[dev]"
	rm -f $(VENV)/.installed*
	touch $@

install: $(MARKER)  ## the virtual environment .venv with torch and this package (once)

# Prepare Shakespeare, train configs/tiny.yaml on the CPU, evaluate extrapolation, generate a sample.
demo: install  ## the tiny config on the CPU in minutes: train, evaluate extrapolation, generate
	$(PY) -m data.prepare --config configs/tiny.yaml
	$(PY) train.py --config configs/tiny.yaml --resume
	$(PY) -m eval.extrapolation runs/tiny --lengths 256,512,1024,2048 --scaling none,ntk,yarn \
		--max-tokens 8192 --out runs/demo
	$(PY) generate.py runs/tiny --prompt "ROMEO:" --max-new-tokens 120 --seed 1

# REQUIRE_ORACLES: the transformers oracle tests fail, not skip, when transformers is missing.
# The tests run in one process a core (pytest-xdist; tests/conftest.py shares the cores' threads out among them);
# TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= auto
test: install  ## every test (CPU; CUDA tests run where CUDA is)
	REQUIRE_ORACLES=1 $(PY) -m pytest tests studies -n $(TEST_WORKERS) --dist worksteal

test-fast: install  ## the inner loop: every test not marked slow
	$(PY) -m pytest tests studies -m "not slow" -q -n $(TEST_WORKERS) --dist worksteal

# Every study page's tables and named values, and every evaluator's table, filled again from the committed rows
# (studies/report.py); the tests check that none differs.
reports: install  ## fill every study page's tables and values again from its committed rows
	$(PY) -m studies.report

visualize: install  ## pictures of RoPE, the scalings and ALiBi for learners (studies/visualize)
	$(PY) visualize.py --out studies/visualize

clean:  ## remove runs/ (the demo report included)
	rm -rf runs

help:  ## this list: the core's targets, then each study's under its name
	@for f in $(filter-out studies/%,$(MAKEFILE_LIST)) $(STUDY_MAKEFILES); do \
		case $$f in studies/*) echo "$$(dirname $$f | cut -d/ -f2):";; esac; \
		awk -F':.*## ' '/^[a-zA-Z0-9_.%/-]+:.*## / {printf "  %-22s %s\n", $$1, $$2}' $$f; done

# Settings every study takes: THREADS=N runs each training or evaluation on N cores (OMP_NUM_THREADS); RESUME=1
# keeps the rows already in a report and measures only what it lacks.
THREADS ?=
RUN_PY := $(if $(THREADS),OMP_NUM_THREADS=$(THREADS)) $(PY)
RESUME ?=
EVAL_RESUME := $(if $(RESUME),--resume)
.SECONDEXPANSION:

.PHONY: install demo test test-fast reports visualize clean help

STUDY_MAKEFILES := $(sort $(wildcard studies/*/*.mk))
include $(STUDY_MAKEFILES)
