# The long-range task track (reports/tasks): its runs, evaluation, anchors and context methods.
# Included by the Makefile (its settings: PY, RUN_PY, RESUME ...); `make help` lists the targets.

# The long-range task track: encodings and RoPE's 4x fine-tunes trained on data/tasks.py's tasks
# (configs/tasks.yaml, L = 128), evaluated by eval.tasks at 1x-16x L with RoPE's scalings. A run of the recipe
# costs one to two CPU-core hours (12,000 steps; seed 11's added runs took 59-102 minutes on one thread, two runs at
# a time; the learned biases and FoX the longest), so the track trains the encodings its questions need, RoPE, ALiBi
# and NoPE, and RoPE's 4x fine-tunes; TASK_ENCODINGS="rope alibi nope t5" adds T5, and TASK_ENCODINGS=t5 TASK_RUNS=t5
# RESUME=1 adds it alone to seeds already in the report.
TASK_ENCODINGS ?= rope alibi nope
TASK_RUNS ?= $(TASK_ENCODINGS) $(EXTENSIONS)
extrapolation-tasks:  ## the task track: train its runs and evaluate them (reports/tasks)
	$(MAKE) task-eval STUDY=runs/tasks STUDY_CONFIG=configs/tasks.yaml EXTEND_CONFIG=configs/extend-4x-tasks.yaml \
		STUDY_REPORT=reports/tasks RUNS="$(TASK_RUNS)"

# Every other method on the track, three seeds (issue 60's rows, reports/tasks/README.md "Every method on the track"):
# the encodings the rebuilt track had dropped, RoPE's variants, the training-time position schedules and DroPE.
TASK_ADDED_ENCODINGS := kerple fire sinusoidal learned fox
TASK_ADDED := $(TASK_ADDED_ENCODINGS) rope-half p-rope rnope-swa rope-pose rope-randomized alibi-randomized drope
extrapolation-tasks-added:  ## every other method on the track, into its report's rows (SEED_NUMBERS="11 12 13")
	$(MAKE) extrapolation-tasks TASK_ENCODINGS="$(TASK_ADDED_ENCODINGS)" TASK_RUNS="$(TASK_ADDED)" RESUME=1
	$(MAKE) $(foreach s,$(SEED_NUMBERS),task-drope-base/$(s)) STUDY=runs/tasks STUDY_CONFIG=configs/tasks.yaml
	$(MAKE) task-drope-long
	$(MAKE) task-drawn

# What more recalibration buys DroPE (reports/tasks/README.md, DroPE's paragraph): each seed's DroPE run again with
# 8x its steps (ARGS_drope-long), from the same RoPE run, evaluated into reports/tasks/drope-long.
task-drope-long:  ## DroPE recalibrated 8x as long, on the RoPE runs task-drope-base trained (reports/tasks/drope-long)
	$(MAKE) $(foreach s,$(SEED_NUMBERS),task-eval/$(s)/drope-long) STUDY=runs/tasks STUDY_CONFIG=configs/tasks.yaml \
		EXTEND_CONFIG=configs/extend-4x-tasks.yaml RESUME=1
	$(PY) -m render.merge $(if $(RESUME),$(wildcard reports/tasks/drope-long)) \
		$(foreach s,$(SEED_NUMBERS),runs/tasks/eval/seed$(s)/drope-long) --out reports/tasks/drope-long

# The randomized-position runs measured as their paper's code measures them (reports/tasks/README.md, "Every method on
# the track"): each sequence given positions drawn from [0, 16L) at 1x-8x L (eval.tasks --drawn-positions; at 16x L
# the draw is every position, the track's own rows), into reports/tasks/drawn, seeds added to its rows.
task-drawn: install  ## the randomized-position runs with positions drawn at evaluation too, as Ruoss et al.'s code does
	$(RUN_PY) -m eval.tasks $(foreach s,$(SEED_NUMBERS),runs/tasks/seed$(s)/rope-randomized runs/tasks/seed$(s)/alibi-randomized) \
		--drawn-positions --multiples 1,2,4,8 --out reports/tasks/drawn --resume

# The RoPE run a DroPE run continues is trained again for it (run folders are not committed), so it is not the
# committed RoPE run of its seed (reports/tasks/README.md, "Runs trained again"): its rows and training log go to
# reports/tasks/reproduction/rope-seedSEED, where the DroPE paragraph compares DroPE with YaRN on that very run.
task-drope-base/%: run/%/rope  ## task-drope-base/SEED: the RoPE run DroPE continues, evaluated into reports/tasks/reproduction
	$(RUN_PY) -m eval.tasks $(STUDY)/seed$*/rope --scaling $(TASK_SCALINGS) --fixed-factors '' \
		--out reports/tasks/reproduction/rope-seed$* --resume
	cp $(STUDY)/seed$*/rope/metrics.jsonl reports/tasks/reproduction/rope-seed$*/

# Each static scaling at s = length / L and dynamic NTK; dynamic-yarn and llama3 stay in the text study.
# Each run is evaluated as soon as it is trained (task-eval/SEED/NAME, into $(STUDY)/eval/seedSEED/NAME), on
# the core the training leaves free; then the folders are merged into the report (RESUME=1: into its rows), and
# eval.heads reads where each encoding's heads look (reports/tasks/heads).
TASK_SCALINGS ?= none,linear,ntk,dynamic,yarn
task-eval: $(RUN_TARGETS:run/%=task-eval/%)  ## evaluate the track's runs, merge them into the report, read where the heads look
	$(PY) -m render.merge $(if $(RESUME),$(wildcard $(STUDY_REPORT))) \
		$(foreach s,$(SEED_NUMBERS),$(addprefix $(STUDY)/eval/seed$(s)/,$(RUNS))) --out $(STUDY_REPORT)
	$(PY) -m eval.heads $(foreach s,$(SEED_NUMBERS),$(addprefix $(STUDY)/seed$(s)/,$(TASK_ENCODINGS))) \
		--out $(STUDY_REPORT)/heads $(EVAL_RESUME)

task-eval/%: run/%  ## task-eval/SEED/NAME: evaluate one run of the track
	$(RUN_PY) -m eval.tasks $(STUDY)/seed$(run_seed)/$(run_name) --scaling $(TASK_SCALINGS) --fixed-factors '' \
		--out $(STUDY)/eval/seed$(run_seed)/$(run_name) $(EVAL_RESUME)

# What RoPE's retrieval leans on (reports/tasks/README.md, "A far-back anchor"): the track's runs with the keys
# past a window hidden from every query (the sinks method with no sinks), and the fine-tunes with their first
# tokens shown nearer; one folder of eval.tasks rows per setting in reports/tasks/anchor.
ANCHOR = $(PY) -m eval.tasks $(EVAL_RESUME) --out reports/tasks/anchor
task-anchor: install  ## what RoPE's retrieval leans on: keys hidden past a window, first tokens shown nearer
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
task-context: $(foreach m,$(CONTEXT_METHODS),$(addprefix task-context/$(m)/,$(SEED_NUMBERS)))  ## the training-free context methods on the track's RoPE and ALiBi runs
	$(foreach m,$(CONTEXT_METHODS),$(PY) -m render.merge $(if $(RESUME),$(wildcard reports/tasks/context/$(m))) \
		$(addprefix runs/tasks/context/$(m)/seed,$(SEED_NUMBERS)) --out reports/tasks/context/$(m);)

task-context/%: install  ## task-context/METHOD/SEED: one method on one seed
	$(RUN_PY) -m eval.tasks runs/tasks/seed$(notdir $*)/rope runs/tasks/seed$(notdir $*)/alibi \
		--context-method $(patsubst %/,%,$(dir $*)) --out runs/tasks/context/$(dir $*)seed$(notdir $*) $(EVAL_RESUME)

.PHONY: extrapolation-tasks extrapolation-tasks-added task-drawn task-eval task-anchor task-context
