"""Stage 6 figures: the KD table and the probing table."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from lib.viz.figures import saved


def plot_kd(rows: pd.DataFrame, teacher: list[dict], path: str | Path | None = None):
    """Bars of test accuracy (mean ± std over seeds) per task: KD student beside its control, teacher as a line."""
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(rows.task))
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.5 * len(tasks), 3.4), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        g = rows[rows.task == task].groupby(["student", "method"], sort=False).test.agg(["mean", "std"]).reset_index()
        x = np.arange(len(g))
        ax.bar(x, g["mean"], yerr=g["std"].fillna(0), color=["C0" if m == "kd" else "C7" for m in g.method], capsize=3)
        ax.set_xticks(x, [f"{s}\n{m}" for s, m in zip(g.student, g.method)], fontsize=8)
        for t in teacher:
            if t["task"] == task:
                ax.axhline(t["test"], color="C3", ls="--", lw=1, label="fine-tuned teacher")
        ax.set_title(task)
        ax.set_ylabel("test accuracy")
        ax.legend(fontsize=8, loc="lower right")
    return saved(fig, path)


def plot_probing(table: pd.DataFrame, path: str | Path | None = None):
    """Heat map of probing accuracy, models x tasks, the majority-class row included."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.1 * table.shape[1] + 3, 0.42 * table.shape[0] + 1.2))
    im = ax.imshow(table.to_numpy(float), cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(table.shape[1]), table.columns, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(table.shape[0]), table.index, fontsize=8)
    for (i, j), v in np.ndenumerate(table.to_numpy(float)):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w" if v < 0.6 else "k")
    fig.colorbar(im, ax=ax, label="probe test accuracy")
    return saved(fig, path)
