"""What a run computes on, by name, without importing torch: device names, compute precisions and CPU threads.

The runner and the stage configs check these names before any work; lib.common.device turns them into torch objects.
"""

from __future__ import annotations

import os

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def check_device_name(name) -> None:
    """`name` is "cpu", "cuda" or "cuda:N" (whether a GPU is visible is lib.common.device.get_device's check)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"device={name!r} is not a device name; use 'cpu' or 'cuda'")
    if name != "cpu" and not name.startswith("cuda"):
        raise ValueError(f"device={name!r} is not supported; use 'cpu' or 'cuda'")


def check_precision(name: str) -> None:
    if name not in PRECISIONS:
        raise ValueError(f"precision={name!r} is unknown; use one of {PRECISIONS}")


def default_threads() -> int:
    """OMP_NUM_THREADS when it is set to a positive integer, otherwise the number of cores this process may use."""
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)
