"""Stage 3 edge sampling on title pairs: seeded negatives, held-out splits, the pairs a training graph
must not see, and the distance-2 ("dist2") negatives. The protocols of lib.linkpred.protocols are built from these."""

from __future__ import annotations

import random
from collections.abc import Iterable

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import negative_sampling, subgraph, to_undirected

from lib.embed.dataset import with_graph_features

PER_POSITIVE = 20  # negatives per positive of the "heart" and "matched" sets (lib.linkpred.negatives says why 20)
# Protocols whose training graphs are identical share one trained model per (seed, supervision, kind).
TRAIN_SET = {
    "seed": "graphs",
    "within_graph": "graphs",
    "leak_free": "leak_free",
    "pair_split": "pair_split",
    "new_nodes": "new_nodes",
}


def sample_negatives(edge_index: Tensor, num_nodes: int, num_neg: int, seed: int) -> Tensor:
    """num_neg non-edges [2, ≤num_neg] of the graph `edge_index` (never a self-loop, never an edge), seeded.

    PyG's negative_sampling draws from Python's global `random`; it runs here under a seeded state that is restored
    afterwards, so the caller's random stream is untouched.
    """
    if num_neg <= 0:  # PyG returns a float tensor here, which would turn a cat with long pairs into float
        return torch.empty(2, 0, dtype=torch.long)
    state = random.getstate()
    try:
        random.seed(seed)
        neg = negative_sampling(edge_index, num_nodes=num_nodes, num_neg_samples=int(num_neg), method="sparse")
    finally:
        random.setstate(state)
    return neg


def undirected(edge_index: Tensor) -> Tensor:
    """[2, E] with u < v of a both-directions edge_index [2, 2E]."""
    return edge_index[:, edge_index[0] < edge_index[1]]


def holdout_count(n_edges: int, fraction: float) -> int:
    """round(fraction · E), at least 1 and at most E - 1 (one edge always stays for message passing)."""
    return min(max(1, round(fraction * n_edges)), n_edges - 1)


def split_edges(edge_index: Tensor, num_nodes: int, fraction: float, seed: int) -> tuple[Tensor, Tensor]:
    """Hold a seeded `fraction` of one graph's undirected edges out: (kept edges [2, 2(E-P)] both directions,
    held-out pairs [2, P] with u < v). The held-out pairs are absent from the kept edges in both directions."""
    und = undirected(edge_index)
    p = holdout_count(und.size(1), fraction)
    perm = torch.randperm(und.size(1), generator=torch.Generator().manual_seed(seed))
    return to_undirected(und[:, perm[p:]], num_nodes=num_nodes), und[:, perm[:p]]


def with_edges(data: Data, edge_index: Tensor) -> Data:
    """A view of `data` with another edge set; features and titles are shared, not copied."""
    return with_graph_features(
        data,
        edge_index=edge_index,
        num_nodes=data.num_nodes,
        titles=data.titles,
        topics=getattr(data, "topics", None),
        graph_id=data.graph_id,
        root=getattr(data, "root", None),
    )


def local_pairs_with_keys(data: Data, gids: np.ndarray, tp: TitlePairs, keys: np.ndarray) -> Tensor:
    """Node pairs [2, H] (i < j, local ids) of `data` whose title pair is one of the sorted `keys`, whether or not
    the pair is an edge of this graph."""
    n = tp.n
    a, b = keys // n, keys % n
    local = np.full(n, -1, dtype=np.int64)
    local[gids] = np.arange(gids.size)  # a title appears once per graph
    u, v = local[a], local[b]
    ok = (u >= 0) & (v >= 0)
    u, v = u[ok], v[ok]
    return torch.from_numpy(np.stack([np.minimum(u, v), np.maximum(u, v)]))


def training_exclusions(data: Data) -> Tensor:
    """Pairs [2, E + 2H] no training step may use as a negative: the graph's edges and, under `leak_free` and
    `pair_split`, both directions of every held-out title pair present in it (`held_out_pairs`,
    set by make_protocol)."""
    held = getattr(data, "held_out_pairs", None)
    if held is None or held.size(1) == 0:
        return data.edge_index
    return torch.cat([data.edge_index, held, held.flip(0)], 1)


def without_nodes(data: Data, drop: np.ndarray) -> Data:
    """`data` without the nodes where drop [N] is True (their edges go too; node ids are renumbered)."""
    keep = torch.from_numpy(np.flatnonzero(~drop))
    ei, _ = subgraph(keep, data.edge_index, relabel_nodes=True, num_nodes=data.num_nodes)
    topics = getattr(data, "topics", None) or [None] * data.num_nodes
    k = keep.tolist()
    root = data.titles[0] if not drop[0] else None
    return with_graph_features(
        data,
        keep,
        edge_index=ei,
        num_nodes=len(k),
        titles=[data.titles[i] for i in k],
        topics=[topics[i] for i in k],
        graph_id=data.graph_id,
        root=root,
    )


# ---------------------------------------------------------------- title pairs


def is_member(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """keys [K] -> bool [K]: which occur in `sorted_keys` (ascending, unique). Binary search: O(K log S), no S-sized
    temporaries, which matters when S is every link of 389 graphs."""
    if sorted_keys.size == 0:
        return np.zeros(keys.shape, dtype=bool)
    i = np.searchsorted(sorted_keys, keys)
    return sorted_keys[np.minimum(i, sorted_keys.size - 1)] == keys


class TitlePairs:
    """Global ids for every title of a set of graphs and int64 keys for unordered title pairs."""

    def __init__(self, graphs: Iterable[Data]):
        graphs = list(graphs)
        titles = sorted({t for g in graphs for t in g.titles})
        self.index = {t: i for i, t in enumerate(titles)}
        self.n = len(titles)
        self._gids: dict[int, tuple[list, np.ndarray]] = {}

    def gids(self, data: Data) -> np.ndarray:
        """Global title id per node [N] int64."""
        key = id(data.titles)  # views made by with_edges share the titles list; the list is kept so its id stays unique
        if key not in self._gids:
            self._gids[key] = (
                data.titles,
                np.fromiter((self.index[t] for t in data.titles), dtype=np.int64, count=len(data.titles)),
            )
        return self._gids[key][1]

    def keys(self, gids: np.ndarray, pairs) -> np.ndarray:
        """Keys [P] of node pairs [2, P] (tensor or array) of one graph; the same title pair has the same key
        whatever its direction or graph."""
        pairs = pairs.numpy() if isinstance(pairs, Tensor) else np.asarray(pairs)
        a, b = gids[pairs[0]], gids[pairs[1]]
        return np.minimum(a, b) * self.n + np.maximum(a, b)

    def edge_keys(self, data: Data, edge_index: Tensor | None = None) -> np.ndarray:
        """Sorted unique keys of a graph's edges."""
        ei = data.edge_index if edge_index is None else edge_index
        return np.unique(self.keys(self.gids(data), ei))

    def titles_of(self, keys: np.ndarray) -> np.ndarray:
        """Global title ids [2, K] of keys [K]."""
        return np.stack([keys // self.n, keys % self.n])


# ---------------------------------------------------------------- negatives


def sample_global_negatives(
    data: Data,
    gids: np.ndarray,
    tp: TitlePairs,
    forbidden: np.ndarray,
    num: int,
    seed: int,
    anchors: np.ndarray | None = None,
) -> Tensor:
    """num seeded node pairs [2, ≤num] of `data` whose title pair is not in `forbidden` (sorted keys), u != v, no pair
    twice; u is drawn from `anchors` (node ids) when given. Rejection sampling: the graphs are sparse, so a few
    rounds suffice; a graph where no pair qualifies is an error naming it."""
    rng = np.random.default_rng(seed)
    n = data.num_nodes
    pool = np.arange(n) if anchors is None else np.asarray(anchors)
    got_u, got_v, seen = [], [], set()
    for _ in range(64):
        need = num - len(got_u)
        if need <= 0:
            break
        m = max(64, 2 * need)
        u, v = rng.choice(pool, m), rng.integers(0, n, m)
        ok = u != v
        k = tp.keys(gids, np.stack([u, v]))
        ok &= ~is_member(k, forbidden)
        for a, b, key in zip(u[ok], v[ok], k[ok]):
            if key not in seen and len(got_u) < num:
                seen.add(int(key))
                got_u.append(a)
                got_v.append(b)
    if not got_u and num > 0:
        raise ValueError(
            f"graph {data.graph_id}: no pair of its nodes{' with an unseen title' if anchors is not None else ''} "
            f"is a non-link in the dataset, so it has no negatives; drop it from the test/validation graphs"
        )
    return torch.tensor(np.array([got_u, got_v], dtype=np.int64).reshape(2, -1))


def dist2_negatives(
    mp_edge_index: Tensor,
    data: Data,
    gids: np.ndarray,
    tp: TitlePairs,
    forbidden: np.ndarray,
    pos: Tensor,
    seed: int,
    anchor_ok: np.ndarray | None = None,
) -> tuple[Tensor, int]:
    """One hard negative per positive: ([2, H] pairs (anchor, w), number of positives that got none).

    w is at distance exactly 2 from the anchor in the message-passing graph mp_edge_index [2, M], its title pair is not
    in `forbidden`, and it has the anchor's topic when any candidate has it (topics of None count as unknown). The
    anchor is the positive's first endpoint, else its second; anchor_ok [N] restricts which nodes may anchor. w is the
    anchor's candidates (ascending) at a uniform index drawn per positive in order."""
    rng = np.random.default_rng(seed)
    n = data.num_nodes
    pos_np = pos.numpy().reshape(2, -1)
    ei = mp_edge_index.numpy()
    a = sp.csr_matrix((np.ones(ei.shape[1], dtype=np.int32), (ei[0], ei[1])), shape=(n, n))
    ends = np.unique(pos_np)
    if anchor_ok is not None:
        ends = ends[np.asarray(anchor_ok, dtype=bool)[ends]]
    ptr, cand = _distance2_candidates(a, ends, gids, tp, forbidden, getattr(data, "topics", None) or None)
    size = np.zeros(n, dtype=np.int64)
    start = np.zeros(n, dtype=np.int64)
    size[ends], start[ends] = np.diff(ptr), ptr[:-1]
    u, v = pos_np
    anchor = np.where(size[u] > 0, u, np.where(size[v] > 0, v, -1))  # size is 0 where anchor_ok forbids
    has = anchor >= 0
    anchor = anchor[has]
    # one draw per positive with a candidate, in order: numpy's array-bounded integers give the same numbers, and leave
    # the generator in the same state, as one scalar draw per positive
    pick = rng.integers(0, size[anchor]) if anchor.size else np.empty(0, dtype=np.int64)
    out = np.stack([anchor, cand[start[anchor] + pick]]).astype(np.int64)
    return torch.from_numpy(out), int((~has).sum())


def _distance2_candidates(
    a: sp.csr_matrix, nodes: np.ndarray, gids: np.ndarray, tp: TitlePairs, forbidden: np.ndarray, topics
) -> tuple[np.ndarray, np.ndarray]:
    """Each node's distance-2 candidates in the adjacency `a` [N, N] (CSR), as CSR arrays over `nodes` [R] (ptr
    [R + 1], candidates ascending per node): the nodes two steps away that are neither a neighbour nor the node itself,
    whose title pair with it is not in `forbidden`, and, where the node has a topic and some candidate shares it, only
    those. Written with sparse products rather than per node (a row slice each), which cost most of a training step
    drawing distance-2 negatives."""
    rows = a[nodes]
    two = (rows @ a).tocoo()  # a product's entries are counts of 2-walks: nonzero exactly where one exists
    r, c = two.row, two.col
    rows.sort_indices()  # _in_rows searches each row's columns
    keep = (c != nodes[r]) & ~_in_rows(rows, r, c)
    r, c = r[keep], c[keep]
    if c.size:
        keep = ~is_member(tp.keys(gids, np.stack([nodes[r], c])), forbidden)
        r, c = r[keep], c[keep]
    if topics is not None and c.size:
        codes = _topic_codes(topics)
        same = (codes[c] == codes[nodes[r]]) & (codes[nodes[r]] >= 0)
        any_same = np.zeros(nodes.size, dtype=bool)
        any_same[r[same]] = True
        keep = same | ~any_same[r]
        r, c = r[keep], c[keep]
    order = np.lexsort((c, r))
    r, c = r[order], c[order]
    ptr = np.zeros(nodes.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=nodes.size), out=ptr[1:])
    return ptr, c


def _in_rows(m: sp.csr_matrix, r: np.ndarray, c: np.ndarray) -> np.ndarray:
    """bool [K]: whether column c[k] is stored in row r[k] of `m` (sorted indices), for every k at once."""
    flat = np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr)) * m.shape[1] + m.indices
    return is_member(r.astype(np.int64) * m.shape[1] + c, flat)


def _topic_codes(topics) -> np.ndarray:
    """int codes [N] of node topics, equal exactly where the topics are equal; -1 for None (unknown)."""
    names: dict = {}
    return np.array([-1 if t is None else names.setdefault(t, len(names)) for t in topics], dtype=np.int64)
