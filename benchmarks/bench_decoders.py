"""Cost of the pair decoders on a seed-sized graph: seconds per 1,000 scored pairs and peak memory, against the dot
decoder measured in the same run.

    python benchmarks/bench_decoders.py [--nodes 20000 --edges 38700 --pairs 20000 --repeats 5 --threads 2]

Graph: 20,000 nodes, 38,700 undirected edges (the seed's mean), 384-d features (benchmarks/bench_model.py's graph).
Scoring = decode `pairs` node pairs (half edges, half random pairs) from the eval-mode embeddings z, which are
computed once (the encoder is the same for every decoder); "+ encode" adds one encoder pass, what scoring a new graph
costs. Decoders are timed alternately in one process (the machine may be shared), median of `repeats`. Peak memory:
each decoder also scores alone in a child process and reports the growth of its peak RSS (VmHWM) over the RSS before
scoring.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from bench_model import _rss_kib, seed_sized_graph  # noqa: E402

from lib.model import GatModel, ModelConfig, count_parameters  # noqa: E402

VARIANTS = {"dot": {}, "hadamard_mlp": {"decoder": "hadamard_mlp"}, "ncn": {"decoder": "ncn"},
            "ncn_feat": {"decoder": "ncn", "decoder_features": True},
            "ncn_feat_rescaled": {"decoder": "ncn", "decoder_features": True, "decoder_rescale": True}}


def setup(a):
    torch.manual_seed(0)
    x, ei = seed_sized_graph(a.nodes, a.edges)
    g = torch.Generator().manual_seed(1)
    half = a.pairs // 2
    pairs = torch.cat([ei[:, torch.randperm(ei.size(1), generator=g)[:half]],
                       torch.randint(0, a.nodes, (2, a.pairs - half), generator=g)], 1)
    models = {}
    for name, kw in VARIANTS.items():
        torch.manual_seed(0)
        models[name] = GatModel(ModelConfig(**kw)).eval()
        if kw.get("decoder_rescale"):  # counts read at half the graph's density, as leak_free's training graphs
            models[name].decoder.set_reference_degree(ei.size(1) / a.nodes / 2)
    with torch.no_grad():
        z = models["dot"](x, ei)
    return x, ei, pairs, z, models


def child(a) -> None:
    x, ei, pairs, z, models = setup(a)
    m = models[a.child]
    before = _rss_kib("VmRSS")
    with torch.no_grad():
        m.decode(z, pairs, ei, x)
    print(json.dumps({"peak_mib": (_rss_kib("VmHWM") - before) / 1024}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=20000)
    ap.add_argument("--edges", type=int, default=38700)
    ap.add_argument("--pairs", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.child:
        return child(a)
    x, ei, pairs, z, models = setup(a)
    times = {n: [] for n in models}
    enc = []
    with torch.no_grad():
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            models["dot"](x, ei)
            enc.append(time.perf_counter() - t0)
            for n, m in models.items():
                t0 = time.perf_counter()
                m.decode(z, pairs, ei, x)
                times[n].append(time.perf_counter() - t0)
    enc_s = statistics.median(enc)
    base = statistics.median(times["dot"])
    print(f"{a.nodes:,} nodes, {a.edges:,} edges, {a.pairs:,} pairs scored, {a.threads} thread(s), median of "
          f"{a.repeats}; one encoder pass {enc_s:.2f} s")
    print(f"{'decoder':<14}{'params':>9}{'s / 1,000 pairs':>17}{'ratio vs dot':>14}{'+ encode, s':>13}"
          f"{'peak MiB':>10}")
    for n, m in models.items():
        med = statistics.median(times[n])
        out = subprocess.run([sys.executable, __file__, "--child", n, "--nodes", str(a.nodes), "--edges",
                              str(a.edges), "--pairs", str(a.pairs), "--threads", str(a.threads)],
                             capture_output=True, text=True, check=True)
        peak = json.loads(out.stdout.strip().splitlines()[-1])["peak_mib"]
        print(f"{n:<14}{count_parameters(m):>9,}{med * 1000 / a.pairs:>17.5f}{med / base:>14.1f}"
              f"{enc_s + med:>13.2f}{peak:>10.1f}")


if __name__ == "__main__":
    main()
