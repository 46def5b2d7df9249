"""Figures the notebooks show, drawn here so a notebook cell only calls them (and a test can): every function returns
its matplotlib Figure and, given a path, writes it as a PNG through `saved`."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd


def saved(fig, path: str | os.PathLike | None, dpi: int = 120, outer_legend: bool = False):
    """fig laid out and, when `path` is given, written there (its folder made first); returns fig. `outer_legend`: the
    file is cropped to everything drawn, so a figure legend placed beside the axes is kept."""
    import warnings

    with warnings.catch_warnings():  # a crowded figure keeps its layout; the warning would print this file's path
        warnings.filterwarnings("ignore", "Tight layout not applied", UserWarning)
        fig.tight_layout()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi, bbox_inches="tight" if outer_legend else None)
    return fig


def pca_topics(titles: list[str], vectors: np.ndarray, topic_of: dict[str, str], seed: int,
               path: str | os.PathLike | None = None, model_name: str = "all-MiniLM-L6-v2"):
    """Title embeddings [N, D] projected on their first two principal components, coloured by topic; titles
    without a topic ("Uncategorized" or unknown) are drawn first, in grey, under the others."""
    import matplotlib.pyplot as plt
    from sklearn.decomposition import PCA

    pca = PCA(n_components=2, random_state=seed)
    z = pca.fit_transform(vectors)
    labels = pd.Series([topic_of.get(t, "unknown") for t in titles])
    groups = labels.groupby(labels).groups
    no_topic = [tp for tp in ("Uncategorized", "unknown") if tp in groups]
    palette = [plt.cm.tab10(i) for i in range(10)] + ["black", "navy", "maroon", "teal", "darkgoldenrod", "indigo"]
    fig, ax = plt.subplots(figsize=(9, 6.5))
    for tp in no_topic:
        ax.scatter(z[groups[tp], 0], z[groups[tp], 1], s=4, alpha=0.35, color="lightgrey",
                   label=f"{tp} ({len(groups[tp])})")
    for i, tp in enumerate(sorted(set(groups) - set(no_topic))):
        idx = groups[tp]
        ax.scatter(z[idx, 0], z[idx, 1], s=6, alpha=0.75, color=palette[i % len(palette)], label=f"{tp} ({len(idx)})")
    ax.set(title=f"{model_name} title embeddings, PCA ({pca.explained_variance_ratio_.sum():.1%} of variance)",
           xlabel="PC 1", ylabel="PC 2")
    ax.legend(fontsize=7, markerscale=3, loc="center left", bbox_to_anchor=(1, 0.5))
    return saved(fig, path)


def protocol_bars(means: pd.DataFrame, models: list[str], sets: list[str], protocols: list[str], n_seeds: int,
                  path: str | os.PathLike | None = None):
    """Notebook 03: test AUC per protocol, one panel per negative set, one bar per model · supervision.
    means: rows {protocol, negatives, model, supervision, auc, auc_std} (mean and std over seeds)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharey=True, squeeze=False)
    axes = axes.ravel()
    for ax in axes[len(sets):]:
        ax.set_visible(False)
    width = 0.8
    for ax, n in zip(axes, sets):
        g = means[means["negatives"] == n]
        labels = [f"{m}" + (f" · {sv}" if sv != "none" else "") for m in models
                  for sv in g[g["model"] == m]["supervision"].unique()]
        width = 0.8 / max(1, len(labels))
        for i, lab in enumerate(labels):
            m, _, sv = lab.partition(" · ")
            r = g[(g["model"] == m) & (g["supervision"] == (sv or "none"))].set_index("protocol").reindex(protocols)
            ax.bar(np.arange(len(protocols)) + i * width, r["auc"], width, yerr=r["auc_std"].fillna(0), capsize=1.5,
                   label=lab, color=f"C{i % 10}", hatch="//" if sv == "disjoint" else None)
        ax.axhline(0.5, color="grey", lw=0.8, ls=":")
        ax.set(xticks=np.arange(len(protocols)) + 0.4 - width / 2, xticklabels=protocols, ylim=(0.3, 1.0),
               title=f"test AUC, {n} negatives (mean ± std over {n_seeds} seeds)")
    axes[0].set_ylabel("AUC")
    axes[len(sets) - 1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1, 0.5))
    return saved(fig, path)


def beyond_bars(rows: pd.DataFrame, models: list[str], n_seeds: int, hatched=(), path: str | os.PathLike | None = None):
    """Notebook 03b: test AUC and MRR per protocol × negative set, one bar per model (mean ± std over seeds);
    `hatched` models (the heuristic stacks) are hatched. rows: one per seed {protocol, negatives, model, auc, mrr}."""
    import matplotlib.pyplot as plt

    show = [m for m in models if m in set(rows["model"])]
    mean = rows.groupby(["protocol", "negatives", "model"])[["auc", "mrr"]].mean()
    std = rows.groupby(["protocol", "negatives", "model"])[["auc", "mrr"]].std()
    combos = list(dict.fromkeys(zip(rows["protocol"], rows["negatives"])))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2))
    for ax, metric in zip(axes, ("auc", "mrr")):
        width = 0.85 / len(show)
        for i, m in enumerate(show):
            vals = [mean[metric].get((p, n, m), np.nan) for p, n in combos]
            errs = [std[metric].get((p, n, m), 0) for p, n in combos]
            ax.bar(np.arange(len(combos)) + i * width, vals, width, yerr=np.nan_to_num(errs), capsize=1.5, label=m,
                   color=f"C{i % 10}", hatch="//" if m in hatched else None)
        ax.set(xticks=np.arange(len(combos)) + 0.425 - width / 2, xticklabels=[f"{p}\n{n}" for p, n in combos],
               ylabel=metric.upper(), title=f"test {metric.upper()} (mean ± std over {n_seeds} seeds)")
    axes[0].set_ylim(0.3, 1.0)
    axes[1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1, 0.5))
    return saved(fig, path)


def degree_distribution(graphs: list, stats: pd.DataFrame, path: str | os.PathLike | None = None):
    """Left: each crawled graph's degree distribution on log-log axes (nodes per degree); right: the share of
    degree-1 leaves per root (stats: lib.crawl.campaign.graph_stats rows with root, leaf_share)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for g in graphs:
        deg = np.bincount(np.asarray(g.edges, dtype=np.int64).reshape(-1), minlength=g.num_nodes)
        counts = pd.Series(deg).value_counts().sort_index()
        axes[0].loglog(counts.index, counts.values, ".", alpha=0.6, label=g.root)
    axes[0].set(xlabel="degree", ylabel="nodes", title="Degree distribution (log-log)")
    axes[0].legend(fontsize=6, ncol=2)
    stats.plot.bar(x="root", y="leaf_share", ax=axes[1], legend=False, title="Share of degree-1 leaves")
    return saved(fig, path)
