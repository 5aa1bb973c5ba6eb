# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The torch requirement pip installs first (see the README's Install section for CPU and CUDA builds).
TORCH ?= torch==2.13.0
# The install marker names the torch choice, so `make demo TORCH=...` reinstalls after a first install.
MARKER := $(VENV)/.installed-$(shell printf '%s' '$(TORCH)' | md5sum | cut -c1-12)

.PHONY: install demo test extrapolation extrapolation-tasks extrapolation-gpu gpu-report study-eval study-probe task-eval visualize clean

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

# The study behind the README's results: eight encodings and three RoPE variants (half the head
# rotated, base 1e5, base 1e6) trained alike (configs/study.yaml, L = 128) for each of SEEDS seeds;
# the RoPE run extended to 4x with PI, with YaRN, and without scaling (the control); RoPE and ALiBi
# trained with randomized positions, RoPE with PoSE, and RoPE continued with PoSE; everything
# evaluated at 1x-16x on held-out plays, plus the context-use probes.
# `make -j2 extrapolation SEEDS=3 THREADS=1` trains two seeds at once, one core each.
# RESUME=1 keeps the rows already in the report and measures only the runs and seeds it lacks.
SEEDS ?= 1
THREADS ?=
STUDY ?= runs/study
STUDY_CONFIG ?= configs/study.yaml
EXTEND_CONFIG ?= configs/extend-4x.yaml
STUDY_LENGTHS ?= 128,256,512,1024,2048
DATA_OVERRIDE ?=
ENCODINGS := learned sinusoidal rope alibi nope t5 kerple fire
# RoPE variants, name:override
VARIANTS := rope-half:model.position.rotary_fraction=0.5 rope-base1e5:model.position.theta=1e5 \
	rope-base1e6:model.position.theta=1e6
RESUME ?=
EVAL_RESUME := $(if $(RESUME),--resume)
# Training positions (train.positions): randomized over 16x L (every evaluated length), PoSE to 4x L,
# and PoSE continuing the RoPE run at the 4x fine-tunes' steps and tokens (L-token windows, 4x the batch)
RANDOMIZED ?= {type: randomized, max_position: 2048}
POSE ?= {type: pose, max_position: 512}
POSE_CONTINUE ?= model.max_seq_len=128 train.batch_size=32
POSITION_RUNS := rope-randomized alibi-randomized rope-pose rope-pose-continued
EXTENSIONS := rope-pi rope-yarn rope-continued
SEED_NUMBERS := $(shell seq 1 $(SEEDS))
STUDY_RUNS := $(foreach s,$(SEED_NUMBERS),$(addprefix $(STUDY)/seed$(s)/,$(ENCODINGS) $(foreach v,$(VARIANTS),$(firstword $(subst :, ,$(v)))) $(EXTENSIONS) $(POSITION_RUNS)))
RUN_PY := $(if $(THREADS),OMP_NUM_THREADS=$(THREADS)) $(PY)

study-seed%: install
	for p in $(ENCODINGS); do \
		$(RUN_PY) train.py --config $(STUDY_CONFIG) run.out_dir=$(STUDY)/seed$* run.seed=$* run.name=$$p \
			model.position.type=$$p $(DATA_OVERRIDE) --resume || exit 1; done
	for v in $(VARIANTS); do \
		$(RUN_PY) train.py --config $(STUDY_CONFIG) run.out_dir=$(STUDY)/seed$* run.seed=$* run.name=$${v%%:*} \
			model.position.type=rope $${v#*:} $(DATA_OVERRIDE) --resume || exit 1; done
	$(RUN_PY) train.py --config $(EXTEND_CONFIG) run.out_dir=$(STUDY)/seed$* run.seed=$* \
		train.init_from=$(STUDY)/seed$*/rope run.name=rope-pi "model.position.scaling={type: linear, factor: 4}" $(DATA_OVERRIDE) --resume
	$(RUN_PY) train.py --config $(EXTEND_CONFIG) run.out_dir=$(STUDY)/seed$* run.seed=$* \
		train.init_from=$(STUDY)/seed$*/rope run.name=rope-yarn $(DATA_OVERRIDE) --resume
	$(RUN_PY) train.py --config $(EXTEND_CONFIG) run.out_dir=$(STUDY)/seed$* run.seed=$* \
		train.init_from=$(STUDY)/seed$*/rope run.name=rope-continued model.position.scaling=null $(DATA_OVERRIDE) --resume
	$(RUN_PY) train.py --config $(STUDY_CONFIG) run.out_dir=$(STUDY)/seed$* run.seed=$* run.name=rope-randomized \
		"train.positions=$(RANDOMIZED)" $(DATA_OVERRIDE) --resume
	$(RUN_PY) train.py --config $(STUDY_CONFIG) run.out_dir=$(STUDY)/seed$* run.seed=$* run.name=alibi-randomized \
		model.position.type=alibi "train.positions=$(RANDOMIZED)" $(DATA_OVERRIDE) --resume
	$(RUN_PY) train.py --config $(STUDY_CONFIG) run.out_dir=$(STUDY)/seed$* run.seed=$* run.name=rope-pose \
		"train.positions=$(POSE)" $(DATA_OVERRIDE) --resume
	$(RUN_PY) train.py --config $(EXTEND_CONFIG) run.out_dir=$(STUDY)/seed$* run.seed=$* \
		train.init_from=$(STUDY)/seed$*/rope run.name=rope-pose-continued model.position.scaling=null $(POSE_CONTINUE) \
		"train.positions=$(POSE)" $(DATA_OVERRIDE) --resume

STUDY_REPORT ?= reports/extrapolation
extrapolation: study-eval study-probe
	$(PY) -m eval.summary $(STUDY_RUNS) --out $(STUDY_REPORT)/training.md

study-eval: $(addprefix study-seed,$(SEED_NUMBERS))
	$(RUN_PY) -m eval.extrapolation $(STUDY_RUNS) --lengths $(STUDY_LENGTHS) \
		--scaling none,linear,ntk,dynamic,yarn,dynamic-yarn --fixed-factors 4 --out $(STUDY_REPORT) $(EVAL_RESUME)

study-probe: $(addprefix study-seed,$(SEED_NUMBERS))
	$(RUN_PY) -m eval.probe $(STUDY_RUNS) --out $(STUDY_REPORT) $(EVAL_RESUME)

# The long-range task track: the same encodings and fine-tunes trained on data/tasks.py's tasks
# (configs/tasks.yaml, L = 128), evaluated by eval.tasks at 1x-16x L with every RoPE scaling.
extrapolation-tasks:
	$(MAKE) task-eval STUDY=runs/tasks STUDY_CONFIG=configs/tasks.yaml EXTEND_CONFIG=configs/extend-4x-tasks.yaml \
		STUDY_REPORT=reports/tasks

# Dynamic scalings decode 16 tokens a step past L (not 1, as generation does): one seed's evaluation
# then fits the track's 30-minute budget on 2 cores.
task-eval: $(addprefix study-seed,$(SEED_NUMBERS))
	$(RUN_PY) -m eval.tasks $(STUDY_RUNS) --decode-chunk 16 --out $(STUDY_REPORT) $(EVAL_RESUME)

# The same study at GPU scale (configs/study-gpu.yaml: 26M parameters, L = 256, 100M tokens a run, two seeds).
GPU_DATA ?= ../shared/corpora/gutenberg
extrapolation-gpu:
	$(MAKE) extrapolation SEEDS=2 STUDY=runs/study-gpu STUDY_CONFIG=configs/study-gpu.yaml \
		EXTEND_CONFIG=configs/extend-4x-gpu.yaml STUDY_LENGTHS=256,512,1024,2048,4096 \
		STUDY_REPORT=reports/extrapolation-gpu DATA_OVERRIDE="data.source=$(GPU_DATA)" \
		RANDOMIZED="{type: randomized, max_position: 4096}" POSE="{type: pose, max_position: 1024}" \
		POSE_CONTINUE="model.max_seq_len=256 train.batch_size=128"

# Every GPU report in one command, on a CUDA machine: the CUDA path tests, the benchmark with its peer,
# the GPU study and one epoch of configs/minimind-26m.yaml.
GPU_REPORT := reports/bench/gpu
gpu-report: install
	@$(PY) -c "import sys, torch; torch.cuda.is_available() or sys.exit('error: make gpu-report needs a CUDA GPU; torch sees none here')"
	mkdir -p $(GPU_REPORT)
	REQUIRE_ORACLES=1 $(PY) -m pytest tests/test_cuda.py -rs 2>&1 | tee $(GPU_REPORT)/cuda-tests.txt
	$(PY) -m eval.bench --config configs/gpt2-124m.yaml --peer transformers --out $(GPU_REPORT)
	/usr/bin/env time -p $(MAKE) extrapolation-gpu GPU_DATA=$(GPU_DATA) 2>&1 | tee reports/extrapolation-gpu.log
	$(PY) -m data.prepare --config configs/minimind-26m.yaml data.source=$(GPU_DATA)
	$(PY) train.py --config configs/minimind-26m.yaml run.name=minimind-26m-epoch data.source=$(GPU_DATA) \
		train.max_steps=$$($(PY) -c "import sys; from config import *; from data import *; \
			c = load_config(Config, 'configs/minimind-26m.yaml', ['data.source=$(GPU_DATA)']).resolve(); \
			print(len(TokenData(prepare_shards(c.data, progress=False), 'train')) // (c.train.batch_size * c.model.max_seq_len))") \
		--resume 2>&1 | tee $(GPU_REPORT)/minimind-26m-epoch.log

visualize: install
	$(PY) -m eval.visualize --out reports/visualize

clean:
	rm -rf runs reports/demo
