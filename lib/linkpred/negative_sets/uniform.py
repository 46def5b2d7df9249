""" "uniform": non-links drawn uniformly, shared by every positive of the task — the protocol's own negatives."""

from __future__ import annotations

import numpy as np
from torch import Tensor

from lib.common.seeding import derive_seed
from lib.linkpred.names import GRAPH_PROTOCOLS
from lib.linkpred.negative_sets.base import Draw, NegativeContext, NegativeSet, TrainingContext
from lib.linkpred.sampling import sample_global_negatives, sample_negatives


def uniform_negatives(ctx: NegativeContext) -> Draw:
    """Per-graph protocols: non-edges of the graph (under "seed" round(2E · neg_rate) of them, else one per positive);
    dataset-wide protocols: one pair per positive that is a link in no graph (anchored at an allowed node)."""
    data = ctx.data
    if ctx.protocol == "seed":
        return Draw(
            sample_negatives(data.edge_index, data.num_nodes, round(data.edge_index.size(1) * ctx.neg_rate), ctx.seed)
        )
    if ctx.protocol in GRAPH_PROTOCOLS:
        return Draw(sample_negatives(data.edge_index, data.num_nodes, ctx.pos.size(1), derive_seed(ctx.seed, "neg")))
    anchors = np.flatnonzero(ctx.anchor_ok) if ctx.anchor_ok is not None else None
    return Draw(
        sample_global_negatives(
            data, ctx.gids, ctx.tp, ctx.forbidden, ctx.pos.size(1), derive_seed(ctx.seed, "neg"), anchors
        )
    )


def uniform_training(ctx: TrainingContext, n: int) -> Tensor:
    """n non-edges [2, ≤ n] of the training graph drawn uniformly, never an excluded pair: the share of a step's
    training negatives that the other sets of the mix leave."""
    return sample_negatives(ctx.excluded, ctx.data.num_nodes, n, ctx.step_seed("train-neg"))


SET = NegativeSet(
    "uniform",
    "uniform",
    uniform_negatives,
    can_miss=False,
    order=0,
    default=True,
    summary="non-links drawn uniformly, shared by every positive of a task",
    train=uniform_training,
)
