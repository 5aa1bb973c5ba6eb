"""Evaluation: length-extrapolation perplexity (`eval.extrapolation`) and its plots (`eval.plots`)."""
