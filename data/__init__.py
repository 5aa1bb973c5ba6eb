"""Text sources -> sentencepiece tokenizer -> token shards with document boundaries -> batches."""
from data.shards import DataConfig, prepare
from data.tokenizer import Tokenizer
from data.tokens import TokenData

__all__ = ["DataConfig", "prepare", "TokenData", "Tokenizer"]
