# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The torch requirement pip installs first (see the README's Install section for CPU and CUDA builds).
TORCH ?= torch==2.13.0
# The install marker names the torch choice, so `make demo TORCH=...` reinstalls after a first install.
MARKER := $(VENV)/.installed-$(shell printf '%s' '$(TORCH)' | md5sum | cut -c1-12)

.PHONY: install demo test extrapolation study-eval study-probe visualize clean

$(MARKER): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[dev]"
	rm -f $(VENV)/.installed*
	touch $@

install: $(MARKER)

# Prepare Shakespeare, train configs/tiny.yaml on the CPU, evaluate extrapolation, generate a sample.
demo: install
	$(PY) -m data.prepare --config configs/tiny.yaml
	$(PY) train.py --config configs/tiny.yaml --resume
	$(PY) -m eval.extrapolation runs/tiny --lengths 256,512,1024,2048 --scaling none,ntk,yarn \
		--max-tokens 8192 --out reports/demo
	$(PY) generate.py runs/tiny --prompt "ROMEO:" --max-new-tokens 120 --seed 1

# REQUIRE_ORACLES: the transformers oracle tests fail, not skip, when transformers is missing.
test: install
	REQUIRE_ORACLES=1 $(PY) -m pytest tests

# The study behind the README's results: five encodings trained alike (configs/study.yaml, L = 128)
# for each of SEEDS seeds; the RoPE run extended to 4x with PI, with YaRN, and without scaling (the
# control); everything evaluated at 1x-16x on held-out plays, plus the context-use probes.
# `make -j2 extrapolation SEEDS=3 THREADS=1` trains two seeds at once, one core each.
SEEDS ?= 1
THREADS ?=
STUDY := runs/study
ENCODINGS := learned sinusoidal rope alibi nope
EXTENSIONS := rope-pi rope-yarn rope-continued
SEED_NUMBERS := $(shell seq 1 $(SEEDS))
STUDY_RUNS := $(foreach s,$(SEED_NUMBERS),$(addprefix $(STUDY)/seed$(s)/,$(ENCODINGS) $(EXTENSIONS)))
RUN_PY := $(if $(THREADS),OMP_NUM_THREADS=$(THREADS)) $(PY)

study-seed%: install
	for p in $(ENCODINGS); do \
		$(RUN_PY) train.py --config configs/study.yaml run.out_dir=$(STUDY)/seed$* run.seed=$* run.name=$$p \
			model.position.type=$$p --resume || exit 1; done
	$(RUN_PY) train.py --config configs/extend-4x.yaml run.out_dir=$(STUDY)/seed$* run.seed=$* \
		train.init_from=$(STUDY)/seed$*/rope run.name=rope-pi "model.position.scaling={type: linear, factor: 4}" --resume
	$(RUN_PY) train.py --config configs/extend-4x.yaml run.out_dir=$(STUDY)/seed$* run.seed=$* \
		train.init_from=$(STUDY)/seed$*/rope run.name=rope-yarn --resume
	$(RUN_PY) train.py --config configs/extend-4x.yaml run.out_dir=$(STUDY)/seed$* run.seed=$* \
		train.init_from=$(STUDY)/seed$*/rope run.name=rope-continued model.position.scaling=null --resume

STUDY_REPORT := reports/extrapolation
extrapolation: study-eval study-probe
	$(PY) -m eval.summary $(STUDY_RUNS) --out $(STUDY_REPORT)/training.md

study-eval: $(addprefix study-seed,$(SEED_NUMBERS))
	$(RUN_PY) -m eval.extrapolation $(STUDY_RUNS) --lengths 128,256,512,1024,2048 \
		--scaling none,linear,ntk,dynamic,yarn,dynamic-yarn --fixed-factors 4 --out $(STUDY_REPORT)

study-probe: $(addprefix study-seed,$(SEED_NUMBERS))
	$(RUN_PY) -m eval.probe $(STUDY_RUNS) --out $(STUDY_REPORT)

visualize: install
	$(PY) -m eval.visualize --out reports/visualize

clean:
	rm -rf runs reports/demo
