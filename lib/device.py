"""Device selection shared by every stage: "cpu", "cuda" or "cuda:N"; never a silent fallback to the CPU."""
from __future__ import annotations

import torch


def get_device(name: str = "cpu") -> torch.device:
    """The torch.device for `name`; "cuda" without a visible GPU is an error, not a quiet CPU run."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"device={name!r} is not a device name; use 'cpu' or 'cuda'")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise RuntimeError(f"device={name!r} requested but no CUDA GPU is visible; use params/cpu.yaml")
        return torch.device(name)
    if name != "cpu":
        raise ValueError(f"device={name!r} is not supported; use 'cpu' or 'cuda'")
    return torch.device("cpu")
