""""matched": K negatives of each positive's own at the positive's own distance in the message passing."""
from __future__ import annotations

from lib.linkpred.heuristics import adjacency
from lib.linkpred.negative_sets.base import OWN, Draw, NegativeContext, NegativeSet
from lib.linkpred.negatives import matched_negatives
from lib.linkpred.sampling import derive_seed


def matched_set(ctx: NegativeContext) -> Draw:
    """lib.linkpred.negatives.matched_negatives of the task's positives."""
    a = adjacency(ctx.mp_edge_index, ctx.data.num_nodes)
    pairs, owner, missing = matched_negatives(a, ctx.data, ctx.gids, ctx.tp, ctx.forbidden, ctx.pos,
                                              ctx.per_positive, derive_seed(ctx.seed, "matched"), ctx.anchor_ok)
    return Draw(pairs, owner, missing)


SET = NegativeSet("matched", "distance-matched", matched_set, ranking=OWN, per_positive=True, cached=True,
                  order=30, default=True,
                  summary="`negatives_per_positive` pairs of each positive's own, sharing an endpoint with it, at "
                          "the positive's own distance in the message passing, so \"has a common neighbour\" "
                          "separates nothing (the shortcut scores AUC 0.5)")
