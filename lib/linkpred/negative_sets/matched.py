""""matched": K negatives of each positive's own at the positive's own distance in the message passing."""
from __future__ import annotations

from lib.linkpred.negative_sets.base import OWN, Draw, NegativeContext, NegativeSet, own_negatives
from lib.linkpred.negatives import matched_negatives


def matched_set(ctx: NegativeContext) -> Draw:
    """lib.linkpred.negatives.matched_negatives of the task's positives."""
    return own_negatives(ctx, matched_negatives, "matched")


SET = NegativeSet("matched", "distance-matched", matched_set, ranking=OWN, per_positive=True, cached=True,
                  order=30, default=True,
                  summary="`negatives_per_positive` pairs of each positive's own, sharing an endpoint with it, at "
                          "the positive's own distance in the message passing, so \"has a common neighbour\" "
                          "separates nothing (the shortcut scores AUC 0.5)")
