"""Stage 3 metrics: AUC, AP, Hits@k and MRR per negative set and per common-neighbour stratum, and the
mean ± std tables over seeds."""

from __future__ import annotations

import numpy as np
import pandas as pd

from lib.metrics.ranking import average_precision, roc_auc
from lib.metrics.selection import STRATA, choose_on_validation

# ---------------------------------------------------------------- metrics


def link_metrics(pos: np.ndarray, neg: np.ndarray, hits_k: int = 50) -> dict:
    """AUC, AP, Hits@K and MRR of positive scores [P] against negative scores [Q] (higher = more likely an edge).

    Hits@K follows OGB's link-prediction convention (share of positives scored above the K-th best negative; 1 if
    there are fewer than K negatives).  MRR: mean over positives of 1 / (1 + #negatives scored at least as high),
    a ranking of each held-out edge against the shared negatives.  Both hand-written because neither sklearn nor
    PyG has these shared-negative forms and torchmetrics is not a dependency.
    """
    pos, neg = np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64)
    y = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
    s = np.r_[pos, neg]
    neg_sorted = np.sort(neg)
    kth = neg_sorted[-hits_k] if len(neg) >= hits_k else -np.inf
    rank = 1 + (len(neg) - np.searchsorted(neg_sorted, pos, side="left"))
    return {
        "auc": roc_auc(y, s),
        "ap": average_precision(y, s),
        f"hits@{hits_k}": float((pos > kth).mean()),
        "mrr": float((1.0 / rank).mean()),
    }


def ranks(pos: np.ndarray, neg: np.ndarray, owner: np.ndarray | None = None) -> np.ndarray:
    """Rank of each positive [P] among its negatives: 1 + #negatives scored at least as high (ties count against
    the positive, so a constant scorer ranks last). owner [Q]: the positive each negative belongs to (per-positive
    ranking); None: every negative is every positive's (shared ranking)."""
    pos, neg = np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64)
    if owner is None:
        s = np.sort(neg)
        return 1 + (len(neg) - np.searchsorted(s, pos, side="left"))
    owner = np.asarray(owner)
    return 1 + np.bincount(owner, weights=(neg >= pos[owner]), minlength=len(pos)).astype(np.int64)


def ranking_metrics(pos: np.ndarray, neg: np.ndarray, owner: np.ndarray | None = None, ks=(1, 10)) -> dict:
    """{"mrr", "hits@1", "hits@10"} over the positives that have negatives (for per-positive sets)."""
    r = ranks(pos, neg, owner)
    if owner is not None:
        r = r[np.bincount(np.asarray(owner), minlength=len(pos)) > 0]
    if r.size == 0:
        return {"mrr": None, **{f"hits@{k}": None for k in ks}}
    return {"mrr": float((1.0 / r).mean()), **{f"hits@{k}": float((r <= k).mean()) for k in ks}}


def set_metrics(
    pos: np.ndarray,
    neg: np.ndarray,
    owner: np.ndarray | None = None,
    has_cn: np.ndarray | None = None,
    hits_k: int = 50,
) -> dict:
    """Metrics of one negative set of one task: AUC and AP over every positive [P] and negative [Q] score; MRR and
    Hits@{1,10} of each positive among its negatives (its own when owner [Q] maps every negative to its positive, as
    for the per-positive sets of lib.linkpred.negative_sets; all of them otherwise), Hits@K (shared sets only, OGB's
    form, `link_metrics`); and,
    with has_cn [P], the same AUC and MRR within each stratum of positives (STRATA: auc_cn, mrr_no_cn, ...; a
    per-positive set keeps the stratum's own negatives) plus pos_no_cn, the share of positives without a common
    neighbour. A stratum without positives (or negatives) gets None."""

    def one(p, q, o):
        if len(p) == 0 or len(q) == 0:
            return {"auc": None, "ap": None, "mrr": None, "hits@1": None, "hits@10": None}
        m = link_metrics(p, q, hits_k)
        m.update(ranking_metrics(p, q, o))
        if o is not None:
            m.pop(f"hits@{hits_k}")  # with K own negatives per positive, Hits@50 says nothing
        return m

    pos, neg = np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64)
    out = one(pos, neg, owner)
    if has_cn is not None:
        has_cn = np.asarray(has_cn, dtype=bool)
        out["pos_no_cn"] = float((~has_cn).mean()) if len(has_cn) else None
        for name, mask in zip(STRATA, (has_cn, ~has_cn)):
            if owner is None:
                m = one(pos[mask], neg, None)
            else:
                keep = mask[owner]
                new_index = np.cumsum(mask) - 1  # positive index -> index within the stratum
                m = one(pos[mask], neg[keep], new_index[owner[keep]])
            out[f"auc_{name}"], out[f"mrr_{name}"] = m["auc"], m["mrr"]
    return out


def mean_std(v) -> str:
    """'mean ± std' of a series over seeds (std 0 with one seed): the cell of every results table."""
    return f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0:.3f}"


def summary_table(
    rows: list[dict],
    metrics=("auc", "ap", "hits@50", "mrr", "aauc", "aauc_self"),
    by=("protocol", "negatives", "supervision", "model"),
):
    """pandas DataFrame (protocol, negatives, supervision, model) × metric of 'mean ± std' over seeds, plus n_seeds
    (grouping keys missing from the rows are left out)."""

    df = pd.DataFrame(rows)
    by = [b for b in by if b in df]
    out = []
    for key, g in df.groupby(by, sort=False):
        rec = {**dict(zip(by, key if isinstance(key, tuple) else (key,))), "n_seeds": g["seed"].nunique()}
        for m in metrics:
            v = g[m].dropna() if m in g else []
            rec[m] = f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0:.3f}" if len(v) else "n/a"
        out.append(rec)
    return pd.DataFrame(out).set_index(by)


# ---------------------------------------------------------------- reporting helpers for notebook 03

# The seed report's own numbers (its code, test split, one run each, scoring message-passing edges).
SEED_REPORTED = [
    {"train_graphs": 40, "test_graphs": 10, "auc": 0.900, "aauc": 0.772},
    {"train_graphs": 180, "test_graphs": 20, "auc": 0.922, "aauc": 0.628},
    {"train_graphs": 315, "test_graphs": 35, "auc": 0.927, "aauc": 0.578},
]


def gat_verdicts(rows: pd.DataFrame, heuristics) -> tuple[pd.DataFrame, list[str]]:
    """Notebook 03's verdict per protocol × negative set: the GatModel, its supervision chosen on validation
    (choose_on_validation), against the best heuristic by mean test AUC (a bar chosen on test only makes the
    comparison harder for the model). rows: one row per seed, model, supervision (results of run_experiment).
    Returns (table, one sentence per row)."""
    df = rows[rows["auc"].notna()].copy()  # a negative set a protocol cannot have (matched under seed) has no row
    df["candidate"] = df["model"] + " · " + df["supervision"]
    table, sentences = [], []
    for (p, n), g in df.groupby(["protocol", "negatives"], sort=False):
        gat = g[g["model"] == "gat_model"]
        heur = g[g["model"].isin(list(heuristics))]
        if gat.empty or heur.empty:
            continue
        best, chosen_on, _ = choose_on_validation(gat, list(dict.fromkeys(gat["candidate"])), key="candidate")
        m = gat[gat["candidate"] == best]
        sv = best.split(" · ")[1]
        h_mean = heur.groupby("model")["auc"].mean()
        h = h_mean.idxmax()
        auc, sd, gap = m["auc"].mean(), m["auc"].std(ddof=1) if len(m) > 1 else 0.0, m["auc"].mean() - h_mean[h]
        table.append(
            {
                "protocol": p,
                "negatives": n,
                "best GatModel": f"{sv}: {auc:.3f} ± {sd:.3f}",
                "supervision chosen on": chosen_on,
                "best heuristic": f"{h}: {h_mean[h]:.3f}",
                "gap": round(gap, 3),
            }
        )
        sentences.append(
            f"{p} / {n} negatives: GatModel ({sv} supervision, chosen on {chosen_on}) {auc:.3f} AUC "
            f"{'beats' if gap > 0 else 'trails'} the best heuristic, {h} at {h_mean[h]:.3f}, by "
            f"{abs(gap):.3f}."
        )
    return pd.DataFrame(table), sentences
