"""Does bf16 (or fp16) pay off on this CPU? The GatModel training step's matrix products timed in float32, bf16 and
fp16 in the same run, at the seed's graph size (20,000 nodes, hidden 128, 2 heads, 384-dim titles).

`precision: auto` (lib.common.device) picks bf16 on a CPU from its flags alone; this benchmark is the measurement
behind that rule. A CPU with AVX512-BF16 but no AMX has bf16 instructions yet multiplies bf16 matrices no faster than
float32 ones, so a bf16 step there is slower than a float32 one (autocast adds casts around every product).

Each repeat runs the products in float32, then bf16, then fp16, back to back; the speed claim "bf16 is faster than
float32" is judged by the project's rule (lib.metrics.paired.judge_ratio) on the paired ratios of the repeats, for each
shape and for their sum (the step's products weighted as one step has them), against <= 1.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_precision.py [--threads 1] [--repeats 15]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import torch

from lib.common.device import cpu_bf16_support, cpu_flags, cpuinfo, resolve_precision
from lib.metrics.paired import judge_ratio, ratio_text

N, HIDDEN, HEADS, FEATURES = 20_000, 128, 2, 384
# (name, [m, k] @ [k, n], calls per training step): forward and backward of each layer of the 4-level model.
PRODUCTS = [
    ("GAT projection x W^T", (N, HIDDEN, HEADS * HIDDEN), 4),
    ("its input gradient", (N, HEADS * HIDDEN, HIDDEN), 4),
    ("its weight gradient", (HEADS * HIDDEN, N, HIDDEN), 4),
    ("FFN layer (and input gradient)", (N, HIDDEN, HIDDEN), 16),
    ("FFN weight gradient", (HIDDEN, N, HIDDEN), 8),
    ("input layer 384 -> 128", (N, FEATURES, HIDDEN), 1),
    ("its weight gradient", (HIDDEN, N, FEATURES), 1),
]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def time_product(a: torch.Tensor, b: torch.Tensor, inner: int = 3) -> float:
    """Seconds per a @ b, the median of `inner` calls after a warm-up call."""
    a @ b
    times = []
    for _ in range(inner):
        t = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=15)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    shown = sorted(
        (cpu_flags() or set()) & {"avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_fp16", "bf16"}
    )
    print(f"CPU: {cpuinfo('model name')} (model {cpuinfo('model')}); flags: {' '.join(shown) or 'none of interest'}")
    print(f"cpu_bf16_support: {cpu_bf16_support()[1]}; auto -> {resolve_precision('auto', 'cpu').name}")
    print(f"torch {torch.__version__}, {a.threads} thread(s), {a.repeats} repeats")

    g = torch.Generator().manual_seed(0)
    base = [(torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)) for _, (m, k, n), _ in PRODUCTS]
    operands = {d: [(x.to(dtype), w.to(dtype)) for x, w in base] for d, dtype in DTYPES.items()}
    times = {d: [[] for _ in PRODUCTS] for d in DTYPES}
    for repeat in range(a.repeats + 1):  # the first round warms every product up and is not kept
        for i in range(len(PRODUCTS)):
            for d in DTYPES:
                seconds = time_product(*operands[d][i])
                if repeat:
                    times[d][i].append(seconds)
    for i, (name, (m, k, n), calls) in enumerate(PRODUCTS):
        fp32 = statistics.median(times["fp32"][i])
        row = [f"[{m}, {k}] @ [{k}, {n}] x{calls:<2} {name:<30} fp32 {fp32 * 1e3:6.2f} ms"]
        for d in ("bf16", "fp16"):
            judged = judge_ratio(times[d][i], times["fp32"][i], 1.0)
            row.append(f"{d} {judged['ratio']:.2f}x [{judged['ci_low']:.2f}, {judged['ci_high']:.2f}]")
        print("; ".join(row))
    per_step = {
        d: [sum(c * times[d][i][r] for i, (_, _, c) in enumerate(PRODUCTS)) for r in range(a.repeats)] for d in DTYPES
    }
    print(f"one step's products: fp32 {statistics.median(per_step['fp32']) * 1e3:.1f} ms")
    for d in ("bf16", "fp16"):
        judged = judge_ratio(per_step[d], per_step["fp32"], 1.0)
        print(f"{d} / fp32 time of one step's products (faster than float32: {ratio_text(judged)})")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
