"""Quality measurements of run directories: perplexity by length (`eval.extrapolation`), the long-range tasks
(`eval.tasks`), the context-use probes (`eval.probe`), the passkey heat map (`eval.passkey`), RULER's synthetic tasks
(`eval.ruler`) and where the heads look (`eval.heads`); each writes its rows, a plain markdown table and plots
(`eval/results/`)."""
