"""Seconds per GatModel training step on a seed-sized graph: fused implementation vs straightforward PyG GATConv.

    python benchmarks/bench_model.py [--nodes 20000 --edges 38700 --repeats 5 --threads 2 --device cpu] [--profile]

Graph: 20,000 nodes and 38,700 undirected edges (the seed's mean), 384-dim features.  A step = encode, decode the
graph's edges and round(0.3 · 2E) sampled non-edges, BCE-with-logits, backward, AdamW — as in lib.linkpred.train.
Both implementations are timed alternately in the same process (the machine may be shared), median of `repeats`;
each speed target is judged by the project's rule (lib.metrics.paired.judge_ratio) on the ratios of the steps of one
repeat, which ran back to back: met, missed or undecided, with the 95% interval of the mean ratio.
Peak memory: each implementation also runs alone in a child process and reports its peak RSS (ru_maxrss), and on
`--device cuda` its peak allocated GPU memory (torch.cuda.max_memory_allocated); GPU steps are timed after a
synchronize, so a step's time includes its kernels.
Checks first that both have the same parameter count and the same outputs for the same weights. On the CPU the fused
step runs its C++ kernels where they are built (lib.linkpred.kernels), and is timed in torch ops too (row
`fused-torch-ops`, what runs where they cannot be built), with the paired ratio of the two.
`--profile`: where a step's time goes instead — torch.profiler's operators of one warm step (forward, backward, AdamW)
of each implementation, by self CPU time, with their input shapes.
On CUDA the fused step is also timed captured as a CUDA graph (lib.linkpred.cuda_graph.GraphedTrainStep, rows
`fused-graph` and `fused-<low>-graph`): at the seed's size a GPU step is bound by launching its kernels.

Low precision (`--precision`, default auto; lib.common.device): the fused step under autocast (bf16, or fp16 with a
GradScaler) against the PyG float32 reference in the same run (target <= 0.25x on a CPU), its peak memory, and the
eval AUC after `--auc-steps` training steps on a learnable synthetic graph, fused low precision vs fused float32 from
the same initial weights (target: within 0.01). Where `auto` resolves to float32 (no fast bf16 on this CPU) the
benchmark says so and reports float32 only; an explicit `--precision bf16` times the emulated path anyway.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from unittest import mock

import numpy as np
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from lib.common.device import cpuinfo, get_device, resolve_precision
from lib.linkpred.cuda_graph import GraphedTrainStep
from lib.linkpred.data import synthetic_graph
from lib.linkpred.kernels import SWITCH, kernels_status
from lib.linkpred.model import GatModel, count_parameters
from lib.linkpred.sampling import sample_negatives
from lib.metrics.paired import judge_ratio, mean_interval, ratio_text


def seed_sized_graph(nodes: int, edges: int, features: int = 384, seed: int = 0):
    """x [nodes, features], edge_index [2, 2·edges]: exactly `edges` distinct undirected edges, no self-loops."""
    g = torch.Generator().manual_seed(seed)
    keys = torch.empty(0, dtype=torch.long)
    while keys.numel() < edges:
        u = torch.randint(0, nodes, (2 * edges,), generator=g)
        v = torch.randint(0, nodes, (2 * edges,), generator=g)
        lo, hi = torch.minimum(u, v), torch.maximum(u, v)
        keys = torch.unique(torch.cat([keys, (lo * nodes + hi)[lo != hi]]))
    keys = keys[torch.randperm(keys.numel(), generator=g)[:edges]]
    und = torch.stack([keys // nodes, keys % nodes])
    ei = torch.cat([und, und.flip(0)], 1)
    return torch.randn(nodes, features, generator=g), ei


def make_step(model, x, ei, neg, precision: str = "fp32", lr: float = 1e-3):
    """One lib.linkpred.train-style step at `precision` (autocast; GradScaler for fp16) on the device `x` is on."""
    device = x.device
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    prec = resolve_precision(precision, device)
    scaler = torch.amp.GradScaler(device.type, enabled=prec.grad_scaling)
    labels = torch.cat([torch.ones(ei.size(1)), torch.zeros(neg.size(1))]).to(device)

    def step():
        model.train()
        with prec.autocast(device):
            z = model(x, ei)
            logits = torch.cat([model.decode(z, ei), model.decode(z, neg)]).float()
        loss = F.binary_cross_entropy_with_logits(logits, labels)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    return step


def without_kernels(step):
    """`step` with WIKIGAT_CPU_KERNELS=0: the fused step in torch ops (lib.linkpred.kernels)."""

    def run():
        with mock.patch.dict(os.environ, {SWITCH: "0"}):
            step()

    return run


def graphed_steps(ref: GatModel, x, ei, neg, low: str | None) -> dict:
    """{name: step} of the fused step captured as a CUDA graph (lib.linkpred.cuda_graph), in float32 and in `low`
    precision, from `ref`'s weights: the same step as make_step's (decode the edges and the non-edges, BCE, AdamW).
    A capture that fails is reported and left out, so the eager rows still print."""
    pairs = torch.cat([ei, neg], 1)
    labels = torch.cat([torch.ones(ei.size(1)), torch.zeros(neg.size(1))]).to(x.device)
    out = {}
    for p in ["fp32"] + ([low] if low else []):
        model = GatModel(gat_impl="fused").to(x.device)
        model.load_state_dict(ref.state_dict())
        name = "fused-graph" if p == "fp32" else f"fused-{p}-graph"
        try:
            g = GraphedTrainStep(model, x, ei, pairs, labels, precision=p)
        except Exception as e:  # noqa: BLE001 - reported; the benchmark goes on with the eager rows
            print(f"{name}: capture failed: {type(e).__name__}: {e}")
            continue

        def step(g=g):
            g.step()
            torch.cuda.synchronize(x.device)

        out[name] = step
    return out


def auc_after_steps(precision: str, steps: int, seed: int = 0, device: torch.device = torch.device("cpu")) -> float:
    """Eval-mode AUC (float32 forward) on a held-out half of a synthetic graph's edges after `steps` fused steps at
    `precision`, from the same initial weights, edges and negatives for every precision."""
    from sklearn.metrics import roc_auc_score

    g = synthetic_graph(2000, 8000, seed=seed)
    und = g.edge_index[:, g.edge_index[0] < g.edge_index[1]]
    perm = torch.randperm(und.size(1), generator=torch.Generator().manual_seed(seed))
    train_e, test_e = und[:, perm[: und.size(1) // 2]], und[:, perm[und.size(1) // 2 :]]
    mp = torch.cat([train_e, train_e.flip(0)], 1)
    neg = sample_negatives(g.edge_index, g.num_nodes, mp.size(1), seed=seed + 1)
    test_neg = sample_negatives(g.edge_index, g.num_nodes, test_e.size(1), seed=seed + 2)
    torch.manual_seed(seed)
    model = GatModel(gat_impl="fused").to(device)
    x, mp, neg = g.x.to(device), mp.to(device), neg.to(device)
    step = make_step(model, x, mp, neg, precision, lr=5e-3)
    for _ in range(steps):
        step()
    model.eval()
    with torch.no_grad():
        z = model(x, mp)
        s = torch.cat([model.decode(z, test_e.to(device)), model.decode(z, test_neg.to(device))])
    return float(roc_auc_score([1] * test_e.size(1) + [0] * test_neg.size(1), s.float().cpu().numpy()))


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def child(
    impl: str, nodes: int, edges: int, steps: int, precision: str = "fp32", device: torch.device = torch.device("cpu")
) -> None:
    """Peak RSS (and on CUDA peak allocated GPU memory) of `steps` training steps alone: the peaks are reset after the
    graph and negatives exist, because generating them costs more memory than training on them."""
    x, ei = seed_sized_graph(nodes, edges)
    neg = sample_negatives(ei, nodes, round(0.3 * ei.size(1)), seed=1)
    x, ei, neg = x.to(device), ei.to(device), neg.to(device)
    step = make_step(GatModel(gat_impl=impl).to(device), x, ei, neg, precision)
    gpu = {}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        gpu_before = torch.cuda.memory_allocated(device)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # Linux: reset the peak-RSS counter
        before, peak = _rss_kib("VmRSS"), None
        for _ in range(steps):
            step()
        peak = _rss_kib("VmHWM")
    except OSError:  # not Linux: whole-process peak only
        before = 0
        for _ in range(steps):
            step()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if device.type == "cuda":
        gpu_peak = torch.cuda.max_memory_allocated(device)
        gpu = {"gpu_peak_mib": gpu_peak / 2**20, "gpu_step_growth_mib": (gpu_peak - gpu_before) / 2**20}
    print(
        json.dumps(
            {
                "impl": impl,
                "precision": precision,
                "peak_rss_mib": peak / 1024,
                "step_growth_mib": (peak - before) / 1024,
                **gpu,
            }
        )
    )


def print_profiles(steps: dict, rows: int = 30) -> None:
    """torch.profiler's table of one step of each of `steps` (name -> step function, already warm): the `rows`
    operators with the most self CPU time, split by input shape."""
    for name, step in steps.items():
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        with profile(activities=activities, record_shapes=True) as prof:
            step()
        print(f"\n== {name}: one step, by self CPU time ==")
        print(
            prof.key_averages(group_by_input_shape=True).table(
                sort_by="self_cpu_time_total", row_limit=rows, max_name_column_width=40, max_shapes_column_width=70
            )
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--edges", type=int, default=38_700)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--precision", default="auto", help="low precision of the fused step: auto, bf16, fp16 (lib.common.device)"
    )
    ap.add_argument("--auc-steps", type=int, default=40, help="training steps before the AUC comparison")
    ap.add_argument("--profile", action="store_true", help="print where one step's time goes instead of timing")
    ap.add_argument("--child", default=None)
    ap.add_argument("--child-precision", default="fp32")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (lib.common.device: cuda without a GPU is an error)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    device = get_device(a.device)
    if a.child:
        return child(a.child, a.nodes, a.edges, 2, a.child_precision, device)
    prec = resolve_precision(a.precision, device)
    low = prec.name if prec.name != "fp32" else None
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(
        f"device {device} ({card}); precision {a.precision!r} -> {prec.name}: {prec.reason}"
        + ("" if low else "; reporting float32 only")
    )
    if device.type == "cpu":
        print(
            f"cpu: {cpuinfo('model name')}; the fused step's C++ CPU kernels (lib.linkpred.kernels): {kernels_status()}"
        )

    x, ei = seed_sized_graph(a.nodes, a.edges)
    neg = sample_negatives(ei, a.nodes, round(0.3 * ei.size(1)), seed=1)
    x, ei, neg = x.to(device), ei.to(device), neg.to(device)
    torch.manual_seed(0)
    ref, fused = GatModel(gat_impl="pyg").to(device), GatModel(gat_impl="fused").to(device)
    fused.load_state_dict(ref.state_dict())
    assert count_parameters(ref) == count_parameters(fused), "parameter counts differ"
    ref.eval(), fused.eval()
    with torch.no_grad():
        diff = (ref(x, ei) - fused(x, ei)).abs().max().item()
    print(
        f"graph: {a.nodes} nodes, {ei.size(1) // 2} undirected edges; parameters: {count_parameters(ref):,} "
        f"(both); max |z_pyg - z_fused| (eval, same weights) = {diff:.2e}"
    )
    assert diff < 1e-3, "outputs differ"

    steps = {"pyg": make_step(ref, x, ei, neg), "fused": make_step(fused, x, ei, neg)}
    if device.type == "cpu" and kernels_status() == "built":  # what a machine without a C++ compiler runs
        plain = GatModel(gat_impl="fused")
        plain.load_state_dict(ref.state_dict())
        steps["fused-torch-ops"] = without_kernels(make_step(plain, x, ei, neg))
    if low:
        lowm = GatModel(gat_impl="fused").to(device)
        lowm.load_state_dict(ref.state_dict())
        steps[f"fused-{low}"] = make_step(lowm, x, ei, neg, low)
    if device.type == "cuda":
        steps.update(graphed_steps(ref, x, ei, neg, low))
    for s in steps.values():
        s()  # warm-up
    if a.profile:
        return print_profiles(steps)
    times = {k: [] for k in steps}
    cpu = {k: [] for k in steps}
    for _ in range(a.repeats):
        for k, s in steps.items():  # alternate so both see the same machine load
            t, c = time.perf_counter(), time.process_time()
            s()
            times[k].append(time.perf_counter() - t)
            cpu[k].append(time.process_time() - c)
    med = {k: statistics.median(v) for k, v in times.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    for k, v in times.items():
        print(
            f"{k:>6}: median {med[k]:.3f} s/step wall  (min {min(v):.3f}, max {max(v):.3f}, n={len(v)}); "
            f"median {med_cpu[k]:.3f} CPU-s/step"
        )
    # The targets: on a CPU the fused step at most 0.30x PyG's (fp32) and 0.25x (low precision); on a GPU, where an
    # eager step at this size is bound by launching kernels, any fused step (the captured ones included) at most 0.8x.
    # Each is judged by the project's rule (lib.metrics.paired) on the ratios of the steps of one repeat, which ran back
    # to back: the ratio of the medians alone moves by several hundredths between runs of this benchmark.
    fp32_target, low_target = (0.8, 0.8) if device.type == "cuda" else (0.30, 0.25)
    # CPU seconds are printed too because on a shared machine the wall-clock ratio mostly measures the neighbours.
    targets = {"fused": fp32_target, **{k: 0.8 for k in steps if k.endswith("graph")}}
    if low:
        targets[f"fused-{low}"] = low_target
    for k, target in targets.items():
        print(
            f"ratio {k} / pyg fp32 = {med[k] / med['pyg']:.3f} wall (min/min {min(times[k]) / min(times['pyg']):.3f}), "
            f"{med_cpu[k] / med_cpu['pyg']:.3f} CPU; paired wall ratios "
            f"{ratio_text(judge_ratio(times[k], times['pyg'], target))}"
        )
    if "fused-torch-ops" in times:
        r = mean_interval(np.asarray(times["fused-torch-ops"]) / np.asarray(times["fused"]))
        print(
            f"ratio fused-torch-ops / fused = {med['fused-torch-ops'] / med['fused']:.3f} wall; paired mean "
            f"{r['diff']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}] ({r['seeds']} repeats): the fused step in torch "
            f"ops, as where the C++ kernels cannot be built"
        )
    if low:
        auc = {p: auc_after_steps(p, a.auc_steps, device=device) for p in ("fp32", low)}
        d = auc[low] - auc["fp32"]
        print(
            f"held-out AUC after {a.auc_steps} fused steps: fp32 {auc['fp32']:.4f}, {low} {auc[low]:.4f} "
            f"(difference {d:+.4f}; target within 0.01) -> {'OK' if abs(d) <= 0.01 else 'OUTSIDE TARGET'}"
        )

    for impl, p in [("pyg", "fp32"), ("fused", "fp32")] + ([("fused", low)] if low else []):
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                impl,
                "--child-precision",
                p,
                "--nodes",
                str(a.nodes),
                "--edges",
                str(a.edges),
                "--threads",
                str(a.threads),
                "--device",
                a.device,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"{impl + ' ' + p:>11}: peak RSS during 2 training steps {r['peak_rss_mib']:.0f} MiB "
            f"({r['step_growth_mib']:.0f} MiB above the resident graph + model)"
            + (
                f"; peak GPU memory {r['gpu_peak_mib']:.0f} MiB ({r['gpu_step_growth_mib']:.0f} MiB above the "
                f"resident graph + model)"
                if "gpu_peak_mib" in r
                else ""
            )
        )


if __name__ == "__main__":
    main()
