"""Seconds per GatModel training step on a seed-sized graph: fused implementation vs straightforward PyG GATConv.

    python benchmarks/bench_model.py [--nodes 20000 --edges 38700 --repeats 5 --threads 2]

Graph: 20,000 nodes and 38,700 undirected edges (the seed's mean), 384-dim features.  A step = encode, decode the
graph's edges and round(0.3 · 2E) sampled non-edges, BCE-with-logits, backward, AdamW — as in lib.train.
Both implementations are timed alternately in the same process (the machine may be shared), median of `repeats`.
Peak memory: each implementation also runs alone in a child process and reports its peak RSS (ru_maxrss).
Checks first that both have the same parameter count and the same outputs for the same weights.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from lib.model import GatModel, count_parameters
from lib.train import sample_negatives


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


def make_step(model, x, ei, neg):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    labels = torch.cat([torch.ones(ei.size(1)), torch.zeros(neg.size(1))])

    def step():
        model.train()
        z = model(x, ei)
        loss = F.binary_cross_entropy_with_logits(torch.cat([model.decode(z, ei), model.decode(z, neg)]), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def child(impl: str, nodes: int, edges: int, steps: int) -> None:
    """Peak RSS of `steps` training steps alone: the peak (VmHWM) is reset after the graph and negatives exist,
    because generating them costs more memory than training on them."""
    x, ei = seed_sized_graph(nodes, edges)
    neg = sample_negatives(ei, nodes, round(0.3 * ei.size(1)), seed=1)
    step = make_step(GatModel(impl=impl), x, ei, neg)
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
    print(json.dumps({"impl": impl, "peak_rss_mib": peak / 1024, "step_growth_mib": (peak - before) / 1024}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--edges", type=int, default=38_700)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", default=None)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.child:
        return child(a.child, a.nodes, a.edges, 2)

    x, ei = seed_sized_graph(a.nodes, a.edges)
    neg = sample_negatives(ei, a.nodes, round(0.3 * ei.size(1)), seed=1)
    torch.manual_seed(0)
    ref, fused = GatModel(impl="pyg"), GatModel(impl="fused")
    fused.load_state_dict(ref.state_dict())
    assert count_parameters(ref) == count_parameters(fused), "parameter counts differ"
    ref.eval(), fused.eval()
    with torch.no_grad():
        diff = (ref(x, ei) - fused(x, ei)).abs().max().item()
    print(f"graph: {a.nodes} nodes, {ei.size(1) // 2} undirected edges; parameters: {count_parameters(ref):,} "
          f"(both); max |z_pyg - z_fused| (eval, same weights) = {diff:.2e}")
    assert diff < 1e-3, "outputs differ"

    steps = {"pyg": make_step(ref, x, ei, neg), "fused": make_step(fused, x, ei, neg)}
    for s in steps.values():
        s()  # warm-up
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
        print(f"{k:>6}: median {med[k]:.3f} s/step wall  (min {min(v):.3f}, max {max(v):.3f}, n={len(v)}); "
              f"median {med_cpu[k]:.3f} CPU-s/step")
    # CPU seconds are printed too because on a shared machine the wall-clock ratio mostly measures the neighbours.
    print(f"ratio fused / pyg = {med['fused'] / med['pyg']:.3f} wall (min/min {min(times['fused']) / min(times['pyg']):.3f}),"
          f" {med_cpu['fused'] / med_cpu['pyg']:.3f} CPU  (target <= 0.8)")

    for impl in ("pyg", "fused"):
        out = subprocess.run([sys.executable, __file__, "--child", impl, "--nodes", str(a.nodes), "--edges",
                              str(a.edges), "--threads", str(a.threads)], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{impl:>6}: peak RSS during 2 training steps {r['peak_rss_mib']:.0f} MiB "
              f"({r['step_growth_mib']:.0f} MiB above the resident graph + model)")


if __name__ == "__main__":
    main()
