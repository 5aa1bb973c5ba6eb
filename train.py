"""Train a tiny GPT from a YAML config.

    python train.py --config configs/tiny.yaml [dotted.key=value ...] [--resume] [--wait-for-lock SECONDS]
    torchrun --nproc_per_node 2 train.py --config configs/tiny.yaml   # data-parallel (DDP)

Writes the run directory run.out_dir/run.name: config.yaml (resolved), metrics.jsonl,
tokenizer.model and atomic checkpoints (checkpoint.py). Batches are a pure function of
(seed, step), so a resumed run sees the same data and reproduces the same losses. One process
trains a run at a time: it holds the run directory's lock until it ends, and a second is refused.

A fine-tune (train.init_from: a run directory, or hf:PATH, a transformers checkpoint converted first) keeps its
base's model and tokenizer: its config states only what it changes (the length, the RoPE scaling), e.g.
configs/smollm2-extend.yaml, which extends SmolLM2-135M to 32,768 tokens with PoSE windows of train.seq_len.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import netrc
import os
import secrets
import shutil
import signal
import sys
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import yaml
from tqdm import tqdm

from checkpoint import (
    POINTER,
    atomic_write_text,
    drop_best_after,
    hold,
    load_state,
    load_weights_into,
    pretrained_tokenizer,
    read_metrics,
    read_pointer,
    read_run_config,
    remove_leftovers,
    save_best,
    save_checkpoint,
)
from config import (
    ArgumentParser,
    Config,
    ModelConfig,
    RunFailed,
    TrainConfig,
    UserError,
    apply_overrides,
    from_dict,
    read_yaml,
    run_cli,
    to_dict,
)
from data import TaskData, TokenData, open_data
from data.train_positions import sample_positions
from device import autocast, compiled, keep_freed_host_memory, pick_device
from convert.to_run import converted
from model.gpt import GPT, make_optimizer
from model.positions import build_position
from model.positions import check as check_model
from hf.checkpoints import is_hf


def resolve(cfg: Config, resume: bool = False) -> Config:
    """The config checked as a whole, with what training derives from it filled in, so that config.yaml
    records the run as it trains: a fine-tune's original length (from the base run), the accumulation
    rounded to the process count, and the decay length (kept from the run when resuming)."""
    cfg.resolve()
    check_model(cfg.model)  # names a bad encoding or scaling key before asking for the original length
    limit = build_position(cfg.model).max_positions
    top = cfg.train.positions.max_position
    if top is not None and limit is not None and top > limit:
        raise UserError(f"train.positions: {cfg.train.positions.type} positions reach {top - 1}, but "
                        f"{cfg.model.position.type} positions stop at {limit - 1} (model.max_seq_len)")
    scaling, t = cfg.model.position.scaling, cfg.train
    if scaling is not None and scaling.original_max_position_embeddings is None:
        if t.init_from is None:
            raise UserError("model.position.scaling needs original_max_position_embeddings "
                            "(or train.init_from, to take it from the base run)")
        try:
            base = read_run_config(base_run(cfg))["model"]["max_seq_len"]
        except UserError as e:
            raise UserError(f"train.init_from: {e}") from None
        except (TypeError, KeyError):
            raise UserError("train.init_from: its config.yaml has no model.max_seq_len") from None
        cfg.model.position.scaling = dataclasses.replace(scaling, original_max_position_embeddings=base)
    world = int(os.environ.get("WORLD_SIZE", "1"))  # torchrun's; every process runs grad_accum / world micro-steps
    if t.grad_accum % world:
        adjusted = -(-t.grad_accum // world) * world
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"note: train.grad_accum {t.grad_accum} does not divide over {world} processes; using {adjusted} "
                  f"(a global batch of {adjusted * t.batch_size} sequences instead of {t.grad_accum * t.batch_size})")
        t.grad_accum = adjusted
    if t.decay_steps is None:  # the schedule is fixed when a run starts: extending it continues the decay
        run_dir = Path(cfg.run.out_dir) / cfg.run.name
        saved = {}
        if resume and (run_dir / POINTER).exists():
            saved = read_run_config(run_dir).get("train") or {}
        t.decay_steps = saved.get("decay_steps") or saved.get("max_steps") or t.max_steps
    return cfg


def base_run(cfg: Config) -> Path | None:
    """The run directory a fine-tune starts from: train.init_from, where an hf: checkpoint is converted first
    (convert/to_run.py, once: the conversion is kept in the data cache)."""
    base = cfg.train.init_from
    if base is None:
        return None
    return converted(base, Path(cfg.data.cache_dir)) if is_hf(base) else Path(base)


# what a fine-tune may change of its base run's model; every other key is the base's weights' shape or meaning
FINE_TUNABLE = ("max_seq_len", "dropout", "init_std", "position.scaling")


def drops_positions(stated: dict, base: ModelConfig) -> bool:
    """A fine-tune that removes its base's positions (position.type: nope) where they carry no weights: DroPE's
    recalibration (Gelberg et al., arXiv 2512.12167, section 3: train with RoPE, drop it, train briefly without)."""
    weightless = not any(True for _ in build_position(base).parameters())
    return (stated.get("position") or {}).get("type") == "nope" and base.position.type != "nope" and weightless


def load_training_config(path: str, overrides: list[str]) -> Config:
    """YAML + overrides as a Config. A fine-tune (train.init_from) takes its base run's model section (an hf:
    checkpoint's, converted) for every key it leaves out, and its vocabulary; a key it states must agree with
    the base, except those of FINE_TUNABLE."""
    data = apply_overrides(read_yaml(path), list(overrides))
    cfg = from_dict(Config, data)
    if cfg.train.init_from is None:
        return cfg
    try:
        base = read_run_config(base_run(cfg))["model"]
    except UserError as e:
        raise UserError(f"train.init_from: {e}") from None
    stated = data.get("model") or {}
    model = merged(base, stated)
    ours, theirs = (flatten(to_dict(from_dict(ModelConfig, m, "model"))) for m in (model, base))
    dropped = drops_positions(stated, from_dict(ModelConfig, base, "model"))
    for key, value in flatten(stated).items():
        if dropped and key == "position.type":
            continue
        if key not in FINE_TUNABLE and ours.get(key) != theirs.get(key):
            raise UserError(f"model.{key}: {value!r} contradicts {cfg.train.init_from} ({theirs.get(key)!r}); a "
                            f"fine-tune keeps its base's model: leave it out (it may set {', '.join(FINE_TUNABLE)})")
    vocab, text = base.get("vocab_size"), dict(data.get("data") or {})
    if text.setdefault("vocab_size", vocab) != vocab:
        raise UserError(f"data.vocab_size: {text['vocab_size']} contradicts {cfg.train.init_from}'s vocabulary "
                        f"({vocab}); leave it out: a fine-tune reads text with its base's tokenizer")
    return from_dict(Config, {**data, "model": model, "data": text})


def merged(base: dict, stated: dict) -> dict:
    """`base` with the keys of `stated` in place, section by section (a scaling is one value)."""
    out = dict(base)
    for key, value in stated.items():
        both = isinstance(value, dict) and isinstance(base.get(key), dict) and key != "scaling"
        out[key] = merged(base[key], value) if both else value
    return out


def flatten(tree: dict, prefix: str = "") -> dict:
    """{"model.position.type": "rope", ...} from a nested dict."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict) and key != "scaling":  # a scaling is one value
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def resume_changes(run_dir: Path, cfg: Config) -> dict:
    """{key: [saved, new]} for the keys in which `cfg` differs from the run's config.yaml. A resumed run
    may change how it trains, logs and checkpoints, never its model, its data, its positions or its seed."""
    saved = read_run_config(run_dir)
    old, new = flatten(saved if isinstance(saved, dict) else {}), flatten(to_dict(cfg))
    changes = {k: [old[k], v] for k, v in new.items() if k in old and old[k] != v}  # older runs lack new keys
    refused = [k for k in changes if k in ("run.seed", "train.seq_len") or k.startswith("train.positions.")
               or (k.startswith(("model.", "data.")) and k != "data.cache_dir")]
    if refused:
        raise UserError(f"cannot resume {run_dir} with a different {', '.join(refused)} "
                          f"({'; '.join(f'{changes[k][0]!r} -> {changes[k][1]!r}' for k in refused)}): "
                          f"that is another model or data; choose another run.name")
    return changes


def lr_at(step: int, t: TrainConfig) -> float:
    """Linear warmup, then cosine decay to min_lr over decay_steps, then min_lr."""
    if step < t.warmup_steps:
        return t.lr * (step + 1) / t.warmup_steps
    decay = t.decay_steps or t.max_steps  # resolve() fills decay_steps; here for a bare TrainConfig
    progress = min(1.0, (step - t.warmup_steps) / max(1, decay - t.warmup_steps))
    return t.min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (t.lr - t.min_lr)


@torch.no_grad()
def evaluate(model, batches, device) -> dict:
    """Mean loss over the scored targets (not -1) of fixed validation batches (task, x, y): text windows
    inside documents, or task sequences, whose answer accuracy is also given per task (val_acc_<task>)."""
    model.eval()
    total, count = 0.0, 0
    right: dict[str, list[int]] = {}
    for task, x, y in batches:
        x, y = x.to(device), y.to(device)
        with autocast(device):
            logits, loss = model(x, y)
        scored = y != -1
        n = int(scored.sum())
        total += loss.item() * n
        count += n
        if task is not None:
            hits = right.setdefault(task, [0, 0])
            hits[0] += int((logits.argmax(-1) == y)[scored].sum())
            hits[1] += n
    model.train()
    out = {"val_loss": total / count}
    out.update({f"val_acc_{task}": hit / n for task, (hit, n) in right.items()})
    return out


class Stopper(contextlib.AbstractContextManager):
    """Turns SIGINT / SIGTERM into a request to checkpoint and exit after the current step."""

    def __enter__(self):
        self.signal = None
        self.previous = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        return False

    def _handle(self, signum, frame):
        self.signal = signal.Signals(signum)


def setup_distributed(device: torch.device) -> tuple[bool, int, int, torch.device]:
    """(ddp, rank, world size, device) from torchrun's environment variables."""
    if int(os.environ.get("WORLD_SIZE", "1")) == 1:
        return False, 0, 1, device
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return True, dist.get_rank(), dist.get_world_size(), device


def open_metrics(run_dir: Path, resume_step: int | None):
    """metrics.jsonl opened for appending, without rows logged after the checkpoint we resume from.
    A torn last line (the process was killed while writing it) is dropped."""
    path = run_dir / "metrics.jsonl"
    kept = []
    if resume_step is not None and path.exists():
        kept = [json.dumps(row) for row in read_metrics(run_dir) if row["step"] <= resume_step]
    atomic_write_text(path, "".join(line + "\n" for line in kept))
    return open(path, "a")


def all_finite(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> bool:
    """Whether every weight and every optimizer moment is finite (one device sync)."""
    tensors = [p.detach() for p in model.parameters()]
    tensors += [v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v) and v.dim()]
    return bool(torch.stack([t.isfinite().all() for t in tensors]).all())


@dataclass
class Session:
    """What `setup` builds for a run: its processes, directory, data, model and optimizer."""
    cfg: Config
    run_dir: Path
    device: torch.device
    ddp: bool
    rank: int
    world: int
    model: GPT
    train_model: torch.nn.Module  # the model as stepped: wrapped by DDP and / or compiled
    optimizer: torch.optim.Optimizer
    train_data: TokenData | TaskData
    val_batches: list  # fixed (task or None, x, y) validation batches
    metrics: object = None  # metrics.jsonl, open for appending (rank 0)
    wandb_run: object = None

    @property
    def main(self) -> bool:
        return self.rank == 0

    def log(self, *args):
        if self.main:
            print(*args)


@dataclass
class Progress:
    """The loop's counters: where it started, the checkpoint on disk, the loss since the last report."""
    start: int  # the step training starts from (that of the resumed checkpoint, or 0)
    last_good: int | None  # the step of the checkpoint on disk
    loss_sum: torch.Tensor  # training loss summed since the last report, on the device (no sync per step)
    loss_count: int = 0
    clock: float = dataclasses.field(default_factory=time.perf_counter)
    val_loss: float | None = None  # of the latest evaluation
    began: float = dataclasses.field(default_factory=time.perf_counter)  # this process's training loop
    wall_before: float = 0.0  # seconds the run trained in earlier processes (resumed from)


def train(cfg: Config, resume: bool = False) -> Path:
    """Train until train.max_steps; SIGINT / SIGTERM checkpoint and exit. Returns the run directory."""
    s, p, t = *setup(cfg, resume), cfg.train
    plain = not sys.stderr.isatty()  # a log file (SLURM, nohup): a line per report instead of a redrawn bar
    bar = tqdm(total=t.max_steps, initial=p.start, disable=not s.main or plain, dynamic_ncols=True, unit="step")
    with bar, Stopper() as stopper:  # the bar closes before any error line
        for step in range(p.start + 1, t.max_steps + 1):
            lr = train_step(s, p, step - 1)
            bar.update(1)
            is_eval = step % t.eval_every == 0 or step == t.max_steps
            is_ckpt = step % t.ckpt_every == 0 or step == t.max_steps or stopper.signal is not None
            reported = step % t.log_every == 0 or is_eval or is_ckpt
            if reported:
                fields = report(s, p, step, lr, is_eval, bar.write)
                if plain:
                    s.log(f"step {step}/{t.max_steps} | " + " | ".join(f"{k} {v}" for k, v in fields.items()))
                else:
                    bar.set_postfix(fields)
            if is_ckpt:
                save(s, p, step)
            if is_eval and s.main and p.last_good is not None and math.isfinite(p.val_loss):
                save_best(s.run_dir, s.model, step, p.val_loss)
            if reported:  # the next rate counts training steps only, not this evaluation or checkpoint
                p.clock = time.perf_counter()
            if stopper.signal is not None:
                s.log(f"{stopper.signal.name}: checkpoint saved at step {step} in {s.run_dir}; continue with --resume")
                raise SystemExit(128 + stopper.signal.value)
    finish(s)
    return s.run_dir


def setup(cfg: Config, resume: bool) -> tuple[Session, Progress]:
    """Processes, the run directory, data, model and optimizer (resumed or initialised) of a resolved config."""
    ddp, rank, world, device = setup_distributed(pick_device(cfg.run.device, "run.device"))
    run_dir = Path(cfg.run.out_dir) / cfg.run.name
    resume, changes = check_run_dir(cfg, run_dir, resume, rank)
    base = base_run(cfg)
    own_tokenizer = pretrained_tokenizer(base) if base else None  # a pretrained base's text is read with its own
    if rank == 0:
        removed = remove_leftovers(run_dir)
        if removed:
            print(f"note: removed {len(removed)} leftover file(s) of an interrupted run in {run_dir}: {', '.join(removed)}")
        train_data, val_data, tokenizer = open_data(cfg.data, tokenizer=own_tokenizer)
    if ddp:
        dist.barrier()
        train_data, val_data, tokenizer = open_data(cfg.data, progress=False, tokenizer=own_tokenizer)  # a cache hit now

    model, optimizer, start = build_model(cfg, run_dir, resume, device, rank)
    train_model = model
    if ddp:
        train_model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    train_model = compiled(train_model, cfg.run)  # after DDP, as PyTorch recommends, so its bucketing is compiled in
    val_batches = val_data.validation(cfg.train.seq_len, cfg.train.eval_tokens, cfg.train.batch_size)
    s = Session(cfg, run_dir, device, ddp, rank, world, model, train_model, optimizer, train_data, val_batches)
    p = Progress(start, last_good=start if resume else None, loss_sum=torch.zeros((), device=device))
    if s.main:
        open_run_dir(s, p, tokenizer, changes)
    s.log(f"resuming {run_dir} from step {start}" if resume else
          f"initialised from {cfg.train.init_from}" if cfg.train.init_from else f"starting {run_dir}")
    corpus = (f"tasks {', '.join(train_data.tasks)}" if isinstance(train_data, TaskData)
              else f"{len(train_data) / 1e6:.2f}M training tokens")
    s.log(f"{cfg.run.name}: {cfg.model.position.type} | {model.num_params() / 1e6:.2f}M parameters | {device} | "
          f"{tokens_per_step(cfg)} tokens/step | {corpus}")
    p.clock = p.began = time.perf_counter()
    return s, p


def check_run_dir(cfg: Config, run_dir: Path, resume: bool, rank: int) -> tuple[bool, dict]:
    """(whether there is a checkpoint to resume, the resumed run's config changes); a UserError for a run
    directory that already holds a checkpoint without --resume, or a fine-tune's missing base run."""
    has_ckpt = (run_dir / POINTER).exists()
    if has_ckpt and not resume:
        raise UserError(f"{run_dir} already holds a checkpoint (step {read_pointer(run_dir)['step']}); "
                        "pass --resume to continue it or choose another run.name")
    if resume and not has_ckpt and rank == 0:
        print(f"note: nothing to resume in {run_dir}; starting a new run")
    resume = resume and has_ckpt
    if cfg.train.init_from and not resume:
        try:
            read_pointer(base_run(cfg))
        except UserError as e:
            raise UserError(f"train.init_from: {e}") from None
    return resume, resume_changes(run_dir, cfg) if resume else {}


def build_model(cfg: Config, run_dir: Path, resume: bool, device: torch.device, rank: int):
    """(model, optimizer, start step): resumed from the run's checkpoint, initialised from train.init_from's
    weights, or from the seed."""
    torch.manual_seed(cfg.run.seed)
    model = GPT(cfg.model).to(device)
    optimizer = make_optimizer(model, cfg.train, device)
    start = 0
    if resume:
        if rank == 0:
            drop_best_after(run_dir, read_pointer(run_dir)["step"])
        load_weights_into(model, run_dir)
        state = load_state(run_dir)
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        if device.type == "cuda" and "cuda_rng" in state:
            torch.cuda.set_rng_state(state["cuda_rng"], device)
        start = state["step"]
    elif cfg.train.init_from:
        load_weights_into(model, base_run(cfg), extend=True)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        model.use_flex_attention(True)
    return model, optimizer, start


def open_run_dir(s: Session, p: Progress, tokenizer: Path | None, changes: dict) -> None:
    """config.yaml, the tokenizer (a text run), metrics.jsonl (cut back to the resumed step), the config
    history, wandb."""
    s.run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(s.run_dir / "config.yaml", yaml.safe_dump(to_dict(s.cfg), sort_keys=False))
    if tokenizer is not None and tokenizer.is_dir():  # a pretrained model's own (checkpoint.pretrained_tokenizer)
        shutil.copytree(tokenizer, s.run_dir / tokenizer.name, dirs_exist_ok=True)
    elif tokenizer is not None:
        shutil.copyfile(tokenizer, s.run_dir / "tokenizer.model")
    s.metrics = open_metrics(s.run_dir, p.last_good)
    p.wall_before = max((row.get("wall_s", 0.0) for row in read_metrics(s.run_dir)), default=0.0)
    if changes:  # config.yaml now holds the new values; this keeps the history
        with open(s.run_dir / "config_changes.jsonl", "a") as f:
            f.write(json.dumps({"resumed_at_step": p.start, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                "changes": changes}) + "\n")
        print(f"note: resuming with {', '.join(f'{k}: {a!r} -> {b!r}' for k, (a, b) in changes.items())} "
              f"(recorded in config_changes.jsonl)")
    s.wandb_run = start_wandb(s.cfg, s.run_dir) if s.cfg.run.wandb else None


def tokens_per_step(cfg: Config) -> int:
    return cfg.train.batch_size * cfg.train.grad_accum * cfg.train.seq_len


def to_device(t: torch.Tensor | None, device: torch.device) -> torch.Tensor | None:
    """A batch tensor on the device: on CUDA through pinned memory, copied without blocking the host."""
    if t is None or device.type == "cpu":
        return t
    return t.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else t.to(device)


def train_step(s: Session, p: Progress, step: int) -> float:
    """One optimizer step (gradient accumulation over this process's micro-steps); returns its lr."""
    t = s.cfg.train
    lr = lr_at(step, t)
    for group in s.optimizer.param_groups:
        group["lr"] = lr
    micro_steps = t.grad_accum // s.world
    for micro in range(micro_steps):
        x, y = s.train_data.batch(t.batch_size, t.seq_len, s.cfg.run.seed, step, micro, micro_steps,
                                  s.rank, s.world)
        positions = sample_positions(t.positions, t.batch_size, t.seq_len, s.cfg.run.seed, step, micro,
                                     micro_steps, s.rank, s.world)  # None: contiguous
        x, y, positions = (to_device(b, s.device) for b in (x, y, positions))
        sync = contextlib.nullcontext() if not s.ddp or micro == micro_steps - 1 else s.train_model.no_sync()
        with sync, autocast(s.device):
            _, loss = s.train_model(x, y, positions=positions)
        (loss / micro_steps).backward()
        p.loss_sum += loss.detach() / micro_steps
    if t.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(s.model.parameters(), t.grad_clip)
    s.optimizer.step()
    s.optimizer.zero_grad(set_to_none=True)
    p.loss_count += 1
    return lr


def report(s: Session, p: Progress, step: int, lr: float, is_eval: bool, write=print) -> dict:
    """Log the mean training loss since the last report (and the validation loss on an eval step) to
    metrics.jsonl and wandb; stop with RunFailed on a non-finite loss. Returns the progress-bar fields."""
    if s.ddp:
        dist.all_reduce(p.loss_sum, op=dist.ReduceOp.AVG)
    loss = p.loss_sum.item() / p.loss_count
    if not math.isfinite(loss):
        raise RunFailed(diverged(f"loss is {loss}", step, p.last_good, s.run_dir))
    row = {"step": step, "loss": round(loss, 5), "lr": lr,
           "tokens_per_s": round(p.loss_count * tokens_per_step(s.cfg) / (time.perf_counter() - p.clock), 1),
           # what a report's minutes are rendered from: the run's training time so far, and on what
           "wall_s": round(p.wall_before + time.perf_counter() - p.began, 1),
           "threads": torch.get_num_threads(), "processes": s.world}
    if is_eval:
        metrics = evaluate(s.model, s.val_batches, s.device)
        val = p.val_loss = metrics.pop("val_loss")
        row.update(val_loss=round(val, 5), val_ppl=round(math.exp(val), 3), **{k: round(v, 4) for k, v in metrics.items()})
        write(f"step {step}: train loss {loss:.4f} | val loss {val:.4f} | val ppl {math.exp(val):.2f}"
              + "".join(f" | {k.removeprefix('val_')} {v:.2f}" for k, v in metrics.items()))
    if s.main:
        s.metrics.write(json.dumps(row) + "\n")
        s.metrics.flush()
        if s.wandb_run is not None:
            s.wandb_run.log(row, step=step)
    p.loss_sum.zero_()
    p.loss_count = 0
    return {"loss": f"{loss:.3f}", "lr": f"{lr:.1e}", "tok_s": f"{row['tokens_per_s']:.0f}"}


def save(s: Session, p: Progress, step: int) -> None:
    """Checkpoint the step, only from finite weights and optimizer state (the loss was checked by report)."""
    if not all_finite(s.model, s.optimizer):
        raise RunFailed(diverged("the weights are not finite", step, p.last_good, s.run_dir))
    if s.main:
        state = {"step": step, "optimizer": s.optimizer.state_dict(), "rng": torch.get_rng_state()}
        if s.device.type == "cuda":
            state["cuda_rng"] = torch.cuda.get_rng_state(s.device)
        save_checkpoint(s.run_dir, s.model, state, step, keep=s.cfg.train.keep_checkpoints)
    p.last_good = step


def finish(s: Session) -> None:
    if s.main:
        s.metrics.close()
        if s.wandb_run is not None:
            s.wandb_run.finish()
    if s.ddp:
        dist.destroy_process_group()


def diverged(what: str, step: int, last_good: int | None, run_dir: Path) -> str:
    kept = (f"the last good checkpoint (step {last_good}) in {run_dir} is kept" if last_good is not None
            else f"no checkpoint was saved in {run_dir}")
    return f"{what} at step {step}; stopping (try a lower train.lr); {kept}"


def wandb_logged_in() -> bool:
    """Whether wandb has an API key, found where wandb itself looks: WANDB_API_KEY, then the netrc entry
    that `wandb login` writes for its host."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = urllib.parse.urlsplit(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
    try:
        return netrc.netrc(os.environ.get("NETRC")).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def start_wandb(cfg: Config, run_dir: Path):
    """A wandb run whose id is kept in the run directory, so that --resume continues the same one."""
    import wandb
    if not os.environ.get("WANDB_MODE") and not wandb_logged_in():
        os.environ["WANDB_MODE"] = "offline"
        print(f"note: not logged in to wandb; logging offline to {run_dir / 'wandb'} "
              f"(upload later with `wandb sync {run_dir / 'wandb'}/offline-run-*`)")
    id_file = run_dir / "wandb_id"
    run_id = id_file.read_text().strip() if id_file.exists() else secrets.token_hex(4)
    atomic_write_text(id_file, run_id + "\n")
    return wandb.init(project=cfg.run.wandb_project, name=cfg.run.name, config=to_dict(cfg), dir=str(run_dir),
                      id=run_id, resume="allow")


def train_held(cfg: Config, resume: bool, wait: float = 0.0) -> Path:
    """train() while this process holds the run directory (rank 0 does; the others write nothing there):
    a run that another process trains is refused in one line, after waiting up to `wait` seconds for it to
    end. The run directory is read (resolve, resume) only once it is held, so a run that waited resumes
    from the checkpoint its holder left."""
    if not wait >= 0:
        raise UserError(f"--wait-for-lock must be a number of seconds >= 0, got {wait}")
    cfg.resolve()  # every key and path checked before the run directory is taken
    run_dir = Path(cfg.run.out_dir) / cfg.run.name
    held = (hold(run_dir, "train.py", wait, " (or pass --wait-for-lock SECONDS)")
            if int(os.environ.get("RANK", "0")) == 0 else contextlib.nullcontext())
    with held:
        return train(resolve(cfg, resume), resume=resume)


def main(argv=None):
    keep_freed_host_memory()  # process-wide: CPU steps reuse freed memory (device.py)
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="YAML config, e.g. configs/tiny.yaml")
    parser.add_argument("--resume", action="store_true", help="continue the run's latest checkpoint")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved config (every key and its value) and exit")
    parser.add_argument("--wait-for-lock", type=float, default=0.0, metavar="SECONDS",
                        help="when another process is training the run, wait up to SECONDS for it to end, "
                             "then go on (default 0: refuse at once)")
    parser.add_argument("overrides", nargs="*", help="dotted.key=value, e.g. model.position.type=alibi "
                                                     "(see --print-config for every key)")
    args = parser.parse_intermixed_args(argv)  # overrides may stand before or after --resume
    if args.print_config:
        cfg = run_cli(lambda: resolve(load_training_config(args.config, args.overrides), args.resume))
        print(yaml.safe_dump(to_dict(cfg), sort_keys=False), end="")
        return
    run_dir = run_cli(lambda: train_held(load_training_config(args.config, args.overrides), args.resume,
                                          args.wait_for_lock))
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"done: {run_dir}")


if __name__ == "__main__":
    main()
