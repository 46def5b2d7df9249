"""Redraw the committed reference figures from the inputs committed beside them (outputs/reference/<run>/), so the
repository's PNGs are what the current plot functions draw, called as the notebooks call them.

    python scripts/render_reference_figures.py                 # every figure whose inputs are committed
    python scripts/render_reference_figures.py --crawl seed40  # also the degree figure, re-crawling the offline source

Redrawn: 03_protocols, 03_auc_vs_aauc (train_gat_rows.csv), 03b_beyond (beyond_rows.csv), 04_trend_size
(aauc_size_trend.csv), 04_groups (metrics.json), 05_learning_curves (distill/curves.csv), 06_kd_vs_control and
06_probing (rows.csv, probing.csv); with --crawl, 01_degree_distribution (the offline crawl is deterministic, so the
same roots give the same graphs). The others keep the PNG their notebook wrote: their inputs (training histories,
per-graph sensitivity and trade-off rows, the losses of long runs, attention maps, title embeddings) are not committed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from lib.common import published  # noqa: E402
from lib.common.paths import OUTPUTS  # noqa: E402

REFERENCE_RUNS = OUTPUTS / "reference"


def _json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def stage3(run: Path, fig: Path) -> list[str]:
    from lib.linkpred.heuristics import HEURISTICS
    from lib.linkpred.negative_sets.registry import NEGATIVE_SETS
    from lib.linkpred.plots import plot_auc_vs_aauc, protocol_bars

    if not (run / "train_gat_rows.csv").is_file():
        return []
    df = pd.read_csv(run / "train_gat_rows.csv")
    df["negatives"] = df["negatives"].map(published.negative_set)
    p = _json(run / "params_03_train_gat.json")["params"]
    tg = _json(run / "metrics.json")["train_gat"]
    keys = ["protocol", "negatives", "model", "supervision"]
    means = df.groupby(keys, sort=False)[["auc", "mrr"]].mean().reset_index()
    means["auc_std"] = df.groupby(keys, sort=False)["auc"].std().reset_index(drop=True)
    means = means[means["auc"].notna()]
    show = [m for m in ("gat_model", "plain_gat", "mlp") if m in set(df["model"])] + list(HEURISTICS)
    present = list(dict.fromkeys(means["negatives"]))
    sets = [n for n in NEGATIVE_SETS if n in present] + [n for n in present if n not in NEGATIVE_SETS]
    protocol_bars(means, show, sets, p["protocols"], len(tg["seeds"]), fig / "03_protocols.png")
    rows = df.astype(object).where(df.notna(), None).to_dict("records")
    n_train = len(tg["splits"][str(tg["seeds"][0])]["train"])
    plot_auc_vs_aauc(rows, n_train, fig / "03_auc_vs_aauc.png", supervision=p["train_supervision"][0])
    return ["03_protocols", "03_auc_vs_aauc"]


def stage3b(run: Path, fig: Path) -> list[str]:
    from lib.linkpred.beyond import STACKS
    from lib.linkpred.plots import beyond_bars

    if not (run / "beyond_rows.csv").is_file():
        return []
    rows = pd.read_csv(run / "beyond_rows.csv")
    beyond_bars(
        rows, list(dict.fromkeys(rows["model"])), rows["seed"].nunique(), hatched=STACKS, path=fig / "03b_beyond.png"
    )
    return ["03b_beyond"]


def stage4(run: Path, fig: Path) -> list[str]:
    from lib.aauc.groups import plot_groups
    from lib.aauc.plots import plot_trend
    from lib.metrics.link import SEED_REPORTED

    done = []
    if (run / "aauc_size_trend.csv").is_file():
        plot_trend(pd.read_csv(run / "aauc_size_trend.csv"), fig / "04_trend_size.png", seed_reported=SEED_REPORTED)
        done.append("04_trend_size")
    a = _json(run / "metrics.json").get("aauc_analysis") or {}
    if a.get("inside_across"):
        cols = ["topic", "aauc", "aauc_std", "defined", "graphs", "n_pos", "n_neg"]
        topics = pd.DataFrame(a.get("per_topic") or [], columns=cols).set_index("topic")
        plot_groups(topics, pd.DataFrame(a["inside_across"]).set_index("pairs"), fig / "04_groups.png")
        done.append("04_groups")
    return done


def stage5(run: Path, fig: Path) -> list[str]:
    from lib.distill.eval import plot_learning_curves

    d = run / "distill"
    if not (d / "curves.csv").is_file():
        return []
    c = pd.read_csv(d / "curves.csv")
    curves = {k: g.drop(columns="run").reset_index(drop=True) for k, g in c.groupby("run", sort=False)}
    plot_learning_curves(curves, pd.read_csv(d / "results.csv"), path=fig / "05_learning_curves.png")
    return ["05_learning_curves"]


def stage6(run: Path, fig: Path) -> list[str]:
    from lib.kd.plots import plot_kd, plot_probing

    if not (run / "rows.csv").is_file() or not (run / "probing.csv").is_file():
        return []
    plot_kd(pd.read_csv(run / "rows.csv"), _json(run / "metrics.json")["kd"]["teacher"], fig / "06_kd_vs_control.png")
    plot_probing(pd.read_csv(run / "probing.csv", index_col=0), fig / "06_probing.png")
    return ["06_kd_vs_control", "06_probing"]


def stage1(run: Path, fig: Path) -> list[str]:
    """The degree figure from the run's offline crawl, done again in memory (roots that fail are skipped, as the
    campaign skips them)."""
    from lib.crawl.bfs import bfs_crawl
    from lib.crawl.campaign import graph_stats, read_roots
    from lib.crawl.config import CrawlParams
    from lib.crawl.pages import RootSkipped
    from lib.crawl.sources import OFFLINE_SOURCES, notebook_source
    from lib.viz.figures import degree_distribution

    p = _json(run / "params_01_crawl.json").get("params") or {}
    if p.get("source") not in OFFLINE_SOURCES:
        return []
    cfg = CrawlParams.from_values(p)
    source = notebook_source(cfg)
    roots = read_roots(cfg.roots_file) if cfg.roots_file else cfg.roots
    graphs = []
    for root in roots:
        try:
            graphs.append(bfs_crawl(source, root, cfg.max_nodes))
        except RootSkipped:
            continue
    stats = pd.DataFrame([graph_stats(g) for g in graphs])
    degree_distribution(graphs, stats, fig / "01_degree_distribution.png")
    return ["01_degree_distribution"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", help="reference runs (default: every one)")
    ap.add_argument("--crawl", action="store_true", help="also redraw the degree figure by crawling again")
    a = ap.parse_args(argv)
    runs = [REFERENCE_RUNS / r for r in a.runs] or sorted(p.parent for p in REFERENCE_RUNS.glob("*/metrics.json"))
    for run in runs:
        fig = run / "figures"
        done = []
        for stage in (stage3, stage3b, stage4, stage5, stage6) + ((stage1,) if a.crawl else ()):
            done += stage(run, fig)
            plt.close("all")
        print(f"{run.name}: {', '.join(done) or 'nothing with committed inputs'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
