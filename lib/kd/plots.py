"""Stage 6 figures: the KD table and the probing table."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from lib.viz.figures import saved


def plot_kd(rows: pd.DataFrame, teacher: list[dict], path: str | Path | None = None):
    """Bars of test accuracy (mean ± std over seeds) per task: each KD student beside its CE-only control, the
    fine-tuned teacher as a dashed line; the legend sits below the panels."""
    tasks = list(dict.fromkeys(rows.task))
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.5 * len(tasks), 3.6), squeeze=False, sharey=True)
    for ax, task in zip(axes[0], tasks):
        g = rows[rows.task == task].groupby(["student", "method"], sort=False).test.agg(["mean", "std", "size"])
        g = g.reset_index()
        x = np.arange(len(g))
        ax.bar(x, g["mean"], yerr=g["std"].fillna(0), color=["C0" if m == "kd" else "C7" for m in g.method], capsize=3)
        ax.set_xticks(x, [f"{s}\n{m}" for s, m in zip(g.student, g.method)], fontsize=8)
        for t in teacher:
            if t["task"] == task:
                ax.axhline(t["test"], color="C3", ls="--", lw=1)
        n = int(g["size"].max())
        ax.set_title(f"{task} (mean ± std over {n} seed{'s' * (n != 1)})", fontsize=9)
    axes[0][0].set_ylabel("test accuracy")
    fig.legend(
        [
            plt.Rectangle((0, 0), 1, 1, color="C0"),
            plt.Rectangle((0, 0), 1, 1, color="C7"),
            Line2D([], [], color="C3", ls="--"),
        ],
        ["KD: trained on the teacher's logits", "control: the same student, CE on the labels", "fine-tuned teacher"],
        loc="lower center",
        ncol=3,
        fontsize=8,
        frameon=False,
    )
    fig.suptitle("Classic KD: each student distilled from the teacher beside its CE-only control", fontsize=10)
    return saved(fig, path, outer_legend=True, rect=(0, 0.08, 1, 1))


def plot_probing(table: pd.DataFrame, path: str | Path | None = None):
    """Heat map of probing accuracy, models x tasks, the majority-class row included."""
    fig, ax = plt.subplots(figsize=(1.1 * table.shape[1] + 3, 0.42 * table.shape[0] + 1.6))
    im = ax.imshow(table.to_numpy(float), cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(table.shape[1]), table.columns, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(table.shape[0]), table.index, fontsize=8)
    for (i, j), v in np.ndenumerate(table.to_numpy(float)):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w" if v < 0.6 else "k")
    ax.set_title(
        "Probing: test accuracy of a linear probe per model (rows) and task (columns);\n"
        "the majority row is what always answering the most frequent class scores",
        fontsize=9,
    )
    fig.colorbar(im, ax=ax, label="probe test accuracy")
    return saved(fig, path)
