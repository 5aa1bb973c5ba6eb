# The bench study (studies/bench): the CPU speed rows. Included by the Makefile (its settings: PY ...); `make help`
# lists the targets. The GPU rows come from studies/gpu/gpu.mk's pieces, which write into studies/bench/gpu.

# The CPU speed tables of studies/bench/README.md, measured again on an otherwise idle machine (on a busy one the
# figures move from run to run): every encoding, the profile of a step, then our RoPE model against each
# peer in turns on the same batches (NANOGPT=path/to/nanoGPT/model.py adds nanoGPT's). `make reports` renders the
# page's tables from them.
BENCH_CPU ?= studies/bench/cpu
NANOGPT ?=
BENCH_PEER = $(PY) -m speed.bench --config configs/tiny.yaml --positions rope --multiples 1 --decode-multiples 1 \
	--steps 5 --rounds 45
bench-cpu: install  ## the CPU speed tables: every encoding, and our model against GPT-2, transformers (and nanoGPT)
	$(PY) -m speed.bench --config configs/tiny.yaml --out $(BENCH_CPU)
	$(PY) -m speed.profile --config configs/tiny.yaml --evaluations 0 --out $(BENCH_CPU)/profile
	$(BENCH_PEER) --peer gpt2 --out $(BENCH_CPU)/peer-gpt2
	$(BENCH_PEER) --peer transformers --out $(BENCH_CPU)/peer-transformers
	$(if $(NANOGPT),$(BENCH_PEER) --peer $(NANOGPT) --out $(BENCH_CPU)/peer-nanogpt)

.PHONY: bench-cpu
