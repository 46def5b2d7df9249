"""Per-positive negative sets that one structural bit cannot solve, and the ranking metrics that go with them.

A positive (u, v) of an evaluation task gets its *own* K negatives, each sharing one endpoint with it (the anchor);
a scorer is then judged by where each positive ranks among its own negatives (MRR, Hits@k per positive, as the HeaRT
benchmark does) beside the AUC over every positive and negative of the task.

- "heart" (after HeaRT, Li et al., NeurIPS 2023): the candidates x of an anchor a are ranked by three heuristics that
  span local structure (resource allocation RA(a, x) = Σ_{z ∈ N(a) ∩ N(x)} 1 / deg z), global structure (personalised
  PageRank from a over the message-passing graph) and the features (cosine of the node features); the ranks are
  averaged and K negatives are drawn, seeded, from the HEART_POOL·K best candidates. So the negatives are hard for the
  heuristics themselves, not by construction of one distance. HeaRT uses hundreds per positive on graphs of 10^4-10^5
  nodes; here K = 20 (`per_positive`) on graphs of about 1,000-2,000 nodes keeps every model's evaluation at every
  epoch within a CPU budget and still makes the negatives the top 2% of an anchor's candidates.
- "matched": negatives at the positive's own shortest-path distance in the message passing (bins: 1, 2, and
  3-or-more/unreachable), drawn uniformly within the bin, so "has a common neighbour" (distance 2) separates nothing.

Both draw K/2 negatives from each endpoint (all K from the one allowed anchor when `anchor_ok` forbids the other, as
under new_nodes where the negative must hold an unseen title); a negative is never a link of any graph (`forbidden`,
sorted title-pair keys) and never the anchor itself. A positive whose anchors have no candidate gets none and is
counted as missing. Each set's registry entry (lib.linkpred.negative_sets) draws it for a task and caches it.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from scipy.stats import rankdata
from torch import Tensor

_CHUNK = 512  # anchors per dense [anchors, nodes] block: bounds memory at 512 x N float64 per heuristic


def personalized_pagerank(
    a: sp.csr_matrix, anchors: np.ndarray, alpha: float = 0.85, tol: float = 1e-10, max_iter: int = 1000
) -> np.ndarray:
    """Personalised PageRank [len(anchors), N] of the (symmetric) graph `a` [N, N] restarting at each anchor, with
    networkx.pagerank's semantics (damping `alpha`, a dangling node's mass goes back to the restart node, convergence
    when the L1 change is below N·tol). Power iteration for all anchors at once (networkx does one at a time)."""
    n = a.shape[0]
    deg = np.asarray(a.sum(1)).ravel()
    inv = np.divide(1.0, deg, out=np.zeros(n), where=deg > 0)
    walk = (sp.diags(inv) @ a).T.tocsr()  # column-stochastic on non-dangling nodes: x_next = walk @ x
    dangling = deg == 0
    at = (
        np.asarray(anchors),
        np.arange(len(anchors)),
    )  # the restart vectors' one entries: column j restarts at anchor j
    x = np.zeros((n, len(anchors)))
    x[at] = 1.0
    for _ in range(max_iter):
        prev = x
        # alpha · (walk @ x + restart · dangling mass) + (1 - alpha) · restart, in place: the restart terms add exact
        # zeros everywhere but at the anchors, so touching only those gives the same floats in half the passes
        x = walk @ prev
        x[at] += prev[dangling].sum(0)
        x *= alpha
        x[at] += 1 - alpha
        if (np.abs(x - prev).sum(0) < n * tol).all():
            break
    return x.T


def resource_allocation(a: sp.csr_matrix, anchors: np.ndarray) -> np.ndarray:
    """RA(anchor, x) for every node x: [len(anchors), N] (Zhou et al. 2009), one sparse product."""
    deg = np.asarray(a.sum(1)).ravel()
    inv = np.divide(1.0, deg, out=np.zeros_like(deg, dtype=np.float64), where=deg > 0)
    return np.asarray((a[anchors] @ sp.diags(inv) @ a).todense())


def distance_bins(a: sp.csr_matrix, anchors: np.ndarray) -> np.ndarray:
    """Shortest-path distance from each anchor to every node, binned: 0 itself, 1, 2, 3 = three or more or
    unreachable. [len(anchors), N] int8."""
    a = (a != 0).astype(np.int8).tocsr()
    rows = a[anchors]
    two = (rows @ a).astype(bool).toarray()
    one = rows.toarray().astype(bool)
    out = np.full(one.shape, 3, dtype=np.int8)
    out[two] = 2
    out[one] = 1
    out[np.arange(len(anchors)), anchors] = 0
    return out


def _cosine_rows(x: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    u = x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)
    return u[anchors] @ u.T


def _anchor_split(k: int, both: bool) -> tuple[int, int]:
    return ((k + 1) // 2, k // 2) if both else (k, 0)


def _expand(starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(which range, position) of every position of the ranges [starts[i], stops[i]), in order."""
    counts = stops - starts
    which = np.repeat(np.arange(len(starts)), counts)
    return which, np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts) + starts[which]


def _valid(tp, gids: np.ndarray, forbidden: np.ndarray, anchors: np.ndarray, n: int) -> np.ndarray:
    """[A, N] bool: x != anchor and the title pair (anchor, x) is not in `forbidden` (sorted keys).
    Looks up each anchor title's forbidden partners (a key is lo·tp.n + hi, lo <= hi) instead of testing all A·N
    pairs' keys: the same mask, a tenth of the time on 2,000-node graphs."""
    ok = np.ones((len(anchors), n), dtype=bool)
    ok[np.arange(len(anchors)), anchors] = False
    if forbidden.size == 0:
        return ok
    lo, hi = np.divmod(forbidden, tp.n)  # lo ascending, as the keys are
    by_hi = np.argsort(hi, kind="stable")
    hi_sorted, g = hi[by_hi], gids[anchors]
    rows, partners = [], []
    for ends, others in ((lo, hi), (hi_sorted, lo[by_hi])):
        which, pos = _expand(np.searchsorted(ends, g, "left"), np.searchsorted(ends, g, "right"))
        rows.append(which)
        partners.append(others[pos])
    rows, partners = np.concatenate(rows), np.concatenate(partners)
    node_order = np.argsort(gids, kind="stable")  # a title may name several nodes of a graph
    sorted_gids = gids[node_order]
    which, pos = _expand(
        np.searchsorted(sorted_gids, partners, "left"), np.searchsorted(sorted_gids, partners, "right")
    )
    ok[rows[which], node_order[pos]] = False
    return ok


def per_positive_draw(
    candidates, data, gids, tp, forbidden: np.ndarray, pos: Tensor, k: int, seed: int, anchor_ok: np.ndarray | None
) -> tuple[Tensor, Tensor, int]:
    """Shared driver. Each positive asks K/2 negatives of each allowed endpoint (all K of the only allowed one);
    candidates(anchors [B], owners [B], valid [B, N], counts [B]) gives each request its candidate nodes, from which
    `count` are drawn without replacement (seeded). Returns (pairs [2, Q], owner [Q], positives that got none)."""
    rng = np.random.default_rng(seed)
    n = data.num_nodes
    p = pos.numpy()
    ok = np.ones(n, dtype=bool) if anchor_ok is None else np.asarray(anchor_ok, dtype=bool)
    requests = []
    for i, (u, v) in enumerate(p.T):
        ends = [e for e in (u, v) if ok[e]]
        requests += [(i, e, c) for e, c in zip(ends, _anchor_split(k, len(ends) == 2)) if c > 0]
    req = np.array(requests, dtype=np.int64).reshape(-1, 3)
    out_u, out_v, owner = [], [], []
    for s in range(0, len(req), _CHUNK):
        block = req[s : s + _CHUNK]
        valid = _valid(tp, gids, forbidden, block[:, 1], n)
        for (i, anchor, count), cand in zip(block, candidates(block[:, 1], block[:, 0], valid, block[:, 2])):
            chosen = rng.choice(cand, size=min(count, cand.size), replace=False) if cand.size else []
            out_u += [anchor] * len(chosen)
            out_v += list(chosen)
            owner += [i] * len(chosen)
    got = np.bincount(np.array(owner, dtype=np.int64), minlength=p.shape[1])
    neg = torch.tensor(np.array([out_u, out_v], dtype=np.int64).reshape(2, -1))
    return neg, torch.tensor(np.array(owner, dtype=np.int64)), int((got == 0).sum())


def _smallest(values: np.ndarray, m: np.ndarray) -> list[np.ndarray]:
    """Per row j of values [B, N], the columns of its m[j] smallest values in the order of a stable argsort (ties by
    column). Only the candidates at or below the m-th smallest are sorted: a full argsort of every row was a tenth of
    the HeaRT draw."""
    top = int(m.max(initial=0))
    if top == 0:
        return [np.empty(0, dtype=np.int64) for _ in m]
    cut = np.partition(values, top - 1, axis=1)[:, top - 1]
    out = []
    for j, k in enumerate(m):
        cols = np.flatnonzero(values[j] <= cut[j])
        out.append(cols[np.argsort(values[j, cols], kind="stable")][:k])
    return out


HEART_POOL = 2  # HeaRT negatives are drawn from the HEART_POOL·K best-ranked candidates of each positive


def node_features(data) -> np.ndarray:
    """x [N, F] float64 of a graph, or the identity [N, N] for a graph without features."""
    return data.x.numpy().astype(np.float64) if data.x is not None else np.eye(data.num_nodes)


def heart_negatives(
    a: sp.csr_matrix,
    data,
    gids,
    tp,
    forbidden: np.ndarray,
    pos: Tensor,
    k: int,
    seed: int,
    anchor_ok: np.ndarray | None = None,
) -> tuple[Tensor, Tensor, int]:
    """HeaRT-style negatives: per positive, K pairs (anchor, w) drawn from the HEART_POOL·K candidates with the best
    mean rank under resource allocation, personalised PageRank from the anchor and feature cosine (a [N, N] the
    message-passing adjacency, node_features(data) [N, F] the features). Returns (pairs [2, Q], owner [Q] = index of
    the positive each negative belongs to, positives that got none)."""
    x = node_features(data)

    def candidates(anchors, owners, valid, counts):
        uniq, inv = np.unique(anchors, return_inverse=True)  # an anchor of several positives is scored once
        # tol 1e-7 stops the power iteration early; tests/test_negatives.py checks the chosen
        # candidates against networkx's PageRank at 1e-12
        scores = [resource_allocation(a, uniq), personalized_pagerank(a, uniq, tol=1e-7), _cosine_rows(x, uniq)]
        mean_rank = np.zeros(valid.shape)
        for h in scores:
            # invalid candidates score -inf, so they rank after every valid one and change no valid rank
            mean_rank += rankdata(np.where(valid, -h[inv], np.inf), axis=1)
        return _smallest(mean_rank, np.minimum(HEART_POOL * counts, valid.sum(1)))

    return per_positive_draw(candidates, data, gids, tp, forbidden, pos, k, seed, anchor_ok)


def matched_negatives(
    a: sp.csr_matrix,
    data,
    gids,
    tp,
    forbidden: np.ndarray,
    pos: Tensor,
    k: int,
    seed: int,
    anchor_ok: np.ndarray | None = None,
) -> tuple[Tensor, Tensor, int]:
    """Distance-matched negatives: per positive (u, v), K pairs (anchor, w) with w drawn uniformly among the nodes
    whose distance bin from the anchor (1, 2, 3+ / unreachable; `distance_bins`) equals the bin of the positive's
    other endpoint from it in the message passing. Returns (pairs [2, Q], owner [Q], positives that got none)."""
    p = pos.numpy()

    def candidates(anchors, owners, valid, counts):
        bins = distance_bins(a, anchors)
        other = np.where(anchors == p[0, owners], p[1, owners], p[0, owners])
        own = bins[np.arange(len(anchors)), other]  # the positive's own bin (distance is symmetric)
        return [np.flatnonzero(valid[j] & (bins[j] == own[j])) for j in range(len(anchors))]

    return per_positive_draw(candidates, data, gids, tp, forbidden, pos, k, seed, anchor_ok)
