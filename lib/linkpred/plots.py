"""Stage 3 figures: training curves and AUC against A-AUC."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from lib.linkpred.config import MODEL_KINDS
from lib.linkpred.sampling import PROTOCOLS
from lib.metrics.link import SEED_REPORTED
from lib.viz.figures import saved


def plot_training(history: list[dict], title: str, path: str | Path | None = None):
    """The seed's figures 3–8 for one run: per-step AUC and A-AUC (left) and loss (right)."""
    import matplotlib.pyplot as plt

    steps = np.arange(1, len(history) + 1)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.6))

    def series(key):
        return [np.nan if h.get(key) is None else h[key] for h in history]

    a.plot(steps, series("auc"), color="C0", ls=":", label="AUC, training mode")
    a.plot(steps, series("aauc"), color="C1", ls=":", label="A-AUC, training mode")
    if any(h.get("auc_eval") is not None for h in history):
        a.plot(steps, series("auc_eval"), color="C0", label="AUC, eval mode after the step")
        a.plot(steps, series("aauc_eval"), color="C1", label="A-AUC, eval mode after the step")
    a.set(xlabel="training step (one graph)", ylabel="score", title=f"AUC vs A-AUC — {title}")
    a.legend(fontsize=7)
    b.plot(steps, [h["loss"] for h in history], color="C3")
    b.set(xlabel="training step (one graph)", ylabel="BCE loss", title=f"loss — {title}")
    for ax in (a, b):
        for e in sorted({h["epoch"] for h in history})[1:]:
            ax.axvline(next(i for i, h in enumerate(history, 1) if h["epoch"] == e) - 0.5, color="grey", lw=0.6)
    return saved(fig, path)


def plot_auc_vs_aauc(rows: list[dict], n_train: int, path: str | Path | None = None, negatives: str = "uniform",
                     supervision: str = "mp"):
    """Test AUC against test A-AUC for the embedding models (every protocol and seed; one negative set and
    supervision) beside the seed's points."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for r in SEED_REPORTED:
        ax.scatter(r["aauc"], r["auc"], marker="*", s=160, color="k")
        ax.annotate(f"seed report, {r['train_graphs']} train", (r["aauc"], r["auc"]), textcoords="offset points",
                    xytext=(6, -3), fontsize=8)
    marks = dict(zip(PROTOCOLS, "os^vD"))
    for i, kind in enumerate(MODEL_KINDS):
        for protocol, m in marks.items():
            pts = [(r["aauc"], r["auc"]) for r in rows if r["model"] == kind and r["protocol"] == protocol
                   and r.get("negatives", negatives) == negatives and r.get("supervision", supervision) == supervision
                   and r.get("aauc") is not None]
            if pts:
                ax.scatter(*zip(*pts), marker=m, color=f"C{i}", alpha=0.8, label=f"{kind} · {protocol}")
    ax.set(xlabel="A-AUC (test graphs)", ylabel="AUC (test graphs)",
           title=f"this run ({n_train} train graphs, {supervision} supervision, {negatives} negatives) vs the seed report")
    ax.legend(fontsize=6, loc="lower left", ncol=2)
    return saved(fig, path)
