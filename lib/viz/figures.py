"""Figures the notebooks show, drawn here so a notebook cell only calls them (and a test can): every function returns
its matplotlib Figure and, given a path, writes it as a PNG through `saved`."""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from lib.linkpred.negative_sets.registry import set_title


def saved(fig, path: str | os.PathLike | None, dpi: int = 120, outer_legend: bool = False,
          rect: tuple = (0, 0, 1, 1)):
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


def pca_topics(titles: list[str], vectors: np.ndarray, topic_of: dict[str, str], seed: int,
               path: str | os.PathLike | None = None, model_name: str = "all-MiniLM-L6-v2"):
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
        ax.scatter(z[groups[tp], 0], z[groups[tp], 1], s=4, alpha=0.35, color="lightgrey",
                   label=f"{tp} ({len(groups[tp])})")
    for i, tp in enumerate(sorted(set(groups) - set(no_topic))):
        idx = groups[tp]
        ax.scatter(z[idx, 0], z[idx, 1], s=6, alpha=0.75, color=palette[i % len(palette)], label=f"{tp} ({len(idx)})")
    ax.set(title=f"{model_name} title embeddings, PCA ({pca.explained_variance_ratio_.sum():.1%} of variance)",
           xlabel="PC 1", ylabel="PC 2")
    ax.legend(fontsize=7, markerscale=3, loc="center left", bbox_to_anchor=(1, 0.5))
    return saved(fig, path)


def _bar_labels(ax, bars, names, fontsize=7):
    """Write each bar's own name on it, bottom up, in black (bars carrying names have light colours): the model of a
    bar that changes from group to group."""
    for rect, name in zip(bars, names):
        if name and np.isfinite(rect.get_height()) and rect.get_height() > 0:
            ax.annotate(name, (rect.get_x() + rect.get_width() / 2, ax.get_ylim()[0]), xytext=(0, 3),
                        textcoords="offset points", rotation=90, ha="center", va="bottom", fontsize=fontsize,
                        bbox={"facecolor": "white", "alpha": 0.75, "lw": 0, "pad": 0.6})


def protocol_bars(means: pd.DataFrame, models: list[str], sets: list[str], protocols: list[str], n_seeds: int,
                  path: str | os.PathLike | None = None):
    """Notebook 03: test AUC per protocol, one panel per negative set: one bar per learned model · supervision and
    one for the strongest heuristic of that protocol (highest mean test AUC, named on its bar; every heuristic is in
    the notebook's table). means: rows {protocol, negatives, model, supervision, auc, auc_std} (mean and std over
    seeds); `models` may name heuristics (lib.linkpred.heuristics.REGISTRY) and learned models."""
    from lib.linkpred.heuristics import REGISTRY  # lazy: torch_geometric stays out of the importers of `saved`

    heuristics = [m for m in models if m in REGISTRY]
    learned = [m for m in models if m not in REGISTRY]
    ncols = 2 if len(sets) > 1 else 1
    nrows = -(-len(sets) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.2 * ncols, 3.9 * nrows + 0.6), sharey=True, squeeze=False)
    axes = axes.ravel()
    for ax in axes[len(sets):]:
        ax.set_visible(False)
    x = np.arange(len(protocols))
    for ax, n in zip(axes, sets):
        g = means[means["negatives"] == n]
        labels = [(m, sv) for m in learned for sv in g[g["model"] == m]["supervision"].unique()]
        width = 0.84 / (len(labels) + (1 if heuristics else 0))
        ax.set_ylim(0.3, 1.0)
        for i, (m, sv) in enumerate(labels):
            r = g[(g["model"] == m) & (g["supervision"] == sv)].set_index("protocol").reindex(protocols)
            ax.bar(x + i * width, r["auc"], width, yerr=r["auc_std"].fillna(0), capsize=1.5,
                   label=m + (f" · {sv}" if sv != "none" else ""), color=f"C{i % 10}",
                   hatch="//" if sv == "disjoint" else None)
        if heuristics:
            h = g[g["model"].isin(heuristics) & g["auc"].notna()]
            best = h.loc[h.groupby("protocol")["auc"].idxmax()].set_index("protocol").reindex(protocols) if len(h) else \
                pd.DataFrame(index=protocols, columns=["auc", "auc_std", "model"], dtype=float)
            bars = ax.bar(x + len(labels) * width, best["auc"], width, yerr=best["auc_std"].fillna(0), capsize=1.5,
                          color="0.8", label="strongest heuristic (named on its bar)")
            _bar_labels(ax, bars, [m if isinstance(m, str) else "" for m in best["model"]])
        for j, p in enumerate(protocols):
            if g[(g["protocol"] == p)]["auc"].notna().sum() == 0:
                ax.text(j + 0.42 - width / 2, 0.32, f"no {n}\nnegatives", ha="center", va="bottom", fontsize=7,
                        color="0.4")
        ax.axhline(0.5, color="grey", lw=0.8, ls=":")
        ax.set(xticks=x + 0.42 - width / 2, xticklabels=protocols, title=set_title(n))
        ax.tick_params(axis="x", labelsize=8)
    for ax in axes[::ncols]:
        ax.set_ylabel("test AUC")
    handles, names = axes[0].get_legend_handles_labels()
    fig.suptitle(f"Notebook 03: test AUC per protocol, learned models against the strongest heuristic "
                 f"(mean ± std over {n_seeds} seeds)", fontsize=11)
    fig.legend(handles, names, loc="lower center", ncol=min(4, len(names)), fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    return saved(fig, path, outer_legend=True, rect=(0, 0.05 + 0.03 * (len(names) > 4), 1, 1))


BEYOND_ROLES = (("chosen", "model chosen on validation", "#9ecae1"), ("bar", "strongest heuristic scorer", "#fdae6b"),
                ("shortcut", "no_cn_shortcut", "0.55"))


def beyond_bars(rows: pd.DataFrame, models: list[str], n_seeds: int, hatched=(), path: str | os.PathLike | None = None):
    """Notebook 03b: per negative set (columns) and metric (rows: test AUC, test MRR), three bars per protocol — the
    graph model chosen on validation, the bar it must beat (the strongest heuristic scorer by mean test AUC; both
    named on their bars, as lib.linkpred.beyond.gap_table picks them) and no_cn_shortcut — mean ± std over seeds.
    Every other model is in the notebook's tables. rows: one per seed {protocol, negatives, model, auc, mrr, val_auc};
    only `models` take part; `hatched` models (the heuristic stacks) are hatched."""
    from lib.linkpred.beyond import SHORTCUT, gap_table  # lazy: torch_geometric stays out of the importers of `saved`

    rows = rows[rows["model"].isin(models)]
    gaps = gap_table(rows) if len(rows) else pd.DataFrame()
    sets = list(dict.fromkeys(gaps["negatives"])) if len(gaps) else []
    protocols = list(dict.fromkeys(gaps["protocol"])) if len(gaps) else []
    mean = rows.groupby(["protocol", "negatives", "model"])[["auc", "mrr"]].mean()
    std = rows.groupby(["protocol", "negatives", "model"])[["auc", "mrr"]].std()
    fig, axes = plt.subplots(2, max(1, len(sets)), figsize=(3.3 * max(1, len(sets)) + 0.6, 6.6), squeeze=False,
                             sharey="row")
    x, width = np.arange(len(protocols)), 0.27
    top = min(1.0, float(np.nanmax(mean["mrr"].to_numpy(float), initial=0.5)) * 1.15 + 0.02)
    who = {(g["protocol"], g["negatives"]): {"chosen": g["best graph model"], "bar": g["bar"], "shortcut": SHORTCUT}
           for g in gaps.to_dict("records")}
    for col, n in enumerate(sets):
        for row, metric in enumerate(("auc", "mrr")):
            ax = axes[row][col]
            ax.set_ylim(0.0, 1.0 if metric == "auc" else top)
            for i, (role, label, colour) in enumerate(BEYOND_ROLES):
                names = [who.get((p, n), {}).get(role) for p in protocols]
                vals = [mean[metric].get((p, n, m), np.nan) for p, m in zip(protocols, names)]
                errs = [std[metric].get((p, n, m), 0) for p, m in zip(protocols, names)]
                bars = ax.bar(x + (i - 1) * width, vals, width, yerr=np.nan_to_num(errs), capsize=2, color=colour,
                              label=label)
                for rect, m in zip(bars, names):
                    rect.set_hatch("//" if m in hatched else None)
                if role != "shortcut" and metric == "auc":
                    _bar_labels(ax, bars, [m or "" for m in names])
            if metric == "auc":
                ax.axhline(0.5, color="grey", lw=0.8, ls=":")
            ax.set_xticks(x, protocols, fontsize=8)
            if row == 0:
                ax.set_title(set_title(n))
            if col == 0:
                ax.set_ylabel(f"test {metric.upper()}")
    if not sets:
        for ax in axes.ravel():
            ax.text(0.5, 0.5, "no protocol × negative set with a graph model and a heuristic", ha="center",
                    transform=ax.transAxes, fontsize=8)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for _, _, c in BEYOND_ROLES]
    labels = [f"{label} (named on its AUC bar)" if role != "shortcut" else f"{label} (1 = no common neighbour)"
              for role, label, _ in BEYOND_ROLES]
    if any(m in hatched for m in rows["model"]):
        handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="k", hatch="//"))
        labels.append("hatched: a heuristic stack")
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    fig.suptitle(f"Notebook 03b: the graph model chosen on validation against the bar and the shortcut "
                 f"(mean ± std over {n_seeds} seeds)", fontsize=10)
    return saved(fig, path, outer_legend=True, rect=(0, 0.05, 1, 1))


def degree_distribution(graphs: list, stats: pd.DataFrame, path: str | os.PathLike | None = None,
                        each_up_to: int = 12):
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
        axes[0].loglog(grid[:last], share[:last], lw=1 if each else 0.5, alpha=0.9 if each else 0.2,
                       color=colours[i] if each else "0.6")
    if shares and not each:
        med = np.median(np.vstack(shares), axis=0)
        keep = med >= 1 / max(g.num_nodes for g in graphs)  # below one node the median halves a 0 and a 1/n
        axes[0].loglog(grid[keep], med[keep], color="C0", lw=2, label=f"median over {len(graphs)} graphs")
        axes[0].legend(fontsize=8)
    axes[0].set(xlabel="degree k", ylabel="share of nodes with degree ≥ k",
                title=f"Degree distribution of {len(graphs)} graph{'s' * (len(graphs) != 1)}"
                      + (" (colours: right panel)" if each else " (grey: one each)"))
    if each:
        axes[1].barh(stats["root"], stats["leaf_share"], color=colours[:len(stats)])
        axes[1].invert_yaxis()
        axes[1].tick_params(axis="y", labelsize=8)
        axes[1].set(xlabel="share of degree-1 leaves", title="Degree-1 leaves per root")
    else:
        axes[1].hist(stats["leaf_share"], bins=30, color="C0")
        axes[1].set(xlabel="share of degree-1 leaves in a graph", ylabel="graphs",
                    title=f"Degree-1 leaves over {len(stats)} roots")
    return saved(fig, path)
