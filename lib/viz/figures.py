"""Figures the notebooks show, drawn here so a notebook cell only calls them (and a test can): every function returns
its matplotlib Figure and, given a path, writes it as a PNG through `saved`."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def saved(fig, path: str | os.PathLike | None, dpi: int = 120, outer_legend: bool = False, rect: tuple = (0, 0, 1, 1)):
    """fig laid out within `rect` (figure fractions left, bottom, right, top: room for a figure legend below) and,
    when `path` is given, written there (its folder made first); returns fig. `outer_legend`: the file is cropped to
    everything drawn, so a figure legend placed beside the axes is kept."""

    with warnings.catch_warnings():  # a crowded figure keeps its layout; the warning would print this file's path
        warnings.filterwarnings("ignore", "Tight layout not applied", UserWarning)
        fig.tight_layout(rect=rect)
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi, bbox_inches="tight" if outer_legend else None)
    return fig


def pca_topics(
    titles: list[str],
    vectors: np.ndarray,
    topic_of: dict[str, str],
    seed: int,
    path: str | os.PathLike | None = None,
    model_name: str = "all-MiniLM-L6-v2",
):
    """Title embeddings [N, D] projected on their first two principal components, coloured by topic; titles
    without a topic ("Uncategorized" or unknown) are drawn first, in grey, under the others."""
    from sklearn.decomposition import PCA  # lazy: slow to load; only notebook 02's PCA figure uses it

    pca = PCA(n_components=2, random_state=seed)
    z = pca.fit_transform(vectors)
    labels = pd.Series([topic_of.get(t, "unknown") for t in titles])
    groups = labels.groupby(labels).groups
    no_topic = [tp for tp in ("Uncategorized", "unknown") if tp in groups]
    palette = [plt.cm.tab10(i) for i in range(10)] + ["black", "navy", "maroon", "teal", "darkgoldenrod", "indigo"]
    fig, ax = plt.subplots(figsize=(9, 6.5))
    for tp in no_topic:
        ax.scatter(
            z[groups[tp], 0], z[groups[tp], 1], s=4, alpha=0.35, color="lightgrey", label=f"{tp} ({len(groups[tp])})"
        )
    for i, tp in enumerate(sorted(set(groups) - set(no_topic))):
        idx = groups[tp]
        ax.scatter(z[idx, 0], z[idx, 1], s=6, alpha=0.75, color=palette[i % len(palette)], label=f"{tp} ({len(idx)})")
    ax.set(
        title=f"{model_name} title embeddings, PCA ({pca.explained_variance_ratio_.sum():.1%} of variance)",
        xlabel="PC 1",
        ylabel="PC 2",
    )
    ax.legend(fontsize=7, markerscale=3, loc="center left", bbox_to_anchor=(1, 0.5))
    return saved(fig, path)


def bar_labels(ax, bars, names, fontsize=7):
    """Write each bar's own name on it, bottom up, in black (bars carrying names have light colours): the model of a
    bar that changes from group to group."""
    for rect, name in zip(bars, names):
        if name and np.isfinite(rect.get_height()) and rect.get_height() > 0:
            ax.annotate(
                name,
                (rect.get_x() + rect.get_width() / 2, ax.get_ylim()[0]),
                xytext=(0, 3),
                textcoords="offset points",
                rotation=90,
                ha="center",
                va="bottom",
                fontsize=fontsize,
                bbox={"facecolor": "white", "alpha": 0.75, "lw": 0, "pad": 0.6},
            )


def degree_distribution(graphs: list, stats: pd.DataFrame, path: str | os.PathLike | None = None, each_up_to: int = 12):
    """Left: each crawled graph's degree distribution as the share of nodes with degree ≥ k on log-log axes, one
    colour per graph up to `each_up_to` graphs, else every graph in grey under the median over graphs; right: the
    share of degree-1 leaves per root (bars, in the left panel's colours) or, for more graphs, its histogram over
    roots. stats: lib.crawl.campaign.graph_stats rows with root, leaf_share."""
    each = len(graphs) <= each_up_to
    colours = [(plt.cm.tab10 if len(graphs) <= 10 else plt.cm.tab20)(i % 20) for i in range(len(graphs))]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.9), gridspec_kw={"width_ratios": [1.25, 1]})
    top = 1 + max((g.num_nodes for g in graphs), default=1)
    grid, shares = np.arange(1, top), []
    for i, g in enumerate(graphs):
        deg = np.bincount(np.asarray(g.edges, dtype=np.int64).reshape(-1), minlength=g.num_nodes)
        share = 1 - np.searchsorted(np.sort(deg), grid, side="left") / max(1, len(deg))
        shares.append(share)
        last = int(np.max(deg, initial=1))
        axes[0].loglog(
            grid[:last],
            share[:last],
            lw=1 if each else 0.5,
            alpha=0.9 if each else 0.2,
            color=colours[i] if each else "0.6",
        )
    if shares and not each:
        med = np.median(np.vstack(shares), axis=0)
        keep = med >= 1 / max(g.num_nodes for g in graphs)  # below one node the median halves a 0 and a 1/n
        axes[0].loglog(grid[keep], med[keep], color="C0", lw=2, label=f"median over {len(graphs)} graphs")
        axes[0].legend(fontsize=8)
    axes[0].set(
        xlabel="degree k",
        ylabel="share of nodes with degree ≥ k",
        title=f"Degree distribution of {len(graphs)} graph{'s' * (len(graphs) != 1)}"
        + (" (colours: right panel)" if each else " (grey: one each)"),
    )
    if each:
        axes[1].barh(stats["root"], stats["leaf_share"], color=colours[: len(stats)])
        axes[1].invert_yaxis()
        axes[1].tick_params(axis="y", labelsize=8)
        axes[1].set(xlabel="share of degree-1 leaves", title="Degree-1 leaves per root")
    else:
        axes[1].hist(stats["leaf_share"], bins=30, color="C0")
        axes[1].set(
            xlabel="share of degree-1 leaves in a graph",
            ylabel="graphs",
            title=f"Degree-1 leaves over {len(stats)} roots",
        )
    return saved(fig, path)
