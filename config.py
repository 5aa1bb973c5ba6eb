"""The config layer, at the bottom of the project: it imports nothing else of it.

Every section of a run as a dataclass (run, data, model with its position and RoPE scaling, train),
the YAML + dotted-override loader, the two error types and the command-line conventions they map to:

    cfg = load_config(Config, "configs/tiny.yaml", ["train.max_steps=50"]).resolve()

Unknown keys, wrong types and values out of range are a `UserError` whose one-line message names the
key. Checks that need another module (an encoding or scaling name, a base run's length) are made
where that module is used (model/positions.py, model/rope.py, train.py).

Every command line runs its work through `run_cli`: a `UserError` (bad input, a missing or corrupt
run) is one line on stderr and exit code 2; a `RunFailed` (divergence, a full disk) one line and 1.
"""
from __future__ import annotations

import argparse
import dataclasses
import errno
import math
import os
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, TypeVar

import yaml


class UserError(ValueError):
    """A mistake a user can make (a bad config, option or path, a missing or corrupt run): one line, exit 2."""


class RunFailed(RuntimeError):
    """A run that started and failed (divergence, a full disk): one line, exit 1, finished work kept."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad command line is one line on stderr (exit code 2), not usage + error."""

    def error(self, message):
        self.exit(2, f"error: {message} (see --help)\n")


T = TypeVar("T")


def write_error(e: BaseException) -> str | None:
    """What went wrong in a failed write, in a few words; None when `e` is not a failed write.
    torch.save reports a full disk as a RuntimeError from its zip writer."""
    if isinstance(e, OSError):
        if e.errno == errno.ENOSPC:
            return "no space left on device"
        if e.errno == errno.EROFS:
            return "read-only file system"
        if isinstance(e, PermissionError):
            return "permission denied"
        return e.strerror or str(e)
    if isinstance(e, RuntimeError) and ("unexpected pos" in str(e) or "PytorchStreamWriter failed" in str(e)):
        return "no space left on device"
    return None


def run_cli(work: Callable[[], T]) -> T:
    """Run a command's work; a UserError exits 2, a RunFailed or a failed write 1, each as one line."""
    try:
        return work()
    except UserError as e:
        message, code = str(e), 2
    except RunFailed as e:
        message, code = str(e), 1
    except OSError as e:
        if write_error(e) is None:
            raise
        message, code = f"{write_error(e)} while writing {e.filename or 'the output'}", 1
    print(f"error: {message.splitlines()[0] if message else 'failed'}", file=sys.stderr)
    sys.exit(code)


def check(ok: bool, key: str, accepts: str, value: Any) -> None:
    """Raise UserError naming `key` and what it accepts unless `ok`."""
    if not ok:
        raise UserError(f"{key} must be {accepts}, got {value!r}")


def positive(value, key: str) -> None:
    check(value > 0, key, "> 0", value)  # `not NaN > 0`, so NaN is refused too


# torch.compile's modes: reduce-overhead adds CUDA graphs, max-autotune also searches kernels (minutes)
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass
class RunConfig:
    name: str = "tiny"
    out_dir: str = "runs"
    seed: int = 1337
    device: str = "auto"  # auto: cuda, then mps, then cpu
    compile: bool = False
    compile_mode: str = "default"  # torch.compile's mode where compile is on (COMPILE_MODES)
    wandb: bool = False
    wandb_project: str = "positional-encodings"

    def validate(self) -> None:
        check(self.compile_mode in COMPILE_MODES, "run.compile_mode", " | ".join(COMPILE_MODES), self.compile_mode)
        check(bool(self.name) and "/" not in self.name and self.name not in (".", ".."), "run.name",
              "a plain directory name", self.name)
        check(self.seed >= 0, "run.seed", ">= 0", self.seed)
        run_dir = Path(self.out_dir) / self.name
        for path, key in ((Path(self.out_dir), "run.out_dir"), (run_dir, "run.out_dir/run.name")):
            if path.exists() and not path.is_dir():
                raise UserError(f"{key}: {path} is a file, not a directory")


ROOT = Path(__file__).resolve().parent  # the checkout


def default_cache_dir() -> str:
    """Where token shards are cached unless data.cache_dir says: $POSITIONAL_GPT_CACHE, else .cache/data
    in the checkout (not the working directory, so every command finds the same cache)."""
    return os.environ.get("POSITIONAL_GPT_CACHE") or str(ROOT / ".cache" / "data")


def is_task_source(source: str) -> bool:
    """`tasks` or `tasks:NAME,...`: generated long-range task sequences (data/tasks.py), not text. The name
    wins over a local path, as `shakespeare` does; write ./tasks for a folder of that name."""
    return source == "tasks" or source.startswith("tasks:")


@dataclass
class DataConfig:
    source: str = "shakespeare"  # shakespeare | a local file, folder or glob | hf:NAME[:CONFIG] | tasks[:NAME,...]
    vocab_size: int = 4096
    cache_dir: str = field(default_factory=default_cache_dir)
    val_fraction: float = 0.05  # by document, when the source has no split of its own
    test_fraction: float = 0.07
    max_documents: int | None = None  # cap per split, for large hf: datasets
    text_field: str = "text"  # the column (.parquet, hf:) or field (.jsonl) holding each document
    # Task sources only (data/tasks.py): a start token of its own before every sequence (needs data.vocab_size 163),
    # and a curriculum over distance, [D, S]: training facts within D tokens of the token that asks for them at
    # step 0, a bound growing linearly to the whole sequence by step S (validation places facts anywhere).
    start_token: bool = False
    curriculum: list[int] | None = None

    def validate(self) -> None:
        check(bool(self.source), "data.source", "shakespeare, a local file, folder or glob, hf:NAME[:CONFIG] or tasks",
              self.source)
        if is_task_source(self.source):
            if self.curriculum is not None:
                check(len(self.curriculum) == 2 and all(isinstance(v, int) and v > 0 for v in self.curriculum),
                      "data.curriculum", "[D, S]: positive integers, a distance and a step", self.curriculum)
            return  # the task vocabulary's rule is data/tasks.py's; the text-only keys do not apply
        for key in ("start_token", "curriculum"):
            check(getattr(self, key) in (False, None), f"data.{key}", "unset for a text source (tasks only)",
                  getattr(self, key))
        check(self.vocab_size >= 260, "data.vocab_size", "above 259 (256 byte tokens + unk, bos, eos)",
              self.vocab_size)
        for key in ("val_fraction", "test_fraction"):
            check(0 <= getattr(self, key) < 1, f"data.{key}", "in [0, 1)", getattr(self, key))
        check(self.val_fraction + self.test_fraction < 1, "data.val_fraction + data.test_fraction", "below 1",
              self.val_fraction + self.test_fraction)
        if self.max_documents is not None:
            positive(self.max_documents, "data.max_documents")
        check(bool(self.text_field), "data.text_field", "a column or field name", self.text_field)
        if Path(self.cache_dir).exists() and not Path(self.cache_dir).is_dir():
            raise UserError(f"data.cache_dir {self.cache_dir!r} is a file, not a directory")


@dataclass
class ScalingConfig:
    """A RoPE scaling with Hugging Face's key names, e.g. {type: yarn, factor: 4}. Every key a method
    may take is a field; which belong to which method, the method names and the ranges are checked by
    model/rope.py's registry (`check_scaling`), where the methods live. Hugging Face's `rope_type` is
    read as `type`."""
    type: str = "none"
    factor: float | None = None  # s; every method but none and dynamic-yarn requires it
    original_max_position_embeddings: int | None = None  # L; filled from the run when left out
    beta_fast: float | None = None  # yarn
    beta_slow: float | None = None  # yarn
    attention_factor: float | None = None  # yarn
    low_freq_factor: float | None = None  # llama3
    high_freq_factor: float | None = None  # llama3
    short_factor: list[float] | None = None  # longrope: one divisor per rotated pair, up to L
    long_factor: list[float] | None = None  # longrope: the same past L
    # Which layers it acts on, any method: global (the full_attention layers of model.layer_types, as Gemma 3 extends
    # its context: only its global layers' RoPE is rescaled) or all; None: global for a model with layer_types, else all
    layers: str | None = None

    def to_dict(self) -> dict:
        """The keys that are set, as a user would write them."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


def parse_scaling(value: Any, key: str = "scaling") -> ScalingConfig | None:
    """A scaling from a mapping, YAML text (`--rope-scaling "{type: yarn, factor: 4}"`), a ScalingConfig
    or None (or "none"): the one parser for config files, overrides, command lines and saved runs."""
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError as e:
            raise UserError(f"{key}: cannot parse {value!r} as YAML ({e.problem})") from None
    if value is None or value == "none" or isinstance(value, ScalingConfig):
        return value if isinstance(value, ScalingConfig) else None
    if not isinstance(value, dict):
        raise UserError(f"{key}: a RoPE scaling is a mapping such as {{type: yarn, factor: 4}}, got {value!r}")
    value = dict(value)
    if "rope_type" in value:
        alias = value.pop("rope_type")
        if value.setdefault("type", alias) != alias:
            raise UserError(f"{key}: type {value['type']!r} and rope_type {alias!r} disagree; give one")
    return from_dict(ScalingConfig, value, key)


@dataclass
class ContextConfig:
    """A training-free context method applied at load time, e.g. {type: self-extend, group_size: 8}, or its
    name alone. Every key a method may take is a field; which belong to which method, their defaults (from
    the run's training length) and ranges are model/context.py's registry (`check_context`)."""
    type: str = "none"
    group_size: int | None = None  # self-extend: G
    window: int | None = None  # self-extend, rerope, leaky-rerope: W (neighbour window); sinks: recent tokens kept
    k: float | None = None  # leaky-rerope: distances past the window grow at slope 1/k
    chunk_size: int | None = None  # dca: s
    local_window: int | None = None  # dca: w
    sinks: int | None = None  # sinks: first tokens always kept
    length: int | None = None  # logn: L, the base of the logarithm

    def to_dict(self) -> dict:
        """The keys that are set, as a user would write them."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


def parse_context(value: Any, key: str = "context") -> ContextConfig | None:
    """A context method from its name (`--context-method dca`), a mapping or YAML text
    (`--context-method "{type: dca, chunk_size: 64}"`), a ContextConfig, or None ("none")."""
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError as e:
            raise UserError(f"{key}: cannot parse {value!r} as YAML ({e.problem})") from None
    if isinstance(value, str):
        value = {"type": value}
    if value is None or value == {"type": "none"} or isinstance(value, ContextConfig):
        return value if isinstance(value, ContextConfig) else None
    if not isinstance(value, dict):
        raise UserError(f"{key}: a context method is a name or a mapping such as {{type: dca, chunk_size: 64}}, "
                        f"got {value!r}")
    return from_dict(ContextConfig, value, key)


@dataclass
class PositionConfig:
    type: str = "rope"  # a name in model/positions.py's registry
    theta: float = 10000.0  # rope: the base b of the frequencies b^(-2i/d)
    rotary_fraction: float = 1.0  # rope: the share of each head's dimensions rotated (GPT-NeoX's partial rotary)
    kept_frequencies: float = 1.0  # rope: p-RoPE's p, the share of the frequencies kept (the highest); the rest 0
    buckets: int = 32  # t5: distance buckets per head
    max_distance: int = 128  # t5: the distance from which every distance shares the last bucket
    # Applied at load time for evaluation and generation, or here in a context-extension fine-tune.
    scaling: ScalingConfig | None = None
    # rope: the base of the sliding_attention layers of model.layer_types (Gemma 3's rope_local_base_freq); None: theta
    local_theta: float | None = None
    # Which layers apply the encoding: comma-separated entries, each `type` or nope, repeated over the layers
    # ("rope,rope,rope,nope": every 4th layer without positions, Llama 4's iRoPE; "rope,nope": RNoPE, Yang et al.,
    # arXiv 2501.18795). None: every layer applies it. model.sliding_window, if set, applies to the layers that do.
    layer_pattern: str | None = None
    # Llama 4's attention temperature on the layers without positions (transformers' Llama4TextAttention): their
    # queries times log(floor((position + 1) / floor_scale) + 1) * attn_scale + 1: 1 at positions below floor_scale - 1.
    nope_temperature: bool = False
    floor_scale: float = 8192.0  # nope_temperature: positions per step of the temperature (Llama 4's 8192)
    attn_scale: float = 0.1  # nope_temperature: its slope (Llama 4's 0.1)

    def __post_init__(self):  # a mapping written in Python is parsed like one written in YAML
        self.scaling = parse_scaling(self.scaling, "model.position.scaling")

    def pattern(self) -> list[str] | None:
        """The entries of layer_pattern, or None."""
        return None if self.layer_pattern is None else [e.strip() for e in self.layer_pattern.split(",")]


LAYER_TYPES = ("sliding_attention", "full_attention")  # model.layer_types' entries, transformers' names


@dataclass
class ModelConfig:
    vocab_size: int | None = None  # filled in from data.vocab_size by Config.resolve
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int | None = None  # each head's width; None -> d_model / n_heads (Gemma 3's is its own)
    max_seq_len: int = 256
    ffn_hidden: int | None = None  # SwiGLU width; None -> 8/3 * d_model rounded up to a multiple of 64
    norm_eps: float = 1e-5
    dropout: float = 0.0
    init_std: float = 0.02  # std of every weight at init (GPT-2); sets the token scale additive encodings match
    # Options a pretrained Llama-family checkpoint may need (hf/weights.py); the defaults are this repo's GPT.
    tie_embeddings: bool = True  # the output projection is the embedding matrix (False: Llama 3)
    qkv_bias: bool = False  # biases on the q, k and v projections (Qwen2)
    scale_embeddings: bool = True  # token embeddings times sqrt(d_model) (Vaswani et al.; Llama: False; Gemma: True)
    # Options a Gemma 3 checkpoint needs, each off by default. Its (1 + w) RMSNorm weights are folded at import.
    qk_norm: bool = False  # an RMSNorm over each head's q and k, before RoPE
    post_norms: bool = False  # an RMSNorm on the attention's and the MLP's outputs too, before each residual add
    mlp_activation: Literal["silu", "gelu_tanh"] = "silu"  # SwiGLU, or GeGLU with tanh GELU (Gemma)
    attention_scalar: float | None = None  # scores times attention_scalar^-0.5 (query_pre_attn_scalar); None: head_dim
    # One entry per layer, sliding_attention or full_attention, as transformers names them (Gemma 3's local and global
    # layers): model.sliding_window then applies to the sliding layers only, which rotate with their own base
    # (model.position.local_theta); a RoPE scaling acts on the full layers unless its `layers` says all.
    layer_types: list[str] | None = None
    # Sliding-window attention (Mistral; RNoPE-SWA, Yang et al., arXiv 2501.18795): a query at position i reads the
    # keys at positions i - sliding_window + 1 .. i, on every layer, or with model.position.layer_pattern on the
    # layers that apply the encoding (its nope layers read every key), or with model.layer_types on the sliding
    # layers. None: every key.
    sliding_window: int | None = None
    position: PositionConfig = field(default_factory=PositionConfig)

    def __post_init__(self):
        if self.ffn_hidden is None:
            self.ffn_hidden = 64 * -(-(8 * self.d_model // 3) // 64)
        self.head_dim_given = self.head_dim is not None  # not a field: validate's rule for d_model / n_heads
        if self.head_dim is None:
            self.head_dim = self.d_model // self.n_heads if self.n_heads else 0  # 0: validate names n_heads

    @property
    def positional_layers(self) -> list[bool]:
        """Whether each layer applies model.position.type (False: a nope entry of layer_pattern, repeated over
        the layers)."""
        entries = self.position.pattern() or [self.position.type]
        return [entries[i % len(entries)] != "nope" or self.position.type == "nope" for i in range(self.n_layers)]

    @property
    def layer_kinds(self) -> list[str]:
        """Each layer's kind, which says the encoding and the window it reads (GPT.forward): sliding (a
        sliding_attention entry of layer_types), nope (a nope entry of layer_pattern) or positional (the rest)."""
        types = self.layer_types or ["full_attention"] * self.n_layers
        return ["nope" if not on else "sliding" if kind == "sliding_attention" else "positional"
                for on, kind in zip(self.positional_layers, types)]

    @property
    def nope_layers(self) -> list[bool]:
        """Whether each layer attends without positions: a nope entry of layer_pattern, or every layer of NoPE."""
        return [not on or self.position.type == "nope" for on in self.positional_layers]

    def validate(self) -> None:
        """Shapes and ranges; the encoding and scaling names are checked by model/ (positions.check)."""
        if self.vocab_size is not None:
            positive(self.vocab_size, "model.vocab_size")
        for key in ("d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim", "max_seq_len", "ffn_hidden",
                    "norm_eps", "init_std"):
            positive(getattr(self, key), f"model.{key}")
        check(0 <= self.dropout < 1, "model.dropout", "in [0, 1)", self.dropout)
        check(math.isfinite(self.init_std), "model.init_std", "finite", self.init_std)
        positive(self.position.theta, "model.position.theta")
        if self.attention_scalar is not None:
            check(0 < self.attention_scalar < math.inf, "model.attention_scalar", "a finite number > 0 or null",
                  self.attention_scalar)
        if self.d_model % self.n_heads and not self.head_dim_given:
            raise UserError(f"model.d_model ({self.d_model}) must be divisible by model.n_heads ({self.n_heads})")
        if self.n_heads % self.n_kv_heads:
            raise UserError(f"model.n_heads ({self.n_heads}) must be a multiple of model.n_kv_heads ({self.n_kv_heads})")
        p = self.position
        check(0 < p.rotary_fraction <= 1, "model.position.rotary_fraction", "in (0, 1]", p.rotary_fraction)
        check(0 < p.kept_frequencies <= 1, "model.position.kept_frequencies", "in (0, 1]", p.kept_frequencies)
        check(p.buckets >= 2, "model.position.buckets", "at least 2", p.buckets)
        check(p.max_distance > p.buckets // 2, "model.position.max_distance",
              f"above buckets / 2 = {p.buckets // 2} (the exact buckets)", p.max_distance)
        defaults = PositionConfig()
        for key, owner in (("scaling", "rope"), ("rotary_fraction", "rope"), ("kept_frequencies", "rope"),
                           ("local_theta", "rope"), ("buckets", "t5"), ("max_distance", "t5")):
            if getattr(p, key) != getattr(defaults, key) and p.type != owner:
                raise UserError(f"model.position.{key} applies to {owner} only, not {p.type!r}")
        check(self.sliding_window is None or self.sliding_window >= 1, "model.sliding_window", ">= 1 or null",
              self.sliding_window)
        if p.layer_pattern is not None:
            if p.type == "nope":
                raise UserError("model.position.layer_pattern mixes model.position.type with nope layers; with type "
                                "nope every layer is one already")
            bad = [e for e in p.pattern() if e not in (p.type, "nope")]
            if bad:
                raise UserError(f"model.position.layer_pattern: {bad[0]!r} is not {p.type} or nope (each comma-"
                                f"separated entry is model.position.type or nope, e.g. "
                                f"{p.type},{p.type},{p.type},nope)")
            check(len(p.pattern()) <= self.n_layers, "model.position.layer_pattern",
                  f"at most model.n_layers = {self.n_layers} entries", p.layer_pattern)
        self.validate_layer_types()
        check(0 < p.floor_scale < math.inf, "model.position.floor_scale", "a finite number > 0", p.floor_scale)
        check(0 <= p.attn_scale < math.inf, "model.position.attn_scale", "a finite number >= 0", p.attn_scale)
        for key in ("floor_scale", "attn_scale"):
            if getattr(p, key) != getattr(defaults, key) and not p.nope_temperature:
                raise UserError(f"model.position.{key} applies to model.position.nope_temperature only, which is off")
        if p.nope_temperature and not any(self.nope_layers):
            raise UserError(f"model.position.nope_temperature scales the queries of layers without positions, and "
                            f"this {p.type} model has none (add nope entries to model.position.layer_pattern)")

    def validate_layer_types(self) -> None:
        """layer_types: one known entry per layer, not beside layer_pattern, a window for its sliding layers; and
        model.position.local_theta only with them."""
        p, types = self.position, self.layer_types
        if p.local_theta is not None:
            positive(p.local_theta, "model.position.local_theta")
            if types is None:
                raise UserError("model.position.local_theta is the base of the sliding layers of model.layer_types, "
                                "which is unset")
        if types is None:
            return
        if p.layer_pattern is not None:
            raise UserError("model.layer_types and model.position.layer_pattern both say what each layer is; give one")
        check(len(types) == self.n_layers, "model.layer_types", f"one entry per layer ({self.n_layers} entries)",
              len(types))
        bad = [t for t in types if t not in LAYER_TYPES]
        if bad:
            raise UserError(f"model.layer_types: {bad[0]!r} is not a layer type; each entry is "
                            f"{' or '.join(LAYER_TYPES)}")
        if "sliding_attention" in types and self.sliding_window is None:
            raise UserError("model.layer_types lists sliding_attention layers, which need model.sliding_window (the "
                            "keys each query reads)")


@dataclass
class TrainPositions:
    """The positions each training sequence gets (data/train_positions.py); evaluation and generation always
    use contiguous positions 0, 1, ..."""
    type: Literal["contiguous", "randomized", "pose"] = "contiguous"
    max_position: int | None = None  # randomized, pose: positions drawn below it (pose: the target length)
    chunks: int = 2  # pose: chunks of the window, each shifted by its own skip (the PoSE paper's default)

    def validate(self) -> None:
        if self.type == "contiguous":
            check(self.max_position is None, "train.positions.max_position", "null for contiguous positions",
                  self.max_position)
        elif self.max_position is None:
            raise UserError(f"train.positions: {self.type} positions need max_position (the largest position + 1, "
                            f"e.g. {{type: {self.type}, max_position: 1024}})")
        check(self.chunks >= 1, "train.positions.chunks", ">= 1", self.chunks)
        if self.chunks != 2 and self.type != "pose":
            raise UserError(f"train.positions.chunks applies to pose only, not {self.type!r}")


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
    keep_checkpoints: int = 1  # the newest N checkpoints are kept, plus the best-validation weights
    init_from: str | None = None  # a run directory or hf:PATH to start from (context-extension fine-tuning)
    # tokens per training sequence; None: model.max_seq_len. Shorter windows with train.positions spanning the
    # whole context are PoSE's way to extend a context at the cost of short windows.
    seq_len: int | None = None
    positions: TrainPositions = field(default_factory=TrainPositions)

    def validate(self) -> None:
        for key in ("batch_size", "grad_accum", "max_steps", "log_every", "eval_every", "ckpt_every", "eval_tokens",
                    "keep_checkpoints"):
            check(getattr(self, key) >= 1, f"train.{key}", ">= 1", getattr(self, key))
        check(self.decay_steps is None or self.decay_steps >= 1, "train.decay_steps", ">= 1 or null", self.decay_steps)
        check(self.seq_len is None or self.seq_len >= 1, "train.seq_len", ">= 1 or null", self.seq_len)
        check(self.warmup_steps >= 0, "train.warmup_steps", ">= 0", self.warmup_steps)
        check(0 < self.lr < math.inf, "train.lr", "a finite number > 0", self.lr)
        check(0 <= self.min_lr <= self.lr, "train.min_lr", f"in [0, train.lr = {self.lr}]", self.min_lr)
        for key in ("beta1", "beta2"):
            check(0 < getattr(self, key) < 1, f"train.{key}", "in (0, 1)", getattr(self, key))
        for key in ("weight_decay", "grad_clip"):
            check(0 <= getattr(self, key) < math.inf, f"train.{key}", "a finite number >= 0", getattr(self, key))
        check(self.init_from is None or bool(self.init_from), "train.init_from", "a run directory or null",
              self.init_from)
        self.positions.validate()


@dataclass
class Config:
    """A training run: what train.py reads from YAML + overrides and writes as the run's config.yaml."""
    run: RunConfig = field(default_factory=RunConfig)
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def resolve(self) -> Config:
        """Check every section and fill model.vocab_size from data.vocab_size."""
        self.run.validate()
        self.data.validate()
        self.train.validate()
        if self.model.vocab_size is None:
            self.model.vocab_size = self.data.vocab_size
        elif self.model.vocab_size != self.data.vocab_size:
            raise UserError(f"model.vocab_size ({self.model.vocab_size}) differs from data.vocab_size "
                            f"({self.data.vocab_size}); set data.vocab_size only")
        self.model.validate()
        t = self.train
        if t.seq_len is None:
            t.seq_len = self.model.max_seq_len
        elif t.seq_len > self.model.max_seq_len:
            raise UserError(f"train.seq_len ({t.seq_len}) must be at most model.max_seq_len ({self.model.max_seq_len}), "
                            f"the context the model is made for")
        p = t.positions
        if p.max_position is not None and p.max_position < self.model.max_seq_len:
            raise UserError(f"train.positions.max_position ({p.max_position}) must be at least model.max_seq_len "
                            f"({self.model.max_seq_len}): a sequence needs that many distinct positions")
        return self


def _check_type(value: Any, tp: Any, key: str) -> Any:
    """Return `value` converted to `tp`, or raise UserError naming `key`."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in typing.get_args(tp):
            return None
        errors = []
        for arg in typing.get_args(tp):
            if arg is type(None):
                continue
            try:
                return _check_type(value, arg, key)
            except UserError as e:
                errors.append(str(e))
        if len(errors) == 1:
            raise UserError(errors[0])
        raise UserError(f"{key}: wrong type {type(value).__name__} ({value!r})")
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise UserError(f"{key}: {value!r} is not one of {', '.join(map(str, typing.get_args(tp)))}")
        return value
    if tp is ScalingConfig:
        return parse_scaling(value, key)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise UserError(f"{key}: expected a mapping, got {type(value).__name__} ({value!r})")
        return from_dict(tp, value, key)
    if origin is list:
        if not isinstance(value, list):
            raise UserError(f"{key}: expected a list, got {type(value).__name__} ({value!r})")
        (item,) = typing.get_args(tp)
        return [_check_type(v, item, f"{key}[{i}]") for i, v in enumerate(value)]
    if tp is float and not isinstance(value, bool):
        if isinstance(value, int):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads 1e4 as a string
            try:
                return float(value)
            except ValueError:
                pass
    expected = origin or tp
    if expected is Any:
        return value
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise UserError(f"{key}: expected {getattr(expected, '__name__', expected)}, "
                          f"got {type(value).__name__} ({value!r})")
    return value


def from_dict(cls, data: dict, prefix: str = ""):
    """Build dataclass `cls` from a (nested) dict, rejecting unknown keys and wrong types."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - names)
    if unknown:
        key = f"{prefix}.{unknown[0]}" if prefix else unknown[0]
        raise UserError(f"unknown config key {key!r}; valid keys here: {', '.join(sorted(names))}")
    kwargs = {k: _check_type(v, hints[k], f"{prefix}.{k}" if prefix else k) for k, v in data.items()}
    return cls(**kwargs)


def to_dict(obj) -> dict:
    """A config as nested plain values (what config.yaml holds); a scaling keeps only the keys it sets."""
    out = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, ScalingConfig):
            value = value.to_dict()
        elif dataclasses.is_dataclass(value):
            value = to_dict(value)
        out[f.name] = value
    return out


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply `dotted.key=value` overrides (values parsed as YAML) to a nested dict in place."""
    for item in overrides:
        if "=" not in item:
            raise UserError(f"override {item!r} is not of the form dotted.key=value")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise UserError(f"override {key}: cannot parse {raw!r} as YAML ({e.problem})") from None
        node = data
        *parents, leaf = key.split(".")
        for i, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise UserError(f"override {key}: {'.'.join(parents[:i + 1])} is not a section")
        node[leaf] = value
    return data


def read_yaml(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text (a config is a YAML file)") from None
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of sections at the top level")
    return data


def load_config(cls, path: str | Path | None, overrides: list[str] = ()):
    """YAML file (or defaults when `path` is None) + dotted overrides -> dataclass `cls`."""
    data = read_yaml(path) if path is not None else {}
    return from_dict(cls, apply_overrides(data, list(overrides)))
