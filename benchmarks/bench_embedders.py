"""Benchmark node embedders: titles/s of all-MiniLM-L6-v2 (stage 2's fp32 path) against model2vec static models
distilled from it, at one thread and at every core, on the same titles, measured in the same run.

    .venv/bin/python benchmarks/bench_embedders.py            # 10,033 vital-article titles, 5 interleaved repetitions
    .venv/bin/python benchmarks/bench_embedders.py --quick    # 2,000 titles, 1 repetition, no distillation timing

1. Distillation: wall time of one model2vec distillation from the local all-MiniLM-L6-v2 folder (`--pca`, into a
   temporary folder; skipped with --quick).
2. Encoding: `lib.embed.encoder.encode` (what `embed_titles` runs: equal-length batches of 256 for the transformer, the
   sparse table lookup of lib.embed.static for a static model), titles/s as the median over repetitions that alternate
   the encoders, so a noisy shared machine slows them alike; the ratio to all-MiniLM-L6-v2 at the same thread count;
   peak RSS growth while loading the model and during one encode call.
Static models are those in `--static` folders, else distilled once into outputs/cache/models/static/ (widths `--pca`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_embed import PeakRSS, vital_titles  # same folder: the peak-RSS sampler and the title list of bench_embed


def static_folders(args) -> list[Path]:
    from lib.common.paths import CACHE
    from lib.embed.encoder import default_model_dir
    from lib.embed.static import STATIC_CONFIG, distil

    if args.static:
        return [Path(f) for f in args.static]
    out = []
    for p in args.pca:
        folder = CACHE / "models" / "static" / (f"all-MiniLM-L6-v2_pca{p}" if p else "all-MiniLM-L6-v2_nopca")
        if not (folder / STATIC_CONFIG).is_file():
            distil(default_model_dir(), folder, pca_dims=p or None, source_name="all-MiniLM-L6-v2")
        out.append(folder)
    return out


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--titles", type=int, default=0, help="number of unique titles (0 = all 10,033)")
    ap.add_argument("--reps", type=int, default=5, help="interleaved repetitions per encoder and thread count")
    ap.add_argument("--pca", type=int, nargs="+", default=[256, 0], help="static widths distilled (0: no PCA)")
    ap.add_argument("--static", nargs="*", default=[], help="static model folders to time instead of distilling")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, os.cpu_count() or 1], help="thread counts")
    ap.add_argument("--quick", action="store_true", help="2,000 titles, 1 repetition, no distillation timing")
    ap.add_argument("--json", default="", help="also write the figures to this JSON file")
    args = ap.parse_args()
    if args.quick:
        args.titles, args.reps = 2000, 1

    import torch

    from lib.embed.encoder import default_model_dir, load_model
    from lib.embed.static import distil
    from lib.embedders.evaluate import titles_per_second

    titles = vital_titles()
    titles = titles[: args.titles] if args.titles else titles
    results = {
        "titles": len(titles),
        "threads": args.threads,
        "torch": torch.__version__,
        "encoders": {},
        "loadavg_1min_start": os.getloadavg()[0],
    }
    print(
        f"{len(titles)} unique titles | torch {torch.__version__} | {os.cpu_count()} cores | threads {args.threads} | "
        f"load average {os.getloadavg()[0]:.1f} (other processes slow every encoder, the transformer at 2 threads most)"
    )
    if not args.quick:
        with tempfile.TemporaryDirectory() as tmp, PeakRSS() as mem:
            t0 = time.perf_counter()
            distil(default_model_dir(), Path(tmp) / "m2v", pca_dims=args.pca[0] or None)
            sec = time.perf_counter() - t0
        results["distil"] = {
            "pca": args.pca[0],
            "seconds": sec,
            "threads": torch.get_num_threads(),
            "peak_rss_growth_mib": mem.mib,
        }
        print(
            f"distil (pca {args.pca[0] or 'none'}, {torch.get_num_threads()} threads): {sec:.1f} s, "
            f"peak +{mem.mib:.0f} MiB"
        )

    folders = [None] + static_folders(args)
    models, load_mib = {}, {}
    for f in folders:
        with PeakRSS() as mem:
            m = load_model(f)
        name = "all-MiniLM-L6-v2 (fp32, bs 256)" if f is None else f"static {m.dim}-d ({Path(f).name})"
        models[name], load_mib[name] = m, mem.mib
    rates = {(n, t): [] for n in models for t in args.threads}
    peak = {n: 0.0 for n in models}
    for rep in range(args.reps):
        for t in args.threads:
            for name, m in models.items():
                with PeakRSS() as mem:
                    rates[(name, t)].append(titles_per_second({name: m}, titles, 1, t)[name])
                peak[name] = max(peak[name], mem.mib)
        print(f"  rep {rep + 1}/{args.reps}: " + ", ".join(f"{v[-1]:.0f}/s" for v in rates.values()))
    ref = next(iter(models))
    print(f"\n{'encoder':44s} {'threads':>7s} {'titles/s':>10s} {'x MiniLM':>9s} {'load MiB':>9s} {'encode MiB':>11s}")
    for name in models:
        rows = {}
        for t in args.threads:
            med = statistics.median(rates[(name, t)])
            ratio = med / statistics.median(rates[(ref, t)])
            rows[str(t)] = {"titles_per_s": med, "ratio_to_minilm": ratio, "reps": rates[(name, t)]}
            print(f"{name:44s} {t:7d} {med:10.0f} {ratio:9.1f} {load_mib[name]:9.1f} {peak[name]:11.1f}")
        results["encoders"][name] = {
            "threads": rows,
            "load_rss_growth_mib": load_mib[name],
            "encode_peak_rss_growth_mib": peak[name],
        }
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    results["loadavg_1min_end"] = os.getloadavg()[0]
    print(f"\nprocess peak RSS {maxrss:.0f} MiB (every model loaded at once); load average {os.getloadavg()[0]:.1f}")
    results["process_peak_rss_mib"] = maxrss
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
