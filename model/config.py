"""Typed configuration: dataclasses are the source of truth, YAML is how a user writes them.

`load_config(Config, "configs/tiny.yaml", ["train.max_steps=50"])` reads the YAML, applies
dotted overrides (values parsed as YAML scalars) and builds the dataclasses, rejecting unknown
keys and wrong types with a `ConfigError` whose message names the key.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml


class ConfigError(ValueError):
    """A mistake in a config file or override; its message is one line that names the key."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad command line is one line on stderr (exit code 2), not usage + error."""

    def error(self, message):
        self.exit(2, f"error: {message} (see --help)\n")


def check(ok: bool, key: str, accepts: str, value: Any) -> None:
    """Raise ConfigError naming `key` and what it accepts unless `ok`."""
    if not ok:
        raise ConfigError(f"{key} must be {accepts}, got {value!r}")


def positive(value, key: str) -> None:
    check(value > 0, key, "> 0", value)  # `not NaN > 0`, so NaN is refused too


@dataclass
class PositionConfig:
    type: str = "rope"
    theta: float = 10000.0
    # RoPE scaling with Hugging Face's key names, e.g. {type: yarn, factor: 4}. Applied at load time
    # for evaluation and generation, or here in a context-extension fine-tune.
    scaling: dict | None = None


@dataclass
class ModelConfig:
    vocab_size: int | None = None  # filled in from data.vocab_size by train.py
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 2
    max_seq_len: int = 256
    ffn_hidden: int | None = None  # SwiGLU width; None -> 8/3 * d_model rounded up to a multiple of 64
    norm_eps: float = 1e-5
    dropout: float = 0.0
    init_std: float = 0.02  # std of every weight at init (GPT-2); sets the token scale additive encodings match
    position: PositionConfig = field(default_factory=PositionConfig)

    def __post_init__(self):
        if self.ffn_hidden is None:
            self.ffn_hidden = 64 * -(-(8 * self.d_model // 3) // 64)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def validate(self) -> None:
        from .positions import ENCODINGS  # the registry (positions.py imports this module)
        from .rope import rope_frequencies
        if self.vocab_size is not None:
            positive(self.vocab_size, "model.vocab_size")
        for key in ("d_model", "n_layers", "n_heads", "n_kv_heads", "max_seq_len", "ffn_hidden", "norm_eps",
                    "init_std"):
            positive(getattr(self, key), f"model.{key}")
        check(0 <= self.dropout < 1, "model.dropout", "in [0, 1)", self.dropout)
        check(math.isfinite(self.init_std), "model.init_std", "finite", self.init_std)
        positive(self.position.theta, "model.position.theta")
        if self.position.type not in ENCODINGS:
            raise ConfigError(f"model.position.type: unknown encoding {self.position.type!r}; "
                              f"choose one of {', '.join(sorted(ENCODINGS))}")
        if self.d_model % self.n_heads:
            raise ConfigError(f"model.d_model ({self.d_model}) must be divisible by model.n_heads ({self.n_heads})")
        if self.n_heads % self.n_kv_heads:
            raise ConfigError(f"model.n_heads ({self.n_heads}) must be a multiple of model.n_kv_heads ({self.n_kv_heads})")
        if self.position.type == "rope" and self.head_dim % 2:
            raise ConfigError(f"model.position.type=rope needs an even head dimension, got "
                              f"d_model/n_heads = {self.head_dim}")
        if self.position.scaling is not None:
            if self.position.type != "rope":
                raise ConfigError(f"model.position.scaling applies to rope only, not {self.position.type!r}")
            try:  # the model fills in the original length the same way (positions.Rope)
                rope_frequencies(self.head_dim, self.position.theta,
                                 {"original_max_position_embeddings": self.max_seq_len, **self.position.scaling})
            except (ValueError, TypeError) as e:
                raise ConfigError(f"model.position.scaling: {e}") from None


def _check_type(value: Any, tp: Any, key: str) -> Any:
    """Return `value` converted to `tp`, or raise ConfigError naming `key`."""
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
            except ConfigError as e:
                errors.append(str(e))
        if len(errors) == 1:
            raise ConfigError(errors[0])
        raise ConfigError(f"{key}: wrong type {type(value).__name__} ({value!r})")
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise ConfigError(f"{key}: {value!r} is not one of {', '.join(map(str, typing.get_args(tp)))}")
        return value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {type(value).__name__} ({value!r})")
        return from_dict(tp, value, key)
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
        raise ConfigError(f"{key}: expected {getattr(expected, '__name__', expected)}, "
                          f"got {type(value).__name__} ({value!r})")
    return value


def from_dict(cls, data: dict, prefix: str = ""):
    """Build dataclass `cls` from a (nested) dict, rejecting unknown keys and wrong types."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - names)
    if unknown:
        key = f"{prefix}.{unknown[0]}" if prefix else unknown[0]
        raise ConfigError(f"unknown config key {key!r}; valid keys here: {', '.join(sorted(names))}")
    kwargs = {k: _check_type(v, hints[k], f"{prefix}.{k}" if prefix else k) for k, v in data.items()}
    return cls(**kwargs)


def to_dict(obj) -> dict:
    return dataclasses.asdict(obj)


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply `dotted.key=value` overrides (values parsed as YAML) to a nested dict in place."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form dotted.key=value")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise ConfigError(f"override {key}: cannot parse {raw!r} as YAML ({e.problem})") from None
        node = data
        *parents, leaf = key.split(".")
        for i, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {key}: {'.'.join(parents[:i + 1])} is not a section")
        node[leaf] = value
    return data


def read_yaml(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of sections at the top level")
    return data


def load_config(cls, path: str | Path | None, overrides: list[str] = ()):
    """YAML file (or defaults when `path` is None) + dotted overrides -> dataclass `cls`."""
    data = read_yaml(path) if path is not None else {}
    return from_dict(cls, apply_overrides(data, list(overrides)))
