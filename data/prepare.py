"""Prepare the data of a config ahead of training:

    python -m data.prepare --config configs/tiny.yaml [data.vocab_size=8192 ...]

The work lives in data/shards.py; this module is its command line (and re-exports `prepare`).
"""
from __future__ import annotations

import sys

from data.shards import DataConfig, prepare
from data.tokens import TokenData
from model.config import ArgumentParser, ConfigError, apply_overrides, from_dict, read_yaml

__all__ = ["DataConfig", "prepare", "main"]


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description="Tokenize a config's data source into cached token shards.")
    parser.add_argument("--config", required=True, help="YAML config; only its data: section is used")
    parser.add_argument("overrides", nargs="*", help="dotted.key=value, e.g. data.vocab_size=8192")
    args = parser.parse_args(argv)
    try:
        raw = apply_overrides(read_yaml(args.config), args.overrides)
        section = raw.get("data") or {}
        if not isinstance(section, dict):
            raise ConfigError(f"data: expected a mapping of data keys, got {section!r}")
        cfg = from_dict(DataConfig, section, "data")
        cfg.validate()
        path = prepare(cfg)
        print(path)
        for split in ("train", "val", "test"):
            data = TokenData(path, split)
            print(f"{split:>5}: {len(data):>12,} tokens in {data.n_docs:,} documents")
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
