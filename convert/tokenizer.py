"""Our sentencepiece BPE as a Hugging Face fast tokenizer (tokenizer.json + tokenizer_config.json),
so that `AutoTokenizer.from_pretrained` gives exactly `data.Tokenizer`'s ids."""
from __future__ import annotations

import sentencepiece as spm


def bpe_merges(sp: spm.SentencePieceProcessor) -> list[list[str]]:
    """Every split of a learned piece into two pieces, ranked as sentencepiece merges: by the score
    of the merged piece (higher first), then by the ids of its halves."""
    def ordinary(i):
        return not (sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i))
    ids = {sp.id_to_piece(i): i for i in range(sp.vocab_size()) if ordinary(i)}
    ranked = []
    for piece, i in ids.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in ids and right in ids:
                ranked.append((-sp.get_score(i), i, ids[left], ids[right], [left, right]))
    return [merge for *_, merge in sorted(ranked)]


def tokenizer_json(sp: spm.SentencePieceProcessor) -> dict:
    """A `tokenizers` BPE that encodes exactly like our sentencepiece model: no normalisation but
    spaces shown as U+2581, no dummy prefix and no pre-splitting (sentencepiece BPE merges across
    the whole text; its pieces never straddle a word boundary), byte fallback for the rest."""
    special = [i for i in range(sp.vocab_size()) if sp.is_control(i) or sp.is_unknown(i)]
    bos = sp.id_to_piece(sp.bos_id())
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": i, "content": sp.id_to_piece(i), "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True} for i in special],
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "pre_tokenizer": None,
        # Every training document starts with BOS (data/shards.py), so a prompt should too.
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [sp.bos_id()], "tokens": [bos]}},
        },
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
        ]},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": sp.id_to_piece(sp.unk_id()),
            "continuing_subword_prefix": None, "end_of_word_suffix": None,
            "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
            "vocab": {sp.id_to_piece(i): i for i in range(sp.vocab_size())},
            "merges": bpe_merges(sp),
        },
    }


def tokenizer_config(sp: spm.SentencePieceProcessor, max_len: int) -> dict:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": sp.id_to_piece(sp.bos_id()),
        "eos_token": sp.id_to_piece(sp.eos_id()),
        "unk_token": sp.id_to_piece(sp.unk_id()),
        "add_bos_token": True,
        "add_eos_token": False,
        # sentencepiece reads a literal "<s>" in text as characters, never as the control token.
        "split_special_tokens": True,
        "clean_up_tokenization_spaces": False,
        "model_max_length": max_len,
    }
