""""heart": K negatives of each positive's own, ranked hard by three heuristics together (HeaRT)."""
from __future__ import annotations

from lib.linkpred.heuristics import adjacency
from lib.linkpred.negative_sets.base import OWN, Draw, NegativeContext, NegativeSet
from lib.linkpred.negatives import heart_negatives
from lib.linkpred.sampling import derive_seed


def heart_set(ctx: NegativeContext) -> Draw:
    """lib.linkpred.negatives.heart_negatives of the task's positives."""
    a = adjacency(ctx.mp_edge_index, ctx.data.num_nodes)
    pairs, owner, missing = heart_negatives(a, ctx.data, ctx.gids, ctx.tp, ctx.forbidden, ctx.pos, ctx.per_positive,
                                            derive_seed(ctx.seed, "heart"), ctx.anchor_ok)
    return Draw(pairs, owner, missing)


SET = NegativeSet("heart", "HeaRT", heart_set, ranking=OWN, per_positive=True, cached=True,
                  order=20, default=True,
                  summary="`negatives_per_positive` pairs of each positive's own, sharing an endpoint with it, drawn "
                          "among the candidates ranked best by resource allocation, personalised PageRank and "
                          "feature cosine together")
