"""Stage 3 evaluation protocols across overlapping graphs, negative sets and a leak audit — all decided on titles.

The BFS graphs of one campaign overlap heavily (the embedded demo's 12 graphs share 89–99% of their titles with each
other; the seed's 389 graphs about 92%), so the same article pair is an edge in many graphs. Whether a held-out link
was "seen" in training is therefore decided on *title pairs*, never on per-graph node ids.

Protocols — what every scorer of one seed sees, after the graphs were split into train / validation / test:

  "seed":         the seed code's: a test graph's existing edges (both directions), which are also its message-passing
                  edges, against round(2E · R_neg) non-edges of that graph. Training graphs untouched.
  "within_graph": `holdout_fraction` of a test graph's edges held out of *its own* message passing, against as many
                  non-edges of that graph. Training graphs untouched, so the same title pairs are usually ordinary
                  edges of training graphs (the leak the audit counts).
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

Negative sets (`settings.negative_sets`; each one's sampler, ranking and description are its entry in
lib.linkpred.negative_sets), each reported on its own: every one is a non-link under the protocol's rule (a link in no
graph of the dataset, so never a positive of any role); under new_nodes only an unseen title may anchor a negative.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected

from lib.common.paths import CACHE
from lib.common.seeding import derive_seed
from lib.linkpred.heuristics import heuristic_scores
from lib.linkpred.names import GRAPH_PROTOCOLS, check_protocol
from lib.linkpred.negative_sets.base import Draw, NegativeContext
from lib.linkpred.negative_sets.registry import (
    DEFAULT_NEGATIVE_SETS,
    check_negatives,
    check_selection,
    draw_negatives,
)
from lib.linkpred.sampling import (
    PER_POSITIVE,
    TitlePairs,
    holdout_count,
    is_member,
    local_pairs_with_keys,
    split_edges,
    undirected,
    with_edges,
    without_nodes,
)

# ---------------------------------------------------------------- tasks

# content-keyed draws of the cached negative sets (lib.linkpred.negative_sets); None draws them every time
NEGATIVE_CACHE: Path | None = CACHE / "negatives"


@dataclass
class EvalTask:
    """What every scorer sees for one graph under one protocol.

    data: the evaluation graph (x [N, F], titles, topics; edge_index = every edge it may know of);
    mp_edge_index [2, M]: edges for message passing and neighbourhood heuristics (both directions);
    pos [2, P]: positives; negative_sets: registry name (lib.linkpred.negative_sets) -> Draw (pairs [2, Q], owner [Q]
    or None, positives that got none), in registry order, for the sets the protocol drew."""

    graph_id: str
    protocol: str
    data: Data
    mp_edge_index: Tensor
    pos: Tensor
    negative_sets: dict[str, Draw] = field(default_factory=dict)

    def negatives(self, which: str) -> Tensor:
        """pairs [2, Q] of one negative set; [2, 0] for a registered set the task does not hold."""
        draw = self.negative_sets.get(check_negatives(which))
        return draw.pairs if draw is not None else torch.empty(2, 0, dtype=torch.long)

    def owners(self, which: str) -> np.ndarray | None:
        """owner [Q] of a per-positive set's negatives (index into pos); None for the shared sets."""
        draw = self.negative_sets.get(which)
        return draw.owner.numpy() if draw is not None and draw.owner is not None else None

    def missing(self, which: str) -> int:
        """Positives for which the set found no negative (0 for a set the task does not hold)."""
        draw = self.negative_sets.get(which)
        return draw.missing if draw is not None else 0

    def pos_has_cn(self) -> np.ndarray:
        """[P] bool: the positive has a common neighbour in the message passing (the strata of every table)."""
        return heuristic_scores("common_neighbours", self.data.x, self.mp_edge_index, self.data.num_nodes, self.pos) > 0


@dataclass(frozen=True)
class ProtocolSettings:
    """How a protocol holds out and samples its pairs (notebook 03's parameter names; GatParams.protocol_settings)."""

    holdout_fraction: float = 0.1  # held-out protocols: share of a graph's (or the dataset's) links held out
    neg_rate: float = 0.3  # "seed": uniform negatives per positive edge (R_neg)
    new_node_fraction: float = 0.1  # new_nodes: share of the test graphs' titles never seen in training
    negatives_per_positive: int = PER_POSITIVE  # K of the per-positive sets ("heart", "matched"; 0: none)
    negative_sets: tuple[str, ...] = DEFAULT_NEGATIVE_SETS  # registry names of the sets every task draws

    def __post_init__(self):
        object.__setattr__(self, "negative_sets", check_selection(self.negative_sets))
        for key in ("holdout_fraction", "new_node_fraction"):
            if not 0 < getattr(self, key) < 1:
                raise ValueError(f"{key}={getattr(self, key)!r} must be in (0, 1), e.g. 0.1")


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


def graph_task(
    data: Data, protocol: str, seed: int, settings: ProtocolSettings = ProtocolSettings(), tp: TitlePairs | None = None
) -> EvalTask:
    """The seeded pairs of one graph under a per-graph protocol ("seed" or "within_graph"); negatives (every set) are
    non-edges of this graph."""
    if protocol not in GRAPH_PROTOCOLS:
        raise ValueError(
            f"graph_task handles {GRAPH_PROTOCOLS}; {protocol!r} needs the whole dataset "
            f"(lib.linkpred.protocols.make_protocol)"
        )
    tp = tp or TitlePairs([data])
    n, ei = data.num_nodes, data.edge_index
    # within_graph seeds its pairs under the key "leak_free", so its published pairs stay identical
    s = derive_seed(seed, "eval", "leak_free" if protocol == "within_graph" else protocol, str(data.graph_id))
    mp, pos = (ei, ei) if protocol == "seed" else split_edges(ei, n, settings.holdout_fraction, s)
    task = EvalTask(str(data.graph_id), protocol, data, mp, pos)
    return _with_negatives(task, tp.gids(data), tp, tp.edge_keys(data), s, settings)


def _with_negatives(
    task: EvalTask,
    gids: np.ndarray,
    tp: TitlePairs,
    forbidden: np.ndarray,
    seed: int,
    settings: ProtocolSettings,
    anchor_ok: np.ndarray | None = None,
) -> EvalTask:
    """`task` with the negative sets `settings.negative_sets` drawn (lib.linkpred.negative_sets.registry's
    draw_negatives), none of them in `forbidden`, each from its own stream of `seed`; cached sets are kept in
    NEGATIVE_CACHE."""
    ctx = NegativeContext(
        task.protocol,
        task.data,
        task.mp_edge_index,
        task.pos,
        gids,
        tp,
        forbidden,
        seed,
        settings.neg_rate,
        settings.negatives_per_positive,
        anchor_ok,
    )
    task.negative_sets = draw_negatives(ctx, settings.negative_sets, NEGATIVE_CACHE)
    return task


def _heldout_task(
    data: Data,
    protocol: str,
    pos: Tensor,
    tp: TitlePairs,
    forbidden: np.ndarray,
    seed: int,
    settings: ProtocolSettings,
    unseen: np.ndarray | None = None,
    also_drop: np.ndarray | None = None,
) -> EvalTask:
    """Task of a graph whose positives pos [2, P] are held out of its message passing (with the sorted keys
    `also_drop`, when given); negatives avoid `forbidden`."""
    gids = tp.gids(data)
    held = np.unique(tp.keys(gids, pos))
    if also_drop is not None:
        held = np.union1d(held, also_drop)
    und = undirected(data.edge_index)
    keep = ~is_member(tp.keys(gids, und), held)
    mp = to_undirected(und[:, torch.from_numpy(keep)], num_nodes=data.num_nodes)
    return _with_negatives(
        EvalTask(str(data.graph_id), protocol, data, mp, pos), gids, tp, forbidden, seed, settings, unseen
    )


def _pick(n: int, k: int, seed: int) -> np.ndarray:
    return np.sort(np.random.default_rng(seed).permutation(n)[:k])


def _without_pairs(train_g: list[Data], drop: np.ndarray, tp: TitlePairs) -> tuple[list[Data], dict]:
    """The training graphs with every title pair in `drop` (sorted pair keys) removed as an edge, and the counts."""
    out, removed, excluded = [], 0, 0
    for g in train_g:
        und = undirected(g.edge_index)
        keep = ~is_member(tp.keys(tp.gids(g), und), drop)
        removed += int((~keep).sum())
        h = with_edges(g, to_undirected(und[:, torch.from_numpy(keep)], num_nodes=g.num_nodes))
        # The held-out pairs must not come back as training *negatives* either: the graphs share most titles, so a
        # held-out pair sits in many training graphs, usually at distance 2, where dist2 sampling finds
        # it — the model would be taught that exactly the test links are non-links.
        h.held_out_pairs = local_pairs_with_keys(g, tp.gids(g), tp, drop)
        excluded += h.held_out_pairs.size(1)
        out.append(h)
    return out, {
        "train_edges_removed": removed,
        "train_nodes_removed": 0,
        "train_pairs_excluded_from_negatives": excluded,
    }


@dataclass(frozen=True)
class _Build:
    """What a dataset-wide protocol builder reads: the dataset, the graphs' roles, the seed and the settings."""

    graphs: dict  # graph_id -> Data, the whole dataset
    train: list[Data]
    val_ids: list
    test_ids: list
    seed: int
    settings: ProtocolSettings
    tp: TitlePairs
    global_links: np.ndarray  # sorted keys of every link of every graph of the dataset


def _leak_free(out: ProtocolSplit, b: _Build) -> None:
    """Fill `out` for leak_free: held-out test and validation pairs removed from every training graph (see the module
    docstring)."""
    graphs, train_g, val_ids, test_ids, seed, tp, global_links = (
        b.graphs,
        b.train,
        b.val_ids,
        b.test_ids,
        b.seed,
        b.tp,
        b.global_links,
    )
    holdout_fraction = b.settings.holdout_fraction
    test_pos = {}
    for gid in test_ids:
        und = undirected(graphs[gid].edge_index)
        perm = torch.randperm(
            und.size(1), generator=torch.Generator().manual_seed(derive_seed(seed, "holdout", "test", str(gid)))
        )
        test_pos[gid] = und[:, perm[: holdout_count(und.size(1), holdout_fraction)]]
    k_test = np.unique(np.concatenate([tp.keys(tp.gids(graphs[g]), p) for g, p in test_pos.items()]))
    val_graphs, val_pos = [], {}
    for gid in val_ids:
        g = graphs[gid]
        und = undirected(g.edge_index)
        und = und[:, torch.from_numpy(~is_member(tp.keys(tp.gids(g), und), k_test))]
        g = with_edges(g, to_undirected(und, num_nodes=g.num_nodes))
        if und.size(1) < 2:
            out.skipped.append({"graph_id": str(gid), "role": "val", "reason": "fewer than 2 edges left"})
            continue
        perm = torch.randperm(
            und.size(1), generator=torch.Generator().manual_seed(derive_seed(seed, "holdout", "val", str(gid)))
        )
        val_graphs.append(g)
        val_pos[gid] = und[:, perm[: holdout_count(und.size(1), holdout_fraction)]]
    k_val = (
        np.unique(np.concatenate([tp.keys(tp.gids(g), val_pos[g.graph_id]) for g in val_graphs]))
        if val_graphs
        else np.empty(0, dtype=np.int64)
    )
    drop = np.union1d(k_test, k_val)
    out.test = [
        _heldout_task(graphs[g], "leak_free", p, tp, global_links, derive_seed(seed, "test", str(g)), b.settings)
        for g, p in test_pos.items()
    ]
    # Validation negatives avoid every link of the dataset, test pairs included: a test pair is usually at distance
    # 2 in a validation graph (it was removed there), so dist2 negatives would pick it (7.7% of them on seed40) and
    # epoch selection would reward scoring the test links low.
    out.val = [
        _heldout_task(
            g, "leak_free", val_pos[g.graph_id], tp, global_links, derive_seed(seed, "val", str(g.graph_id)), b.settings
        )
        for g in val_graphs
    ]
    out.train, out.removed = _without_pairs(train_g, drop, tp)
    out.removed.update(test_pairs_held_out=int(k_test.size), val_pairs_held_out=int(k_val.size))


def _pair_split(out: ProtocolSplit, b: _Build) -> None:
    """Fill `out` for pair_split: held-out title pairs drawn once for the dataset, removed from every graph."""
    graphs, train_g, val_ids, test_ids, seed, tp, global_links = (
        b.graphs,
        b.train,
        b.val_ids,
        b.test_ids,
        b.seed,
        b.tp,
        b.global_links,
    )
    holdout_fraction = b.settings.holdout_fraction

    def draw(ids: list, exclude: np.ndarray, purpose: str) -> np.ndarray:
        linked = np.unique(np.concatenate([tp.edge_keys(graphs[g]) for g in ids])) if ids else np.empty(0, np.int64)
        linked = np.setdiff1d(linked, exclude, assume_unique=True)
        if linked.size == 0:
            return linked
        return np.sort(
            linked[
                _pick(linked.size, holdout_count(linked.size, holdout_fraction), derive_seed(seed, "pairs", purpose))
            ]
        )

    k_test = draw(test_ids, np.empty(0, np.int64), "test")
    k_val = draw(val_ids, k_test, "val")
    drop = np.union1d(k_test, k_val)

    def pair_task(gid, keys: np.ndarray, purpose: str) -> EvalTask | str:
        g = graphs[gid]
        und = undirected(g.edge_index)
        if purpose == "val":  # a validation graph, as every graph outside the test set, never holds a test pair
            und = und[:, torch.from_numpy(~is_member(tp.keys(tp.gids(g), und), k_test))]
            g = with_edges(g, to_undirected(und, num_nodes=g.num_nodes))
        pos = und[:, torch.from_numpy(is_member(tp.keys(tp.gids(g), und), keys))]
        if pos.size(1) == 0:
            return f"none of its links is a {purpose} pair"
        if pos.size(1) == und.size(1):
            return "every one of its links is held out"
        return _heldout_task(
            g, "pair_split", pos, tp, global_links, derive_seed(seed, purpose, str(gid)), b.settings, also_drop=drop
        )

    for ids, keys, purpose, target in ((test_ids, k_test, "test", out.test), (val_ids, k_val, "val", out.val)):
        for gid in ids:
            t = pair_task(gid, keys, purpose)
            (
                out.skipped.append({"graph_id": str(gid), "role": purpose, "reason": t})
                if isinstance(t, str)
                else target.append(t)
            )
    out.train, out.removed = _without_pairs(train_g, drop, tp)
    out.removed.update(test_pairs_held_out=int(k_test.size), val_pairs_held_out=int(k_val.size))


def _new_nodes(out: ProtocolSplit, b: _Build) -> None:
    """Fill `out` for new_nodes: unseen titles removed (as nodes) from every training and validation graph."""
    graphs, train_g, val_ids, test_ids, seed, tp, global_links = (
        b.graphs,
        b.train,
        b.val_ids,
        b.test_ids,
        b.seed,
        b.tp,
        b.global_links,
    )
    holdout_fraction = b.settings.holdout_fraction
    new_node_fraction = b.settings.new_node_fraction

    def unseen_titles(ids_graphs: list[Data], exclude: set, purpose: str) -> set:
        linked = sorted(
            {t for g in ids_graphs for i in torch.unique(g.edge_index).tolist() for t in (g.titles[i],)} - exclude
        )
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
        perm = torch.randperm(
            cand.size(1),
            generator=torch.Generator().manual_seed(derive_seed(seed, "holdout", purpose, str(g.graph_id))),
        )
        return _heldout_task(
            g,
            "new_nodes",
            cand[:, perm[:p]],
            tp,
            forbidden,
            derive_seed(seed, purpose, str(g.graph_id)),
            b.settings,
            unseen,
        )

    for gid in test_ids:
        t = node_task(graphs[gid], u_test, global_links, "test")
        (
            out.skipped.append({"graph_id": str(gid), "role": "test", "reason": t})
            if isinstance(t, str)
            else out.test.append(t)
        )
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
        (
            out.skipped.append({"graph_id": str(g.graph_id), "role": "val", "reason": t})
            if isinstance(t, str)
            else out.val.append(t)
        )
    hidden = u_test | u_val
    nodes_removed = edges_removed = 0
    for g in train_g:
        drop = np.fromiter((t in hidden for t in g.titles), dtype=bool, count=g.num_nodes)
        h = without_nodes(g, drop) if drop.any() else g
        nodes_removed += int(drop.sum())
        edges_removed += (g.edge_index.size(1) - h.edge_index.size(1)) // 2
        out.train.append(h)
    out.unseen_titles = sorted(u_test)
    out.removed = {
        "train_edges_removed": edges_removed,
        "train_nodes_removed": nodes_removed,
        "unseen_test_titles": len(u_test),
        "unseen_val_titles": len(u_val),
    }


def make_protocol(
    graphs: dict,
    roles: dict,
    protocol: str,
    seed: int,
    settings: ProtocolSettings = ProtocolSettings(),
    tp: TitlePairs | None = None,
    global_links: np.ndarray | None = None,
) -> ProtocolSplit:
    """Build one protocol for one seed. graphs: graph_id -> Data (the whole dataset: negatives must be non-links in
    every one of them); roles: {"train", "val", "test": graph ids} (a seed's split; "val" may be absent).
    Deterministic for a seed. Training graphs left without 2 edges are skipped and listed. Validation tasks are built
    as the test tasks are, with every set of `settings.negative_sets` (`settings.negatives_per_positive` negatives of
    each positive's own for the per-positive sets; 0 builds none of those)."""
    check_protocol(protocol)
    tp = tp or TitlePairs(graphs.values())
    if global_links is None:
        global_links = np.unique(np.concatenate([tp.edge_keys(g) for g in graphs.values()]))
    out = ProtocolSplit(protocol, seed, [], [], [], tp=tp, global_links=global_links)
    val_ids, test_ids = list(roles.get("val", [])), list(roles["test"])
    train_g = [graphs[i] for i in roles["train"]]
    if protocol in GRAPH_PROTOCOLS:
        out.train = train_g
        out.val = [graph_task(graphs[i], "within_graph", seed, settings, tp) for i in val_ids]
        out.test = [graph_task(graphs[i], protocol, seed, settings, tp) for i in test_ids]
        out.removed = {"train_edges_removed": 0, "train_nodes_removed": 0}
        return out

    builders = {"leak_free": _leak_free, "pair_split": _pair_split, "new_nodes": _new_nodes}
    builders[protocol](out, _Build(graphs, train_g, val_ids, test_ids, seed, settings, tp, global_links))
    kept = []
    for g in out.train:
        if g.edge_index.size(1) // 2 < 2:
            out.skipped.append(
                {
                    "graph_id": str(g.graph_id),
                    "role": "train",
                    "reason": f"fewer than 2 edges left after the {protocol} removal",
                }
            )
        else:
            kept.append(g)
    out.train = kept
    return out
