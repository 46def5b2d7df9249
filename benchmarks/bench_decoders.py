"""Cost of the pair decoders on a seed-sized graph: seconds per 1,000 scored pairs and peak memory, against the dot
decoder measured in the same run.

    python benchmarks/bench_decoders.py [--nodes 20000 --edges 38700 --pairs 20000 --repeats 5 --threads 2]

Graph: 20,000 nodes, 38,700 undirected edges (the seed's mean), 384-d features (benchmarks/bench_model.py's graph).
Scoring = decode `pairs` node pairs (half edges, half random pairs) from the eval-mode embeddings z, which are
computed once (the encoder is the same for every decoder); "+ encode" adds one encoder pass, what scoring a new graph
costs. Decoders are timed alternately in one process (the machine may be shared), median of `repeats`.

"cold" clears lib.linkpred.heuristics' caches before every call: the adjacency, the pairs' common-neighbour product, CN, AA, PA
and the float64 cosine are computed afresh (a training step's fresh pairs, or a pair set seen for the first time).
"warm" scores the same pairs again with the caches kept (an evaluation pair set at the next epoch, or by the next
variant): only the sparse-dense common-neighbour sum and the MLP remain. Every decoder's cold and warm scores are
compared, and those of the feature decoders with scores from the features computed the earlier way, each from its own
sparse product (max |Δ| over both).
Peak memory: each decoder also scores alone (cold) in a child process and reports the growth of its peak RSS (VmHWM)
over the RSS before scoring.
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

from lib.linkpred import heuristics  # noqa: E402
from lib.linkpred.model import GatModel, ModelConfig, count_parameters  # noqa: E402

VARIANTS = {"dot": {}, "hadamard_mlp": {"decoder": "hadamard_mlp"}, "ncn": {"decoder": "ncn"},
            "ncn_feat": {"decoder": "ncn", "decoder_features": True},
            "ncn_feat_rescaled": {"decoder": "ncn", "decoder_features": True, "decoder_rescale": True}}


def separate_products_pair_features(x, mp_edge_index, num_nodes, pairs, ref_degree=None, a=None, cache=True):
    """The pair features as computed before the shared product: full-matrix cosine, and CN, AA, PA each from its own
    sparse row product (the reference the cached single-product path must match)."""
    import numpy as np
    import torch.nn.functional as F

    a = heuristics._build_adjacency(mp_edge_index, num_nodes) if a is None else a
    s = heuristics.density_factor(a, ref_degree)
    u, v = pairs[0].cpu().numpy(), pairs[1].cpu().numpy()
    xn = F.normalize(x.double(), dim=1).cpu().numpy()
    deg = np.asarray(a.sum(1)).ravel()
    with np.errstate(divide="ignore"):
        w = np.where(deg > 1, 1.0 / np.log(np.maximum(deg, 2)), 0.0)
    cn = np.asarray(a[u].multiply(a[v]).sum(1)).ravel()
    aa = np.asarray(a[u].multiply(a[v]).multiply(w[None, :]).sum(1)).ravel()
    return np.stack([np.einsum("ij,ij->i", xn[u], xn[v])] + [np.log1p(s * c) for c in (cn, aa, deg[u] * deg[v])], 1)


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
    cold, warm = {n: [] for n in models}, {n: [] for n in models}
    delta = {n: 0.0 for n in models}
    enc = []
    with torch.no_grad():
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            models["dot"](x, ei)
            enc.append(time.perf_counter() - t0)
            for n, m in models.items():
                for c in (heuristics._STRUCTURE, heuristics._ADJACENCY, heuristics._COSINE):
                    c.items.clear()
                t0 = time.perf_counter()
                c = m.decode(z, pairs, ei, x)
                cold[n].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                w = m.decode(z, pairs, ei, x)
                warm[n].append(time.perf_counter() - t0)
                delta[n] = max(delta[n], float((c - w).abs().max()))
                if m.cfg.decoder_features:  # against the separate-products reference
                    new_pf = heuristics.pair_features
                    heuristics.pair_features = separate_products_pair_features
                    try:
                        delta[n] = max(delta[n], float((c - m.decode(z, pairs, ei, x)).abs().max()))
                    finally:
                        heuristics.pair_features = new_pf
    enc_s = statistics.median(enc)
    base = statistics.median(cold["dot"])
    print(f"{a.nodes:,} nodes, {a.edges:,} edges, {a.pairs:,} pairs scored, {a.threads} thread(s), median of "
          f"{a.repeats}; one encoder pass {enc_s:.2f} s")
    print(f"{'decoder':<14}{'params':>9}{'cold s/1,000':>14}{'cold vs dot':>13}{'warm s/1,000':>14}{'warm vs dot':>13}"
          f"{'max |Δ|':>9}{'+ encode, s':>13}{'peak MiB':>10}")
    for n, m in models.items():
        med, med_w = statistics.median(cold[n]), statistics.median(warm[n])
        out = subprocess.run([sys.executable, __file__, "--child", n, "--nodes", str(a.nodes), "--edges",
                              str(a.edges), "--pairs", str(a.pairs), "--threads", str(a.threads)],
                             capture_output=True, text=True, check=True)
        peak = json.loads(out.stdout.strip().splitlines()[-1])["peak_mib"]
        print(f"{n:<14}{count_parameters(m):>9,}{med * 1000 / a.pairs:>14.5f}{med / base:>13.1f}"
              f"{med_w * 1000 / a.pairs:>14.5f}{med_w / base:>13.1f}{delta[n]:>9.1e}{enc_s + med:>13.2f}{peak:>10.1f}")


if __name__ == "__main__":
    main()
