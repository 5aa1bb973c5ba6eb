"""Pretrained checkpoints in: transformers checkpoints (hf:PATH) and .gguf files read, their RoPE parameters
mapped, and Llama-family weights converted into this repo's GPT (export/ writes runs out to transformers)."""
