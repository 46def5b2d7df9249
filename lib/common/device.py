"""Device and compute-precision selection shared by every stage.

Device: "cpu", "cuda" or "cuda:N"; never a silent fallback to the CPU.

Precision (`precision`, a parameter of notebooks 02, 03, 03b and 05): "fp32", "bf16", "fp16" or "auto". Low precision
means torch.autocast around the forward pass; weights, stored embeddings, checkpoints and cached targets stay float32
(teacher targets keep their float16 storage). "auto" resolves to
  - CUDA: bf16 where the GPU computes it natively (Ampere and later), else fp16 (with a GradScaler when training);
  - CPU:  bf16 when the CPU multiplies bf16 matrices faster than float32 ones (x86 AMX, Arm BF16), else fp32 —
          emulated bf16 on a CPU without bf16 instructions is several times *slower* than float32 (measured here: 8x
          on a 256x384 linear layer), and AVX512-BF16 without AMX is no faster (benchmarks/bench_precision.py).
`resolve_precision` returns the choice with the reason, which the run's params.json records (lib.common.runinfo).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from lib.common.compute import THREAD_VARS, check_device_name, check_precision, default_threads

DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def get_device(name: str = "cpu") -> torch.device:
    """The torch.device for `name`; "cuda" without a visible GPU is an error, not a quiet CPU run."""
    check_device_name(name)
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise RuntimeError(f"device={name!r} requested but no CUDA GPU is visible; use params/cpu.yaml")
        return torch.device(name)
    return torch.device("cpu")


def set_threads(threads: int = 0) -> int:
    """Use `threads` CPU threads for torch's kernels (0 = default_threads()) and export them as OMP_NUM_THREADS and
    MKL_NUM_THREADS for processes started from here; returns the number used.

    On a shared machine use 1: torch's OpenMP threads spin while waiting for a peer that another process has
    descheduled, so two threads beside another CPU-bound job made a GatModel step 20x slower (0.12 s -> 2.5 s)."""
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
        raise ValueError(
            f"threads={threads!r} is invalid; use 0 (OMP_NUM_THREADS or every core) or a positive count, "
            f"1 on a shared machine"
        )
    n = threads or default_threads()
    torch.set_num_threads(n)
    for var in THREAD_VARS:
        os.environ[var] = str(n)
    return n


def cpuinfo(field: str) -> str | None:
    """The value of `field` ("flags", "model name") on /proc/cpuinfo's first processor; None where it is unreadable."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() == field:
                return value.strip()
    except OSError:
        return None
    return None


def cpu_flags() -> set[str] | None:
    """The CPU's feature flags ("flags" on x86, "Features" on Arm); None where /proc/cpuinfo has neither."""
    text = cpuinfo("flags") or cpuinfo("Features")
    return set(text.split()) if text else None


def _onednn_bf16() -> bool:
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


FAST_BF16_FLAGS = {"amx_bf16", "bf16"}  # x86 AMX, Arm BF16 (BFMMLA)
# AVX512-BF16 alone (Cooper Lake; Sapphire Rapids guests whose hypervisor hides AMX) has bf16 dot products but no faster
# matrix products: on such a CPU (Xeon model 207, 2026-11-30) oneDNN's bf16 products of the GatModel step's shapes took
# 1.3-2.0x float32's time, and the bf16 step 1.35x the float32 step (benchmarks/bench_precision.py, bench_model.py).
SLOW_BF16_FLAGS = {"avx512_bf16"}


def cpu_bf16_support() -> tuple[bool, str]:
    """(True, why) when bf16 pays off on this CPU: it multiplies bf16 matrices faster than float32 ones (the cpuinfo
    flags amx_bf16, or Arm's bf16); (False, why) otherwise, AVX512-BF16 without AMX included. oneDNN's own check is
    asked only where the flags cannot be read: it also says yes on AVX-512 CPUs without BF16, which convert to float32
    and back (measured on such a CPU: a [20000, 128] x [128, 128] product 2.8x slower in bf16). Tests monkeypatch this
    function to simulate either kind of CPU."""
    flags = cpu_flags()
    if flags is None:
        if _onednn_bf16():
            return True, "oneDNN reports bf16 on this CPU (its flags are unreadable)"
        return False, "this CPU's flags are unreadable and oneDNN reports no bf16"
    fast = flags & FAST_BF16_FLAGS
    if fast:
        return True, f"CPU flags {', '.join(sorted(fast))}"
    if flags & SLOW_BF16_FLAGS:
        return False, "this CPU has AVX512-BF16 but no AMX, so its bf16 matrix products are no faster than float32's"
    return False, "this CPU has no native bf16 (no amx_bf16, avx512_bf16 or bf16 flag), so it emulates bf16"


@dataclass(frozen=True)
class Precision:
    """A resolved compute precision: name ("fp32", "bf16", "fp16"), autocast dtype (None = no autocast), and why."""

    name: str
    dtype: torch.dtype | None
    reason: str
    requested: str = ""

    @property
    def grad_scaling(self) -> bool:
        """float16 gradients underflow without loss scaling; bf16 has float32's exponent range and needs none."""
        return self.dtype is torch.float16

    def autocast(self, device: torch.device | str):
        """torch.autocast for this precision on `device` (a no-op context for fp32)."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(torch.device(device).type, dtype=self.dtype)

    def to_dict(self) -> dict:
        return {
            "requested": self.requested,
            "resolved": self.name,
            "dtype": str(self.dtype or torch.float32),
            "reason": self.reason,
        }


def resolve_precision(name: str, device: torch.device | str = "cpu") -> Precision:
    """The compute precision `name` means on `device` ("auto": see the module docstring), with the reason."""
    check_precision(name)
    dev = torch.device(device)
    if dev.type == "cuda":
        native_bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        if name == "auto":
            if native_bf16:
                return Precision("bf16", torch.bfloat16, "auto on CUDA: the GPU computes bf16 natively", name)
            return Precision(
                "fp16", torch.float16, "auto on CUDA: no native bf16 on this GPU, fp16 with loss scaling", name
            )
        return Precision(name, DTYPES[name], f"requested {name} on CUDA", name)
    if dev.type != "cpu":
        raise ValueError(f"precision on device type {dev.type!r} is not supported; use 'cpu' or 'cuda'")
    fast, why = cpu_bf16_support()
    if name == "auto":
        if fast:
            return Precision("bf16", torch.bfloat16, f"auto on CPU: fast bf16 ({why})", name)
        return Precision("fp32", None, f"auto on CPU: {why}, so float32", name)
    if name == "bf16" and not fast:
        return Precision("bf16", torch.bfloat16, f"requested bf16 on CPU although {why}: expect a slowdown", name)
    return Precision(name, DTYPES[name], f"requested {name} on CPU", name)
