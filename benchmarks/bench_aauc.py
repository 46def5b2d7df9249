"""Time and peak memory of A-AUC on a seed-sized (20,000-node) graph, against a dense unchunked reference.

    python benchmarks/bench_aauc.py [--nodes 20000 --threads 2 --dense-at 0.1]

Graph: 20,000 nodes, 384-dim features in 50 clusters (so a few % of pairs have cosine > T_cos = 0.7) and 64-dim
embeddings = a random projection of the features plus noise.  Cases, each alone in a child process (so its peak RSS,
ru_maxrss minus the RSS after the data is built, is its own):
  ours R_cos 0.1 / 0.5          lib.metrics.aauc.aauc, self-pairs excluded (0.1: ~2M pairs, sklearn path; 0.5: ~50M
                                pairs, chunked exact Mann–Whitney path, at the default chunk_size 2048 and at 256);
  ours R_cos 0.1, self-pairs    the seed code's variant, same value as the reference;
  dense reference R_cos 0.1     what the seed code did: the whole S×S score and label matrices at once
                                (sklearn cosine_similarity, roc_auc_score over the flattened matrix).
Prints a table and the ratios ours / reference (time and memory).  --dense-at 0.1,0.5 also runs the reference at
R_cos 0.5 (~10 GB, minutes).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np
import torch


def make_data(nodes: int, seed: int = 0):
    """x [nodes, 384] clustered features, z [nodes, 64] embeddings correlated with them."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(50, 384, generator=g)
    cluster = torch.randint(0, 50, (nodes,), generator=g)
    x = centres[cluster] + 0.55 * torch.randn(nodes, 384, generator=g)
    z = x @ (torch.randn(384, 64, generator=g) / 384**0.5) + 1.5 * torch.randn(nodes, 64, generator=g)
    return x, z


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def run_case(case: str, r_cos: float, nodes: int, threads: int, chunk_size: int = 2048) -> dict:
    from lib.metrics.aauc import aauc, sample_nodes

    torch.set_num_threads(threads)
    x, z = make_data(nodes)
    base = _rss_kib()
    t0 = time.perf_counter()
    if case == "dense":
        from sklearn.metrics import roc_auc_score
        from sklearn.metrics.pairwise import cosine_similarity

        idx = sample_nodes(nodes, r_cos, 0).numpy()
        zs, xs = z.numpy()[idx].astype(np.float64), x.numpy()[idx].astype(np.float64)
        scores = zs @ zs.T  # logits: the seed's sigmoid ranks identically (and float32 sigmoid would tie)
        labels = cosine_similarity(xs) > 0.7
        value, n_pairs = float(roc_auc_score(labels.ravel(), scores.ravel())), labels.size
    else:
        r = aauc(z, x, r_cos, 0.7, seed=0, include_self=(case == "ours_self"), chunk_size=chunk_size)
        value, n_pairs = r.value, r.n_pos + r.n_neg
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {
        "case": case,
        "r_cos": r_cos,
        "chunk_size": chunk_size if case != "dense" else None,
        "pairs": n_pairs,
        "value": value,
        "seconds": seconds,
        "peak_mib": (peak - base) / 1024,
    }


def child(case: str, r_cos: float, nodes: int, threads: int, chunk_size: int) -> dict:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            case,
            str(r_cos),
            str(chunk_size),
            "--nodes",
            str(nodes),
            "--threads",
            str(threads),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=20000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dense-at", default="0.1", help="comma-separated R_cos values for the dense reference")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(run_case(a.child[0], float(a.child[1]), a.nodes, a.threads, int(a.child[2]))))
        return
    cases = [("ours", 0.1, 2048), ("ours_self", 0.1, 2048), ("ours", 0.5, 2048), ("ours", 0.5, 256)] + [
        ("dense", float(r), 0) for r in a.dense_at.split(",")
    ]
    rows = []
    for case, r, chunk in cases:
        rows.append(child(case, r, a.nodes, a.threads, chunk))
        row = rows[-1]
        print(
            f"{row['case']:10s} R_cos={row['r_cos']:<4} chunk={str(row['chunk_size']):5s} "
            f"pairs={row['pairs']:>11,}  A-AUC={row['value']:.6f}  "
            f"{row['seconds']:7.2f} s  peak +{row['peak_mib']:8.1f} MiB",
            flush=True,
        )
    by = {(r["case"], r["r_cos"], r["chunk_size"]): r for r in rows}
    ref, ours, ours_self = by[("dense", 0.1, None)], by[("ours", 0.1, 2048)], by[("ours_self", 0.1, 2048)]
    assert abs(ours_self["value"] - ref["value"]) < 1e-9, "seed variant disagrees with the dense reference"
    print(
        f"\nR_cos 0.1, {a.nodes:,} nodes: ours (self-pairs excluded) / dense reference: time "
        f"{ours['seconds'] / ref['seconds']:.2f}x, peak memory {ours['peak_mib'] / max(ref['peak_mib'], 1e-9):.2f}x; "
        f"seed variant equals the reference ({ours_self['value']:.6f})."
    )
    for chunk in (2048, 256):
        big = by[("ours", 0.5, chunk)]
        print(
            f"R_cos 0.5, chunk_size {chunk}: {big['pairs']:,} pairs in {big['seconds']:.1f} s, peak "
            f"+{big['peak_mib']:.0f} MiB (a dense S×S float64 score matrix alone: "
            f"{(a.nodes * 0.5) ** 2 * 8 / 2**20:,.0f} MiB, plus as much again for the labels)."
        )
    assert abs(by[("ours", 0.5, 2048)]["value"] - by[("ours", 0.5, 256)]["value"]) < 1e-12


if __name__ == "__main__":
    main()
