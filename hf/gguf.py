"""A .gguf file as a transformers checkpoint folder: its quantized weights dequantized to float32 (by transformers,
with the gguf and accelerate packages), its config and its tokenizer, so that it loads in a second where the .gguf
file takes a minute, and converts like any folder (python -m convert.to_run).

    python -m hf.gguf SmolLM2-135M-Instruct.Q4_1.gguf .cache/smollm2/hf
"""
from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from safetensors.torch import save_file

from config import ArgumentParser, run_cli
from hf.checkpoints import PREFIX, RAISED, failed, locate, transformers, transformers_tokenizer


def dequantize(gguf: Path, out: Path) -> Path:
    """Write the dequantized weights (float32), config and tokenizer of a .gguf file as a checkpoint folder."""
    path = f"{PREFIX}{gguf}"
    tokenizer = transformers_tokenizer(path)
    source = locate(path)
    try:  # as transformers reads it, whatever its architecture (hf: and convert.to_run check that later)
        model = transformers().AutoModelForCausalLM.from_pretrained(source.folder, gguf_file=source.gguf,
                                                                    dtype="float32", local_files_only=True)
    except RAISED as e:
        raise failed(source, "weights", e) from None
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights written are plain float32 tensors
    weights = model.state_dict()
    if config.tie_word_embeddings:  # stored once (safetensors refuses shared storage)
        weights.pop("lm_head.weight", None)
    out.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(out)
    tokenizer.save_pretrained(out)
    save_file({k: v.contiguous() for k, v in weights.items()}, out / "model.safetensors", metadata={"format": "pt"})
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    (out / "SOURCE.md").write_text(f"Written by `python -m hf.gguf` from {gguf.name} (sha256 {digest}): its "
                                   f"quantized weights dequantized to float32, its config and its tokenizer.\n")
    return out


def main(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("gguf", type=Path, help="a .gguf file")
    parser.add_argument("out_dir", type=Path, help="the checkpoint folder to write")
    args = parser.parse_args(argv)
    out = run_cli(lambda: dequantize(args.gguf, args.out_dir))
    print(f"wrote {out} (load it as hf:{out})")


if __name__ == "__main__":
    main()
