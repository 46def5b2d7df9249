"""Stage 3 figures: training curves and AUC against A-AUC."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from lib.linkpred.names import MODEL_KINDS, PROTOCOLS
from lib.metrics.link import SEED_REPORTED
from lib.viz.figures import saved


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
        ax.annotate(str(r["train_graphs"]), (r["aauc"], r["auc"]), textcoords="offset points", xytext=(0, -13),
                    ha="center", fontsize=fontsize)


def plot_auc_vs_aauc(rows: list[dict], n_train: int, path: str | Path | None = None, negatives: str = "uniform",
                     supervision: str = "mp"):
    """Test AUC against test A-AUC for the embedding models (every protocol and seed; one negative set and
    supervision) beside the seed's points: colour = model, marker = protocol, two legends outside the axes."""
    fig, ax = plt.subplots(figsize=(7.4, 4.8))
    _seed_stars(ax)
    marks = dict(zip(PROTOCOLS, "os^vD"))
    kinds, protocols = [], []
    for i, kind in enumerate(MODEL_KINDS):
        for protocol, m in marks.items():
            pts = [(r["aauc"], r["auc"]) for r in rows if r["model"] == kind and r["protocol"] == protocol
                   and r.get("negatives", negatives) == negatives and r.get("supervision", supervision) == supervision
                   and r.get("aauc") is not None and r["aauc"] == r["aauc"]]
            if pts:
                ax.scatter(*zip(*pts), marker=m, color=f"C{i}", alpha=0.8)
                kinds += [kind] if kind not in kinds else []
                protocols += [protocol] if protocol not in protocols else []
    ax.set(xlabel="A-AUC (test graphs)", ylabel="AUC (test graphs)",
           title=f"Test AUC against A-AUC: this run ({n_train} training graphs, {supervision} supervision, "
                 f"{negatives} negatives)\nand the seed report (★, labelled with its training graphs)")
    ax.title.set_fontsize(9)
    fig.legend([Line2D([], [], ls="", marker="o", color=f"C{MODEL_KINDS.index(k)}") for k in kinds], kinds,
               title="model (a point per seed)", fontsize=7, title_fontsize=7, loc="upper left",
               bbox_to_anchor=(1.01, 1.0), bbox_transform=ax.transAxes)
    ax.legend([Line2D([], [], ls="", marker=marks[p], color="0.3") for p in protocols], protocols, title="protocol",
              fontsize=7, title_fontsize=7, loc="lower left", bbox_to_anchor=(1.01, 0.0))
    return saved(fig, path, outer_legend=True)
