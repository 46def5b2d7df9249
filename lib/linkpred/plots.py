"""Stage 3 figures: training curves, AUC against A-AUC, and the bar charts of notebooks 03 and 03b (learned models
against the strongest heuristic; the chosen graph model against the bar and the shortcut)."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from lib.linkpred.beyond import SHORTCUT, gap_table
from lib.linkpred.heuristics import REGISTRY
from lib.linkpred.names import MODEL_KINDS, PROTOCOLS
from lib.linkpred.negative_sets.registry import set_title
from lib.metrics.link import SEED_REPORTED
from lib.viz.figures import bar_labels, saved


def plot_training(history: list[dict], title: str, path: str | Path | None = None):
    """The seed's figures 3–8 for one run: per-step AUC and A-AUC (left) and loss (right); a score logged on every
    N-th step only (log_every) is drawn through the steps that have it."""
    steps = np.arange(1, len(history) + 1)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.1))

    def series(key) -> tuple[list, list]:
        """(steps, values) of the steps that logged `key`."""
        kept = [(i, h[key]) for i, h in zip(steps, history) if h.get(key) is not None]
        return [i for i, _ in kept], [v for _, v in kept]

    a.plot(*series("auc"), color="C0", ls=":", label="AUC, training mode")
    a.plot(*series("aauc"), color="C1", ls=":", label="A-AUC, training mode")
    if any(h.get("auc_eval") is not None for h in history):
        a.plot(*series("auc_eval"), color="C0", label="AUC, eval mode after the step")
        a.plot(*series("aauc_eval"), color="C1", label="A-AUC, eval mode after the step")
    a.set(xlabel="training step (one graph)", ylabel="score on the step's graph", title="AUC and A-AUC per step")
    a.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    b.plot(steps, [h["loss"] for h in history], color="C3")
    b.set(xlabel="training step (one graph)", ylabel="BCE loss", title="training loss per step")
    for ax in (a, b):
        for e in sorted({h["epoch"] for h in history})[1:]:
            ax.axvline(next(i for i, h in enumerate(history, 1) if h["epoch"] == e) - 0.5, color="grey", lw=0.6)
    fig.suptitle(f"{title} (grey line: next epoch)", fontsize=10)
    return saved(fig, path, outer_legend=True)


def _seed_stars(ax, fontsize: int = 8):
    """The seed report's (A-AUC, AUC) points as black stars, each labelled with its training graphs."""
    for r in SEED_REPORTED:
        ax.scatter(r["aauc"], r["auc"], marker="*", s=160, color="k", zorder=3)
        ax.annotate(
            str(r["train_graphs"]),
            (r["aauc"], r["auc"]),
            textcoords="offset points",
            xytext=(0, -13),
            ha="center",
            fontsize=fontsize,
        )


def plot_auc_vs_aauc(
    rows: list[dict], n_train: int, path: str | Path | None = None, negatives: str = "uniform", supervision: str = "mp"
):
    """Test AUC against test A-AUC for the embedding models (every protocol and seed; one negative set and
    supervision) beside the seed's points: colour = model, marker = protocol, two legends outside the axes."""
    fig, ax = plt.subplots(figsize=(7.4, 4.8))
    _seed_stars(ax)
    marks = dict(zip(PROTOCOLS, "os^vD"))
    kinds, protocols = [], []
    for i, kind in enumerate(MODEL_KINDS):
        for protocol, m in marks.items():
            pts = [
                (r["aauc"], r["auc"])
                for r in rows
                if r["model"] == kind
                and r["protocol"] == protocol
                and r.get("negatives", negatives) == negatives
                and r.get("supervision", supervision) == supervision
                and r.get("aauc") is not None
                and r["aauc"] == r["aauc"]
            ]
            if pts:
                ax.scatter(*zip(*pts), marker=m, color=f"C{i}", alpha=0.8)
                kinds += [kind] if kind not in kinds else []
                protocols += [protocol] if protocol not in protocols else []
    ax.set(
        xlabel="A-AUC (test graphs)",
        ylabel="AUC (test graphs)",
        title=f"Test AUC against A-AUC: this run ({n_train} training graphs, {supervision} supervision, "
        f"{negatives} negatives)\nand the seed report (★, labelled with its training graphs)",
    )
    ax.title.set_fontsize(9)
    fig.legend(
        [Line2D([], [], ls="", marker="o", color=f"C{MODEL_KINDS.index(k)}") for k in kinds],
        kinds,
        title="model (a point per seed)",
        fontsize=7,
        title_fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        bbox_transform=ax.transAxes,
    )
    ax.legend(
        [Line2D([], [], ls="", marker=marks[p], color="0.3") for p in protocols],
        protocols,
        title="protocol",
        fontsize=7,
        title_fontsize=7,
        loc="lower left",
        bbox_to_anchor=(1.01, 0.0),
    )
    return saved(fig, path, outer_legend=True)


def protocol_bars(
    means: pd.DataFrame,
    models: list[str],
    sets: list[str],
    protocols: list[str],
    n_seeds: int,
    path: str | os.PathLike | None = None,
):
    """Notebook 03: test AUC per protocol, one panel per negative set: one bar per learned model · supervision and
    one for the strongest heuristic of that protocol (highest mean test AUC, named on its bar; every heuristic is in
    the notebook's table). means: rows {protocol, negatives, model, supervision, auc, auc_std} (mean and std over
    seeds); `models` may name heuristics (lib.linkpred.heuristics.REGISTRY) and learned models."""
    heuristics = [m for m in models if m in REGISTRY]
    learned = [m for m in models if m not in REGISTRY]
    ncols = 2 if len(sets) > 1 else 1
    nrows = -(-len(sets) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.2 * ncols, 3.9 * nrows + 0.6), sharey=True, squeeze=False)
    axes = axes.ravel()
    for ax in axes[len(sets) :]:
        ax.set_visible(False)
    x = np.arange(len(protocols))
    for ax, n in zip(axes, sets):
        g = means[means["negatives"] == n]
        labels = [(m, sv) for m in learned for sv in g[g["model"] == m]["supervision"].unique()]
        width = 0.84 / (len(labels) + (1 if heuristics else 0))
        ax.set_ylim(0.3, 1.0)
        for i, (m, sv) in enumerate(labels):
            r = g[(g["model"] == m) & (g["supervision"] == sv)].set_index("protocol").reindex(protocols)
            ax.bar(
                x + i * width,
                r["auc"],
                width,
                yerr=r["auc_std"].fillna(0),
                capsize=1.5,
                label=m + (f" · {sv}" if sv != "none" else ""),
                color=f"C{i % 10}",
                hatch="//" if sv == "disjoint" else None,
            )
        if heuristics:
            h = g[g["model"].isin(heuristics) & g["auc"].notna()]
            best = (
                h.loc[h.groupby("protocol")["auc"].idxmax()].set_index("protocol").reindex(protocols)
                if len(h)
                else pd.DataFrame(index=protocols, columns=["auc", "auc_std", "model"], dtype=float)
            )
            bars = ax.bar(
                x + len(labels) * width,
                best["auc"],
                width,
                yerr=best["auc_std"].fillna(0),
                capsize=1.5,
                color="0.8",
                label="strongest heuristic (named on its bar)",
            )
            bar_labels(ax, bars, [m if isinstance(m, str) else "" for m in best["model"]])
        for j, p in enumerate(protocols):
            if g[(g["protocol"] == p)]["auc"].notna().sum() == 0:
                ax.text(
                    j + 0.42 - width / 2, 0.32, f"no {n}\nnegatives", ha="center", va="bottom", fontsize=7, color="0.4"
                )
        ax.axhline(0.5, color="grey", lw=0.8, ls=":")
        ax.set(xticks=x + 0.42 - width / 2, xticklabels=protocols, title=set_title(n))
        ax.tick_params(axis="x", labelsize=8)
    for ax in axes[::ncols]:
        ax.set_ylabel("test AUC")
    handles, names = axes[0].get_legend_handles_labels()
    fig.suptitle(
        f"Notebook 03: test AUC per protocol, learned models against the strongest heuristic "
        f"(mean ± std over {n_seeds} seeds)",
        fontsize=11,
    )
    fig.legend(
        handles,
        names,
        loc="lower center",
        ncol=min(4, len(names)),
        fontsize=8,
        frameon=False,
        bbox_to_anchor=(0.5, 0.0),
    )
    return saved(fig, path, outer_legend=True, rect=(0, 0.05 + 0.03 * (len(names) > 4), 1, 1))


BEYOND_ROLES = (
    ("chosen", "model chosen on validation", "#9ecae1"),
    ("bar", "strongest heuristic scorer", "#fdae6b"),
    ("shortcut", "no_cn_shortcut", "0.55"),
)


def beyond_bars(rows: pd.DataFrame, models: list[str], n_seeds: int, hatched=(), path: str | os.PathLike | None = None):
    """Notebook 03b: per negative set (columns) and metric (rows: test AUC, test MRR), three bars per protocol — the
    graph model chosen on validation, the bar it must beat (the strongest heuristic scorer by mean test AUC; both
    named on their bars, as lib.linkpred.beyond.gap_table picks them) and no_cn_shortcut — mean ± std over seeds.
    Every other model is in the notebook's tables. rows: one per seed {protocol, negatives, model, auc, mrr, val_auc};
    only `models` take part; `hatched` models (the heuristic stacks) are hatched."""
    rows = rows[rows["model"].isin(models)]
    gaps = gap_table(rows) if len(rows) else pd.DataFrame()
    sets = list(dict.fromkeys(gaps["negatives"])) if len(gaps) else []
    protocols = list(dict.fromkeys(gaps["protocol"])) if len(gaps) else []
    mean = rows.groupby(["protocol", "negatives", "model"])[["auc", "mrr"]].mean()
    std = rows.groupby(["protocol", "negatives", "model"])[["auc", "mrr"]].std()
    fig, axes = plt.subplots(
        2, max(1, len(sets)), figsize=(3.3 * max(1, len(sets)) + 0.6, 6.6), squeeze=False, sharey="row"
    )
    x, width = np.arange(len(protocols)), 0.27
    top = min(1.0, float(np.nanmax(mean["mrr"].to_numpy(float), initial=0.5)) * 1.15 + 0.02)
    who = {
        (g["protocol"], g["negatives"]): {"chosen": g["best graph model"], "bar": g["bar"], "shortcut": SHORTCUT}
        for g in gaps.to_dict("records")
    }
    for col, n in enumerate(sets):
        for row, metric in enumerate(("auc", "mrr")):
            ax = axes[row][col]
            ax.set_ylim(0.0, 1.0 if metric == "auc" else top)
            for i, (role, label, colour) in enumerate(BEYOND_ROLES):
                names = [who.get((p, n), {}).get(role) for p in protocols]
                vals = [mean[metric].get((p, n, m), np.nan) for p, m in zip(protocols, names)]
                errs = [std[metric].get((p, n, m), 0) for p, m in zip(protocols, names)]
                bars = ax.bar(
                    x + (i - 1) * width, vals, width, yerr=np.nan_to_num(errs), capsize=2, color=colour, label=label
                )
                for rect, m in zip(bars, names):
                    rect.set_hatch("//" if m in hatched else None)
                if role != "shortcut" and metric == "auc":
                    bar_labels(ax, bars, [m or "" for m in names])
            if metric == "auc":
                ax.axhline(0.5, color="grey", lw=0.8, ls=":")
            ax.set_xticks(x, protocols, fontsize=8)
            if row == 0:
                ax.set_title(set_title(n))
            if col == 0:
                ax.set_ylabel(f"test {metric.upper()}")
    if not sets:
        for ax in axes.ravel():
            ax.text(
                0.5,
                0.5,
                "no protocol × negative set with a graph model and a heuristic",
                ha="center",
                transform=ax.transAxes,
                fontsize=8,
            )
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for _, _, c in BEYOND_ROLES]
    labels = [
        f"{label} (named on its AUC bar)" if role != "shortcut" else f"{label} (1 = no common neighbour)"
        for role, label, _ in BEYOND_ROLES
    ]
    if any(m in hatched for m in rows["model"]):
        handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="k", hatch="//"))
        labels.append("hatched: a heuristic stack")
    fig.legend(
        handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False, bbox_to_anchor=(0.5, 0.0)
    )
    fig.suptitle(
        f"Notebook 03b: the graph model chosen on validation against the bar and the shortcut "
        f"(mean ± std over {n_seeds} seeds)",
        fontsize=10,
    )
    return saved(fig, path, outer_legend=True, rect=(0, 0.05, 1, 1))
