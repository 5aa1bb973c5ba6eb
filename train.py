"""Train a tiny GPT from a YAML config.

    python train.py --config configs/tiny.yaml [dotted.key=value ...] [--resume]
    torchrun --nproc_per_node 2 train.py --config configs/tiny.yaml   # data-parallel (DDP)

Writes the run directory run.out_dir/run.name: config.yaml (resolved), metrics.jsonl,
tokenizer.model and atomic checkpoints (model/checkpoint.py). Batches are a pure function of
(seed, step), so a resumed run sees the same data and reproduces the same losses.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
import yaml
from tqdm import tqdm

from data import DataConfig, TokenData, prepare
from model.checkpoint import (CheckpointError, atomic_write_text, load_state, load_weights, read_pointer,
                              read_run_config, remove_leftovers, save_checkpoint, write_error)
from model.config import ArgumentParser, ConfigError, ModelConfig, load_config, to_dict
from model.device import autocast, pick_device
from model.gpt import GPT


@dataclass
class RunConfig:
    name: str = "tiny"
    out_dir: str = "runs"
    seed: int = 1337
    device: str = "auto"  # auto: cuda, then mps, then cpu
    compile: bool = False
    wandb: bool = False
    wandb_project: str = "positional-encodings"

    def validate(self) -> None:
        if not self.name or "/" in self.name or self.name in (".", ".."):
            raise ConfigError(f"run.name must be a plain directory name, got {self.name!r}")
        if self.seed < 0:
            raise ConfigError(f"run.seed must be >= 0, got {self.seed}")
        run_dir = Path(self.out_dir) / self.name
        for path, key in ((Path(self.out_dir), "run.out_dir"), (run_dir, "run.out_dir/run.name")):
            if path.exists() and not path.is_dir():
                raise ConfigError(f"{key}: {path} is a file, not a directory")


@dataclass
class TrainConfig:
    batch_size: int = 16  # sequences per micro-step (per process)
    grad_accum: int = 1  # micro-steps per optimizer step, split across DDP processes
    max_steps: int = 1000
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup_steps: int = 100
    decay_steps: int | None = None  # length of the cosine decay; None -> max_steps
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    log_every: int = 10
    eval_every: int = 200
    eval_tokens: int = 16384  # validation tokens per evaluation
    ckpt_every: int = 200
    init_from: str | None = None  # a run directory to start from (context-extension fine-tuning)

    def validate(self) -> None:
        for key in ("batch_size", "grad_accum", "max_steps", "log_every", "eval_every", "ckpt_every", "eval_tokens"):
            if getattr(self, key) < 1:
                raise ConfigError(f"train.{key} must be >= 1, got {getattr(self, key)}")
        if self.decay_steps is not None and self.decay_steps < 1:
            raise ConfigError(f"train.decay_steps must be >= 1 or null, got {self.decay_steps}")
        if self.warmup_steps < 0:
            raise ConfigError(f"train.warmup_steps must be >= 0, got {self.warmup_steps}")
        if not 0 < self.lr < math.inf:
            raise ConfigError(f"train.lr must be a finite number > 0, got {self.lr}")
        if not 0 <= self.min_lr <= self.lr:
            raise ConfigError(f"train.min_lr must be in [0, train.lr = {self.lr}], got {self.min_lr}")
        for key in ("beta1", "beta2"):
            if not 0 < getattr(self, key) < 1:
                raise ConfigError(f"train.{key} must be in (0, 1), got {getattr(self, key)}")
        for key in ("weight_decay", "grad_clip"):
            if not 0 <= getattr(self, key) < math.inf:
                raise ConfigError(f"train.{key} must be a finite number >= 0, got {getattr(self, key)}")
        if self.init_from is not None and not self.init_from:
            raise ConfigError("train.init_from must be a run directory or null, got ''")


@dataclass
class Config:
    run: RunConfig = field(default_factory=RunConfig)
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def resolve(cfg: Config) -> Config:
    """Fill derived keys and check the config as a whole."""
    cfg.run.validate()
    cfg.data.validate()
    cfg.train.validate()
    if cfg.model.vocab_size is None:
        cfg.model.vocab_size = cfg.data.vocab_size
    elif cfg.model.vocab_size != cfg.data.vocab_size:
        raise ConfigError(f"model.vocab_size ({cfg.model.vocab_size}) differs from data.vocab_size "
                          f"({cfg.data.vocab_size}); set data.vocab_size only")
    cfg.model.validate()  # names a bad scaling key before asking for the original length
    scaling = cfg.model.position.scaling
    if scaling is not None and "original_max_position_embeddings" not in scaling:
        if cfg.train.init_from is None:
            raise ConfigError("model.position.scaling needs original_max_position_embeddings "
                              "(or train.init_from, to take it from the base run)")
        try:
            base = read_run_config(cfg.train.init_from)["model"]["max_seq_len"]
        except CheckpointError as e:
            raise ConfigError(f"train.init_from: {e}") from None
        cfg.model.position.scaling = {**scaling, "original_max_position_embeddings": base}
    return cfg


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
    may change how it trains, logs and checkpoints, never its model, its data or its seed."""
    saved = read_run_config(run_dir)
    old, new = flatten(saved if isinstance(saved, dict) else {}), flatten(to_dict(cfg))
    changes = {k: [old[k], v] for k, v in new.items() if k in old and old[k] != v}  # older runs lack new keys
    refused = [k for k in changes if k == "run.seed" or (k.startswith(("model.", "data.")) and k != "data.cache_dir")]
    if refused:
        raise ConfigError(f"cannot resume {run_dir} with a different {', '.join(refused)} "
                          f"({'; '.join(f'{changes[k][0]!r} -> {changes[k][1]!r}' for k in refused)}): "
                          f"that is another model or data; choose another run.name")
    return changes


def lr_at(step: int, t: TrainConfig) -> float:
    """Linear warmup, then cosine decay to min_lr over decay_steps, then min_lr."""
    if step < t.warmup_steps:
        return t.lr * (step + 1) / t.warmup_steps
    decay = t.decay_steps or t.max_steps
    progress = min(1.0, (step - t.warmup_steps) / max(1, decay - t.warmup_steps))
    return t.min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (t.lr - t.min_lr)


def make_optimizer(model: GPT, t: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not norms or other vectors)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": t.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=t.lr, betas=(t.beta1, t.beta2), fused=device.type == "cuda")


@torch.no_grad()
def evaluate(model, windows, data: TokenData, batch_size: int, device) -> float:
    """Mean next-token loss over fixed validation windows (which never cross a document)."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(windows), batch_size):
        chunk = torch.stack([data.window_tensor(s, e) for s, e, _ in windows[i:i + batch_size]]).to(device)
        with autocast(device):
            _, loss = model(chunk[:, :-1], chunk[:, 1:])
        total += loss.item() * chunk[:, 1:].numel()
        count += chunk[:, 1:].numel()
    model.train()
    return total / count


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
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
        for i, line in enumerate(lines):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                if i == len(lines) - 1:
                    break
                raise CheckpointError(f"{path} line {i + 1} is not JSON; fix or delete that line") from None
            if row["step"] <= resume_step:
                kept.append(line)
    atomic_write_text(path, "".join(line + "\n" for line in kept))
    return open(path, "a")


def all_finite(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> bool:
    """Whether every weight and every optimizer moment is finite (one device sync)."""
    tensors = [p.detach() for p in model.parameters()]
    tensors += [v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v) and v.dim()]
    return bool(torch.stack([t.isfinite().all() for t in tensors]).all())


def train(cfg: Config, resume: bool = False) -> Path:
    t = cfg.train
    ddp, rank, world, device = setup_distributed(pick_device(cfg.run.device, "run.device"))
    if t.grad_accum % world:
        raise ConfigError(f"train.grad_accum ({t.grad_accum}) must be divisible by the number of processes ({world})")
    micro_steps = t.grad_accum // world
    main = rank == 0
    log = print if main else (lambda *a, **k: None)

    run_dir = Path(cfg.run.out_dir) / cfg.run.name
    has_ckpt = (run_dir / "checkpoint.json").exists()
    if has_ckpt and not resume:
        raise ConfigError(f"{run_dir} already holds a checkpoint (step {read_pointer(run_dir)['step']}); "
                          "pass --resume to continue it or choose another run.name")
    if resume and not has_ckpt:
        log(f"note: nothing to resume in {run_dir}; starting a new run")
    changes = resume_changes(run_dir, cfg) if resume and has_ckpt else {}
    if t.init_from and not (resume and has_ckpt):
        try:
            read_pointer(Path(t.init_from))
        except CheckpointError as e:
            raise ConfigError(f"train.init_from: {e}") from None
    if main:
        removed = remove_leftovers(run_dir)
        if removed:
            log(f"note: removed {len(removed)} leftover file(s) of an interrupted run in {run_dir}: {', '.join(removed)}")

    if main:
        data_dir = prepare(cfg.data)
    if ddp:
        dist.barrier()
        data_dir = prepare(cfg.data, progress=False)  # a cache hit now
    train_data, val_data = TokenData(data_dir, "train"), TokenData(data_dir, "val")
    seq_len = cfg.model.max_seq_len

    torch.manual_seed(cfg.run.seed)
    model = GPT(cfg.model).to(device)
    optimizer = make_optimizer(model, t, device)
    start = 0
    if resume and has_ckpt:
        model.load_state_dict(load_weights(run_dir), strict=False)
        state = load_state(run_dir)
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        if device.type == "cuda" and "cuda_rng" in state:
            torch.cuda.set_rng_state(state["cuda_rng"], device)
        start = state["step"]
        log(f"resuming {run_dir} from step {start}")
    elif t.init_from:
        missing, unexpected = model.load_state_dict(load_weights(Path(t.init_from)), strict=False)
        if set(missing) - {"lm_head.weight"} or unexpected:
            raise ConfigError(f"train.init_from: {t.init_from} has a different architecture "
                              f"(missing {missing[:2]}, unexpected {unexpected[:2]})")
        log(f"initialised from {t.init_from}")

    if main:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(to_dict(cfg), sort_keys=False))
        shutil.copyfile(data_dir / "tokenizer.model", run_dir / "tokenizer.model")
        metrics = open_metrics(run_dir, start if resume else None)
        if changes:  # config.yaml now holds the new values; this keeps the history
            with open(run_dir / "config_changes.jsonl", "a") as f:
                f.write(json.dumps({"resumed_at_step": start, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                    "changes": changes}) + "\n")
            log(f"note: resuming with {', '.join(f'{k}: {a!r} -> {b!r}' for k, (a, b) in changes.items())} "
                f"(recorded in config_changes.jsonl)")
        wandb_run = start_wandb(cfg, run_dir) if cfg.run.wandb else None

    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        model.use_flex_attention(True)
    train_model = model
    if ddp:
        train_model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    if cfg.run.compile:  # after DDP, as PyTorch recommends, so its bucketing is compiled in
        train_model = torch.compile(train_model)
    val_windows = val_data.eval_windows(seq_len, max_tokens=t.eval_tokens)
    if not val_windows:
        raise ConfigError(f"no validation document is longer than model.max_seq_len ({seq_len})")

    n_params = model.num_params()
    tokens_per_step = t.batch_size * t.grad_accum * seq_len
    log(f"{cfg.run.name}: {cfg.model.position.type} | {n_params / 1e6:.2f}M parameters | {device} | "
        f"{tokens_per_step} tokens/step | {len(train_data) / 1e6:.2f}M training tokens")
    bar = tqdm(total=t.max_steps, initial=start, disable=not main, dynamic_ncols=True, unit="step")
    loss_sum, loss_count = torch.zeros((), device=device), 0
    last_good = start if resume and has_ckpt else None  # the step of the checkpoint on disk
    clock = time.perf_counter()
    step = start
    with bar, Stopper() as stopper:  # the bar closes before any error line
        while step < t.max_steps:
            lr = lr_at(step, t)
            for group in optimizer.param_groups:
                group["lr"] = lr
            for micro in range(micro_steps):
                x, y = train_data.batch(t.batch_size, seq_len, cfg.run.seed, step, micro, micro_steps, rank, world)
                if device.type == "cuda":
                    x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
                elif device.type != "cpu":
                    x, y = x.to(device), y.to(device)
                sync = contextlib.nullcontext() if not ddp or micro == micro_steps - 1 else train_model.no_sync()
                with sync, autocast(device):
                    _, loss = train_model(x, y)
                (loss / micro_steps).backward()
                loss_sum += loss.detach() / micro_steps
            if t.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            loss_count += 1
            bar.update(1)

            is_eval = step % t.eval_every == 0 or step == t.max_steps
            is_ckpt = step % t.ckpt_every == 0 or step == t.max_steps or stopper.signal is not None
            if step % t.log_every == 0 or is_eval or is_ckpt:
                if ddp:
                    dist.all_reduce(loss_sum, op=dist.ReduceOp.AVG)
                loss_value = loss_sum.item() / loss_count
                if not math.isfinite(loss_value):
                    raise FloatingPointError(diverged(f"loss is {loss_value}", step, last_good, run_dir))
                elapsed = time.perf_counter() - clock
                row = {"step": step, "loss": round(loss_value, 5), "lr": lr,
                       "tokens_per_s": round(loss_count * tokens_per_step / elapsed, 1)}
                if is_eval:
                    val = evaluate(model, val_windows, val_data, t.batch_size, device)
                    row.update(val_loss=round(val, 5), val_ppl=round(math.exp(val), 3))
                    bar.write(f"step {step}: train loss {loss_value:.4f} | val loss {val:.4f} | val ppl {math.exp(val):.2f}")
                bar.set_postfix(loss=f"{loss_value:.3f}", lr=f"{lr:.1e}", tok_s=f"{row['tokens_per_s']:.0f}")
                if main:
                    metrics.write(json.dumps(row) + "\n")
                    metrics.flush()
                    if wandb_run is not None:
                        wandb_run.log(row, step=step)
                loss_sum.zero_()
                loss_count = 0
                clock = time.perf_counter()
            if is_ckpt:
                if not all_finite(model, optimizer):  # the loss was checked above: a checkpoint step logs
                    raise FloatingPointError(diverged("the weights are not finite", step, last_good, run_dir))
                if main:
                    state = {"step": step, "optimizer": optimizer.state_dict(), "rng": torch.get_rng_state()}
                    if device.type == "cuda":
                        state["cuda_rng"] = torch.cuda.get_rng_state(device)
                    save_checkpoint(run_dir, model, state, step)
                last_good = step
            if stopper.signal is not None:
                log(f"{stopper.signal.name}: checkpoint saved at step {step} in {run_dir}; continue with --resume")
                raise SystemExit(128 + stopper.signal.value)
    if main:
        metrics.close()
        if wandb_run is not None:
            wandb_run.finish()
    if ddp:
        dist.destroy_process_group()
    return run_dir


def diverged(what: str, step: int, last_good: int | None, run_dir: Path) -> str:
    kept = (f"the last good checkpoint (step {last_good}) in {run_dir} is kept" if last_good is not None
            else f"no checkpoint was saved in {run_dir}")
    return f"{what} at step {step}; stopping (try a lower train.lr); {kept}"


def start_wandb(cfg: Config, run_dir: Path):
    import wandb
    if not os.environ.get("WANDB_API_KEY") and not os.environ.get("WANDB_MODE"):
        print("note: no WANDB_API_KEY; logging to wandb in offline mode (sync later with `wandb sync`)")
        os.environ["WANDB_MODE"] = "offline"
    return wandb.init(project=cfg.run.wandb_project, name=cfg.run.name, config=to_dict(cfg), dir=str(run_dir))


def main(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="YAML config, e.g. configs/tiny.yaml")
    parser.add_argument("--resume", action="store_true", help="continue the run's latest checkpoint")
    parser.add_argument("overrides", nargs="*", help="dotted.key=value, e.g. model.position.type=alibi")
    args = parser.parse_intermixed_args(argv)  # overrides may stand before or after --resume
    try:
        cfg = resolve(load_config(Config, args.config, args.overrides))
        run_dir = train(cfg, resume=args.resume)
    except (ConfigError, CheckpointError, FloatingPointError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2 if isinstance(e, ConfigError) else 1)
    except OSError as e:  # a full disk or read-only run directory outside a checkpoint save
        if write_error(e) is None:
            raise
        print(f"error: {write_error(e)} while writing {e.filename or 'the run directory'}", file=sys.stderr)
        sys.exit(1)
    print(f"done: {run_dir}")


if __name__ == "__main__":
    main()
