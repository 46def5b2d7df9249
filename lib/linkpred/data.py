"""Stage 3 inputs: a graph as a link-prediction problem, which graphs are usable, and seeded synthetic graphs."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected

# ---------------------------------------------------------------- seeds, input checks, synthetic graphs


def graph_problem(data: Data, in_channels: int | None = None) -> str | None:
    """Why `data` cannot be used for link prediction (None if it can); a wrong feature width is an error."""
    x = data.x
    if in_channels is not None and (x.dim() != 2 or x.size(1) != in_channels):
        raise ValueError(
            f"graph {getattr(data, 'graph_id', '?')} has features of shape {tuple(x.shape)} but the "
            f"model expects width {in_channels}; re-embed the dataset or set in_channels"
        )
    if data.num_nodes < 2:
        return f"{data.num_nodes} node(s); link prediction needs at least 2"
    if data.edge_index.size(1) == 0:
        return "no edges"
    if not torch.isfinite(x).all():
        return "features contain NaN/inf"
    if data.edge_index.size(1) // 2 < 2:
        return "fewer than 2 undirected edges; cannot hold any out"
    return None


def usable_graphs(graphs: Iterable[Data], in_channels: int) -> tuple[list[Data], list[dict]]:
    """(usable graphs, [{graph_id, reason}] of the skipped ones)."""
    ok, skipped = [], []
    for g in graphs:
        why = graph_problem(g, in_channels)
        (skipped.append({"graph_id": getattr(g, "graph_id", None), "reason": why}) if why else ok.append(g))
    return ok, skipped


def synthetic_graph(
    num_nodes: int = 300,
    num_edges: int = 1200,
    in_channels: int = 384,
    num_clusters: int = 6,
    homophily: float = 0.9,
    seed: int = 0,
    graph_id: str = "synthetic",
) -> Data:
    """A stochastic-block graph whose edges follow feature clusters, so a model can learn them.

    x: [N, in_channels] float32 (cluster centre + noise), edge_index: [2, ≈2·num_edges] undirected, coalesced,
    no self-loops.  For tests and benchmarks when no crawled dataset is at hand.
    """
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(num_clusters, in_channels, generator=g)
    cluster = torch.randint(0, num_clusters, (num_nodes,), generator=g)
    x = centres[cluster] + 0.8 * torch.randn(num_nodes, in_channels, generator=g)
    src = torch.randint(0, num_nodes, (num_edges,), generator=g)
    same = torch.rand(num_edges, generator=g) < homophily
    order = torch.argsort(cluster)
    counts = torch.bincount(cluster, minlength=num_clusters)
    starts = torch.cumsum(counts, 0) - counts
    pick = (torch.rand(num_edges, generator=g) * counts[cluster[src]]).long()
    dst_same = order[starts[cluster[src]] + pick]
    dst_rand = torch.randint(0, num_nodes, (num_edges,), generator=g)
    dst = torch.where(same, dst_same, dst_rand)
    keep = src != dst
    ei = to_undirected(torch.stack([src[keep], dst[keep]]), num_nodes=num_nodes)
    return Data(
        x=x.float(),
        edge_index=ei,
        num_nodes=num_nodes,
        graph_id=graph_id,
        titles=[f"n{i}" for i in range(num_nodes)],
        root=0,
        topics=[None] * num_nodes,
    )
