"""Documents -> tokenizer + token shards, cached by a key of everything that affects the bytes.

`prepare_shards(cfg)` returns `<cache_dir>/<key>/` holding

    tokenizer.model            sentencepiece BPE trained on the training split (+ .vocab, for reading), unless
                               a pretrained model's tokenizer was given (its text is encoded with that)
    {split}.bin                every document as [BOS] + tokens + [EOS], back to back (uint16 or uint32)
    {split}.docs.npy           int64 document offsets into {split}.bin, n_docs + 1 of them, from 0
    {split}.names.json         document names
    meta.json                  source, vocab, dtype, token and document counts
    done                       written last: a directory without it is never used

The directory is built under a temporary name and renamed into place, so a run killed half way
leaves nothing that looks finished; processes building the same key at once take turns on <key>.lock, and the
later ones use the shards the first built.
"""
from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
from tqdm import tqdm

from config import DataConfig
from data.sources import SHAKESPEARE_SHA256, SPLITS, Spool, load_documents, local_files
from data.tokenizer import TOKENIZER_SETTINGS, Tokenizer, train_tokenizer

FORMAT_VERSION = 1  # bump when the layout or the way documents are read changes


def source_fingerprint(source: str) -> dict:
    """What identifies the source's content without reading it: for local files their absolute
    paths, sizes and mtimes, so an edited file gets a new cache entry."""
    if source == "shakespeare":
        return {"source": source, "sha256": SHAKESPEARE_SHA256}
    if source.startswith("hf:"):
        return {"source": source}
    root, files = local_files(source)
    return {"source": str(root), "pattern": source if glob.has_magic(source) else None,
            "files": [(f.relative_to(root).as_posix(), f.stat().st_size, f.stat().st_mtime_ns) for f in files]}


def dataset_key(cfg: DataConfig, tokenizer=None) -> str:
    """The cache key of (source, splits, tokenizer): the tokenizer trained here (its vocab and settings), or
    a given one (its fingerprint)."""
    encoding = ({"vocab_size": cfg.vocab_size, "tokenizer": TOKENIZER_SETTINGS} if tokenizer is None
                else {"tokenizer_fingerprint": tokenizer.fingerprint})
    blob = json.dumps({"format": FORMAT_VERSION, "data": source_fingerprint(cfg.source), "text_field": cfg.text_field,
                       "val_fraction": cfg.val_fraction, "test_fraction": cfg.test_fraction,
                       "max_documents": cfg.max_documents, **encoding}, sort_keys=True)
    name = Path(cfg.source.removeprefix("hf:").rstrip("/")).name  # a readable prefix; the hash decides
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)[:32].strip("-.") or "data"
    vocab = cfg.vocab_size if tokenizer is None else f"tok{tokenizer.vocab_size}"
    return f"{slug}-{vocab}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def prepare_shards(cfg: DataConfig, progress: bool = True, tokenizer=None) -> Path:
    """Build (or find in the cache) the tokenizer and token shards for `cfg`; returns their directory.
    `progress=False` builds silently (no status lines, no progress bars). With `tokenizer` (a pretrained
    model's own, with data.Tokenizer's encode_batch, bos_id, eos_id, vocab_size and fingerprint), the
    documents are encoded with it and no tokenizer is trained; a document then starts with BOS only where
    that tokenizer starts a text with one (bos_id None: it does not)."""
    cfg.validate()
    cache = Path(cfg.cache_dir)
    key = dataset_key(cfg, tokenizer)
    out = cache / key
    if (out / "done").exists():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f"{key}.lock", "a") as lock:
        # another process building the same shards (two trainings, DDP ranks, test workers): wait and use theirs
        fcntl.flock(lock, fcntl.LOCK_EX)
        return out if (out / "done").exists() else build_shards(cfg, tokenizer, cache, key, progress)


def build_shards(cfg: DataConfig, tokenizer, cache: Path, key: str, progress: bool) -> Path:
    out = cache / key
    say = print if progress else (lambda *a, **k: None)
    remove_abandoned(cache, key)
    tmp = cache / f"{key}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        t0 = time.time()
        say(f"data: reading {cfg.source} ...", flush=True)
        spool = Spool(tmp / "documents.spool")  # the texts wait on disk, not in memory
        docs = load_documents(cfg.source, cfg.cache_dir, cfg.val_fraction, cfg.test_fraction, cfg.max_documents,
                              cfg.text_field, spool)
        if tokenizer is None:
            say(f"data: {', '.join(f'{len(docs[s])} {s}' for s in SPLITS)} documents; training sentencepiece "
                f"BPE (vocab {cfg.vocab_size}) on the {len(docs['train'])} training documents ...", flush=True)
        tok = tokenizer or Tokenizer(train_tokenizer((t for _, t in docs["train"]), cfg.vocab_size, tmp / "tokenizer"))
        dtype = np.uint16 if tok.vocab_size < 2**16 else np.uint32
        counts = {split: write_split(tok, docs[split], tmp, split, dtype, progress) for split in SPLITS}
        spool.close()
        (tmp / "documents.spool").unlink()
        meta = {"source": cfg.source, "key": key, "format_version": FORMAT_VERSION, "config": asdict(cfg),
                "vocab_size": tok.vocab_size, "dtype": np.dtype(dtype).name, "bos_id": tok.bos_id,
                "eos_id": tok.eos_id, "tokens": {s: c[0] for s, c in counts.items()},
                "documents": {s: c[1] for s, c in counts.items()}}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
        (tmp / "done").write_text("")
        fsync_dir(tmp)
        if out.exists():  # an old unfinished layout
            shutil.rmtree(out)
        os.rename(tmp, out)
        say(f"data: {', '.join(f'{s} {n:,}' for s, n in meta['tokens'].items())} tokens in "
            f"{time.time() - t0:.1f}s -> {out}", flush=True)
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_split(tok: Tokenizer, docs: list, out: Path, split: str, dtype, progress: bool,
                chunk_docs: int = 256, chunk_bytes: int = 1 << 16) -> tuple[int, int]:
    """Encode `docs` into out/{split}.bin and its index, a batch of at most chunk_docs documents or about
    chunk_bytes of text at a time; returns (n_tokens, n_docs)."""
    offsets = [0]
    head, tail = [i for i in (tok.bos_id,) if i is not None], [i for i in (tok.eos_id,) if i is not None]

    def batches():
        batch, size = [], 0
        for _, text in docs:
            batch.append(text)
            size += len(text)
            if len(batch) == chunk_docs or size >= chunk_bytes:
                yield batch
                batch, size = [], 0
        if batch:
            yield batch
    with open(out / f"{split}.bin", "wb") as f, \
            tqdm(total=len(docs), desc=f"data: tokenizing {split}", unit="doc", disable=None if progress else True) as bar:  # None: off when not a terminal
        for batch in batches():
            for ids in tok.encode_batch([str(text) for text in batch]):
                tokens = np.array([*head, *ids, *tail], dtype=dtype)
                tokens.tofile(f)
                offsets.append(offsets[-1] + len(tokens))
            bar.update(len(batch))
        f.flush()
        os.fsync(f.fileno())
    np.save(out / f"{split}.docs.npy", np.array(offsets, dtype=np.int64))
    (out / f"{split}.names.json").write_text(json.dumps([name for name, _ in docs]) + "\n")
    return offsets[-1], len(docs)


def remove_abandoned(cache: Path, key: str) -> None:
    """Delete temporary directories left by runs that were killed while building this key."""
    for tmp in cache.glob(f"{key}.tmp-*"):
        pid = tmp.name.rsplit("-", 1)[1]
        if not (pid.isdigit() and pid_alive(int(pid))):
            shutil.rmtree(tmp, ignore_errors=True)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        pass
    return True


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
