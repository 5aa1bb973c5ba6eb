"""Run directories: their files, checkpoints and the one weight loader.

A run directory holds `config.yaml` (the fully resolved config), `metrics.jsonl`,
`tokenizer.model`, and the latest checkpoint: `model_<step>.safetensors` (weights),
`state_<step>.pt` (optimizer, step, RNG; read with `weights_only=True`) and `checkpoint.json`,
the pointer to them, which also names the older checkpoints kept (`train.keep_checkpoints`) and the
best-validation weights `best_<step>.safetensors`. Every file is written atomically (temp file, fsync, rename) and the pointer
last, so a kill at any moment leaves the previous checkpoint loadable. One process at a time writes a run
directory or an evaluator's report folder: it holds the folder's `lock` file (`hold`) until it ends.

A run converted from a pretrained checkpoint (python -m convert.to_run) holds its weights with no optimizer
state (`state` null in checkpoint.json: it is fine-tuned with train.init_from, never resumed) and the
checkpoint's own tokenizer as a folder, `tokenizer/` (tokenizer.json and its settings), instead of
tokenizer.model; its fine-tunes inherit that folder.

A model to evaluate is a run directory or `hf:PATH`, a transformers checkpoint on disk (hf/checkpoints.py).
`check_checkpoint`, `read_run_config`, `model_config`, `load_model`, `load_tokenizer` and `scalings_taken`
open either, so that evaluators and generate.py do not ask which kind it is.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pickle
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import torch
import yaml
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from config import (
    ContextConfig,
    ModelConfig,
    RunFailed,
    ScalingConfig,
    UserError,
    from_dict,
    write_error,
)
from data import PretrainedTokenizer, Tokenizer
from model.gpt import GPT
from model.positions import check as check_positions
from model.rope import FROM_A_NAME
from hf import checkpoints as hf

POINTER = "checkpoint.json"
PRETRAINED_TOKENIZER = "tokenizer"  # the folder of a pretrained model's own tokenizer in a run directory


class FromRun:
    """The scaling a run was trained with: load_model's default, as opposed to None (no scaling)."""

    def __repr__(self) -> str:
        return "from-run"


FROM_RUN = FromRun()
LOCK = "lock"  # held by the process writing a run directory or report folder (hold)
LOCK_NOTE = ("The process named above holds an OS lock (flock) on this file while it writes this folder. The kernel "
             "lets go when that process ends, however it ends (SIGKILL included), so a file left behind locks nothing: "
             "it is harmless and may be deleted.\n")


def file_mode() -> int:
    """The mode open() gives a new file under the current umask (mkstemp's own 0600 would hide run
    files from the rest of a group)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: Path, write) -> None:
    """Call write(tmp_path), fsync it, then rename it over `path`."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, file_mode())
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))


@contextlib.contextmanager
def hold(directory: Path, who: str, wait: float = 0.0, hint: str = "") -> Iterator[None]:
    """Hold `directory` for this process until the block ends: an exclusive flock on directory/lock,
    taken before anything is written there. The kernel releases it when the process dies (SIGKILL
    included), so no stale lock is ever left to clean up. While another process holds it, wait up to
    `wait` seconds, then raise a UserError naming the holder (`who`, pid, host, since when) and what to
    do (`hint` is added to "wait for it to end"). Creates `directory`; if the block leaves it holding only
    the lock file (a command that failed before writing), the folders made here are removed again."""
    directory = Path(directory)
    made = [d for d in [directory, *directory.parents] if not d.exists()]  # deepest first
    path, deadline = directory / LOCK, time.monotonic() + wait
    while True:
        directory.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)  # an existing file is not changed by opening it
        except FileNotFoundError:  # the directory was removed in between (see the end)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = (os.pread(fd, 1024, 0).decode(errors="replace").splitlines() or ["another process"])[0]
            os.close(fd)
            if time.monotonic() >= deadline:
                waited = f" after waiting {wait:g} s" if wait else ""
                raise UserError(f"{directory} is in use by {holder}{waited}; "
                                f"wait for it to end{hint} or stop it") from None
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
            continue
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                break
        os.close(fd)  # a holder removed the empty directory it had made, lock file and all: take the new one
    try:
        text = f"{who} (pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%dT%H:%M:%S')})\n"
        data = (text + LOCK_NOTE).encode()
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
        yield
    finally:
        with contextlib.suppress(OSError):
            if made and [p.name for p in directory.iterdir()] == [LOCK]:
                path.unlink()
                for d in made:
                    d.rmdir()
        os.close(fd)


def weights_of(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """State dict without a tied output projection (safetensors refuses shared storage)."""
    tied = model.lm_head.weight is model.embed.weight
    return {k: v.detach().contiguous() for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")}


def save_checkpoint(run_dir: Path, model, state: dict, step: int, keep: int = 1) -> None:
    """Write the step's weights and state, then point checkpoint.json at them, keeping the `keep` newest
    checkpoints (the best one is kept by save_best). A failed write (full disk, read-only directory)
    leaves the previous checkpoints as they were."""
    run_dir = Path(run_dir)
    weights, state_file = f"model_{step:07d}.safetensors", f"state_{step:07d}.pt"
    previous = read_pointer(run_dir) if (run_dir / POINTER).exists() else None
    try:
        atomic_write(run_dir / weights, lambda tmp: save_file(weights_of(model), tmp, metadata={"step": str(step)}))
        atomic_write(run_dir / state_file, lambda tmp: torch.save(state, tmp))
        older = [] if previous is None else [
            {k: previous[k] for k in ("step", "weights", "state")}, *previous.get("older", [])]
        pointer = {"step": step, "weights": weights, "state": state_file,
                   "older": [c for c in older if c["step"] != step][:keep - 1]}
        if previous and previous.get("best"):
            pointer["best"] = previous["best"]
        write_pointer(run_dir, pointer)
    except (OSError, RuntimeError) as e:
        reason = write_error(e)
        if reason is None:
            raise
        for name in (weights, state_file):
            if name not in files_named(previous):
                with contextlib.suppress(OSError):
                    (run_dir / name).unlink(missing_ok=True)
        kept = f"the step {previous['step']} checkpoint is kept" if previous else "there is no earlier checkpoint"
        raise RunFailed(f"{reason} while saving the step {step} checkpoint in {run_dir}; {kept}") from None
    remove_unnamed(run_dir, files_named(previous) - files_named(pointer))


def save_converted(run_dir: Path, model) -> None:
    """The weights of a model converted from a pretrained checkpoint as the run's step-0 checkpoint, with no
    optimizer state: a start for fine-tunes (train.init_from), not a run to resume."""
    weights = "model_0000000.safetensors"
    atomic_write(Path(run_dir) / weights, lambda tmp: save_file(weights_of(model), tmp, metadata={"step": "0"}))
    write_pointer(run_dir, {"step": 0, "weights": weights, "state": None})


def save_best(run_dir: Path, model, step: int, val_loss: float) -> bool:
    """Keep the weights of the step with the lowest validation loss, named in checkpoint.json: the step's
    own checkpoint weights when it has one, else best_<step>.safetensors. Returns whether this step is
    the new best. Needs a checkpoint.json already."""
    run_dir = Path(run_dir)
    pointer = read_pointer(run_dir)
    best = pointer.get("best")
    if best is not None and best["val_loss"] <= val_loss:
        return False
    saved = {c["step"]: c["weights"] for c in [pointer, *pointer.get("older", [])]}
    weights = saved.get(step, f"best_{step:07d}.safetensors")  # the step's checkpoint, when there is one
    if step not in saved:
        atomic_write(run_dir / weights, lambda tmp: save_file(weights_of(model), tmp, metadata={"step": str(step)}))
    updated = {**pointer, "best": {"step": step, "val_loss": val_loss, "weights": weights}}
    write_pointer(run_dir, updated)
    remove_unnamed(run_dir, files_named(pointer) - files_named(updated))
    return True


def drop_best_after(run_dir: Path, step: int) -> None:
    """On resume from `step`: forget a best checkpoint from a later step (it belongs to the abandoned steps)."""
    pointer = read_pointer(run_dir)
    if pointer.get("best") and pointer["best"]["step"] > step:
        write_pointer(run_dir, {k: v for k, v in pointer.items() if k != "best"})
        remove_unnamed(run_dir, {pointer["best"]["weights"]})


def files_named(pointer: dict | None) -> set[str]:
    """Every file a checkpoint.json keeps: the latest checkpoint, the older ones and the best weights."""
    if not pointer:
        return set()
    names = {pointer["weights"], pointer["state"]}
    for older in pointer.get("older", []):
        names |= {older["weights"], older["state"]}
    if pointer.get("best"):
        names.add(pointer["best"]["weights"])
    return names - {None}  # a converted run's state


def write_pointer(run_dir: Path, pointer: dict) -> None:
    atomic_write_text(Path(run_dir) / POINTER, json.dumps(pointer))


def remove_unnamed(run_dir: Path, names: set[str]) -> None:
    for name in names:
        with contextlib.suppress(OSError):  # a leftover is removed at the next start (remove_leftovers)
            (Path(run_dir) / name).unlink(missing_ok=True)


def remove_leftovers(run_dir: Path) -> list[str]:
    """Delete temp files of killed atomic writes and checkpoint files checkpoint.json does not name;
    returns their names."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    keep = files_named(read_pointer(run_dir) if (run_dir / POINTER).exists() else None)
    removed = []
    candidates = [*run_dir.glob(".*.tmp"), *run_dir.glob("model_*.safetensors"), *run_dir.glob("state_*.pt"),
                  *run_dir.glob("best_*.safetensors")]
    for path in sorted(candidates):
        if path.name not in keep and path.is_file():
            path.unlink()
            removed.append(path.name)
    return removed


def read_pointer(run_dir: Path) -> dict:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"run directory not found: {run_dir}")
    try:
        pointer = json.loads((run_dir / POINTER).read_text())
    except FileNotFoundError:
        raise UserError(f"no checkpoint in {run_dir} (missing {POINTER}); has it trained yet?") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{run_dir / POINTER} is corrupt ({e})") from None
    older, best = (pointer.get("older", []), pointer.get("best")) if isinstance(pointer, dict) else ([], None)
    converted = isinstance(pointer, dict) and pointer.get("state", "") is None  # save_converted
    if not (names_checkpoint({**pointer, "state": ""} if converted else pointer) and isinstance(older, list)
            and all(map(names_checkpoint, older))
            and (best is None or isinstance(best, dict) and isinstance(best.get("weights"), str))):
        raise UserError(f"{run_dir / POINTER} is corrupt (expected step, weights and state)")
    return pointer


def names_checkpoint(entry) -> bool:
    """Whether a checkpoint.json entry gives a step and the names of its weights and state files."""
    return (isinstance(entry, dict) and isinstance(entry.get("step"), int)
            and all(isinstance(entry.get(k), str) for k in ("weights", "state")))


def first_line(e: Exception) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0]


def load_state(run_dir: Path) -> dict:
    run_dir = Path(run_dir)
    state = read_pointer(run_dir)["state"]
    if state is None:
        raise UserError(f"{run_dir} holds converted pretrained weights and no training state: nothing to resume; "
                        f"fine-tune it with train.init_from={run_dir}")
    path = run_dir / state
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise UserError(f"checkpoint state missing: {path}") from None
    except pickle.UnpicklingError as e:
        if "Unsupported global" not in str(e):  # not a pickle at all
            raise UserError(f"{path} is corrupt (not a checkpoint state torch can read)") from None
        # torch's advice here is to unpickle it anyway: we do not
        raise UserError(f"{path} is not a plain checkpoint state (it holds pickled Python objects); "
                              f"it will not be unpickled") from None
    except Exception as e:
        raise UserError(f"{path} is corrupt (cannot read the checkpoint state: {first_line(e)})") from None
    if not (isinstance(state, dict) and isinstance(state.get("step"), int) and isinstance(state.get("optimizer"), dict)
            and torch.is_tensor(state.get("rng"))):
        raise UserError(f"{path} is corrupt (expected step, optimizer and rng)")
    moments = [v for per_param in state["optimizer"].get("state", {}).values() for v in per_param.values()
               if torch.is_tensor(v) and v.is_floating_point()]
    if not all(torch.isfinite(v).all() for v in moments):
        raise UserError(f"{path} holds non-finite optimizer state (NaN or inf)")
    return state


def load_weights(run_dir: Path, best: bool = False) -> dict[str, torch.Tensor]:
    """The weights of the latest checkpoint, or of the best-validation one with `best`."""
    run_dir = Path(run_dir)
    pointer = read_pointer(run_dir)
    if best and not pointer.get("best"):
        raise UserError(f"{run_dir} has no best checkpoint yet (one is kept from the first evaluation "
                        f"after a checkpoint)")
    path = run_dir / (pointer["best"]["weights"] if best else pointer["weights"])
    try:
        weights = load_file(path)
    except FileNotFoundError:
        raise UserError(f"checkpoint weights missing: {path}") from None
    except (SafetensorError, OSError, ValueError) as e:
        raise UserError(f"corrupt checkpoint {path}: {first_line(e)}") from None
    bad = [name for name, t in weights.items() if t.is_floating_point() and not torch.isfinite(t).all()]
    if bad:
        raise UserError(f"{path} holds non-finite weights (NaN or inf in {bad[0]}"
                        f"{f' and {len(bad) - 1} more' if len(bad) > 1 else ''})")
    return weights


def check_checkpoint(path: Path) -> None:
    """A UserError unless `path` holds a model: a run's checkpoint, or an hf: checkpoint's config."""
    if hf.is_hf(path):
        hf.describe(path)
    else:
        read_pointer(path)


def read_run_config(run_dir: Path) -> dict:
    """A run's config.yaml; for hf:PATH, the checkpoint's model as that file would hold it (no data section)."""
    if hf.is_hf(run_dir):
        return hf.describe(run_dir)
    path = Path(run_dir) / "config.yaml"
    if not Path(run_dir).is_dir():
        raise UserError(f"run directory not found: {run_dir}")
    if not path.is_file():
        raise UserError(f"{run_dir} is not a run directory (no config.yaml)")
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise UserError(f"{path} is corrupt (not UTF-8 text)") from None
    except yaml.YAMLError:
        raise UserError(f"{path} is not valid YAML") from None
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        raise UserError(f"{path} is corrupt (no model section)")
    return config


def read_metrics(run_dir: Path) -> list[dict]:
    """The rows of a run's metrics.jsonl; a torn last line (a killed run) is left out."""
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise UserError(f"no metrics.jsonl in {run_dir}")
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except UnicodeDecodeError:
        raise UserError(f"{path} is corrupt (not UTF-8 text)") from None
    rows = []
    for i, line in enumerate(lines):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise UserError(f"{path}:{i + 1} is corrupt (not a JSON object)") from None
        if not isinstance(row, dict) or not isinstance(row.get("step"), int):
            raise UserError(f"{path}:{i + 1} is corrupt (expected a JSON object with a step)")
        rows.append(row)
    return rows


def model_config(run_dir: Path, scaling: ScalingConfig | None | FromRun = FROM_RUN) -> ModelConfig:
    """The run's ModelConfig; `scaling` (parsed and checked where it was given) replaces its RoPE scaling unless left
    at FROM_RUN."""
    cfg = parse_model_section(run_dir, read_run_config(run_dir))
    if scaling is not FROM_RUN:
        cfg.position.scaling = scaling
    return cfg


def load_weights_into(model: GPT, run_dir: Path, extend: bool = False, best: bool = False) -> None:
    """The one weight loader (resume, init_from, generate, eval, export): the latest checkpoint of
    `run_dir` into `model`, strictly. Every weight must be there with the model's shape, and nothing
    else. `extend` (a context-extension fine-tune) lets a learned position table be shorter than the
    model's: it fills the first positions and the rest keep their initial values."""
    weights = load_weights(run_dir, best)
    if model.lm_head.weight is model.embed.weight:
        weights["lm_head.weight"] = weights.get("embed.weight")  # tied: stored once
    expected = model.state_dict()
    missing = [k for k in expected if weights.get(k) is None]
    unexpected = [k for k in weights if k not in expected]
    if missing or unexpected:
        what = [f"lacks {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}"] if missing else []
        what += [f"has {', '.join(unexpected[:3])}{' ...' if len(unexpected) > 3 else ''} that the model has not"] if unexpected else []
        raise UserError(f"the checkpoint in {run_dir} {' and '.join(what)} (a run of another architecture?)")
    for name, target in expected.items():
        tensor = weights[name]
        if tensor.shape == target.shape:
            continue
        if extend and name == "position.table.weight" and tensor.shape[0] < target.shape[0]:
            weights[name] = torch.cat([tensor, target[tensor.shape[0]:].to(tensor.dtype)])
            continue
        raise UserError(f"the checkpoint in {run_dir} has {name} of shape {tuple(tensor.shape)}, the model "
                        f"{tuple(target.shape)} (does config.yaml match the weights?)")
    model.load_state_dict(weights, strict=True)


def parse_model_section(run_dir: Path, config: dict) -> ModelConfig:
    """The model section of the run's config.yaml (as read by read_run_config), checked as train.py checks it."""
    try:
        cfg = from_dict(ModelConfig, config["model"], "model")
        cfg.validate()
        check_positions(cfg)
    except UserError as e:
        raise UserError(f"{run_dir}/config.yaml: {e}") from None
    return cfg


def load_model(run_dir: Path, scaling: ScalingConfig | None | FromRun = FROM_RUN, device="cpu",
               best: bool = False, context: ContextConfig | None = None) -> GPT:
    """The latest (or best-validation) checkpoint of a run as an eval-mode GPT, optionally with another
    RoPE scaling and a context method (checked by the caller: model.context.pairing_problem); for hf:PATH, the transformers
    model called as a GPT is (hf.checkpoints.HFModel)."""
    if hf.is_hf(run_dir):
        if best:
            raise UserError(f"{run_dir} is a transformers checkpoint: it has no best-validation weights (--best "
                            f"reads a run directory)")
        own = scaling is FROM_RUN
        return hf.load_model(str(run_dir), None if own else scaling, device, own=own, context=context)
    model = GPT(model_config(run_dir, scaling))
    load_weights_into(model, run_dir, best=best)
    model.use_flex_attention(torch.device(device).type == "cuda")  # score biases without a T x S mask
    model.use_context_method(context)
    return model.to(device).eval()


def pretrained_tokenizer(run_dir: Path) -> Path | None:
    """The folder of a run's pretrained tokenizer (a converted run and its fine-tunes), None for one trained here."""
    folder = Path(run_dir) / PRETRAINED_TOKENIZER
    return folder if not hf.is_hf(run_dir) and folder.is_dir() else None


def load_tokenizer(run_dir: Path):
    """The tokenizer of a run (data.Tokenizer, or data.PretrainedTokenizer for a converted run and its fine-tunes)
    or of an hf: checkpoint (the same methods)."""
    if hf.is_hf(run_dir):
        return hf.load_tokenizer(str(run_dir))
    folder = pretrained_tokenizer(run_dir)
    return PretrainedTokenizer.from_folder(folder) if folder else Tokenizer(Path(run_dir) / "tokenizer.model")


def scalings_taken(run_dir: Path) -> tuple[str, ...]:
    """The RoPE scaling methods a model can be loaded with from a name alone: every one that needs no settings a
    plain model lacks (longrope's factor lists), and of those only transformers' for hf:PATH."""
    return tuple(m for m in FROM_A_NAME if m in hf.TAKES) if hf.is_hf(run_dir) else FROM_A_NAME
