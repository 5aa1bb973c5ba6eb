"""Text sources -> sentencepiece tokenizer -> token shards with document boundaries -> batches."""
from data.shards import prepare_shards
from data.tokenizer import Tokenizer
from data.tokens import TokenData

__all__ = ["prepare_shards", "TokenData", "Tokenizer"]
