"""The C++ CPU kernels of the fused GatModel step (cpu_kernels.cpp), compiled once per machine on first use.

torch.utils.cpp_extension.load builds them with the machine's C++ compiler and ninja (requirements.txt) into torch's
extension cache (TORCH_EXTENSIONS_DIR, default ~/.cache/torch_extensions): about half a minute the first time, a
fraction of a second to load afterwards. The build is for this CPU (-march=native on x86), so its name carries a hash
of the source, the flags and the CPU's model and features: a home folder shared by several kinds of machine keeps one
build per kind.

Where they cannot be built (no compiler; one warning says so), or with WIKIGAT_CPU_KERNELS=0, the fused step runs the
same maths in torch ops: it drops the same elements (the same random bits), its dropout gives the same values, and its
layer norms and pair dot products differ in the last bits; at the seed's graph size its step takes 1.25x the kernels'
(benchmarks/bench_model.py, row fused-torch-ops).
On a GPU the torch ops always run.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import warnings
from functools import cache
from pathlib import Path
from types import ModuleType

import torch

from lib.common.device import cpu_flags, cpuinfo

SOURCE = Path(__file__).with_name("cpu_kernels.cpp")
SWITCH = "WIKIGAT_CPU_KERNELS"  # "0": use the torch ops


def build_flags() -> list[str]:
    """Compiler flags: -O3; OpenMP on Linux (at::parallel_for's pragmas; Apple's clang has none); -march=native on
    x86-64 (AVX-512 where the CPU has it: on a [20000, 128] tensor the layer-norm kernels took 2.35 ms forward and
    1.8 ms backward, against 2.7 and 3.0 ms with SSE2 alone)."""
    flags = ["-O3"]
    if platform.system() == "Linux":
        flags.append("-fopenmp")
    if platform.machine().lower() in ("x86_64", "amd64"):
        flags.append("-march=native")
    return flags


def build_name(flags: list[str]) -> str:
    """The extension's name for this source, these flags and this CPU."""
    cpu = [cpuinfo("model name") or platform.processor(), " ".join(sorted(cpu_flags() or ()))]
    key = "\n".join([SOURCE.read_text(), " ".join(flags), *cpu, torch.__version__])
    return f"wikigat_cpu_{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def switched_off() -> bool:
    return os.environ.get(SWITCH, "1").strip() == "0"


@cache
def _built() -> ModuleType | None:
    """The built extension, or None with one warning saying why and what to do."""
    from torch.utils.cpp_extension import _get_build_directory, load  # lazy: it imports setuptools

    flags = build_flags()
    name = build_name(flags)
    try:
        if not any(Path(_get_build_directory(name, verbose=False)).glob(f"{name}*.so")):
            print(
                "building the fused GatModel's C++ CPU kernels (once per machine, about half a minute)", file=sys.stderr
            )
        ldflags = ["-fopenmp"] if "-fopenmp" in flags else []
        return load(name, [str(SOURCE)], extra_cflags=flags, extra_ldflags=ldflags, verbose=False)
    except Exception as e:  # noqa: BLE001 - any build failure falls back to the torch ops, said once
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        warnings.warn(
            f"the fused GatModel's C++ CPU kernels could not be built ({type(e).__name__}: {first[:200]}); "
            f"the fused step runs in torch ops instead (same dropped elements, last bits differ, a quarter slower). "
            f"To build them install a C++ compiler (g++ or clang) and ninja (pip install ninja); "
            f"set {SWITCH}=0 to skip trying",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def cpu_kernels(*tensors: torch.Tensor) -> ModuleType | None:
    """The kernels where they apply to `tensors` (all float32 on the CPU), unless switched off or unbuildable."""
    if switched_off() or any(t.device.type != "cpu" or t.dtype != torch.float32 for t in tensors):
        return None
    return _built()


def kernels_status() -> str:
    """What a run records: "built" (the C++ kernels run), "off (WIKIGAT_CPU_KERNELS=0)" or "unavailable"."""
    if switched_off():
        return f"off ({SWITCH}=0)"
    return "built" if _built() is not None else "unavailable (torch ops)"
