"""Text sources -> sentencepiece tokenizer -> token shards with document boundaries -> batches;
or a long-range task source (data/tasks.py) whose sequences are generated, not read."""
from __future__ import annotations

from pathlib import Path

from config import DataConfig, is_task_source
from data.shards import prepare_shards
from data.tasks import TaskData
from data.tokenizer import PretrainedTokenizer, Tokenizer
from data.tokens import TokenData

__all__ = ["open_data", "prepare_shards", "PretrainedTokenizer", "TaskData", "TokenData", "Tokenizer"]


def open_data(cfg: DataConfig, progress: bool = True, tokenizer: Path | None = None
              ) -> tuple[TokenData | TaskData, TokenData | TaskData, Path | None]:
    """(training data, validation data, the tokenizer's file or folder, or None) of a data config: the token shards
    of a text source (prepared or found in the cache) with the tokenizer trained on it, or read with `tokenizer`, a
    pretrained model's own folder (PretrainedTokenizer); or a task source."""
    if is_task_source(cfg.source):
        data = TaskData(cfg)
        return data, data, None
    if tokenizer is not None:
        shards = prepare_shards(cfg, progress, PretrainedTokenizer.from_folder(tokenizer))
        return TokenData(shards, "train"), TokenData(shards, "val"), tokenizer
    shards = prepare_shards(cfg, progress)
    return TokenData(shards, "train"), TokenData(shards, "val"), shards / "tokenizer.model"
