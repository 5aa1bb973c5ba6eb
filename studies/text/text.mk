# The text study (studies/text): its runs, evaluation, probes, passkey map and context methods.
# Included by the Makefile (its settings: PY, RUN_PY, RESUME ...); `make help` lists the targets.

# The study behind the README's results: nine encodings and five RoPE variants (half the head
# rotated, base 1e5, base 1e6, p-RoPE's lowest quarter of the frequencies unrotated, RNoPE-SWA's layer
# pattern) trained alike (studies/text/study.yaml, L = 128) for each of SEEDS seeds; the RoPE run extended to
# 4x with PI, with YaRN, and without scaling (the control); RoPE and ALiBi trained with randomized
# positions, RoPE with PoSE, RoPE continued with PoSE, and RoPE recalibrated without its positions
# (DroPE); everything evaluated at 1x-16x on held-out plays, plus the context-use probes.
# Every run is a target of its own (run/SEED/NAME): `make -j2 extrapolation THREADS=1` trains two runs
# at once, one core each. RESUME=1 keeps the rows already in the report and measures only what it lacks.
SEEDS ?= 1
STUDY ?= runs/study
STUDY_CONFIG ?= studies/text/study.yaml
EXTEND_CONFIG ?= studies/text/extend-4x.yaml
STUDY_LENGTHS ?= 128,256,512,1024,2048
DATA_OVERRIDE ?=
ENCODINGS := learned sinusoidal rope alibi nope t5 kerple fire fox
VARIANTS := rope-half rope-base1e5 rope-base1e6 p-rope rnope-swa
EXTENSIONS := rope-pi rope-yarn rope-continued
POSITION_RUNS := rope-randomized alibi-randomized rope-pose rope-pose-continued drope
RUNS ?= $(ENCODINGS) $(VARIANTS) $(EXTENSIONS) $(POSITION_RUNS)
# Training positions (train.positions): randomized over 16x L (every evaluated length), PoSE to 4x L,
# and PoSE continuing the RoPE run at the 4x fine-tunes' steps and tokens (L-token windows, 4x the batch)
RANDOMIZED ?= {type: randomized, max_position: 2048}
POSE ?= {type: pose, max_position: 512}
# What each run adds to its config (an encoding's name is its model.position.type)
ARGS_rope-half := model.position.type=rope model.position.rotary_fraction=0.5
ARGS_rope-base1e5 := model.position.type=rope model.position.theta=1e5
ARGS_rope-base1e6 := model.position.type=rope model.position.theta=1e6
# p-RoPE (arXiv 2410.06205): the highest 3/4 of the frequencies rotated, the lowest left unrotated
ARGS_p-rope := model.position.type=rope model.position.kept_frequencies=0.75
# RNoPE-SWA (arXiv 2501.18795; Llama 4's iRoPE): three RoPE layers over a window of L/4, then one NoPE layer over all
ARGS_rnope-swa := model.position.type=rope model.position.layer_pattern=rope,rope,rope,nope model.sliding_window=32
ARGS_rope-pi := "model.position.scaling={type: linear, factor: 4}"
ARGS_rope-continued := model.position.scaling=null
ARGS_rope-randomized := model.position.type=rope "train.positions=$(RANDOMIZED)"
ARGS_alibi-randomized := model.position.type=alibi "train.positions=$(RANDOMIZED)"
ARGS_rope-pose := model.position.type=rope "train.positions=$(POSE)"
ARGS_rope-pose-continued := model.position.scaling=null model.max_seq_len=128 train.batch_size=32 \
	"train.positions=$(POSE)"
# DroPE (arXiv 2512.12167): the RoPE run's weights recalibrated without positions at L, with the 4x fine-tunes'
# steps and tokens (L-token windows, 4x the batch)
ARGS_drope := model.position.type=nope model.position.scaling=null model.max_seq_len=128 train.batch_size=32
CONTINUED := $(EXTENSIONS) rope-pose-continued drope  # runs that continue the seed's RoPE run
SEED_NUMBERS ?= $(shell seq 1 $(SEEDS))  # or a list: SEED_NUMBERS="4 5" RESUME=1 adds seeds 4 and 5 to a report
RUN_TARGETS := $(foreach s,$(SEED_NUMBERS),$(addprefix run/$(s)/,$(RUNS)))
STUDY_RUNS := $(foreach s,$(SEED_NUMBERS),$(addprefix $(STUDY)/seed$(s)/,$(RUNS)))

# run/SEED/NAME trains $(STUDY)/seedSEED/NAME (--resume: a finished run is not trained again); a
# continued run waits for its seed's RoPE run.
run_seed = $(patsubst %/,%,$(dir $*))
run_name = $(notdir $*)
run_config = $(if $(filter $(run_name),$(CONTINUED)),$(EXTEND_CONFIG) train.init_from=$(STUDY)/seed$(run_seed)/rope,$(STUDY_CONFIG))
run_args = $(or $(ARGS_$(run_name)),$(if $(filter $(run_name),$(ENCODINGS)),model.position.type=$(run_name)))
# Each seed's RoPE run named as a target, so a continued run finds it whether or not RUNS lists it (make uses a
# pattern rule once in a chain: run/7/rope-pi -> run/7/rope would not be found through run/% otherwise).
$(foreach s,$(SEED_NUMBERS),run/$(s)/rope):
run/%: install $$(if $$(filter $$(notdir $$*),$$(CONTINUED)),run/$$(dir $$*)rope)  ## run/SEED/NAME: train one run of the text study ($(STUDY)/seedSEED/NAME)
	$(RUN_PY) train.py --config $(run_config) run.out_dir=$(STUDY)/seed$(run_seed) run.seed=$(run_seed) \
		run.name=$(run_name) $(run_args) $(DATA_OVERRIDE) --resume

STUDY_REPORT ?= studies/text
extrapolation: study-eval study-probe  ## the text study: train every run of SEEDS seeds, evaluate, probe, summarize training
	$(PY) -m eval.summary $(STUDY_RUNS) --out $(STUDY_REPORT)/training.md

study-eval: $(RUN_TARGETS)  ## perplexity of the study's runs at 1x-16x L with every RoPE scaling
	$(RUN_PY) -m eval.extrapolation $(STUDY_RUNS) --lengths $(STUDY_LENGTHS) \
		--scaling none,linear,ntk,dynamic,yarn,dynamic-yarn --fixed-factors 4 --out $(STUDY_REPORT) $(EVAL_RESUME)

study-probe: $(RUN_TARGETS)  ## the copy and passkey probes of the study's runs
	$(RUN_PY) -m eval.probe $(STUDY_RUNS) --out $(STUDY_REPORT) $(EVAL_RESUME)

# The passkey heat map of the study's RoPE runs (eval.passkey: Mohtashami & Jaggi's prompt), with and without YaRN.
study-passkey: $(foreach s,$(SEED_NUMBERS),run/$(s)/rope)  ## the passkey heat map of the study's RoPE runs, with and without YaRN
	$(RUN_PY) -m eval.passkey $(foreach s,$(SEED_NUMBERS),$(STUDY)/seed$(s)/rope) --scaling none,yarn \
		--out $(STUDY_REPORT)/passkey $(EVAL_RESUME)


# Training-free context methods (model/context.py, each at its defaults from the run's L), in the text study here and
# on the task track (studies/tasks/tasks.mk).
CONTEXT_METHODS ?= self-extend rerope leaky-rerope dca sinks logn

# The same methods in the text study: perplexity of its RoPE, ALiBi and T5 runs (trained first where missing) at
# 1x-16x L, a seed at a time (study-context/METHOD/SEED), merged into studies/text/context/METHOD; with
# them always `none`, the same checkpoints without a method, to compare against; every method found there is
# drawn in one figure (methods_vs_length.png).
CONTEXT_RUNS := rope alibi t5
STUDY_CONTEXT_METHODS = none $(CONTEXT_METHODS)
study-context: $(foreach m,$(STUDY_CONTEXT_METHODS),$(addprefix study-context/$(m)/,$(SEED_NUMBERS)))  ## the training-free context methods on the study's RoPE, ALiBi and T5 runs
	$(foreach m,$(STUDY_CONTEXT_METHODS),$(PY) -m eval.merge $(if $(RESUME),$(wildcard $(STUDY_REPORT)/context/$(m))) \
		$(addprefix $(STUDY)/context/$(m)/seed,$(SEED_NUMBERS)) --out $(STUDY_REPORT)/context/$(m);)
	$(PY) -m eval.results.plots $(STUDY_REPORT)/context/*/results.json --out $(STUDY_REPORT)/context
study-context/%: $$(addprefix run/$$(notdir $$*)/,$$(CONTEXT_RUNS))  ## study-context/METHOD/SEED: one method on one seed
	$(RUN_PY) -m eval.extrapolation $(addprefix $(STUDY)/seed$(notdir $*)/,$(CONTEXT_RUNS)) --lengths $(STUDY_LENGTHS) \
		--scaling none --context-method $(patsubst %/,%,$(dir $*)) --out $(STUDY)/context/$(dir $*)seed$(notdir $*) $(EVAL_RESUME)

.PHONY: extrapolation study-eval study-probe study-passkey study-context
