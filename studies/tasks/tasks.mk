# The long-range task track (studies/tasks): its runs, evaluation, anchors and context methods, whole: its own
# variables and targets; it uses only the Makefile's settings (PY, RUN_PY, RESUME, EVAL_RESUME, install).
# SEED_NUMBERS="11 12" picks the seeds (default 1), CONTEXT_METHODS="dca sinks" the context methods of task-context.

# Encodings and RoPE's 4x fine-tunes trained on data/tasks.py's tasks (studies/tasks/tasks.yaml, L = 128), evaluated
# by eval.tasks at 1x-16x L with RoPE's scalings. A run of the recipe costs one to two CPU-core hours (12,000 steps),
# so the track trains the encodings its questions need, RoPE, ALiBi and NoPE, and RoPE's 4x fine-tunes;
# TASK_ENCODINGS="rope alibi nope t5" adds T5, and TASK_ENCODINGS=t5 TASK_RUNS=t5 RESUME=1 adds it alone to seeds
# already in the rows.
TASK_SEEDS := $(or $(SEED_NUMBERS),1)
TASK_CONTEXT_METHODS := $(or $(CONTEXT_METHODS),self-extend rerope leaky-rerope dca sinks logn)
TASK_OUT := runs/tasks
TASK_CONFIG := studies/tasks/tasks.yaml
TASK_EXTEND_CONFIG := studies/tasks/extend-4x-tasks.yaml
TASK_EXTENSIONS := rope-pi rope-yarn rope-continued
TASK_ENCODINGS ?= rope alibi nope
TASK_RUNS ?= $(TASK_ENCODINGS) $(TASK_EXTENSIONS)
# Each static scaling at s = length / L, and dynamic NTK
TASK_SCALINGS ?= none,linear,ntk,dynamic,yarn

# Every other method on the track (studies/tasks/README.md, "Every method on the track"): the other encodings, RoPE's
# variants, the training-time position schedules and DroPE.
TASK_ADDED_ENCODINGS := kerple fire sinusoidal learned fox
TASK_ADDED := $(TASK_ADDED_ENCODINGS) rope-half p-rope rnope-swa rope-pose rope-randomized alibi-randomized drope
TASK_ALL_ENCODINGS := rope alibi nope t5 $(TASK_ADDED_ENCODINGS)

# What each run adds to its config: an encoding's name is its model.position.type; the others as below.
TASK_RANDOMIZED := {type: randomized, max_position: 2048}
TASK_ARGS_rope-half := model.position.type=rope model.position.rotary_fraction=0.5
TASK_ARGS_p-rope := model.position.type=rope model.position.kept_frequencies=0.75
TASK_ARGS_rnope-swa := model.position.type=rope model.position.layer_pattern=rope,rope,rope,nope model.sliding_window=32
TASK_ARGS_rope-pose := model.position.type=rope "train.positions={type: pose, max_position: 512}"
TASK_ARGS_rope-randomized := model.position.type=rope "train.positions=$(TASK_RANDOMIZED)"
TASK_ARGS_alibi-randomized := model.position.type=alibi "train.positions=$(TASK_RANDOMIZED)"
TASK_ARGS_rope-pi := "model.position.scaling={type: linear, factor: 4}"
TASK_ARGS_rope-continued := model.position.scaling=null
# DroPE (arXiv 2512.12167): the RoPE run's weights recalibrated without positions at L, with the 4x fine-tunes' steps
# and tokens (L-token windows, 4x the batch); drope-long with 8x the steps (make task-drope-long)
TASK_ARGS_drope := model.position.type=nope model.position.scaling=null model.max_seq_len=128 train.batch_size=32
TASK_ARGS_drope-long := $(TASK_ARGS_drope) train.max_steps=2000
# The runs that continue their seed's RoPE run
TASK_CONTINUED := $(TASK_EXTENSIONS) drope drope-long

task_seed = $(patsubst %/,%,$(dir $*))
task_name = $(notdir $*)
task_config = $(if $(filter $(task_name),$(TASK_CONTINUED)),$(TASK_EXTEND_CONFIG) \
	train.init_from=$(TASK_OUT)/seed$(task_seed)/rope,$(TASK_CONFIG))
task_args = $(or $(TASK_ARGS_$(task_name)),$(if $(filter $(task_name),$(TASK_ALL_ENCODINGS)),\
	model.position.type=$(task_name)))
task_evals = $(foreach s,$(TASK_SEEDS),$(addprefix task-eval/$(s)/,$(1)))
task_folders = $(foreach s,$(TASK_SEEDS),$(addprefix $(TASK_OUT)/eval/seed$(s)/,$(1)))

# task-run/SEED/NAME trains runs/tasks/seedSEED/NAME (--resume: a finished run is not trained again); a continued run
# waits for its seed's RoPE run, named as a target so that make finds it through the pattern rule.
$(foreach s,$(TASK_SEEDS),task-run/$(s)/rope):
task-run/%: install $$(if $$(filter $$(notdir $$*),$$(TASK_CONTINUED)),task-run/$$(dir $$*)rope)  ## task-run/SEED/NAME: train one run of the track
	$(RUN_PY) train.py --config $(task_config) run.out_dir=$(TASK_OUT)/seed$(task_seed) run.seed=$(task_seed) \
		run.name=$(task_name) $(task_args) --resume

# Each run is evaluated as soon as it is trained (into runs/tasks/eval/seedSEED/NAME), on the core the training leaves
# free; then the folders are merged into the rows (RESUME=1: into those already there), and eval.heads reads where
# each encoding's heads look (studies/tasks/heads).
task-eval/%: task-run/%  ## task-eval/SEED/NAME: evaluate one run of the track
	$(RUN_PY) -m eval.tasks $(TASK_OUT)/seed$(task_seed)/$(task_name) --scaling $(TASK_SCALINGS) --fixed-factors '' \
		--out $(TASK_OUT)/eval/seed$(task_seed)/$(task_name) $(EVAL_RESUME)

extrapolation-tasks: $(call task_evals,$(TASK_RUNS))  ## the task track: train its runs, evaluate them, read the heads (studies/tasks)
	$(PY) -m eval.merge $(if $(RESUME),$(wildcard studies/tasks)) $(call task_folders,$(TASK_RUNS)) --out studies/tasks
	$(PY) -m eval.heads $(foreach s,$(TASK_SEEDS),$(addprefix $(TASK_OUT)/seed$(s)/,$(TASK_ENCODINGS))) \
		--out studies/tasks/heads $(EVAL_RESUME)

# The added methods go into the rows already there, with the RoPE runs DroPE continues, DroPE recalibrated 8x as long
# and the randomized runs on drawn positions (SEED_NUMBERS="11 12 13").
extrapolation-tasks-added: EVAL_RESUME := --resume
TASK_ADDED_STEPS = $(call task_evals,$(TASK_ADDED)) $(addprefix task-drope-base/,$(TASK_SEEDS)) task-drope-long task-drawn
extrapolation-tasks-added: $(TASK_ADDED_STEPS)  ## every other method on the track, into its rows (SEED_NUMBERS="11 12 13")
	$(PY) -m eval.merge studies/tasks $(call task_folders,$(TASK_ADDED)) --out studies/tasks
	$(PY) -m eval.heads $(foreach s,$(TASK_SEEDS),$(addprefix $(TASK_OUT)/seed$(s)/,$(TASK_ADDED_ENCODINGS))) \
		--out studies/tasks/heads --resume

# What more recalibration buys DroPE: each seed's DroPE run again with 8x its steps, from the same RoPE run.
task-drope-long: EVAL_RESUME := --resume
task-drope-long: $(call task_evals,drope-long)  ## DroPE recalibrated 8x as long (studies/tasks/drope-long)
	$(PY) -m eval.merge $(if $(RESUME),$(wildcard studies/tasks/drope-long)) $(call task_folders,drope-long) \
		--out studies/tasks/drope-long

# The randomized-position runs measured as their paper's code measures them: each sequence given positions drawn from
# [0, 16L) at 1x-8x L (eval.tasks --drawn-positions; at 16x L the draw is every position, the track's own rows).
task-drawn: $(foreach s,$(TASK_SEEDS),task-run/$(s)/rope-randomized task-run/$(s)/alibi-randomized)  ## the randomized-position runs with positions drawn at evaluation too (studies/tasks/drawn)
	$(RUN_PY) -m eval.tasks $(foreach s,$(TASK_SEEDS),$(TASK_OUT)/seed$(s)/rope-randomized \
		$(TASK_OUT)/seed$(s)/alibi-randomized) --drawn-positions --multiples 1,2,4,8 --out studies/tasks/drawn --resume

# The RoPE run a DroPE run continues is trained again for it (run folders are not committed), so it is not the
# committed RoPE run of its seed: its rows and training log go to studies/tasks/reproduction/rope-seedSEED.
task-drope-base/%: task-run/%/rope  ## task-drope-base/SEED: the RoPE run DroPE continues (studies/tasks/reproduction)
	$(RUN_PY) -m eval.tasks $(TASK_OUT)/seed$*/rope --scaling $(TASK_SCALINGS) --fixed-factors '' \
		--out studies/tasks/reproduction/rope-seed$* --resume
	cp $(TASK_OUT)/seed$*/rope/metrics.jsonl studies/tasks/reproduction/rope-seed$*/

# What RoPE's retrieval leans on: the track's runs with the keys past a window hidden from every query (the sinks
# method with no sinks), and the fine-tunes with their first tokens shown nearer; a folder per setting.
TASK_ANCHOR = $(PY) -m eval.tasks $(EVAL_RESUME) --out studies/tasks/anchor
task-anchor: install  ## what RoPE's retrieval leans on: keys hidden past a window, first tokens shown nearer
	$(TASK_ANCHOR)/window64 $(foreach s,$(TASK_SEEDS),$(TASK_OUT)/seed$(s)/rope $(TASK_OUT)/seed$(s)/alibi) \
		--lengths 128 --context-method "{type: sinks, sinks: 0, window: 64}"
	$(TASK_ANCHOR)/window448 $(foreach s,$(TASK_SEEDS),$(addprefix $(TASK_OUT)/seed$(s)/,$(TASK_EXTENSIONS))) \
		--lengths 512 --context-method "{type: sinks, sinks: 0, window: 448}"
	$(TASK_ANCHOR)/sinks64 $(foreach s,$(TASK_SEEDS),$(addprefix $(TASK_OUT)/seed$(s)/,$(TASK_EXTENSIONS))) \
		--lengths 512 --context-method "{type: sinks, sinks: 64, window: 384}"

# Training-free context methods on the track's runs (model/context.py, each at its defaults from the run's L): RoPE
# and ALiBi of each seed at 1x-16x L without a scaling, a seed at a time (3-4 core-minutes a run: make -j2
# task-context THREADS=1), merged into studies/tasks/context/METHOD (RESUME=1: into its rows).
task-context: $(foreach m,$(TASK_CONTEXT_METHODS),$(addprefix task-context/$(m)/,$(TASK_SEEDS)))  ## the training-free context methods on the track's RoPE and ALiBi runs
	$(foreach m,$(TASK_CONTEXT_METHODS),$(PY) -m eval.merge $(if $(RESUME),$(wildcard studies/tasks/context/$(m))) \
		$(addprefix $(TASK_OUT)/context/$(m)/seed,$(TASK_SEEDS)) --out studies/tasks/context/$(m);)

task-context/%: install  ## task-context/METHOD/SEED: one method on one seed
	$(RUN_PY) -m eval.tasks $(TASK_OUT)/seed$(notdir $*)/rope $(TASK_OUT)/seed$(notdir $*)/alibi \
		--context-method $(patsubst %/,%,$(dir $*)) --out $(TASK_OUT)/context/$(dir $*)seed$(notdir $*) $(EVAL_RESUME)

.PHONY: extrapolation-tasks extrapolation-tasks-added task-drope-long task-drawn task-anchor task-context
