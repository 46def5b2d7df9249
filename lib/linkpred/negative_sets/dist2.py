""""dist2": one negative per positive at distance exactly 2 from its endpoint, ranked against every positive."""
from __future__ import annotations

from lib.common.seeding import derive_seed
from lib.linkpred.negative_sets.base import Draw, NegativeContext, NegativeSet
from lib.linkpred.sampling import dist2_negatives


def distance2_negatives(ctx: NegativeContext) -> Draw:
    """lib.linkpred.sampling.dist2_negatives of the task's positives in its message passing."""
    # The salt "hard" is part of every published run's test pairs: another spelling would draw other negatives.
    pairs, missing = dist2_negatives(ctx.mp_edge_index, ctx.data, ctx.gids, ctx.tp, ctx.forbidden, ctx.pos,
                                     derive_seed(ctx.seed, "hard"), ctx.anchor_ok)
    return Draw(pairs, None, missing)


SET = NegativeSet("dist2", "distance 2", distance2_negatives, order=10, default=True,
                  summary="one pair per positive at distance exactly 2 from its endpoint, so every one has a common "
                          "neighbour and \"no common neighbour => link\" separates them with no learning")
