"""dist2_negatives draws the same pairs, bit for bit, as the plain per-node formula it replaced (one row slice per
anchor and one scalar draw per positive), on graphs with topics, forbidden pairs, anchor restrictions and nodes
without a distance-2 partner."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from lib.linkpred.data import synthetic_graph
from lib.linkpred.sampling import TitlePairs, dist2_negatives, is_member


def _plain_dist2_negatives(mp_edge_index, data, gids, tp, forbidden, pos, seed, anchor_ok=None):
    """The formula as first written: each anchor's candidates from its neighbours' rows, one draw per positive."""
    rng = np.random.default_rng(seed)
    n = data.num_nodes
    ei = mp_edge_index.numpy()
    a = sp.csr_matrix((np.ones(ei.shape[1], dtype=np.int8), (ei[0], ei[1])), shape=(n, n))
    topics = getattr(data, "topics", None) or [None] * n
    cache = {}

    def candidates(u):
        if u not in cache:
            nb = a.indices[a.indptr[u] : a.indptr[u + 1]]
            two = np.unique(a[nb].indices) if nb.size else np.empty(0, dtype=np.int64)
            c = np.setdiff1d(two, np.append(nb, u), assume_unique=False)
            if c.size:
                c = c[~is_member(tp.keys(gids, np.stack([np.full(c.size, u), c])), forbidden)]
            if c.size and topics[u] is not None:
                same = c[np.fromiter((topics[w] == topics[u] for w in c), dtype=bool, count=c.size)]
                c = same if same.size else c
            cache[u] = c
        return cache[u]

    out, missing = [], 0
    for u, v in pos.t().tolist():
        for anchor in (u, v):
            if anchor_ok is not None and not anchor_ok[anchor]:
                continue
            c = candidates(anchor)
            if c.size:
                out.append((anchor, int(c[rng.integers(c.size)])))
                break
        else:
            missing += 1
    return torch.tensor(out, dtype=torch.long).reshape(-1, 2).t().contiguous(), missing


@pytest.mark.parametrize("case", range(12))
def test_the_draws_equal_the_plain_formula_bit_for_bit(case):
    rng = np.random.default_rng(case)
    n = int(rng.integers(20, 200))
    g = synthetic_graph(n, int(rng.integers(n // 2, 4 * n)), in_channels=4, seed=case)
    g.titles = [f"t{case}-{i % (n - 3)}" for i in range(n)]  # a few titles twice: pairs that share a key
    g.topics = [None if rng.random() < 0.2 else ["A", "B", "C"][int(rng.integers(3))] for _ in range(n)]
    if case % 4 == 0:
        g.topics = None  # a graph without topics
    tp = TitlePairs([g])
    gids = tp.gids(g)
    ei = g.edge_index
    keep = torch.from_numpy(rng.random(ei.size(1)) < 0.7)
    mp = ei[:, keep]  # a step's message passing: part of the graph's edges
    if case % 3 == 0:
        mp = torch.cat([mp, mp[:, :5], torch.tensor([[0], [0]])], 1)  # duplicate edges and a self-loop
    forbidden = tp.edge_keys(g)
    if case % 2:
        extra = tp.keys(gids, rng.integers(0, n, (2, 3 * n)))
        forbidden = np.union1d(forbidden, extra)  # pairs other graphs link
    pos = torch.from_numpy(rng.integers(0, n, (2, int(rng.integers(1, 3 * n)))))
    anchor_ok = rng.random(n) < 0.6 if case % 5 == 1 else None
    want = _plain_dist2_negatives(mp, g, gids, tp, forbidden, pos, 10 + case, anchor_ok)
    got = dist2_negatives(mp, g, gids, tp, forbidden, pos, 10 + case, anchor_ok)
    assert got[1] == want[1] and got[0].dtype == torch.long and torch.equal(got[0], want[0])


def test_a_graph_without_distance_two_pairs_gives_no_draw():
    g = synthetic_graph(10, 10, in_channels=4, seed=0)
    g.titles, g.topics = [f"s{i}" for i in range(10)], None
    tp = TitlePairs([g])
    star = torch.tensor([[0, 0, 1, 2], [1, 2, 0, 0]])  # every pair at distance 2 is (1, 2): make it forbidden
    forbidden = np.union1d(tp.edge_keys(g), tp.keys(tp.gids(g), np.array([[1], [2]])))
    got, missing = dist2_negatives(star, g, tp.gids(g), tp, forbidden, torch.tensor([[1, 3], [2, 4]]), seed=0)
    assert got.shape == (2, 0) and missing == 2
