"""Choosing and judging a model from result rows, pure functions of pandas tables: the one way a best model is picked
(on validation), and notebook 03b's goal judged by the project's one rule (lib.metrics.paired)."""

from __future__ import annotations

import pandas as pd

from lib.metrics.paired import all_of, interval_text, judged_text, verdict


def choose_on_validation(
    rows: pd.DataFrame, candidates: list, metric: str = "auc", key: str = "model"
) -> tuple[object, str, object]:
    """The one way a best model is picked: among `candidates` (values of column `key`) in `rows` (one protocol ×
    negative set, any number of seeds), the one with the highest mean validation `metric` (column val_<metric>, the
    selected epoch's score on validation tasks built as the test tasks are). Where no candidate has one (a run that
    kept no validation scores, a negative set it did not validate on), the mean test `metric` chooses. Returns (chosen,
    "validation" or "test", the best on test) — a reader sees when the two differ."""
    mean = rows.groupby(key)[metric].mean().reindex(candidates)
    on_test = mean.idxmax()
    col = f"val_{metric}"
    val = rows.groupby(key)[col].mean().reindex(candidates).dropna() if col in rows else pd.Series(dtype=float)
    return (val.idxmax(), "validation", on_test) if len(val) else (on_test, "test", on_test)


STRATA = ("cn", "no_cn")  # positives with / without a common neighbour in the message passing

GOAL_AUC_MARGIN = 0.02  # notebook 03b's goal: >= +0.02 AUC over the stronger heuristic scorer, and a higher MRR
GOAL_MRR_MARGIN = 0.0


GOAL_PARTS = {
    "auc": ("auc_margin", GOAL_AUC_MARGIN),
    "mrr": ("mrr_margin", GOAL_MRR_MARGIN),
    "auc_shortcut": ("auc_margin_shortcut", GOAL_AUC_MARGIN),
    "mrr_shortcut": ("mrr_margin_shortcut", GOAL_MRR_MARGIN),
}
"""The parts of notebook 03b's goal: name -> (gap_table margin column, the margin its interval must lie above)."""


def goal_parts(gap: dict) -> dict[str, str]:
    """The verdicts (lib.metrics.paired.verdict) of the parts of notebook 03b's goal (GOAL_PARTS) in one gap_table row
    (lib.linkpred.beyond): the best graph model's paired AUC margin over the bar above GOAL_AUC_MARGIN and its MRR
    margin above 0 and, on every set but uniform (where a positive's missing common neighbour says little), the same
    over the shortcut when the row holds it — a model that only matches "no common neighbour => link" has not shown it
    learnt anything. A part whose row keeps no interval (a run of one seed, or written before intervals were kept) is
    undecided."""
    shortcut = gap["negatives"] != "uniform" and pd.notna(gap.get("auc_margin_shortcut", float("nan")))
    return {
        name: verdict(_number(gap.get(f"{col}_low")), _number(gap.get(f"{col}_high")), margin)
        for name, (col, margin) in GOAL_PARTS.items()
        if shortcut or not name.endswith("_shortcut")
    }


def goal_verdict(gap: dict) -> str:
    """Notebook 03b's goal in one protocol x negative set: "met", "missed" or "undecided" (lib.metrics.paired.all_of
    over goal_parts)."""
    return all_of(goal_parts(gap).values())


PART_TITLES = {
    "auc": "AUC over the bar",
    "mrr": "MRR over the bar",
    "auc_shortcut": "AUC over the shortcut",
    "mrr_shortcut": "MRR over the shortcut",
}


def verdict_table(gaps: pd.DataFrame) -> pd.DataFrame:
    """Notebook 03b's verdicts as one table, a row per protocol × negative set of a gap_table (lib.linkpred.beyond):
    seeds, the model chosen on validation, the bar, the goal's verdict, each part of the goal as 'verdict: margin
    [95% interval] > required margin' (PART_TITLES; "—" where a part does not apply) and the AUC margin over the bar
    within each stratum of positives (STRATA: with / without a common neighbour) with its interval: where the chosen
    model's gain comes from. The same table for a published run and for a user's own links
    (python -m lib.run.verdicts)."""
    out = []
    for r in gaps.to_dict("records"):
        parts = goal_parts(r)
        row = {
            "protocol": r["protocol"],
            "negatives": r["negatives"],
            "seeds": r.get("seeds"),
            "chosen model": r["best graph model"],
            "bar": r["bar"],
            "goal": goal_verdict(r),
        }
        for part, title in PART_TITLES.items():
            col, margin = GOAL_PARTS[part]
            row[title] = (
                judged_text(_number(r.get(col)), _number(r.get(f"{col}_low")), _number(r.get(f"{col}_high")), margin)
                if part in parts
                else "—"
            )
        for st in STRATA:
            col = f"auc_{st}_margin"
            row[f"AUC margin, {st} positives"] = (
                interval_text(_number(r.get(col)), _number(r.get(f"{col}_low")), _number(r.get(f"{col}_high")))
                if pd.notna(r.get(col))
                else "—"
            )
        out.append(row)
    return pd.DataFrame(out)


def _number(value) -> float:
    return float("nan") if value is None or pd.isna(value) else float(value)
