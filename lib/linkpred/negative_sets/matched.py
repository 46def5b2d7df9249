""" "matched": K negatives of each positive's own at the positive's own distance in the message passing."""

from __future__ import annotations

from torch import Tensor

from lib.linkpred.heuristics import adjacency
from lib.linkpred.negative_sets.base import OWN, Draw, NegativeContext, NegativeSet, TrainingContext, own_negatives
from lib.linkpred.negatives import matched_negatives


def matched_set(ctx: NegativeContext) -> Draw:
    """lib.linkpred.negatives.matched_negatives of the task's positives."""
    return own_negatives(ctx, matched_negatives, "matched")


def matched_training(ctx: TrainingContext, n: int) -> Tensor:
    """n training negatives [2, ≤ n], one per (seeded) positive, at the positive's own distance from its first
    endpoint in the step's message passing, where "has a common neighbour" separates nothing."""
    a = adjacency(ctx.mp_edge_index, ctx.data.num_nodes, cache=False)
    return matched_negatives(
        a,
        ctx.data,
        ctx.gids,
        ctx.tp,
        ctx.forbidden,
        ctx.anchors(n, "train-matched-anchors"),
        1,
        ctx.step_seed("train-matched"),
    )[0]


SET = NegativeSet(
    "matched",
    "distance-matched",
    matched_set,
    ranking=OWN,
    per_positive=True,
    cached=True,
    order=30,
    default=True,
    train=matched_training,
    summary="`negatives_per_positive` pairs of each positive's own, sharing an endpoint with it, at "
    'the positive\'s own distance in the message passing, so "has a common neighbour" '
    "separates nothing (the shortcut scores AUC 0.5)",
)
