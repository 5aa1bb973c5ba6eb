"""The transformers bridge, reading side: transformers checkpoints (hf:PATH) and .gguf files opened
(checkpoints.py, gguf.py), their RoPE parameters mapped (rope.py) and Llama-family weight names and shapes mapped
both ways (weights.py, pure functions). convert/ uses it to write runs in and out."""
