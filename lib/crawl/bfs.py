"""Stage 1: breadth-first Wikipedia article-link graphs (seed report §3.1, Algorithm 1) from any `LinkSource`."""

from __future__ import annotations

from collections import deque

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from lib.common.graphio import Graph
from lib.common.params import ParamError
from lib.crawl.pages import OK, CrawlStats, LinkSource, RootSkipped


def bfs_crawl(source: LinkSource, root: str, max_nodes: int, progress=None) -> Graph:
    """Algorithm 1 of the seed report, iteratively.

    BFS from `root`; every link to an already-visited title adds an edge, every new title is enqueued and added as a
    node until the graph holds `max_nodes` nodes — the check happens before *each* link, so the cut can fall in the
    middle of a page's links and nothing after it (not even an edge between visited nodes) is added. Missing and
    disambiguation pages are skipped when dequeued (their node stays, as in the seed). Self-loops and duplicate
    edges are dropped (the graph is undirected). A disconnected result is reported in the metadata, not dropped.

    Returns a Graph with titles[0] = the root's canonical title, edges in the order they were added.
    """
    if max_nodes < 1:
        raise ParamError(f"max_nodes={max_nodes!r} must be >= 1")
    first = source.page(root)
    if first.status != OK:
        raise RootSkipped(f"root {root!r} is a {first.status} page")
    stats = CrawlStats()
    titles: list[str] = [first.title]
    index: dict[str, int] = {first.title: 0}
    edges: list[tuple[int, int]] = []
    edge_set: set[tuple[int, int]] = set()
    queue: deque[str] = deque([first.title])
    prefetched = {first.title: first}

    def add_edge(u: int, v: int) -> None:
        key = (u, v) if u < v else (v, u)
        if u != v and key not in edge_set:
            edge_set.add(key)
            edges.append((u, v))

    while queue and len(titles) < max_nodes:
        title = queue.popleft()
        page = prefetched.pop(title, None) or source.page(title)
        if page.status != OK:
            stats.pages_skipped[page.status] = stats.pages_skipped.get(page.status, 0) + 1
            continue
        stats.pages_expanded += 1
        u = index[title]
        for link in page.links:
            if len(titles) >= max_nodes:
                break
            v = index.get(link)
            if v is None:
                v = index[link] = len(titles)
                titles.append(link)
                queue.append(link)
                if progress is not None:
                    progress.update(1)
            add_edge(u, v)
    topics = [source.topic(t) for t in titles]
    graph = Graph(titles=titles, edges=edges, topics=topics if any(t is not None for t in topics) else None)
    n_comp = count_components(len(titles), edges)
    graph.metadata = {
        "format_version": 1,
        "algorithm": "seed-report Algorithm 1 (BFS, iterative)",
        "root": root,
        "root_title": first.title,
        "max_nodes": max_nodes,
        "source": source.source_id,
        "num_nodes": len(titles),
        "num_edges": len(edges),
        "connected": n_comp == 1,
        "num_components": n_comp,
        "pages_expanded": stats.pages_expanded,
        "pages_skipped": stats.pages_skipped,
    }
    return graph


def count_components(n: int, edges: list[tuple[int, int]]) -> int:
    """Connected components of the undirected graph of `n` nodes and `edges` [(u, v)]; scipy's sparse one, as
    networkx's Graph took about half a second per 20,000-node graph, twice per graph of a campaign."""
    if not n:
        return 0
    ends = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    adjacency = sp.coo_array((np.ones(len(ends), dtype=np.int8), (ends[:, 0], ends[:, 1])), shape=(n, n))
    return int(connected_components(adjacency, directed=False)[0])


def bfs_parents(graph: Graph) -> list[int]:
    """[N] each node's BFS parent as the graph's edge order records it: the other end of the first edge that mentions
    the node with a smaller id (Algorithm 1, `bfs_crawl`, adds the discovery edge (parent, new node) at the moment it
    adds the node, and graph files keep edges in the order they were added); the root gets 0, a node no such edge
    mentions -1. For a graph from another source the parents are only as good as that order."""
    parent = [-1] * graph.num_nodes
    if graph.num_nodes:
        parent[0] = 0
    for u, v in graph.edges:
        for a, b in ((u, v), (v, u)):
            if parent[b] == -1 and a < b:
                parent[b] = a
    return parent


def bfs_branches(graph: Graph) -> list[int]:
    """[N] for each node the root's child through which the BFS reached it: the root gets 0, a child of the root its
    own id, a deeper node its ancestor's child id, a node never reached -1 (parents from `bfs_parents`)."""
    parent = bfs_parents(graph)
    branch = [0] * graph.num_nodes
    for i in range(1, graph.num_nodes):
        p = parent[i]
        branch[i] = i if p == 0 else branch[p] if p > 0 else -1
    return branch


def bfs_order(graph: Graph) -> list[int]:
    """[N] node ids in breadth-first order from the root (node 0), every node once.

    A crawled graph's ids already are its crawl's BFS discovery order (parents from `bfs_parents` all known and never
    decreasing: a node expanded later discovers later nodes), so it is returned as range(N). Any other graph (an
    imported file) gets a BFS over its links, a node's neighbours taken in id order, then the nodes the root does not
    reach, in id order. Linear in nodes and edges."""
    n = graph.num_nodes
    parent = bfs_parents(graph)
    if min(parent, default=0) >= 0 and all(a <= b for a, b in zip(parent[1:], parent[2:])):
        return list(range(n))
    neighbours: list[list[int]] = [[] for _ in range(n)]
    for u, v in graph.edges:
        neighbours[u].append(v)
        neighbours[v].append(u)
    seen = [False] * n
    order = []
    if n:
        seen[0] = True
        queue = deque([0])
        while queue:
            u = queue.popleft()
            order.append(u)
            for v in sorted(neighbours[u]):
                if not seen[v]:
                    seen[v] = True
                    queue.append(v)
    return order + [i for i in range(n) if not seen[i]]
