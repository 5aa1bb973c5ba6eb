"""Convert a pretrained transformers checkpoint of the Llama family or Gemma 3 into a run directory of this project,
the reverse of the export: afterwards every tool that takes a run directory runs it natively, without transformers.

    python -m convert.to_run hf:.cache/smollm2/SmolLM2-135M-Instruct-Q4_1 runs/smollm2
    python -m convert.to_run hf:model.Q4_1.gguf runs/model      # a .gguf file, dequantized on the way

Writes config.yaml (run and model sections: no data section, since it was trained elsewhere), tokenizer/ (the
checkpoint's own tokenizer files) and its weights as a step-0 checkpoint in safetensors (checkpoint.json names no
optimizer state: fine-tune it with train.init_from, which also takes hf:PATH and converts it here first). The
weights are read by transformers in float32 (safetensors; a pytorch_model.bin only through torch's weights_only
loader, so nothing in it is executed), mapped by hf/weights.py and loaded into the GPT strictly. A checkpoint
the GPT cannot hold exactly (hf/weights.py: `problem`) is refused in one line; hf:PATH evaluates it through
transformers instead.
"""
from __future__ import annotations

import argparse
import hashlib
import shutil
import tempfile
from pathlib import Path

import yaml

from checkpoint import PRETRAINED_TOKENIZER, atomic_write_text, hold, save_converted
from config import ArgumentParser, UserError, run_cli, to_dict
from data import PretrainedTokenizer
from model.gpt import GPT
from hf import checkpoints as hf, weights as llama


def convert_model(path: str) -> GPT:
    """The checkpoint at hf:PATH as this repo's GPT (float32, eval mode), or a UserError saying why it cannot be."""
    config = hf.base_config(path)
    problem = llama.problem(config)
    if problem:
        raise UserError(f"{path} cannot be converted: {problem}; evaluate it through transformers as {path}")
    cfg = llama.gpt_config(config, path)
    source = hf.locate(path)
    try:
        model, info = hf.transformers().AutoModelForCausalLM.from_pretrained(
            source.folder, gguf_file=source.gguf, dtype="float32", local_files_only=True, output_loading_info=True)
    except hf.RAISED as e:
        raise hf.failed(source, "weights", e) from None
    lacking = [k for k in info.get("missing_keys", ()) if k != "lm_head.weight" or not cfg.tie_embeddings]
    if lacking:  # transformers would have given them random values
        raise UserError(f"{path} lacks {lacking[0]}{f' and {len(lacking) - 1} more' if len(lacking) > 1 else ''} "
                        f"(a truncated or foreign checkpoint?)")
    gpt = GPT(cfg)
    try:
        gpt.load_state_dict(llama.from_transformers(model.state_dict(), cfg), strict=True)
    except (KeyError, RuntimeError) as e:
        raise UserError(f"{path}: its weights do not fit its config ({str(e).strip().splitlines()[0]})") from None
    return gpt.eval()


def write_tokenizer(path: str, folder: Path, vocab_size: int) -> None:
    """The checkpoint's tokenizer files into `folder`, as transformers saves them; a UserError when its ids run
    past the model's vocabulary."""
    tok = hf.transformers_tokenizer(path)
    if len(tok) > vocab_size:
        raise UserError(f"{path}: its tokenizer has {len(tok)} tokens but the model's vocabulary {vocab_size}")
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    try:
        tok.save_pretrained(tmp)
        PretrainedTokenizer.from_folder(tmp)  # what the run will read back
        tmp.rename(folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def convert(path: str, run_dir: Path) -> Path:
    """Write the run directory of the checkpoint at hf:PATH; returns `run_dir`."""
    if not hf.is_hf(path):
        raise UserError(f"{path}: give the checkpoint as hf:PATH (a transformers checkpoint folder or a .gguf file)")
    run_dir = Path(run_dir)
    if run_dir.exists() and (not run_dir.is_dir() or any(p.name != "lock" for p in run_dir.iterdir())):
        raise UserError(f"{run_dir} exists and is not an empty directory; choose a new one")
    gpt = convert_model(path)  # every check before anything is written
    with hold(run_dir, "python -m convert.to_run"):
        write_tokenizer(path, run_dir / PRETRAINED_TOKENIZER, gpt.cfg.vocab_size)
        save_converted(run_dir, gpt)
        config = {"run": {"name": run_dir.name, "seed": 0}, "model": to_dict(gpt.cfg)}
        atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(config, sort_keys=False))
        atomic_write_text(run_dir / "SOURCE.md", source_note(path))
    return run_dir


def converted(path: str, cache_dir: Path) -> Path:
    """The run directory of hf:PATH converted under cache_dir/converted, converting it the first time (train.py's
    train.init_from: hf:PATH). Its name follows the checkpoint's files (names, sizes, times), so an edited
    checkpoint is converted again."""
    source = hf.locate(path)
    files = [source.folder / source.gguf] if source.gguf else sorted(p for p in source.folder.iterdir() if p.is_file())
    key = hashlib.sha256(repr([(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files]).encode())
    name = Path(source.gguf).stem if source.gguf else source.folder.resolve().name
    run_dir = Path(cache_dir) / "converted" / f"{name}-{key.hexdigest()[:12]}"
    # one process converts; the others (DDP ranks, a second run) wait for it
    with hold(run_dir.with_name(f".{run_dir.name}.converting"), "a conversion (convert/to_run.py)", wait=900):
        if not (run_dir / "config.yaml").is_file():  # written last
            shutil.rmtree(run_dir, ignore_errors=True)  # a conversion that was cut short
            convert(path, run_dir)
            print(f"converted {path} into {run_dir}")
    return run_dir


def source_note(path: str) -> str:
    source = hf.locate(path)
    files = [source.folder / source.gguf] if source.gguf else sorted(source.folder.glob("*.safetensors"))
    digests = ", ".join(f"{f.name} sha256 {hashlib.sha256(f.read_bytes()).hexdigest()}" for f in files)
    return f"Converted by `python -m convert.to_run` from {path} ({digests}).\n"


def main(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="hf:PATH, a transformers checkpoint folder or .gguf file")
    parser.add_argument("run_dir", type=Path, help="the run directory to write")
    args = parser.parse_args(argv)
    out = run_cli(lambda: convert(args.checkpoint, args.run_dir))
    print(f"wrote {out}: a run directory every tool takes (fine-tune it with train.init_from={out})")


if __name__ == "__main__":
    main()
