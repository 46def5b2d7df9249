"""A-AUC inside groups of nodes (notebook 04): among the pairs of one topic label, and among the pairs inside one
BFS branch of the crawl versus across two branches — where the seed's similarity-based metric has signal to find."""

from __future__ import annotations

import os

import matplotlib.pyplot as plt
import pandas as pd

from lib.aauc.stage import embed_graph, topic_table
from lib.common.seeding import derive_seed
from lib.crawl.bfs import bfs_branches
from lib.metrics.aauc import aauc_by_group, aauc_inside_across
from lib.viz.figures import saved


def group_tables(
    models: dict,
    splits: dict,
    graphs: dict,
    ds,
    crawl_dir: str | os.PathLike,
    seeds: list,
    r_cos: float,
    t_cos: float,
    device="cpu",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The trained GatModel of each seed (models[seed]["gat_model"]) on its test graphs: (per-topic table
    (lib.aauc.stage.topic_table; empty for a source without topic labels), rows {seed, graph_id, pairs: "inside" |
    "across", value, n_pos, n_neg, ...} per graph). The node sample of a graph is seeded by (seed, graph) alone, so
    both splits of the pairs come from the same nodes."""
    topic_rows, branch_rows = [], []
    for s in seeds:
        for g in splits[s]["test"]:
            data, a_seed = graphs[g], derive_seed(s, "eval-aauc", g)
            z = embed_graph(models[s]["gat_model"], data, device)
            labels = data.topics or [None] * data.num_nodes
            for topic, r in aauc_by_group(z, data.x, labels, r_cos, t_cos, a_seed).items():
                topic_rows.append({"seed": s, "graph_id": g, "topic": topic, **r.to_dict()})
            branches = bfs_branches(ds.crawl_graph(g, crawl_dir))
            for where, r in aauc_inside_across(z, data.x, branches, r_cos, t_cos, a_seed).items():
                branch_rows.append({"seed": s, "graph_id": g, "pairs": where, **r.to_dict()})
    return topic_table(topic_rows), pd.DataFrame(branch_rows)


def branch_table(branches: pd.DataFrame) -> pd.DataFrame:
    """Inside / across rows -> one row each: mean and std A-AUC, pair counts and the share of similar pairs."""
    t = branches.groupby("pairs").agg(
        aauc=("value", "mean"), aauc_std=("value", "std"), n_pos=("n_pos", "sum"), n_neg=("n_neg", "sum")
    )
    t["share_pos"] = t["n_pos"] / (t["n_pos"] + t["n_neg"])
    return t


def plot_groups(topics: pd.DataFrame, branches: pd.DataFrame, path=None):
    """A-AUC per topic (left, one horizontal bar per topic in the table's order) and inside / across BFS branches
    (right, a branch_table); chance at 0.5."""
    tt = topics[topics["aauc"].notna()]
    fig, (a, b) = plt.subplots(
        1, 2, figsize=(10, max(3.2, 0.28 * len(tt) + 1.4)), gridspec_kw={"width_ratios": [2.2, 1]}
    )
    a.barh(tt.index, tt["aauc"], xerr=tt["aauc_std"].fillna(0), capsize=2, color="C1")
    a.invert_yaxis()
    a.axvline(0.5, color="grey", lw=0.8, ls=":")
    a.tick_params(axis="y", labelsize=8)
    a.set(
        xlabel="A-AUC (mean ± std over test graphs and seeds)",
        xlim=(0, 1),
        title="A-AUC among the pairs inside one topic",
    )
    if tt.empty:
        a.text(0.5, 0.5, "no topic labels in this run", ha="center", transform=a.transAxes)
    b.bar(branches.index, branches["aauc"], yerr=branches["aauc_std"].fillna(0), capsize=3, color="C2")
    b.axhline(0.5, color="grey", lw=0.8, ls=":")
    b.set(ylabel="A-AUC", title="pairs inside one BFS branch\nor across two", ylim=(0, 1))
    return saved(fig, path)
