"""Notebook 04's figures: the trend with training-set size, the AUC / A-AUC trade-off, the T_cos / R_cos
sensitivity; each returns its matplotlib Figure and, given a path, writes it (lib.viz.figures.saved)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D

from lib.viz.figures import saved


def plot_trend(df, path=None, seed_reported=None):
    """AUC and A-AUC against the number of training graphs: df columns train_graphs, seed, protocol, auc, aauc.
    Mean with min–max band over seeds, one line per (metric, protocol); the seed report's points on a second panel."""
    fig, axes = plt.subplots(1, 2 if seed_reported else 1, figsize=(11 if seed_reported else 6, 4), squeeze=False)
    ax = axes[0, 0]
    for (metric, ls), colour in zip([("auc", "-"), ("aauc", "--")], ["C0", "C1"]):
        for protocol, marker in (("seed", "o"), ("leak_free", "s")):
            # A-AUC is None where no test pair passes its cosine thresholds (tiny graphs): such points are not drawn
            h = df[df["protocol"] == protocol].assign(**{metric: lambda d: pd.to_numeric(d[metric], errors="coerce")})
            g = h.dropna(subset=[metric]).groupby("train_graphs")[metric]
            m, lo, hi = g.mean(), g.min(), g.max()
            if m.empty:
                continue
            name = {"auc": "AUC", "aauc": "A-AUC"}[metric]
            ax.plot(m.index, m.values, ls=ls, marker=marker, color=colour, label=f"{name} · {protocol}")
            ax.fill_between(m.index, lo.values, hi.values, color=colour, alpha=0.12)
    ax.set(
        xlabel="training graphs (this run)",
        ylabel="GatModel score on the test graphs",
        title="this run: GatModel trained on subsets\n(line: mean, band: min–max over seeds)",
    )
    ax.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.15), frameon=False)
    if seed_reported:
        b = axes[0, 1]
        n = [r["train_graphs"] for r in seed_reported]
        b.plot(n, [r["auc"] for r in seed_reported], "-o", color="C0", label="AUC (seed report)")
        b.plot(n, [r["aauc"] for r in seed_reported], "--o", color="C1", label="A-AUC (seed report)")
        b.set(
            xlabel="training graphs (seed report, 20,000-node graphs)",
            ylabel="score",
            title="seed report\n(one run per size)",
        )
        b.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.15), frameon=False)
    fig.suptitle("AUC and A-AUC against training-set size", fontsize=11)
    return saved(fig, path, outer_legend=True)


def plot_tradeoff(df, path=None, seed_reported=None):
    """Scatter of test AUC against test A-AUC, one point per run (df columns label, protocol, auc, aauc), colour =
    run label, marker = protocol, the legend beside the axes; runs whose A-AUC is undefined are not drawn."""
    fig, ax = plt.subplots(figsize=(7.6, 4.8))
    for i, (label, g) in enumerate(df.groupby("label", sort=False)):
        for protocol, marker in (("seed", "o"), ("leak_free", "s")):
            h = g.loc[g["protocol"] == protocol, ["auc", "aauc"]].apply(pd.to_numeric, errors="coerce").dropna()
            ax.scatter(h["aauc"], h["auc"], marker=marker, color=f"C{i % 10}", alpha=0.8, label=f"{label} · {protocol}")
    for r in seed_reported or []:
        ax.scatter(r["aauc"], r["auc"], marker="*", s=160, color="k")
        ax.annotate(
            str(r["train_graphs"]),
            (r["aauc"], r["auc"]),
            textcoords="offset points",
            xytext=(0, -13),
            ha="center",
            fontsize=8,
        )
    ax.set(
        xlabel="A-AUC (self-pairs excluded)",
        ylabel="AUC",
        title="Test AUC against A-AUC across runs"
        + (" and the seed report (★, its training graphs)" if seed_reported else ""),
    )
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="run · protocol", title_fontsize=7)
    return saved(fig, path, outer_legend=True)


# ---------------------------------------------------------------- stage 4: experiments behind notebook 04


def plot_sensitivity(by_t: pd.DataFrame, by_r: pd.DataFrame, r_cos: float, t_cos: float, path=None):
    """A-AUC against T_cos (with the share of positive pairs as bars) and against R_cos (min–max over samples); one
    colour per graph in both panels, named once in a legend beside them."""
    share = by_t.groupby("t_cos")["share_pos"].mean()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11.5, 4.0))
    colour = {g: f"C{i % 10}" for i, g in enumerate(dict.fromkeys([*by_t["graph_id"], *by_r["graph_id"]]))}
    a2 = a.twinx()
    a2.bar(share.index, share.values, width=0.04, alpha=0.2, color="grey")
    a2.set_ylabel("share of positive pairs (grey bars)")
    a.set_zorder(a2.get_zorder() + 1)
    a.patch.set_visible(False)
    for g, h in by_t.groupby("graph_id"):
        a.plot(h["t_cos"], h["aauc"], "-o", ms=4, color=colour[g])
        a.plot(h["t_cos"], h["aauc_self"], ":x", ms=4, color=colour[g])
    a.set(xlabel="T_cos", ylabel="A-AUC", title=f"A-AUC against the threshold T_cos (R_cos = {r_cos})")
    a.legend(
        [Line2D([], [], color="0.3", marker="o"), Line2D([], [], color="0.3", ls=":", marker="x")],
        ["self-pairs excluded", "self-pairs included (seed code)"],
        fontsize=7,
        loc="lower left",
    )
    for g, h in by_r.groupby("graph_id"):
        m = h.groupby("r_cos")["aauc"]
        b.errorbar(
            m.mean().index,
            m.mean().values,
            yerr=[m.mean() - m.min(), m.max() - m.mean()],
            fmt="-o",
            ms=4,
            capsize=3,
            color=colour[g],
        )
    rates = sorted(by_r["r_cos"].unique())
    b.set(
        xscale="log",
        xlabel="R_cos (log scale)",
        ylabel="A-AUC (min–max of the samples)",
        title=f"A-AUC against the sampling rate R_cos (T_cos = {t_cos})",
    )
    b.set_xticks(rates, [f"{r:g}" for r in rates])
    b.minorticks_off()
    fig.legend(
        [Line2D([], [], color=c, marker="o") for c in colour.values()],
        list(colour),
        title="test graph",
        fontsize=7,
        title_fontsize=7,
        loc="center left",
        bbox_to_anchor=(1.0, 0.5),
    )
    return saved(fig, path, outer_legend=True)
