# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The CPU wheel keeps a laptop install small; on a CUDA machine use TORCH=torch (the default build).
TORCH ?= torch==2.13.0

.PHONY: install demo test extrapolation visualize bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

install: $(VENV)/.installed

# Prepare Shakespeare, train configs/tiny.yaml on the CPU, evaluate extrapolation, generate a sample.
demo: install
	$(PY) -m data.prepare --config configs/tiny.yaml
	$(PY) train.py --config configs/tiny.yaml --resume
	$(PY) -m eval.extrapolation runs/tiny --lengths 256,512,1024,2048 --scaling none,ntk,yarn \
		--max-tokens 8192 --out reports/demo
	$(PY) generate.py runs/tiny --prompt "ROMEO:" --max-new-tokens 120 --seed 1

test: install
	$(PY) -m pytest tests

# The study behind the README's results: five encodings trained alike, RoPE extended to 4x with PI
# and with YaRN, everything evaluated at 1x-16x the training context on held-out plays.
STUDY := runs/study
ENCODINGS := learned sinusoidal rope alibi nope
extrapolation: install
	for p in $(ENCODINGS); do \
		$(PY) train.py --config configs/tiny.yaml run.out_dir=$(STUDY) run.name=$$p model.position.type=$$p \
			--resume || exit 1; done
	$(PY) train.py --config configs/extend-4x.yaml run.name=rope-pi \
		"model.position.scaling={type: linear, factor: 4}" --resume
	$(PY) train.py --config configs/extend-4x.yaml run.name=rope-yarn --resume
	$(PY) -m eval.extrapolation $(addprefix $(STUDY)/,$(ENCODINGS) rope-pi rope-yarn) \
		--lengths 256,512,1024,2048,4096 --scaling none,linear,ntk,dynamic,yarn,dynamic-yarn \
		--out reports/extrapolation
	$(PY) -m eval.summary $(addprefix $(STUDY)/,$(ENCODINGS) rope-pi rope-yarn) --out reports/extrapolation/training.md

visualize: install
	$(PY) -m eval.visualize --out reports/visualize

clean:
	rm -rf runs reports/demo
