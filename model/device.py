"""Where the model runs: device auto-detection and mixed precision, one definition for every CLI."""
from __future__ import annotations

import contextlib

import torch


def pick_device(name: str = "auto") -> torch.device:
    """`auto`: cuda, then mps, then cpu; anything else as torch names it (cpu, cuda:1 ...)."""
    if name != "auto":
        return torch.device(name)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def autocast(device: torch.device):
    """bf16 autocast on CUDA; full precision elsewhere. A fresh context for each `with`."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
