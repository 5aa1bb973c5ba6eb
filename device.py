"""Where the model runs: device auto-detection, mixed precision and the host-memory settings, one definition for
every CLI; and the peak memory of a block of work, the same measure for the benchmark and the evaluation."""
from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import resource
import sys
import threading
import time
from pathlib import Path

import torch

from config import UserError


DEVICE_HELP = "auto (cuda, then mps, then cpu), cpu, cuda, cuda:N or mps"  # --device of every command


def pick_device(name: str = "auto", key: str = "device") -> torch.device:
    """`auto`: cuda, then mps, then cpu; or cpu, cuda, cuda:N, mps when this machine has it.
    Anything else is a UserError naming `key` (the config key or option the name came from)."""
    if name != "auto":
        try:
            device = torch.device(name)
        except (RuntimeError, TypeError):
            raise UserError(f"{key}: unknown device {name!r}; use auto, cpu, cuda, cuda:N or mps") from None
        if device.type == "cuda":
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if (device.index or 0) >= count:
                raise UserError(f"{key}: {name!r} is not available here ({count} CUDA devices); "
                                  f"use auto or cpu")
        elif device.type == "mps" and not torch.backends.mps.is_available():
            raise UserError(f"{key}: 'mps' is not available here; use auto or cpu")
        elif device.type not in ("cpu", "cuda", "mps"):
            raise UserError(f"{key}: unsupported device {name!r}; use auto, cpu, cuda, cuda:N or mps")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def compiled(model: torch.nn.Module, run) -> torch.nn.Module:
    """The model as `run` (a RunConfig) trains it: torch.compile in run.compile_mode, or the model itself."""
    if not run.compile:
        return model
    return torch.compile(model, mode=None if run.compile_mode == "default" else run.compile_mode)


def autocast_dtype(device: torch.device) -> torch.dtype | None:
    """The precision autocast runs matrix products in on this device: bf16 on CUDA, None (full) elsewhere."""
    return torch.bfloat16 if device.type == "cuda" else None


def autocast(device: torch.device):
    """bf16 autocast on CUDA; full precision elsewhere. A fresh context for each `with`."""
    dtype = autocast_dtype(device)
    return contextlib.nullcontext() if dtype is None else torch.autocast(device.type, dtype=dtype)


@functools.cache
def glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc on Linux (its malloc is what the two functions below tune)."""
    if sys.platform != "linux":
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # musl and others
        return None


def keep_freed_host_memory() -> None:
    """Let glibc's malloc reuse freed CPU memory instead of handing it back to the kernel.

    glibc serves every block above its mmap threshold (dynamic, at most 32 MiB) with a fresh mmap and
    unmaps it on free, and trims the heap top above 128 KiB. A CPU training step allocates and frees
    the same large tensors every time (the logits alone are 64 MiB on studies/text/study.yaml), so each
    step page-faults them in again. With both thresholds raised the blocks stay in the heap: faster
    CPU training for somewhat more peak memory (figures in studies/bench/history.md). Each command that
    trains or evaluates calls it first, by name (a process-wide setting); a no-op without glibc.
    """
    libc = glibc()
    if libc is not None:
        m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
        libc.mallopt(m_mmap_threshold, 1 << 30)
        libc.mallopt(m_trim_threshold, (1 << 31) - 1)


def release_freed_host_memory() -> None:
    """Return the heap's free memory to the kernel now (glibc's malloc_trim), so that a resident-set
    measurement starting here counts the memory in use, not what keep_freed_host_memory kept."""
    libc = glibc()
    if libc is not None:
        libc.malloc_trim(0)


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
