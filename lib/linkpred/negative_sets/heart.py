""" "heart": K negatives of each positive's own, ranked hard by three heuristics together (HeaRT)."""

from __future__ import annotations

from lib.linkpred.negative_sets.base import OWN, Draw, NegativeContext, NegativeSet, own_negatives
from lib.linkpred.negatives import heart_negatives


def heart_set(ctx: NegativeContext) -> Draw:
    """lib.linkpred.negatives.heart_negatives of the task's positives."""
    return own_negatives(ctx, heart_negatives, "heart")


SET = NegativeSet(
    "heart",
    "HeaRT",
    heart_set,
    ranking=OWN,
    per_positive=True,
    cached=True,
    order=20,
    default=True,
    summary="`negatives_per_positive` pairs of each positive's own, sharing an endpoint with it, drawn "
    "among the candidates ranked best by resource allocation, personalised PageRank and "
    "feature cosine together",
)
