"""Peak memory of a block of work, the same measure for the benchmark and the evaluation."""
from __future__ import annotations

import contextlib
import os
import resource
import sys
import threading
import time
from pathlib import Path

import torch

from device import release_freed_host_memory

STATM = Path("/proc/self/statm")


def _rss() -> int:
    return int(STATM.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakMemory(contextlib.AbstractContextManager):
    """Peak memory in use inside the block, in MiB (`.mib`), model and all: on CUDA the allocator's
    peak; on a Linux CPU the process's resident set size sampled every 2 ms, from a heap trimmed of
    the freed blocks that every command keeps for reuse (device.keep_freed_host_memory); elsewhere
    the process's lifetime peak RSS (ru_maxrss)."""

    def __init__(self, device: torch.device):
        self.device, self.mib = device, None

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        elif STATM.exists():
            release_freed_host_memory()
            self.peak, self.running = _rss(), True
            self.thread = threading.Thread(target=self._sample, daemon=True)
            self.thread.start()
        return self

    def _sample(self):
        while self.running:
            self.peak = max(self.peak, _rss())
            time.sleep(0.002)

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.mib = torch.cuda.max_memory_allocated(self.device) / 2 ** 20
        elif STATM.exists():
            self.running = False
            self.thread.join()
            self.mib = max(self.peak, _rss()) / 2 ** 20
        else:  # ru_maxrss is KiB on Linux, bytes on macOS
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            self.mib = peak / 2 ** 20 if sys.platform == "darwin" else peak / 2 ** 10
        return False
