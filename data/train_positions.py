"""Training positions: what `train.positions` gives each sequence of a batch, a pure function of
(seed, step) like the batches themselves, so a resumed or re-split run sees the same positions.

- contiguous: 0, 1, ..., T-1 for every sequence (None here: the model's default).
- randomized (Ruoss et al., arXiv 2305.16843, section 3): the T positions are a random subset of
  [0, max_position), sorted, drawn anew for every sequence, so the model meets positions and distances
  up to max_position while reading T tokens.
- pose (Zhu et al., arXiv 2309.10400, section 3.2): the window is cut at random into `chunks` pieces;
  piece i keeps its tokens' order and is shifted by a skip u_i, with u_0 = 0 and u_i drawn uniformly
  from [u_(i-1), max_position - T], so positions stay increasing and below max_position (the target
  length), and the distances between pieces cover it.
"""
from __future__ import annotations

import numpy as np
import torch

from config import TrainPositions

SALT = 0x5EED_9051  # keeps the position generator apart from the batch generator of the same (seed, index)


def randomized(rng: np.random.Generator, seq_len: int, max_position: int) -> np.ndarray:
    return np.sort(rng.choice(max_position, size=seq_len, replace=False))


def pose(rng: np.random.Generator, seq_len: int, max_position: int, chunks: int) -> np.ndarray:
    chunks = min(chunks, seq_len)
    cuts = np.sort(rng.choice(np.arange(1, seq_len), size=chunks - 1, replace=False)) if chunks > 1 else []
    skips = np.zeros(seq_len, dtype=np.int64)
    skip = 0
    for cut in cuts:
        skip = int(rng.integers(skip, max_position - seq_len + 1))  # uniform in [previous skip, max_position - T]
        skips[cut:] = skip
    return np.arange(seq_len) + skips


def sample_positions(cfg: TrainPositions, batch_size: int, seq_len: int, seed: int, step: int, micro_step: int = 0,
                     micro_steps: int = 1, rank: int = 0, world_size: int = 1) -> torch.Tensor | None:
    """(batch_size, seq_len) int64 positions for the slice (micro_step, rank) of the global batch of
    `step` (the slice TokenData.batch takes), or None for contiguous positions."""
    if cfg.type == "contiguous":
        return None
    first = (micro_step * world_size + rank) * batch_size
    rows = []
    for index in range(first, first + batch_size):
        rng = np.random.default_rng([SALT, seed, step * batch_size * micro_steps * world_size + index])
        if cfg.type == "randomized":
            rows.append(randomized(rng, seq_len, cfg.max_position))
        else:
            rows.append(pose(rng, seq_len, cfg.max_position, cfg.chunks))
    return torch.from_numpy(np.stack(rows).astype(np.int64))
