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


class PretrainedTokenizer:
    """data.Tokenizer's methods over a pretrained model's own tokenizer: a `tokenizers` Tokenizer, the form
    transformers' fast tokenizers keep (tokenizer.json). A run converted from a pretrained checkpoint holds
    tokenizer.json and tokenizer_config.json (`from_folder`), so it needs no transformers; an hf: checkpoint's
    comes through transformers (hf/checkpoints.py). `bos_id` is None unless the tokenizer itself begins a text
    with BOS (a Llama-style one does, SmolLM2's does not), so that a document or prompt starts as the
    checkpoint's own tokenizer starts it."""

    FILES = ("tokenizer.json", "tokenizer_config.json")  # what a run directory holds of it

    def __init__(self, backend, bos_token_id: int | None, eos_token_id: int | None):
        self.backend = backend
        self.backend.no_truncation()  # documents are encoded whole; windows are cut from them later
        plain, special = (backend.encode("a", add_special_tokens=flag).ids for flag in (False, True))
        bos = bos_token_id
        self.bos_id = bos if bos is not None and special[:1] == [bos] and plain[:1] != [bos] else None
        self.eos_id = eos_token_id
        self.vocab_size = backend.get_vocab_size(with_added_tokens=True)

    @classmethod
    def from_folder(cls, folder: str | Path) -> PretrainedTokenizer:
        """The tokenizer of a folder holding tokenizer.json and tokenizer_config.json (its BOS and EOS tokens)."""
        import json

        from tokenizers import Tokenizer as Backend
        folder = Path(folder)
        try:
            backend = Backend.from_file(str(folder / "tokenizer.json"))
            settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        except FileNotFoundError as e:
            raise UserError(f"tokenizer file not found: {e.filename}") from None
        except Exception as e:  # tokenizers reports a malformed file as a plain Exception
            raise UserError(f"corrupt tokenizer in {folder}: {(str(e).splitlines() or [type(e).__name__])[0]}") from None

        def token_id(key: str) -> int | None:
            token = settings.get(key)
            token = token.get("content") if isinstance(token, dict) else token
            return None if token is None else backend.token_to_id(token)
        return cls(backend, token_id("bos_token"), token_id("eos_token"))

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        ids = self.backend.encode(text, add_special_tokens=False).ids
        return [self.bos_id] * (bos and self.bos_id is not None) + ids + [self.eos_id] * (eos and self.eos_id is not None)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.backend.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: list[int]) -> str:
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=True)

    def piece(self, i: int) -> str:
        """Token i as text, its leading space included (eval.probe's candidate key words)."""
        return self.backend.decode([int(i)], skip_special_tokens=False)

    @functools.cached_property
    def fingerprint(self) -> str:
        """What identifies its encoding (the data cache key of text encoded with it)."""
        spec = self.backend.to_str() + f"[{self.bos_id}, {self.eos_id}, {self.vocab_size}]"
        return hashlib.sha256(spec.encode()).hexdigest()
