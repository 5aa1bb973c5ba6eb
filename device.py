"""Where the model runs: device auto-detection and mixed precision, one definition for every CLI."""
from __future__ import annotations

import contextlib

import torch

from config import UserError


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


def autocast(device: torch.device):
    """bf16 autocast on CUDA; full precision elsewhere. A fresh context for each `with`."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
