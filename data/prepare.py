"""Prepare the data of a config ahead of training:

    python -m data.prepare --config configs/tiny.yaml [data.vocab_size=8192 ...]
    python -m data.prepare --config configs/minimind-26m.yaml --epoch-steps   # prints the steps of one epoch

The command line of `data.prepare_shards` (data/shards.py).
"""
from __future__ import annotations

from config import (
    ArgumentParser,
    DataConfig,
    UserError,
    apply_overrides,
    from_dict,
    is_task_source,
    read_yaml,
    run_cli,
)
from data.shards import prepare_shards
from data.tasks import TaskData
from data.tokens import TokenData


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description="Tokenize a config's data source into cached token shards.")
    parser.add_argument("--config", required=True, help="YAML config; only its data: section is used")
    parser.add_argument("--epoch-steps", action="store_true",
                        help="print only the optimizer steps of one epoch of the training split "
                             "(tokens / (train.batch_size x train.grad_accum x train.seq_len))")
    parser.add_argument("overrides", nargs="*", help="dotted.key=value, e.g. data.vocab_size=8192")
    args = parser.parse_args(argv)
    if args.epoch_steps:
        print(run_cli(lambda: epoch_steps(args.config, args.overrides)))
    else:
        run_cli(lambda: prepare_from_config(args.config, args.overrides))


def epoch_steps(path: str, overrides: list[str]) -> int:
    from config import Config, load_config
    cfg = load_config(Config, path, overrides).resolve()
    if is_task_source(cfg.data.source):
        raise UserError("--epoch-steps: a task source has no epochs (its sequences are generated)")
    tokens = len(TokenData(prepare_shards(cfg.data, progress=False), "train"))
    return max(1, tokens // (cfg.train.batch_size * cfg.train.grad_accum * cfg.train.seq_len))


def prepare_from_config(path: str, overrides: list[str]) -> None:
    raw = apply_overrides(read_yaml(path), overrides)
    section = raw.get("data") or {}
    if not isinstance(section, dict):
        raise UserError(f"data: expected a mapping of data keys, got {section!r}")
    cfg = from_dict(DataConfig, section, "data")
    cfg.validate()
    if is_task_source(cfg.source):
        data = TaskData(cfg)  # checks the task names and the vocabulary
        print(f"{cfg.source}: {', '.join(data.tasks)}; the sequences are generated while training, nothing to prepare")
        return
    shards = prepare_shards(cfg)
    print(shards)
    for split in ("train", "val", "test"):
        data = TokenData(shards, split)
        print(f"{split:>5}: {len(data):>12,} tokens in {data.n_docs:,} documents")


if __name__ == "__main__":
    main()
