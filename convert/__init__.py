"""Runs to and from transformers checkpoints: `python -m convert.to_run hf:PATH RUN_DIR` takes a Llama-family
checkpoint into a run directory, `python -m convert.to_hf RUN_DIR OUT_DIR` writes a run out for transformers."""
