""" "dist2": one negative per positive at distance exactly 2 from its endpoint, ranked against every positive."""

from __future__ import annotations

from torch import Tensor

from lib.common.seeding import derive_seed
from lib.linkpred.negative_sets.base import Draw, NegativeContext, NegativeSet, TrainingContext
from lib.linkpred.sampling import dist2_negatives


def distance2_negatives(ctx: NegativeContext) -> Draw:
    """lib.linkpred.sampling.dist2_negatives of the task's positives in its message passing."""
    # The salt "hard" is part of every published run's test pairs: another spelling would draw other negatives.
    pairs, missing = dist2_negatives(
        ctx.mp_edge_index,
        ctx.data,
        ctx.gids,
        ctx.tp,
        ctx.forbidden,
        ctx.pos,
        derive_seed(ctx.seed, "hard"),
        ctx.anchor_ok,
    )
    return Draw(pairs, None, missing)


def distance2_training(ctx: TrainingContext, n: int) -> Tensor:
    """n training negatives [2, ≤ n] at distance exactly 2 from a (seeded) positive's endpoint in the step's message
    passing — HeaRT's idea (Li et al., 2023) used in training, so a model learns what separates a link from a near
    miss."""
    # the salts are part of every published run's training pairs: another spelling draws other pairs
    return dist2_negatives(
        ctx.mp_edge_index,
        ctx.data,
        ctx.gids,
        ctx.tp,
        ctx.forbidden,
        ctx.anchors(n, "train-hard-anchors"),
        ctx.step_seed("train-hard"),
    )[0]


SET = NegativeSet(
    "dist2",
    "distance 2",
    distance2_negatives,
    order=10,
    default=True,
    train=distance2_training,
    summary="one pair per positive at distance exactly 2 from its endpoint, so every one has a common "
    'neighbour and "no common neighbour => link" separates them with no learning',
)
