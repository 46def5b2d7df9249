"""Choosing and judging a model from result rows, pure functions of pandas tables: the one way a best model is picked
(on validation), and notebook 03b's goal."""
from __future__ import annotations

import pandas as pd


def choose_on_validation(rows: pd.DataFrame, candidates: list, metric: str = "auc", key: str = "model"
                         ) -> tuple[object, str, object]:
    """The one way a best model is picked: among `candidates` (values of column `key`) in `rows` (one protocol ×
    negative set, any number of seeds), the one with the highest mean validation `metric` (column val_<metric>, the
    selected epoch's score on validation tasks built as the test tasks are). Where no candidate has one (a run that
    kept no validation scores, a negative set it did not validate on), the mean test `metric` chooses. Returns (chosen, "validation" or "test", the
    best on test) — a reader sees when the two differ."""
    mean = rows.groupby(key)[metric].mean().reindex(candidates)
    on_test = mean.idxmax()
    col = f"val_{metric}"
    val = rows.groupby(key)[col].mean().reindex(candidates).dropna() if col in rows else pd.Series(dtype=float)
    return (val.idxmax(), "validation", on_test) if len(val) else (on_test, "test", on_test)


GOAL_AUC_MARGIN = 0.02  # issue "Beyond the seed": >= +0.02 AUC over the stronger heuristic scorer, and a higher MRR


def meets_goal(auc_margin: float, mrr_margin: float) -> bool:
    """The goal of notebook 03b for one protocol x negative set: margins of the best graph model over the bar."""
    return auc_margin >= GOAL_AUC_MARGIN and mrr_margin > 0


def goal_met(gap: dict) -> bool:
    """A lib.linkpred.beyond.gap_table row's verdict: the margins over the bar meet the goal and, on every set but uniform (where a
    positive's missing common neighbour says little), so do the margins over the shortcut (`auc_margin_shortcut`) when the rows hold it — a model
    that only matches "no common neighbour => link" has not shown it learnt anything."""
    ok = meets_goal(gap["auc_margin"], gap["mrr_margin"])
    if gap["negatives"] != "uniform" and pd.notna(gap.get("auc_margin_shortcut", float("nan"))):
        ok = ok and meets_goal(gap["auc_margin_shortcut"], gap["mrr_margin_shortcut"])
    return ok
