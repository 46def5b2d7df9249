""" "popular": K negatives of each positive's own whose other endpoint is drawn in proportion to its degree.

A positive (u, v) gets pairs (u, w) and (v, w) (K/2 from each endpoint, as "heart" and "matched" draw them), w drawn
without replacement with probability deg(w) / Σ deg among the anchor's valid candidates, deg the degree in the task's
message passing. Popular articles are what a degree-biased scorer (preferential attachment, or an encoder whose norm
grows with degree) ranks high, so a model that learnt "popular => link" ranks these negatives above the positives:
the shortcut a uniform negative set, mostly pairs of leaves, cannot reveal. A node without a message-passing edge is
never drawn; an anchor with no candidate of positive degree gets none (counted as missing).
"""

from __future__ import annotations

import numpy as np

from lib.common.seeding import derive_seed
from lib.linkpred.negative_sets.base import OWN, Draw, NegativeContext, NegativeSet
from lib.linkpred.negatives import per_positive_draw


def popular_negatives(ctx: NegativeContext) -> Draw:
    """Per positive, K degree-proportional pairs (anchor, w): (pairs [2, Q], owner [Q], positives without any)."""
    n = ctx.data.num_nodes
    deg = np.bincount(ctx.mp_edge_index[0].numpy(), minlength=n).astype(np.float64)
    rng = np.random.default_rng(derive_seed(ctx.seed, "popular", "degree"))

    def candidates(anchors, owners, valid, counts):
        out = []
        for j, count in enumerate(counts):
            w = np.where(valid[j], deg, 0.0)
            nodes = np.flatnonzero(w)
            size = min(int(count), nodes.size)
            out.append(rng.choice(nodes, size=size, replace=False, p=w[nodes] / w[nodes].sum()) if size else nodes[:0])
        return out

    pairs, owner, missing = per_positive_draw(
        candidates,
        ctx.data,
        ctx.gids,
        ctx.tp,
        ctx.forbidden,
        ctx.pos,
        ctx.per_positive,
        derive_seed(ctx.seed, "popular"),
        ctx.anchor_ok,
    )
    return Draw(pairs, owner, missing)


SET = NegativeSet(
    "popular",
    "degree-biased",
    popular_negatives,
    ranking=OWN,
    per_positive=True,
    order=40,
    summary="`negatives_per_positive` pairs of each positive's own, sharing an endpoint with it, whose "
    'other node is drawn in proportion to its degree in the message passing, so "popular => '
    'link" ranks them high',
)
