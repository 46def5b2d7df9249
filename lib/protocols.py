"""Stage 3 evaluation protocols across overlapping graphs, hard negatives and a leak audit — all decided on titles.

The BFS graphs of one campaign overlap heavily (the embedded demo's 12 graphs share 89–99% of their titles with each
other; the seed's 389 graphs about 92%), so the same article pair is an edge in many graphs. Whether a held-out link
was "seen" in training is therefore decided on *title pairs*, never on per-graph node ids.

Protocols — what every scorer of one seed sees, after the graphs were split into train / validation / test:

  "seed":         the seed code's: a test graph's existing edges (both directions), which are also its message-passing
                  edges, against round(2E · R_neg) non-edges of that graph. Training graphs untouched.
  "within_graph": `holdout_fraction` of a test graph's edges held out of *its own* message passing, against as many
                  non-edges of that graph. Training graphs untouched, so the same title pairs are usually ordinary
                  edges of training graphs (the leak the audit counts). This was called "leak_free" before.
  "leak_free":    as within_graph, and every held-out title pair of a test graph is removed from every training and
                  validation graph (message passing and supervision); the held-out pairs of validation graphs are
                  removed from the training graphs; test negatives are title pairs that are a link in no graph of
                  the dataset.
  "pair_split":   the held-out links are drawn once for the whole dataset, as title pairs: a seeded `holdout_fraction`
                  of the distinct title pairs linked in the test graphs are the test pairs, as much of those linked in
                  the validation graphs (test pairs aside) the validation pairs. Every graph — training, validation
                  and test alike — loses both sets from its message passing and supervision, so the model trains on
                  graphs as sparse as those it is tested on (under leak_free a training graph loses the held-out pairs
                  of every test and validation graph while a test graph loses only its own: on the offline seed40
                  graphs 60% against 10% of their edges). A graph's positives are its links among its role's pairs;
                  negatives of validation and test are links in no graph, so never a held-out pair.
  "new_nodes":    a seeded `new_node_fraction` of the test graphs' titles is removed (as nodes) from every training and
                  validation graph; test positives are edges with at least one such unseen title, held out of the
                  test graph's message passing (the unseen article keeps its other links there); negatives also hold
                  an unseen title and are a link in no graph. Validation graphs get unseen titles of their own the
                  same way, removed from the training graphs, so epoch selection measures the same task.

Negative sets, each reported on its own (every one is a non-link under the protocol's rule: a link in no graph of the
dataset, so never a positive of any role):
  "uniform":  as above, shared by all positives of a task.
  "dist2":    for each positive (u, v) one pair (u, w) with w at distance exactly 2 from u in the message-passing graph,
              of u's topic where any such w has it; u is tried first, then v (under new_nodes only an unseen endpoint
              may anchor, so the negative holds an unseen title too). Every such negative has a common neighbour, so
              "no common neighbour => link" ranks a positive without one above all of them with no learning (this set
              was called "hard" before; it is kept for comparison).
  "heart", "matched": `per_positive` negatives of each positive's own, sharing an endpoint with it (lib.negatives):
              ranked hard by resource allocation, personalised PageRank and feature cosine together (HeaRT), or at the
              positive's own distance in the message passing. Scored per positive (MRR, Hits@k among its own
              negatives) beside the AUC.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import negative_sampling, subgraph, to_undirected

PROTOCOLS = ("seed", "within_graph", "leak_free", "pair_split", "new_nodes")
GRAPH_PROTOCOLS = ("seed", "within_graph")  # leave the training graphs as they are
NEGATIVE_SETS = ("uniform", "dist2", "heart", "matched")
PER_POSITIVE = 20  # negatives per positive of the "heart" and "matched" sets (lib.negatives says why 20)
# Protocols whose training graphs are identical share one trained model per (seed, supervision, kind).
TRAIN_SET = {"seed": "graphs", "within_graph": "graphs", "leak_free": "leak_free", "pair_split": "pair_split",
             "new_nodes": "new_nodes"}


def check_protocol(name: str) -> str:
    if name not in PROTOCOLS:
        raise ValueError(f"protocol {name!r} does not exist; use one of {PROTOCOLS}")
    return name


def check_negatives(name: str) -> str:
    if name not in NEGATIVE_SETS:
        raise ValueError(f"negative set {name!r} does not exist; use one of {NEGATIVE_SETS}")
    return name


def derive_seed(*parts) -> int:
    """A 63-bit seed from (run seed, purpose, epoch, step, ...) so every random draw is reproducible on its own."""
    ints = [p if isinstance(p, int) else int.from_bytes(str(p).encode()[:16].ljust(16, b"\0"), "little") % 2**63
            for p in parts]
    return int(np.random.SeedSequence(ints).generate_state(1, dtype=np.uint64)[0] >> 1)


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


def leak_free_split(edge_index: Tensor, num_nodes: int, fraction: float, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """Hold `fraction` of one graph's undirected edges out (the "within_graph" rule): (mp_edge_index [2, 2(E-P)] both
    directions, pos [2, P] with u < v, neg [2, P] non-edges of the *full* graph)."""
    mp, pos = split_edges(edge_index, num_nodes, fraction, seed)
    return mp, pos, sample_negatives(edge_index, num_nodes, pos.size(1), derive_seed(seed, "neg"))


def with_edges(data: Data, edge_index: Tensor) -> Data:
    """A view of `data` with another edge set; features and titles are shared, not copied."""
    return Data(x=data.x, edge_index=edge_index, num_nodes=data.num_nodes, titles=data.titles,
                topics=getattr(data, "topics", None), graph_id=data.graph_id, root=getattr(data, "root", None))


def local_pairs_with_keys(data: Data, gids: np.ndarray, tp: "TitlePairs", keys: np.ndarray) -> Tensor:
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
    `pair_split`, both directions of every held-out title pair present in it (`held_out_pairs`, set by make_protocol)."""
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
    return Data(x=data.x[keep], edge_index=ei, num_nodes=len(k), titles=[data.titles[i] for i in k],
                topics=[topics[i] for i in k], graph_id=data.graph_id, root=root)


# ---------------------------------------------------------------- title pairs


def _member(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
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
            self._gids[key] = (data.titles, np.fromiter((self.index[t] for t in data.titles), dtype=np.int64,
                                                        count=len(data.titles)))
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


def sample_global_negatives(data: Data, gids: np.ndarray, tp: TitlePairs, forbidden: np.ndarray, num: int, seed: int,
                            anchors: np.ndarray | None = None) -> Tensor:
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
        ok &= ~_member(k, forbidden)
        for a, b, key in zip(u[ok], v[ok], k[ok]):
            if key not in seen and len(got_u) < num:
                seen.add(int(key))
                got_u.append(a)
                got_v.append(b)
    if not got_u and num > 0:
        raise ValueError(f"graph {data.graph_id}: no pair of its nodes{' with an unseen title' if anchors is not None else ''} "
                         f"is a non-link in the dataset, so it has no negatives; drop it from the test/validation graphs")
    return torch.tensor(np.array([got_u, got_v], dtype=np.int64).reshape(2, -1))


def hard_negatives(mp_edge_index: Tensor, data: Data, gids: np.ndarray, tp: TitlePairs, forbidden: np.ndarray,
                   pos: Tensor, seed: int, anchor_ok: np.ndarray | None = None) -> tuple[Tensor, int]:
    """One hard negative per positive: ([2, H] pairs (anchor, w), number of positives that got none).

    w is at distance exactly 2 from the anchor in the message-passing graph mp_edge_index [2, M], its title pair is not
    in `forbidden`, and it has the anchor's topic when any candidate has it (topics of None count as unknown). The
    anchor is the positive's first endpoint, else its second; anchor_ok [N] restricts which nodes may anchor."""
    rng = np.random.default_rng(seed)
    n = data.num_nodes
    ei = mp_edge_index.numpy()
    a = sp.csr_matrix((np.ones(ei.shape[1], dtype=np.int8), (ei[0], ei[1])), shape=(n, n))
    topics = getattr(data, "topics", None) or [None] * n
    cache: dict[int, np.ndarray] = {}

    def candidates(u: int) -> np.ndarray:
        if u not in cache:
            nb = a.indices[a.indptr[u]:a.indptr[u + 1]]
            two = np.unique(a[nb].indices) if nb.size else np.empty(0, dtype=np.int64)
            c = np.setdiff1d(two, np.append(nb, u), assume_unique=False)
            if c.size:
                c = c[~_member(tp.keys(gids, np.stack([np.full(c.size, u), c])), forbidden)]
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


# ---------------------------------------------------------------- tasks


@dataclass
class EvalTask:
    """What every scorer sees for one graph under one protocol.

    data: the evaluation graph (x [N, F], titles, topics; edge_index = every edge it may know of);
    mp_edge_index [2, M]: edges for message passing and neighbourhood heuristics (both directions);
    pos [2, P]: positives; neg [2, Q]: uniform negatives; neg_hard [2, H]: distance-2 negatives (set "dist2");
    per_positive: set name -> (pairs [2, Q], owner [Q] = the positive each belongs to) for "heart" and "matched"."""

    graph_id: str
    protocol: str
    data: Data
    mp_edge_index: Tensor
    pos: Tensor
    neg: Tensor
    neg_hard: Tensor
    hard_missing: int = 0
    per_positive: dict = field(default_factory=dict)
    missing: dict = field(default_factory=dict)  # per-positive set -> positives that got no negative

    def negatives(self, which: str) -> Tensor:
        which = check_negatives(which)
        if which == "uniform":
            return self.neg
        if which == "dist2":
            return self.neg_hard
        return self.per_positive[which][0] if which in self.per_positive else torch.empty(2, 0, dtype=torch.long)

    def owners(self, which: str) -> np.ndarray | None:
        """owner [Q] of a per-positive set's negatives (index into pos); None for the shared sets."""
        return self.per_positive[which][1].numpy() if which in self.per_positive else None

    def pos_has_cn(self) -> np.ndarray:
        """[P] bool: the positive has a common neighbour in the message passing (the strata of every table)."""
        from lib.heuristics import heuristic_scores

        return heuristic_scores("common_neighbours", self.data.x, self.mp_edge_index, self.data.num_nodes,
                                self.pos) > 0


@dataclass
class ProtocolSplit:
    """One protocol of one seed: the training graphs as trained on, validation and test tasks, and what was removed."""

    protocol: str
    seed: int
    train: list[Data]
    val: list[EvalTask]
    test: list[EvalTask]
    skipped: list[dict] = field(default_factory=list)  # {graph_id, role, reason}
    removed: dict = field(default_factory=dict)
    unseen_titles: list[str] = field(default_factory=list)
    tp: TitlePairs | None = None
    global_links: np.ndarray | None = None  # sorted keys of every link of every graph of the dataset


def graph_task(data: Data, protocol: str, seed: int, holdout_fraction: float = 0.1, neg_rate: float = 0.3,
               tp: TitlePairs | None = None, per_positive: int = PER_POSITIVE) -> EvalTask:
    """The seeded pairs of one graph under a per-graph protocol ("seed" or "within_graph"); negatives (every set) are
    non-edges of this graph."""
    if protocol not in GRAPH_PROTOCOLS:
        raise ValueError(f"graph_task handles {GRAPH_PROTOCOLS}; {protocol!r} needs the whole dataset "
                         f"(lib.protocols.make_protocol)")
    tp = tp or TitlePairs([data])
    n, ei = data.num_nodes, data.edge_index
    # within_graph was called "leak_free" before the dataset-wide protocols; the old name keeps its pairs identical
    s = derive_seed(seed, "eval", "leak_free" if protocol == "within_graph" else protocol, str(data.graph_id))
    if protocol == "seed":
        mp, pos = ei, ei
        neg = sample_negatives(ei, n, round(ei.size(1) * neg_rate), s)
    else:
        mp, pos, neg = leak_free_split(ei, n, holdout_fraction, s)
    gids = tp.gids(data)
    hard, miss = hard_negatives(mp, data, gids, tp, tp.edge_keys(data), pos, derive_seed(s, "hard"))
    task = EvalTask(str(data.graph_id), protocol, data, mp, pos, neg, hard, miss)
    return _with_per_positive(task, gids, tp, tp.edge_keys(data), s, per_positive)


def _with_per_positive(task: EvalTask, gids: np.ndarray, tp: TitlePairs, forbidden: np.ndarray, seed: int, k: int,
                       anchor_ok: np.ndarray | None = None) -> EvalTask:
    """`task` with its "heart" and "matched" negatives (k per positive; k = 0 builds none)."""
    from lib.heuristics import adjacency
    from lib.negatives import heart_negatives, matched_negatives

    if k <= 0 or task.pos.size(1) == 0:
        return task
    a = adjacency(task.mp_edge_index, task.data.num_nodes)
    x = task.data.x.numpy().astype(np.float64) if task.data.x is not None else np.eye(task.data.num_nodes)
    for name, (neg, owner, miss) in (
            ("heart", heart_negatives(a, x, task.data, gids, tp, forbidden, task.pos, k, derive_seed(seed, "heart"),
                                      anchor_ok)),
            ("matched", matched_negatives(a, task.data, gids, tp, forbidden, task.pos, k, derive_seed(seed, "matched"),
                                          anchor_ok))):
        task.per_positive[name] = (neg, owner)
        task.missing[name] = miss
    return task


def _heldout_task(data: Data, protocol: str, pos: Tensor, tp: TitlePairs, forbidden: np.ndarray, seed: int,
                  unseen: np.ndarray | None = None, also_drop: np.ndarray | None = None,
                  per_positive: int = PER_POSITIVE) -> EvalTask:
    """Task of a graph whose positives pos [2, P] are held out of its message passing (with the sorted keys
    `also_drop`, when given); negatives avoid `forbidden`."""
    gids = tp.gids(data)
    held = np.unique(tp.keys(gids, pos))
    if also_drop is not None:
        held = np.union1d(held, also_drop)
    und = undirected(data.edge_index)
    keep = ~_member(tp.keys(gids, und), held)
    mp = to_undirected(und[:, torch.from_numpy(keep)], num_nodes=data.num_nodes)
    anchors = np.flatnonzero(unseen) if unseen is not None else None
    neg = sample_global_negatives(data, gids, tp, forbidden, pos.size(1), derive_seed(seed, "neg"), anchors)
    hard, miss = hard_negatives(mp, data, gids, tp, forbidden, pos, derive_seed(seed, "hard"), unseen)
    task = EvalTask(str(data.graph_id), protocol, data, mp, pos, neg, hard, miss)
    return _with_per_positive(task, gids, tp, forbidden, seed, per_positive, unseen)


def _pick(n: int, k: int, seed: int) -> np.ndarray:
    return np.sort(np.random.default_rng(seed).permutation(n)[:k])


def _without_pairs(train_g: list[Data], drop: np.ndarray, tp: "TitlePairs") -> tuple[list[Data], dict]:
    """The training graphs with every title pair in `drop` (sorted pair keys) removed as an edge, and the counts."""
    out, removed, excluded = [], 0, 0
    for g in train_g:
        und = undirected(g.edge_index)
        keep = ~_member(tp.keys(tp.gids(g), und), drop)
        removed += int((~keep).sum())
        h = with_edges(g, to_undirected(und[:, torch.from_numpy(keep)], num_nodes=g.num_nodes))
        # The held-out pairs must not come back as training *negatives* either: the graphs share most titles, so a
        # held-out pair sits in many training graphs, usually at distance 2, where hard-negative sampling finds
        # it — the model would be taught that exactly the test links are non-links.
        h.held_out_pairs = local_pairs_with_keys(g, tp.gids(g), tp, drop)
        excluded += h.held_out_pairs.size(1)
        out.append(h)
    return out, {"train_edges_removed": removed, "train_nodes_removed": 0,
                 "train_pairs_excluded_from_negatives": excluded}


def make_protocol(graphs: dict, train_ids: list, val_ids: list, test_ids: list, protocol: str, seed: int,
                  holdout_fraction: float = 0.1, neg_rate: float = 0.3, new_node_fraction: float = 0.1,
                  tp: TitlePairs | None = None, global_links: np.ndarray | None = None,
                  per_positive: int = PER_POSITIVE) -> ProtocolSplit:
    """Build one protocol for one seed. graphs: graph_id -> Data (the whole dataset: negatives must be non-links in
    every one of them). Deterministic for a seed. Training graphs left without 2 edges are skipped and listed.
    Validation tasks are built as the test tasks are, every negative set included (`per_positive` negatives of each
    positive's own for "heart" and "matched"; 0 builds neither)."""
    check_protocol(protocol)
    if not 0 < holdout_fraction < 1:
        raise ValueError(f"holdout_fraction={holdout_fraction!r} must be in (0, 1), e.g. 0.1")
    if not 0 < new_node_fraction < 1:
        raise ValueError(f"new_node_fraction={new_node_fraction!r} must be in (0, 1), e.g. 0.1")
    tp = tp or TitlePairs(graphs.values())
    if global_links is None:
        global_links = np.unique(np.concatenate([tp.edge_keys(g) for g in graphs.values()]))
    out = ProtocolSplit(protocol, seed, [], [], [], tp=tp, global_links=global_links)
    train_g = [graphs[i] for i in train_ids]
    if protocol in GRAPH_PROTOCOLS:
        out.train = train_g
        out.val = [graph_task(graphs[i], "within_graph", seed, holdout_fraction, neg_rate, tp, per_positive)
                   for i in val_ids]
        out.test = [graph_task(graphs[i], protocol, seed, holdout_fraction, neg_rate, tp, per_positive)
                    for i in test_ids]
        out.removed = {"train_edges_removed": 0, "train_nodes_removed": 0}
        return out

    if protocol == "leak_free":
        test_pos = {}
        for gid in test_ids:
            und = undirected(graphs[gid].edge_index)
            perm = torch.randperm(und.size(1), generator=torch.Generator().manual_seed(
                derive_seed(seed, "holdout", "test", str(gid))))
            test_pos[gid] = und[:, perm[:holdout_count(und.size(1), holdout_fraction)]]
        k_test = np.unique(np.concatenate([tp.keys(tp.gids(graphs[g]), p) for g, p in test_pos.items()]))
        val_graphs, val_pos = [], {}
        for gid in val_ids:
            g = graphs[gid]
            und = undirected(g.edge_index)
            und = und[:, torch.from_numpy(~_member(tp.keys(tp.gids(g), und), k_test))]
            g = with_edges(g, to_undirected(und, num_nodes=g.num_nodes))
            if und.size(1) < 2:
                out.skipped.append({"graph_id": str(gid), "role": "val", "reason": "fewer than 2 edges left"})
                continue
            perm = torch.randperm(und.size(1), generator=torch.Generator().manual_seed(
                derive_seed(seed, "holdout", "val", str(gid))))
            val_graphs.append(g)
            val_pos[gid] = und[:, perm[:holdout_count(und.size(1), holdout_fraction)]]
        k_val = np.unique(np.concatenate([tp.keys(tp.gids(g), val_pos[g.graph_id]) for g in val_graphs])) \
            if val_graphs else np.empty(0, dtype=np.int64)
        drop = np.union1d(k_test, k_val)
        out.test = [_heldout_task(graphs[g], protocol, p, tp, global_links, derive_seed(seed, "test", str(g)),
                                  per_positive=per_positive) for g, p in test_pos.items()]
        # Validation negatives avoid every link of the dataset, test pairs included: a test pair is usually at distance
        # 2 in a validation graph (it was removed there), so hard negatives would pick it (7.7% of them on seed40) and
        # epoch selection would reward scoring the test links low.
        out.val = [_heldout_task(g, protocol, val_pos[g.graph_id], tp, global_links,
                                 derive_seed(seed, "val", str(g.graph_id)), per_positive=per_positive)
                   for g in val_graphs]
        out.train, out.removed = _without_pairs(train_g, drop, tp)
        out.removed.update(test_pairs_held_out=int(k_test.size), val_pairs_held_out=int(k_val.size))
    elif protocol == "pair_split":
        def draw(ids: list, exclude: np.ndarray, purpose: str) -> np.ndarray:
            linked = np.unique(np.concatenate([tp.edge_keys(graphs[g]) for g in ids])) if ids else np.empty(0, np.int64)
            linked = np.setdiff1d(linked, exclude, assume_unique=True)
            if linked.size == 0:
                return linked
            return np.sort(linked[_pick(linked.size, holdout_count(linked.size, holdout_fraction),
                                        derive_seed(seed, "pairs", purpose))])

        k_test = draw(test_ids, np.empty(0, np.int64), "test")
        k_val = draw(val_ids, k_test, "val")
        drop = np.union1d(k_test, k_val)

        def pair_task(gid, keys: np.ndarray, purpose: str) -> EvalTask | str:
            g = graphs[gid]
            und = undirected(g.edge_index)
            if purpose == "val":  # a validation graph, as every graph outside the test set, never holds a test pair
                und = und[:, torch.from_numpy(~_member(tp.keys(tp.gids(g), und), k_test))]
                g = with_edges(g, to_undirected(und, num_nodes=g.num_nodes))
            pos = und[:, torch.from_numpy(_member(tp.keys(tp.gids(g), und), keys))]
            if pos.size(1) == 0:
                return f"none of its links is a {purpose} pair"
            if pos.size(1) == und.size(1):
                return "every one of its links is held out"
            return _heldout_task(g, protocol, pos, tp, global_links, derive_seed(seed, purpose, str(gid)),
                                 also_drop=drop, per_positive=per_positive)

        for ids, keys, purpose, target in ((test_ids, k_test, "test", out.test), (val_ids, k_val, "val", out.val)):
            for gid in ids:
                t = pair_task(gid, keys, purpose)
                (out.skipped.append({"graph_id": str(gid), "role": purpose, "reason": t}) if isinstance(t, str)
                 else target.append(t))
        out.train, out.removed = _without_pairs(train_g, drop, tp)
        out.removed.update(test_pairs_held_out=int(k_test.size), val_pairs_held_out=int(k_val.size))
    else:  # new_nodes
        def unseen_titles(ids_graphs: list[Data], exclude: set, purpose: str) -> set:
            linked = sorted({t for g in ids_graphs for i in torch.unique(g.edge_index).tolist()
                             for t in (g.titles[i],)} - exclude)
            k = max(1, round(new_node_fraction * len(linked))) if linked else 0
            return {linked[i] for i in _pick(len(linked), k, derive_seed(seed, "unseen", purpose))}

        u_test = unseen_titles([graphs[g] for g in test_ids], set(), "test")

        def node_task(g: Data, unseen_set: set, forbidden: np.ndarray, purpose: str) -> EvalTask | str:
            unseen = np.fromiter((t in unseen_set for t in g.titles), dtype=bool, count=g.num_nodes)
            und = undirected(g.edge_index)
            cand = und[:, torch.from_numpy(unseen[und[0].numpy()] | unseen[und[1].numpy()])]
            if cand.size(1) == 0:
                return "no edge touches an unseen title"
            p = min(cand.size(1), holdout_count(und.size(1), holdout_fraction))
            perm = torch.randperm(cand.size(1), generator=torch.Generator().manual_seed(
                derive_seed(seed, "holdout", purpose, str(g.graph_id))))
            return _heldout_task(g, "new_nodes", cand[:, perm[:p]], tp, forbidden,
                                 derive_seed(seed, purpose, str(g.graph_id)), unseen, per_positive=per_positive)

        for gid in test_ids:
            t = node_task(graphs[gid], u_test, global_links, "test")
            (out.skipped.append({"graph_id": str(gid), "role": "test", "reason": t}) if isinstance(t, str)
             else out.test.append(t))
        val_clean = []
        for gid in val_ids:
            g = graphs[gid]
            g = without_nodes(g, np.fromiter((t in u_test for t in g.titles), dtype=bool, count=g.num_nodes))
            if g.edge_index.size(1) // 2 < 2:
                out.skipped.append({"graph_id": str(gid), "role": "val", "reason": "fewer than 2 edges left"})
                continue
            val_clean.append(g)
        u_val = unseen_titles(val_clean, u_test, "val") if val_clean else set()
        for g in val_clean:
            t = node_task(g, u_val, global_links, "val")
            (out.skipped.append({"graph_id": str(g.graph_id), "role": "val", "reason": t}) if isinstance(t, str)
             else out.val.append(t))
        hidden = u_test | u_val
        nodes_removed = edges_removed = 0
        for g in train_g:
            drop = np.fromiter((t in hidden for t in g.titles), dtype=bool, count=g.num_nodes)
            h = without_nodes(g, drop) if drop.any() else g
            nodes_removed += int(drop.sum())
            edges_removed += (g.edge_index.size(1) - h.edge_index.size(1)) // 2
            out.train.append(h)
        out.unseen_titles = sorted(u_test)
        out.removed = {"train_edges_removed": edges_removed, "train_nodes_removed": nodes_removed,
                       "unseen_test_titles": len(u_test), "unseen_val_titles": len(u_val)}
    kept = []
    for g in out.train:
        if g.edge_index.size(1) // 2 < 2:
            out.skipped.append({"graph_id": str(g.graph_id), "role": "train",
                                "reason": f"fewer than 2 edges left after the {protocol} removal"})
        else:
            kept.append(g)
    out.train = kept
    return out


# ---------------------------------------------------------------- leak audit


def leak_audit(split: ProtocolSplit) -> dict:
    """What of a protocol's test pairs could have been learnt, counted on title pairs across every graph.

    test_pos_seen: test positive title pairs that are an edge of a training graph (as trained on) or of a validation
    graph (its message passing or its positives); test_neg_true_links / test_neg_hard_true_links (dist2) /
    test_neg_heart_true_links / test_neg_matched_true_links: negative title pairs that are a link in some graph of the
    dataset (label noise); *_titles_seen_share: share of the test graphs' node
    titles, and of the test positives' endpoint titles, that occur in a training or validation graph."""
    tp = split.tp
    seen_keys = [tp.edge_keys(g) for g in split.train]
    seen_keys += [tp.edge_keys(t.data) for t in split.val] + [np.unique(tp.keys(tp.gids(t.data), t.pos)) for t in split.val]
    seen = np.unique(np.concatenate(seen_keys)) if seen_keys else np.empty(0, dtype=np.int64)
    seen_titles = {tp.index[t] for g in [*split.train, *[v.data for v in split.val]] for t in g.titles}

    def keys(attr):
        parts = [tp.keys(tp.gids(t.data), getattr(t, attr)) for t in split.test if getattr(t, attr).numel()]
        return np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)

    pos, neg, hard = keys("pos"), keys("neg"), keys("neg_hard")

    def per_positive_keys(name):
        parts = [tp.keys(tp.gids(t.data), t.negatives(name)) for t in split.test if t.negatives(name).numel()]
        return np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)

    extra = {}
    for name in ("heart", "matched"):
        k = per_positive_keys(name)
        extra.update({f"test_neg_{name}_pairs": int(k.size),
                      f"test_neg_{name}_true_links": int(_member(k, split.global_links).sum()),
                      f"{name}_missing": int(sum(t.missing.get(name, 0) for t in split.test))})
    test_titles = {tp.index[title] for task in split.test for title in task.data.titles}
    pos_titles = set(np.unique(tp.titles_of(pos)).tolist()) if pos.size else set()
    return {
        "protocol": split.protocol, "seed": split.seed,
        "test_pos_pairs": int(pos.size), "test_pos_seen": int(_member(pos, seen).sum()),
        "test_neg_pairs": int(neg.size), "test_neg_true_links": int(_member(neg, split.global_links).sum()),
        "test_neg_hard_pairs": int(hard.size), "test_neg_hard_true_links": int(_member(hard, split.global_links).sum()),
        "test_titles_seen_share": round(len(test_titles & seen_titles) / max(1, len(test_titles)), 4),
        "test_pos_titles_seen_share": round(len(pos_titles & seen_titles) / max(1, len(pos_titles)), 4),
        "hard_missing": int(sum(t.hard_missing for t in split.test)),
        **extra, "train_graphs": len(split.train), "skipped": len(split.skipped), **split.removed,
    }
