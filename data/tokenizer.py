"""A sentencepiece BPE tokenizer trained on the training split.

Settings are chosen so that `decode(encode(text)) == text` for any text: no normalisation, no
stripped or collapsed spaces, no dummy prefix, and byte fallback for characters outside the vocab
(newlines, rare accents, emoji become UTF-8 byte tokens).
"""
from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

import sentencepiece as spm

from config import UserError

UNK_ID, BOS_ID, EOS_ID = 0, 1, 2

# Everything here goes into the dataset cache key: changing a setting retrains the tokenizer.
TOKENIZER_SETTINGS = dict(
    model_type="bpe",
    byte_fallback=True,
    unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=-1,
    split_digits=True,
    normalization_rule_name="identity",
    remove_extra_whitespaces=False,
    # A dummy prefix would make a word after a newline ("\nThe") tokenize differently from the
    # same word at the start of a training line ("▁The"), and break exact round trips.
    add_dummy_prefix=False,
    allow_whitespace_only_pieces=True,  # indentation in verse and code
    character_coverage=0.9995,
    max_sentence_length=1 << 16,  # bytes; longer lines are cut into pieces before training
    input_sentence_size=2_000_000,  # a random sample of lines is plenty and keeps training fast
    shuffle_input_sentence=True,
    seed=0,
)


MAX_TRAINING_CHARS = 200_000_000  # the tokenizer learns from at most this much of the training split


def training_lines(texts):
    """Sentencepiece learns from lines; a newline never becomes part of a piece (it falls back to a byte).
    It holds every line it is given in memory, so a larger corpus gives it only its first
    MAX_TRAINING_CHARS characters."""
    limit = TOKENIZER_SETTINGS["max_sentence_length"] // 4  # characters, at most 4 bytes each
    budget = MAX_TRAINING_CHARS
    for text in texts:
        for line in str(text).splitlines():
            for i in range(0, len(line), limit):
                if budget <= 0:
                    return
                budget -= len(line[i:i + limit])
                yield line[i:i + limit]


def train_tokenizer(texts, vocab_size: int, path_prefix: Path, verbose: bool = False) -> Path:
    """Train on `texts` and write `<path_prefix>.model`; returns that path."""
    settings = dict(TOKENIZER_SETTINGS)
    spm.set_random_generator_seed(settings.pop("seed"))
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=training_lines(texts), model_prefix=str(path_prefix), vocab_size=vocab_size,
            num_threads=os.cpu_count() or 1, minloglevel=0 if verbose else 2, **settings)
    except RuntimeError as e:
        message = str(e).strip().splitlines()[-1]
        if "Vocabulary size" in message:  # e.g. "Vocabulary size too high (5000). Please set it to a value <= 356."
            message = message[message.index("Vocabulary size"):]
            raise UserError(f"data.vocab_size={vocab_size} does not fit this corpus: {message}") from None
        raise UserError(f"sentencepiece could not train a tokenizer: {message}") from None
    return Path(f"{path_prefix}.model")


class Tokenizer:
    """encode/decode with the ids fixed at unk=0, bos=1, eos=2.

    Streaming: `decode` of a prefix of the ids is a prefix of the full text, except that a character
    split across byte tokens decodes to U+FFFD until its last byte arrives. So a generator streams
    by decoding all ids so far and printing the new suffix, holding back while it ends in U+FFFD:

        text = tok.decode(ids)
        if not text.endswith("\\ufffd"):
            print(text[len(shown):], end="", flush=True)
            shown = text
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise UserError(f"tokenizer model not found: {self.path}")
        try:
            self.sp = spm.SentencePieceProcessor(model_file=str(self.path))
        except (RuntimeError, OSError) as e:  # sentencepiece reports a malformed model as RuntimeError
            raise UserError(f"corrupt tokenizer model {self.path}: {str(e).splitlines()[0]}") from None

    @property
    def vocab_size(self) -> int:
        return self.sp.vocab_size()

    @property
    def bos_id(self) -> int:
        return self.sp.bos_id()

    @property
    def eos_id(self) -> int:
        return self.sp.eos_id()

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        return [self.bos_id] * bos + self.sp.encode(text) + [self.eos_id] * eos

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Encode many texts at once on all cores (sentencepiece's own threads)."""
        return self.sp.encode(texts, num_threads=os.cpu_count() or 1)

    def decode(self, ids: list[int]) -> str:
        """Text of `ids`; BOS/EOS (control tokens) decode to nothing."""
        return self.sp.decode([int(i) for i in ids])

    def piece(self, i: int) -> str:
        """Token i as text, a leading space where its piece starts a word (eval.probe's candidate key words)."""
        return self.sp.id_to_piece(i).replace("\u2581", " ")

    @functools.cached_property
    def fingerprint(self) -> str:
        """What identifies its encoding (the data cache key of text encoded with it): its model file's sha256."""
        return hashlib.sha256(self.path.read_bytes()).hexdigest()
