# Two commands set everything up on a fresh machine: `make demo` and `make test`; `make help` lists every target.
# The studies' targets live in make/: the text study, the task track, SmolLM2 and the GPU pieces.
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
		--max-tokens 8192 --out reports/demo
	$(PY) generate.py runs/tiny --prompt "ROMEO:" --max-new-tokens 120 --seed 1

# REQUIRE_ORACLES: the transformers oracle tests fail, not skip, when transformers is missing.
# The tests run in one process a core (pytest-xdist; tests/conftest.py shares the cores' threads out among them);
# TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= auto
test: install  ## every test (CPU; CUDA tests run where CUDA is)
	REQUIRE_ORACLES=1 $(PY) -m pytest tests -n $(TEST_WORKERS) --dist worksteal

test-fast: install  ## the inner loop: every test not marked slow
	$(PY) -m pytest tests -m "not slow" -q -n $(TEST_WORKERS) --dist worksteal

# Every report table rendered again from the committed rows beside it (render/reports.py); the tests check that
# none differs.
reports: install  ## render every report table again from its committed rows
	$(PY) -m render.reports

# The CPU speed tables of reports/bench/README.md, measured again on an otherwise idle machine (on a busy one the
# figures move from run to run): every encoding, the profile of a step, then our RoPE model against each
# peer in turns on the same batches (NANOGPT=path/to/nanoGPT/model.py adds nanoGPT's). `make reports` renders the
# page's tables from them.
BENCH_CPU ?= reports/bench/cpu
NANOGPT ?=
BENCH_PEER = $(PY) -m speed.bench --config configs/tiny.yaml --positions rope --multiples 1 --decode-multiples 1 \
	--steps 5 --rounds 45
bench-cpu: install  ## the CPU speed tables: every encoding, and our model against GPT-2, transformers (and nanoGPT)
	$(PY) -m speed.bench --config configs/tiny.yaml --out $(BENCH_CPU)
	$(PY) -m speed.profile --config configs/tiny.yaml --evaluations 0 --out $(BENCH_CPU)/profile
	$(BENCH_PEER) --peer gpt2 --out $(BENCH_CPU)/peer-gpt2
	$(BENCH_PEER) --peer transformers --out $(BENCH_CPU)/peer-transformers
	$(if $(NANOGPT),$(BENCH_PEER) --peer $(NANOGPT) --out $(BENCH_CPU)/peer-nanogpt)

visualize: install  ## pictures of RoPE, the scalings and ALiBi for learners (reports/visualize)
	$(PY) visualize.py --out reports/visualize

clean:  ## remove runs/ and the demo report
	rm -rf runs reports/demo

help:  ## this list
	@awk -F':.*## ' '/^[a-zA-Z0-9_.%/-]+:.*## / {printf "  %-22s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# Settings every study takes: THREADS=N runs each training or evaluation on N cores (OMP_NUM_THREADS); RESUME=1
# keeps the rows already in a report and measures only what it lacks.
THREADS ?=
RUN_PY := $(if $(THREADS),OMP_NUM_THREADS=$(THREADS)) $(PY)
RESUME ?=
EVAL_RESUME := $(if $(RESUME),--resume)
.SECONDEXPANSION:

.PHONY: install demo test test-fast reports bench-cpu visualize clean help

include make/study.mk make/tasks.mk make/smollm2.mk make/gpu.mk
