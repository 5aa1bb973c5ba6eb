"""Export a run to Hugging Face transformers: `python -m export RUN_DIR OUT_DIR` (see export/llama.py)."""
