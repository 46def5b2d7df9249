"""Seed-scale check: crawl -> embed -> dataset -> train on a few 20,000-node graphs of a synthetic
snapshot, extrapolated to the seed's full campaign of 389 graphs x 20,000 nodes.

    .venv/bin/python benchmarks/bench_seed_scale.py            # ~3-6 minutes on one core
    .venv/bin/python benchmarks/bench_seed_scale.py --graphs 3 --nodes 20000 --ref-nodes 2000 --threads 1

Every stage runs through the repository's own public functions, each in its own child process (so its peak
memory is its own), first at `--ref-nodes` (the demo's 2,000, the reference) and then at `--nodes` (the seed's
20,000), on the same `--graphs` roots:

  crawl    lib.crawl.campaign.run_campaign over SnapshotSource(tests.mockwiki.synthetic_snapshot(--articles));
           in-process, so no network time (a live crawl is bounded by its requests instead: see bench_crawl.py);
  embed    lib.embed.store.embed_titles with the real all-MiniLM-L6-v2 (lib.embed.encoder.load_model) into a
           fresh store;
  dataset  lib.embed.dataset.build_dataset (float32 features);
  train    lib.linkpred.train.train_model("gat_model", seed architecture, TrainConfig(epochs=1) with the seed's
           settings, per-step A-AUC and eval logging included), one optimiser step per graph; no validation graphs;
  train_nolog  the same with log_aauc=False, log_eval=False: what the per-step logging costs;
  train_thin   the same with notebook 03's logging settings (--log-every, --log-aauc-nodes; by default notebook 03's
           defaults, thinned at the seed's size): what they cost.

Extrapolation to the campaign: crawl and dataset scale with graphs (x 389 / measured); embed scales with distinct
titles (389 x 20,000 x (1 - shared share), shared share 0.92 as measured on the seed's live campaign, i.e.
~622,000 titles); train with steps (389 graphs x 2 epochs, one seed; also the seed40 + seed180 + seed315 runs,
(40 + 180 + 315) x 2 steps per seed). Peak memory: every stage holds one graph at a time (the embedding store is
memory-mapped), so its measured peak at --nodes carries over, except embed, whose peak grows with the number of
titles to encode: extrapolated along the line through its two measured peaks (reference and --nodes runs). Disk scales
like time. "ratio" = per-graph (embed: per-title) time at --nodes / at --ref-nodes, both measured in this run: 10 means
linear in graph size.

Peak RSS = ru_maxrss of the stage's child process (Linux: KiB), including the interpreter, torch and (crawl) the
in-memory synthetic snapshot; "base" is the RSS after imports and set-up (snapshot built, model loaded), before the
stage's work.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

STAGES = ("crawl", "embed", "dataset", "train", "train_nolog", "train_thin")
SEED_SHARED_SHARE = 0.92  # distinct-title share shared between graphs on the seed's live campaign
SEED_RUNS_TRAIN_GRAPHS = (40, 180, 315)  # seed40, seed180, seed315


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def roots_for(n_articles: int, graphs: int) -> list[str]:
    """Evenly spaced article titles, one per community region, so the graphs overlap as BFS balls do."""
    width = len(str(n_articles))
    return [f"Article {(k * n_articles) // graphs:0{width}d}" for k in range(graphs)]


def stage_crawl(a, work: Path) -> dict:
    from lib.crawl.campaign import run_campaign
    from lib.crawl.sources import SnapshotSource

    sys.path.insert(
        0, str(Path(__file__).resolve().parents[1] / "tests")
    )  # the synthetic snapshot lives with the tests
    from mockwiki import synthetic_snapshot

    t0 = time.perf_counter()
    source = SnapshotSource(synthetic_snapshot(a.articles, seed=0))  # hashes the snapshot once: set-up, not crawl
    setup = time.perf_counter() - t0
    base = rss_mb()
    t0 = time.perf_counter()
    manifest = run_campaign(roots_for(a.articles, a.graphs), source, work / "crawl", a.size, progress=False)
    seconds = time.perf_counter() - t0
    ok = [r for r in manifest["roots"].values() if r["status"] == "ok"]
    files = [work / "crawl" / r["file"] for r in ok]
    from lib.common.graphio import read_graph

    titles = [t for f in files for t in read_graph(f).titles]
    return {
        "setup_s": setup,
        "seconds": seconds,
        "units": len(ok),
        "base_mb": base,
        "nodes": [r["num_nodes"] for r in ok],
        "edges": [r["num_edges"] for r in ok],
        "bytes": sum(f.stat().st_size for f in files),
        "titles": len(titles),
        "distinct": len(set(titles)),
    }


def stage_embed(a, work: Path) -> dict:
    from lib.common.graphio import read_graph
    from lib.embed.encoder import load_model
    from lib.embed.store import EmbeddingStore, embed_titles

    t0 = time.perf_counter()
    model = load_model()
    titles = [t for f in sorted((work / "crawl" / "graphs").glob("*.json")) for t in read_graph(f).titles]
    store = EmbeddingStore(work / "store", model.wikigat_model_id)
    setup, base = time.perf_counter() - t0, rss_mb()
    stats = embed_titles(titles, model, store, progress=False)
    size = sum(f.stat().st_size for f in (work / "store").rglob("*") if f.is_file())
    return {
        "setup_s": setup,
        "seconds": stats["seconds"],
        "units": stats["newly_encoded"],
        "base_mb": base,
        "bytes": size,
    }


def stage_dataset(a, work: Path) -> dict:
    from lib.embed.dataset import build_dataset
    from lib.embed.encoder import load_model
    from lib.embed.store import EmbeddingStore

    t0 = time.perf_counter()
    store = EmbeddingStore(work / "store", load_model().wikigat_model_id)
    files = sorted((work / "crawl" / "graphs").glob("*.json"))
    setup, base = time.perf_counter() - t0, rss_mb()
    t0 = time.perf_counter()
    build_dataset(files, store, work / "dataset", progress=False)
    seconds = time.perf_counter() - t0
    size = sum(f.stat().st_size for f in (work / "dataset" / "graphs").glob("*.pt"))
    return {"setup_s": setup, "seconds": seconds, "units": len(files), "base_mb": base, "bytes": size}


def stage_train(a, work: Path, log: bool = True, thin: bool = False) -> dict:
    from lib.embed.dataset import GraphDataset
    from lib.linkpred.config import GatParams
    from lib.linkpred.train import train_model

    t0 = time.perf_counter()
    ds = GraphDataset(work / "dataset")
    graphs = [ds[i] for i in range(len(ds))]
    p = GatParams(gat_epochs=1)  # notebook 03's GatModel and training settings
    model_cfg = p.model_config(ds.num_features or 384)
    setup, base = time.perf_counter() - t0, rss_mb()
    t0 = time.perf_counter()
    cfg = replace(p.train_config(0), log_aauc=log, log_eval=log, log_every=1, log_aauc_nodes=0)  # the seed's
    if thin:
        cfg = replace(cfg, log_every=a.log_every, log_aauc_nodes=a.log_aauc_nodes)
    _, res = train_model("gat_model", model_cfg, graphs, [], cfg, progress=False)
    seconds = time.perf_counter() - t0
    return {
        "setup_s": setup,
        "seconds": seconds,
        "units": len(res.history),
        "base_mb": base,
        "bytes": 0,
        "step_s": [round(h["seconds"], 2) for h in res.history],
        "logged": sum(h.get("auc_eval") is not None for h in res.history),
    }


def child(a) -> int:
    import torch

    torch.set_num_threads(a.threads)
    work = Path(a.workdir)
    stages = {
        "crawl": stage_crawl,
        "embed": stage_embed,
        "dataset": stage_dataset,
        "train": stage_train,
        "train_nolog": lambda a, w: stage_train(a, w, log=False),
        "train_thin": lambda a, w: stage_train(a, w, thin=True),
    }
    out = stages[a.stage](a, work)
    out["peak_mb"] = peak_mb()
    print("RESULT " + json.dumps(out))
    return 0


def run_stage(a, stage: str, size: int, work: Path) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--stage",
        stage,
        "--size",
        str(size),
        "--workdir",
        str(work),
        "--graphs",
        str(a.graphs),
        "--articles",
        str(a.articles),
        "--threads",
        str(a.threads),
        "--log-every",
        str(a.log_every),
        "--log-aauc-nodes",
        str(a.log_aauc_nodes),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True)
    line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
    if p.returncode or line is None:
        raise RuntimeError(f"stage {stage} at {size} nodes failed:\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    return json.loads(line[len("RESULT ") :])


def fmt_time(s: float) -> str:
    return f"{s:.1f} s" if s < 120 else (f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h")


def fmt_bytes(b: float) -> str:
    return "-" if not b else (f"{b / 1e6:.0f} MB" if b < 1e9 else f"{b / 1e9:.1f} GB")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", type=int, default=3, help="graphs measured per size")
    ap.add_argument("--nodes", type=int, default=20000, help="graph size to extrapolate from (the seed's)")
    ap.add_argument("--ref-nodes", type=int, default=2000, help="reference graph size measured in the same run")
    ap.add_argument("--articles", type=int, default=60000, help="articles in the synthetic snapshot")
    ap.add_argument("--campaign-graphs", type=int, default=389, help="graphs of the campaign extrapolated to")
    ap.add_argument("--epochs", type=int, default=2, help="training epochs of the campaign (seed §5.1)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per stage")
    ap.add_argument(
        "--log-every",
        type=int,
        default=0,
        help="train_thin: notebook 03's log_every (default: its default, by graph size)",
    )
    ap.add_argument("--log-aauc-nodes", type=int, default=0, help="train_thin: notebook 03's log_aauc_nodes")
    ap.add_argument("--keep", default="", help="keep the work folders here (default: a temporary folder)")
    ap.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.stage:
        return child(a)

    import tempfile

    from lib.linkpred.config import TrainConfig

    thin_cfg = TrainConfig(log_every=a.log_every, log_aauc_nodes=a.log_aauc_nodes)
    every, cap = thin_cfg.log_interval(a.nodes), thin_cfg.log_aauc_cap(a.nodes)
    cap_text = f"{cap:,}" if cap else "r_cos x N"
    t_start = time.perf_counter()
    tmp = tempfile.TemporaryDirectory(prefix="bench_seed_scale_") if not a.keep else None
    root = Path(a.keep or tmp.name)
    res: dict[int, dict[str, dict]] = {}
    for size in (a.ref_nodes, a.nodes):
        work = root / f"n{size}"
        work.mkdir(parents=True, exist_ok=True)
        res[size] = {}
        for stage in STAGES:
            print(f"{stage:<11} {a.graphs} graphs x {size:,} nodes ...", flush=True)
            res[size][stage] = run_stage(a, stage, size, work)
    big, ref = res[a.nodes], res[a.ref_nodes]
    crawl = big["crawl"]
    campaign_titles = a.campaign_graphs * a.nodes * (1 - SEED_SHARED_SHARE)
    seed_steps = sum(SEED_RUNS_TRAIN_GRAPHS) * a.epochs

    def per_unit(r: dict, stage: str) -> float:
        return r[stage]["seconds"] / max(r[stage]["units"], 1)

    rows = []
    for stage, unit, n_campaign, what in [
        ("crawl", "graph", a.campaign_graphs, f"{a.campaign_graphs} graphs"),
        ("embed", "title", campaign_titles, f"{campaign_titles:,.0f} distinct titles"),
        ("dataset", "graph", a.campaign_graphs, f"{a.campaign_graphs} graphs"),
        ("train", "step", a.campaign_graphs * a.epochs, f"{a.campaign_graphs} graphs x {a.epochs} epochs, 1 seed"),
        ("train_nolog", "step", a.campaign_graphs * a.epochs, "the same, without per-step A-AUC / eval logging"),
        (
            "train_thin",
            "step",
            a.campaign_graphs * a.epochs,
            f"the same, logging every {every} steps, A-AUC of <= {cap_text} nodes",
        ),
    ]:
        b, r = big[stage], ref[stage]
        t_unit = per_unit(big, stage)
        if stage == "embed":  # grows with the titles held for encoding: a line through the two measurements
            slope = max(0.0, (b["peak_mb"] - r["peak_mb"]) / max(b["units"] - r["units"], 1))
            mem = b["peak_mb"] + slope * max(n_campaign - b["units"], 0)
        else:
            mem = b["peak_mb"]
        disk = b["bytes"] / max(b["units"], 1) * n_campaign if b["bytes"] else 0
        rows.append((stage, unit, r, b, t_unit, per_unit(ref, stage), t_unit * n_campaign, what, mem, disk))

    print()
    print(
        f"Measured: {a.graphs} graphs of a synthetic snapshot ({a.articles:,} articles) at {a.ref_nodes:,} "
        f"(reference) and {a.nodes:,} nodes; {a.threads} torch thread(s). Graphs at {a.nodes:,}: nodes "
        f"{crawl['nodes']}, edges {crawl['edges']}; {crawl['distinct']:,} distinct of {crawl['titles']:,} titles "
        f"(shared share {1 - crawl['distinct'] / crawl['titles']:.2f}). Snapshot build {crawl['setup_s']:.0f} s "
        f"(not counted)."
    )
    head = (
        f"{'stage':<11} {'unit':<6} {'s/unit @' + format(a.ref_nodes, ','):>14} {'s/unit @' + format(a.nodes, ','):>15}"
        f" {'ratio':>6} {'peak RSS @ref':>13} {'peak @' + format(a.nodes, ','):>12} {'base':>7}"
        f" | {'campaign time':>13} {'campaign peak':>13} {'campaign disk':>13}  campaign = "
    )
    print(head)
    print("-" * len(head))
    total = 0.0
    for stage, unit, r, b, t_unit, t_ref, t_campaign, what, mem, disk in rows:
        ratio = t_unit / t_ref
        total += t_campaign if stage not in ("train_nolog", "train_thin") else 0
        print(
            f"{stage:<11} {unit:<6} {t_ref:>14.4g} {t_unit:>15.4g} {ratio:>6.1f} {r['peak_mb']:>10.0f} MB "
            f"{b['peak_mb']:>9.0f} MB {b['base_mb']:>4.0f} MB | {fmt_time(t_campaign):>13} {mem:>10.0f} MB "
            f"{fmt_bytes(disk):>13}  {what}"
        )
    print(
        f"{'total':<11} {'':<6} {'':>14} {'':>15} {'':>6} {'':>13} {'':>12} {'':>7} | {fmt_time(total):>13}"
        "  crawl + embed + dataset + train (with logging)"
    )
    t_step = per_unit(big, "train")
    print(
        f"train, seed40 + seed180 + seed315 ({seed_steps} steps per seed at {a.epochs} epochs): "
        f"{fmt_time(t_step * seed_steps)} per seed, {fmt_time(3 * t_step * seed_steps)} for 3 seeds "
        f"(training steps only; evaluation of the test graphs not included). Step times at {a.nodes:,} nodes: "
        f"{big['train']['step_s']} s."
    )
    # the thinned run logs every `every`-th step of an epoch: fewer measured steps than that log only the first, so
    # its cost is taken per logged step and spread over `every` steps
    bare, thin = per_unit(big, "train_nolog"), big["train_thin"]
    per_logged = (thin["seconds"] - bare * thin["units"]) / max(thin["logged"], 1)
    print(
        f"logging cost at {a.nodes:,} nodes against a step without logging ({bare:.3g} s): every step (the seed) "
        f"{(t_step - bare) / bare:+.0%}; one logged step with A-AUC of <= {cap_text} nodes "
        f"{per_logged:.3g} s, so every {every} steps {per_logged / every / bare:+.0%} per step."
    )
    print(
        "ratio: seconds per unit at the seed's size / at the reference size, measured in this run (per graph for "
        "crawl, dataset and train; per title for embed, where ~1 means the cost does not depend on graph size)."
    )
    print(f"total benchmark time {time.perf_counter() - t_start:.0f} s")
    if tmp:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
