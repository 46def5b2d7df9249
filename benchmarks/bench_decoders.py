"""Cost of the pair decoders on a seed-sized graph: seconds per 1,000 scored pairs and peak memory, against the dot
decoder measured in the same run.

    python benchmarks/bench_decoders.py [--nodes 20000 --edges 38700 --pairs 20000 --repeats 5 --threads 2]

Graph: 20,000 nodes, 38,700 undirected edges (the seed's mean), 384-d features (benchmarks/bench_model.py's graph).
Scoring = decode `pairs` node pairs (half edges, half random pairs) from the eval-mode embeddings z, which are
computed once (the encoder is the same for every decoder); "+ encode" adds one encoder pass, what scoring a new graph
costs. Decoders are timed alternately in one process (the machine may be shared), median of `repeats`.

"cold" clears lib.linkpred.heuristics' caches before every call: the adjacency, the pairs' common-neighbour product, CN,
AA, PA and the float64 cosine are computed afresh (a training step's fresh pairs, or a pair set seen for the first
time). "warm" scores the same pairs again with the caches kept (an evaluation pair set at the next epoch, or by the next
variant): only the sparse-dense common-neighbour sum and the MLP remain. Every decoder's cold and warm scores are
compared, and those of the feature decoders with scores from the features computed the earlier way, each from its own
sparse product (max |Δ| over both).
Peak memory: each decoder also scores alone (cold) in a child process and reports the growth of its peak RSS (VmHWM)
over the RSS before scoring.

    python benchmarks/bench_decoders.py --step [--nodes 2000 --edges 8000 --repeats 5 --threads 2 --device cpu]

`--step`: seconds per training step of GatModel with each structural-count decoder against `ncn_stack` measured in the
same run (target: at most 2x, judged by the project's rule on the paired ratios of the steps of one round,
lib.metrics.paired.judge_ratio). Graph: lib.linkpred.data.synthetic_graph (clustered, so pairs share neighbours); a step
= encode the message passing (70% of the edges), decode the held-out 30% and as many uniform non-edges in one call,
BCE, backward, AdamW — lib.linkpred.train's disjoint supervision, whose fresh pairs are never cached. Stack variants
start from the stack fitted on the graph (lib.linkpred.train.init_model). Peak memory: each variant's steps alone in
a child process, peak RSS growth (VmHWM) and on CUDA peak allocated GPU memory.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from bench_model import _rss_kib, seed_sized_graph  # noqa: E402

from lib.common.device import get_device  # noqa: E402
from lib.linkpred import decoders, heuristics  # noqa: E402
from lib.linkpred.config import TrainConfig  # noqa: E402
from lib.linkpred.data import synthetic_graph  # noqa: E402
from lib.linkpred.model import GatModel, ModelConfig, count_parameters  # noqa: E402
from lib.linkpred.sampling import sample_negatives, split_edges  # noqa: E402
from lib.linkpred.train import init_model  # noqa: E402
from lib.metrics.paired import judge_ratio, ratio_text  # noqa: E402

VARIANTS = {
    "dot": {},
    "hadamard_mlp": {"decoder": "hadamard_mlp"},
    "ncn": {"decoder": "ncn"},
    "ncn_feat": {"decoder": "ncn", "decoder_features": True},
    "ncn_feat_rescaled": {"decoder": "ncn", "decoder_features": True, "decoder_rescale": True},
    "counts": {"decoder": "counts"},
    "mplp": {"decoder": "mplp"},
}
CACHES = (heuristics._STRUCTURE, heuristics._ADJACENCY, heuristics._COSINE, heuristics._TWO_HOP, heuristics._COUNTS)
STEP_VARIANTS = ("ncn_stack", "ncn", "counts", "counts_stack", "mplp", "mplp_stack")
"""The training-step comparison: the reference (ncn_stack) first, then ncn and the structural-count variants."""


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
    pairs = torch.cat(
        [
            ei[:, torch.randperm(ei.size(1), generator=g)[:half]],
            torch.randint(0, a.nodes, (2, a.pairs - half), generator=g),
        ],
        1,
    )
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


def train_steps(a, device) -> dict:
    """Variant name -> one training step (a function) of a GatModel with that variant's decoder (STEP_VARIANTS) on
    the --step graph, each with its own AdamW."""
    g = synthetic_graph(a.nodes, a.edges, seed=0)
    mp, pos = split_edges(g.edge_index, g.num_nodes, 0.3, seed=1)
    neg = sample_negatives(g.edge_index, g.num_nodes, pos.size(1), seed=2)
    x, mp, pairs = g.x.to(device), mp.to(device), torch.cat([pos, neg], 1).to(device)
    labels = torch.cat([torch.ones(pos.size(1)), torch.zeros(neg.size(1))]).to(device)
    cfg = TrainConfig(seed=0, supervision="disjoint")
    steps = {}
    for name in STEP_VARIANTS if not a.child else (a.child,):
        model = init_model("gat_model", ModelConfig(**decoders.VARIANTS[name]), [g], cfg, device).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def step(model=model, opt=opt):
            loss = F.binary_cross_entropy_with_logits(model.decode(model(x, mp), pairs, mp, x), labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        steps[name] = step
    return steps


def step_child(a, device) -> None:
    step = train_steps(a, device)[a.child]
    step()  # warm: the first step allocates the optimiser state
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # Linux: reset the peak-RSS counter
    before = _rss_kib("VmRSS")
    for _ in range(2):
        step()
    gpu = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    print(json.dumps({"peak_mib": (_rss_kib("VmHWM") - before) / 1024, "gpu_peak_mib": gpu}))


def step_main(a, device) -> None:
    """Median seconds per training step of each STEP_VARIANTS model, alternately, and the ratio to ncn_stack's."""
    steps = train_steps(a, device)
    for step in steps.values():
        step()  # warm-up
    times = {n: [] for n in steps}
    for _ in range(a.repeats):
        for n, step in steps.items():
            t0 = time.perf_counter()
            step()
            times[n].append(time.perf_counter() - t0)
    base = statistics.median(times["ncn_stack"])
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu, {a.threads} thread(s)"
    print(
        f"training step: {a.nodes:,} nodes, {a.edges:,} edges (synthetic_graph), 30% held out as positives against "
        f"as many non-edges; {card}; median of {a.repeats}"
    )
    print(f"{'variant':<14}{'s/step':>10}{'vs ncn_stack':>14}{'peak RSS MiB':>14}{'GPU peak MiB':>14}")
    for n in steps:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--step",
                "--child",
                n,
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
        mem = json.loads(out.stdout.strip().splitlines()[-1])
        gpu = "" if mem["gpu_peak_mib"] is None else f"{mem['gpu_peak_mib']:.1f}"
        med = statistics.median(times[n])
        judged = "" if n == "ncn_stack" else f"  {ratio_text(judge_ratio(times[n], times['ncn_stack'], 2.0))}"
        print(f"{n:<14}{med:>10.4f}{med / base:>14.2f}{mem['peak_mib']:>14.1f}{gpu:>14}{judged}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--step", action="store_true", help="time training steps against ncn_stack instead of scoring")
    ap.add_argument("--nodes", type=int, default=None, help="20,000 (scoring) or 2,000 (--step)")
    ap.add_argument("--edges", type=int, default=None, help="38,700 (scoring) or 8,000 (--step)")
    ap.add_argument("--pairs", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="--step only: cpu or cuda (lib.common.device)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.nodes = a.nodes or (2000 if a.step else 20000)
    a.edges = a.edges or (8000 if a.step else 38700)
    torch.set_num_threads(a.threads)
    if a.step:
        device = get_device(a.device)
        return step_child(a, device) if a.child else step_main(a, device)
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
                for c in CACHES:
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
    print(
        f"{a.nodes:,} nodes, {a.edges:,} edges, {a.pairs:,} pairs scored, {a.threads} thread(s), median of "
        f"{a.repeats}; one encoder pass {enc_s:.2f} s"
    )
    print(
        f"{'decoder':<14}{'params':>9}{'cold s/1,000':>14}{'cold vs dot':>13}{'warm s/1,000':>14}{'warm vs dot':>13}"
        f"{'max |Δ|':>9}{'+ encode, s':>13}{'peak MiB':>10}"
    )
    for n, m in models.items():
        med, med_w = statistics.median(cold[n]), statistics.median(warm[n])
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                n,
                "--nodes",
                str(a.nodes),
                "--edges",
                str(a.edges),
                "--pairs",
                str(a.pairs),
                "--threads",
                str(a.threads),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        peak = json.loads(out.stdout.strip().splitlines()[-1])["peak_mib"]
        print(
            f"{n:<14}{count_parameters(m):>9,}{med * 1000 / a.pairs:>14.5f}{med / base:>13.1f}"
            f"{med_w * 1000 / a.pairs:>14.5f}{med_w / base:>13.1f}{delta[n]:>9.1e}{enc_s + med:>13.2f}{peak:>10.1f}"
        )


if __name__ == "__main__":
    main()
