"""Prepared token shards -> training batches and evaluation windows.

Training batches are random windows that may cross document boundaries (BOS/EOS mark them), as in
nanoGPT. Evaluation windows stay inside one document, so perplexity at length T measures what the
model does with T tokens of real context (the ALiBi paper's protocol, 2108.12409).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from config import UserError
from data.sources import SPLITS

MASK64 = (1 << 64) - 1


class TokenData:
    """One split of a `prepare_shards()` directory, memory-mapped."""

    def __init__(self, path: str | Path, split: str):
        path = Path(path)
        if split not in SPLITS:
            raise UserError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
        if not (path / "done").exists():
            raise UserError(f"{path} is not a prepared data directory (run python -m data.prepare)")
        self.path, self.split = path, split
        self.meta = json.loads((path / "meta.json").read_text())
        self.doc_offsets = np.load(path / f"{split}.docs.npy")
        self.names = json.loads((path / f"{split}.names.json").read_text())
        n = int(self.doc_offsets[-1])
        # np.memmap refuses an empty file; an empty split is a valid (if useless) outcome
        self.tokens = (np.memmap(path / f"{split}.bin", dtype=self.meta["dtype"], mode="r", shape=(n,))
                       if n else np.zeros(0, dtype=self.meta["dtype"]))

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def n_docs(self) -> int:
        return len(self.doc_offsets) - 1

    def batch(self, batch_size: int, seq_len: int, seed: int, step: int, micro_step: int = 0,
              micro_steps: int = 1, rank: int = 0, world_size: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """Random windows (x, y), each (batch_size, seq_len) int64, y = x shifted by one.

        A pure function of (seed, step): the whole global batch of batch_size * micro_steps *
        world_size windows is drawn from one generator, and each (micro_step, rank) takes its own
        slice. So a resumed run sees the same data, and the same global batch split over 1 or 8
        GPUs, or over more gradient-accumulation steps, covers the same windows.
        """
        if len(self) < seq_len + 1:
            raise UserError(f"{self.split} split has {len(self)} tokens, fewer than seq_len + 1 = {seq_len + 1}")
        g = torch.Generator().manual_seed((seed * 1_000_003 + step) & MASK64)
        starts = torch.randint(0, len(self) - seq_len, (batch_size * micro_steps * world_size,), generator=g)
        first = (micro_step * world_size + rank) * batch_size
        starts = starts[first:first + batch_size].numpy()
        buf = self.tokens[starts[:, None] + np.arange(seq_len + 1)].astype(np.int64)  # (B, T+1)
        x = torch.from_numpy(buf[:, :-1].copy())
        y = torch.from_numpy(buf[:, 1:].copy())
        return x, y

    def eval_windows(self, seq_len: int, max_tokens: int | None = None,
                     stride: int | None = None) -> list[tuple[int, int, int]]:
        """Windows (start, end, n_scored) inside single documents, end - start = seq_len + 1.

        The model reads tokens[start:end-1] and predicts tokens[start+1:end]; only the last
        `n_scored` predictions count. Non-overlapping by default (stride = seq_len, all scored).
        With a smaller stride the windows slide and every window, a document's first included,
        scores only its last `stride` targets: each scored target has at least seq_len - stride
        tokens of context and is scored once, and the first seq_len - stride targets of a document
        are never scored. Documents shorter than seq_len + 1 are skipped.

        `max_tokens` caps the scored tokens: windows are taken round-robin over documents (the
        first window of every document, then the second ...) while the total stays within the
        budget, so a small budget still samples every document. Returned in token order.
        """
        stride = seq_len if stride is None else stride
        if not 1 <= stride <= seq_len:
            raise UserError(f"eval stride must be between 1 and seq_len ({seq_len}), got {stride}")
        per_doc = []
        for a, b in zip(self.doc_offsets[:-1].tolist(), self.doc_offsets[1:].tolist()):
            starts = range(a, b - seq_len, stride)  # start + seq_len + 1 <= b
            per_doc.append([(s, s + seq_len + 1, stride) for s in starts])
        if max_tokens is None:
            return [w for windows in per_doc for w in windows]
        chosen, total = [], 0
        for k in range(max((len(w) for w in per_doc), default=0)):
            for windows in per_doc:
                if k < len(windows):
                    if total + windows[k][2] > max_tokens:
                        return sorted(chosen)
                    chosen.append(windows[k])
                    total += windows[k][2]
        return sorted(chosen)

    def span_windows(self, seq_len: int, span: int, max_documents: int | None = None) -> list[tuple[int, int, int]]:
        """Windows (start, end, n_scored), as eval_windows', that score the first `span` targets of each
        document and nothing else: a document at offset a is cut into span // seq_len non-overlapping
        windows from a, so its scored targets are tokens[a+1 : a+span+1] at every seq_len that divides
        span; only the context before each differs. Documents shorter than span + 1 are skipped;
        `max_documents` keeps the first that many of the others, in split order. Returned in token order.
        """
        if span % seq_len:
            raise UserError(f"span ({span}) must be a multiple of seq_len ({seq_len})")
        offsets = self.doc_offsets.tolist()
        starts = [a for a, b in zip(offsets[:-1], offsets[1:]) if b - a > span][:max_documents]
        return [(s, s + seq_len + 1, seq_len) for a in starts for s in range(a, a + span, seq_len)]

    def validation(self, seq_len: int, max_tokens: int, batch_size: int) -> list[tuple[None, torch.Tensor, torch.Tensor]]:
        """Fixed validation batches (None, x, y) of non-overlapping windows inside documents, at most
        max_tokens targets in all (train.py's validation loss)."""
        windows = self.eval_windows(seq_len, max_tokens=max_tokens)
        if not windows:
            raise UserError(f"no {self.split} document is longer than model.max_seq_len ({seq_len})")
        out = []
        for i in range(0, len(windows), batch_size):
            chunk = torch.stack([self.window_tensor(s, e) for s, e, _ in windows[i:i + batch_size]])
            out.append((None, chunk[:, :-1], chunk[:, 1:]))
        return out

    def window_tensor(self, start: int, end: int) -> torch.Tensor:
        """tokens[start:end] as a 1-D int64 tensor."""
        return torch.from_numpy(self.tokens[start:end].astype(np.int64))
