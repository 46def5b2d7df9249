"""Interactive pyvis pictures saved as self-contained HTML (no CDN: they render with no network)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import networkx as nx

from lib.common.graphio import Graph
from lib.common.paths import atomic_write_text
from lib.crawl.bfs import bfs_order

# pyvis's template always adds Bootstrap from a CDN even with cdn_resources="in_line"; it is only page chrome.
_REMOTE_TAG = re.compile(r"<(link|script)\b[^>]*\b(?:href|src)=\"https?://[^\"]*\"[^>]*>(?:\s*</script>)?", re.S)

TOPIC_COLOURS = {
    "People": "#e41a1c",
    "Biology and health sciences": "#4daf4a",
    "Geography": "#377eb8",
    "Physical sciences": "#984ea3",
    "Society and social sciences": "#ff7f00",
    "Arts": "#a65628",
    "Technology": "#f781bf",
    "History": "#999999",
    "Everyday life": "#66c2a5",
    "Philosophy and religion": "#8da0cb",
    "Mathematics": "#e5c494",
    "Uncategorized": "#b3b3b3",
}
"""The embedded source's 12 labels (Wikispeedia shares five of them)."""
TOPIC_COLOURS |= {
    "Science": "#1b9e77",
    "Citizenship": "#d95f02",
    "Business Studies": "#7570b3",
    "Design and Technology": "#e7298a",
    "Countries": "#66a61e",
    "Language and literature": "#e6ab02",
    "Religion": "#17becf",
    "Music": "#bcbd22",
    "IT": "#393b79",
    "Art": "#843c39",
}
"""Wikispeedia's other ten topics (first category level)."""
MAX_DRAWN_NODES = 2000
"""Nodes a picture draws at most: its layout costs time and memory quadratic in them and a browser slows down past a
few thousand (the seed's Figure 1 drew 2,000 of a 20,000-node graph)."""
EXTRA_COLOURS = ("#8c564b", "#637939", "#7b4173", "#3182bd", "#31a354", "#756bb1", "#636363", "#e377c2")


def topic_colour(topic: str | None) -> str:
    """A topic's node colour: the fixed one of a shipped source's label, else one of EXTRA_COLOURS chosen by a stable
    hash of the name (the same topic has the same colour in every picture)."""
    if topic in TOPIC_COLOURS:
        return TOPIC_COLOURS[topic]
    if not topic:
        return "#1f78b4"
    return EXTRA_COLOURS[int(hashlib.sha1(topic.encode("utf-8")).hexdigest(), 16) % len(EXTRA_COLOURS)]


def offline_html(net) -> str:
    """pyvis Network -> HTML with vis-network inlined and every remote tag removed."""
    html = net.generate_html()
    html = _REMOTE_TAG.sub("", html)
    if re.search(r"(?:src|href)=\"https?://", html):
        raise RuntimeError("pyvis HTML still references a remote resource; update lib.viz.graph._REMOTE_TAG")
    return html


def focus_nodes(edges, links) -> list[int]:
    """Node ids [K], ascending: the endpoints of `links` [(u, v)] and every neighbour of an endpoint in `edges`
    [(u, v)] (undirected). The focused picture of a few predicted links draws exactly these nodes."""
    ends = {int(n) for link in links for n in link}
    keep = set(ends)
    for u, v in edges:
        u, v = int(u), int(v)
        if u in ends:
            keep.add(v)
        if v in ends:
            keep.add(u)
    return sorted(keep)


def drawn_nodes(
    graph: Graph, extra_edges=None, view: str = "whole", max_drawn_nodes: int = MAX_DRAWN_NODES
) -> tuple[list[int], int]:
    """The node ids [K] (ascending) a picture of `graph` draws and how many its view holds before the cap.

    view="whole" holds every node, view="focus" `focus_nodes(graph.edges, extra_edges)`. Above `max_drawn_nodes` the
    picture keeps the view's nodes first in BFS order from the root (lib.crawl.bfs.bfs_order: a crawled graph's own
    order), so the whole view becomes the root's BFS neighbourhood; the endpoints of `extra_edges` are always kept
    (they are what the picture is for), so K passes the cap only when they alone do. Linear in nodes and edges."""
    if not isinstance(max_drawn_nodes, int) or max_drawn_nodes < 1:
        raise ValueError(f"max_drawn_nodes={max_drawn_nodes!r} must be an integer >= 1; it caps the nodes drawn")
    extra = [(int(u), int(v)) for u, v in extra_edges or []]
    held = focus_nodes(graph.edges, extra) if view == "focus" else list(range(graph.num_nodes))
    if len(held) <= max_drawn_nodes:
        return held, len(held)
    ends = {n for link in extra for n in link}
    held_set = set(held) - ends
    first = [i for i in bfs_order(graph) if i in held_set][: max(max_drawn_nodes - len(ends), 0)]
    return sorted(ends.union(first)), len(held)


def _legend_html(with_root: bool, topics: list[str], with_links: bool, focus: bool, caption: str = "") -> str:
    """A fixed box in the page's corner naming the node colours and edge styles actually drawn."""
    dot = (
        '<span style="display:inline-block;width:10px;height:10px;border-radius:50%;background:{};margin-right:4px">'
        "</span>{}"
    )
    items = [f"<b>{caption}</b>"] * bool(caption)
    items += [dot.format("#000000", "root")] * with_root + [dot.format(topic_colour(t), t) for t in topics]
    items.append('<span style="color:#c8c8c8">&#9472;&#9472;</span> existing link')
    if with_links:
        items.append('<span style="color:#d62728">&#9476;&#9476;</span> predicted new link')
    if focus:
        items.append("large, labelled: endpoint of a predicted link; small: its neighbours (hover for the title)")
    return (
        '<div id="wikigat-legend" style="position:absolute;top:8px;right:8px;z-index:10;background:#ffffffe0;'
        'border:1px solid #ccc;padding:6px 8px;font:12px sans-serif;max-width:320px">' + "<br>".join(items) + "</div>"
    )


def graph_to_html(
    graph: Graph,
    path: str | Path,
    extra_edges: list[tuple[int, int]] | None = None,
    height: str = "750px",
    seed: int = 0,
    view: str = "whole",
    max_drawn_nodes: int = MAX_DRAWN_NODES,
) -> Path:
    """Write `graph` as an interactive, self-contained HTML picture with a legend.

    Nodes are coloured by topic label where known (root drawn larger and black); `extra_edges` (e.g. predicted new
    links) are drawn dashed in red, apart from the existing grey links. view="whole" draws every node; view="focus"
    draws only `focus_nodes(graph.edges, extra_edges)` (the extra edges' endpoints, large and labelled, and their
    neighbours, small, title on hover) with the links among them, so a few dozen predicted links stay visible in a
    2,000-node graph. Either view draws at most `max_drawn_nodes` nodes (`drawn_nodes`: those nearest the root in BFS
    order, the extra edges' endpoints always), and the legend's first line then says how many of how many. The layout
    is computed here (networkx spring layout, seeded; quadratic in the nodes drawn, hence the cap) and physics is off
    in the browser: a live force simulation of 2,000 nodes takes minutes to settle on a small CPU, a precomputed one
    paints at once.
    """
    from pyvis.network import Network  # lazy: pyvis and jinja2 only for the HTML graph picture

    if view not in ("whole", "focus"):
        raise ValueError(
            f"view={view!r} is unknown; use 'whole' (every node) or 'focus' (predicted links and their neighbourhood)"
        )
    extra = [(int(u), int(v)) for u, v in extra_edges or []]
    if view == "focus" and not extra:
        raise ValueError("view='focus' needs extra_edges to focus on; pass the predicted links or use view='whole'")
    nodes, held = drawn_nodes(graph, extra, view, max_drawn_nodes)
    keep = set(nodes)
    edges = [(int(u), int(v)) for u, v in graph.edges if u in keep and v in keep]
    ends = {n for link in extra for n in link}
    g = nx.Graph()
    g.add_nodes_from(nodes)
    g.add_edges_from(edges + extra)
    pos = nx.spring_layout(g, seed=seed, iterations=50)
    scale = 60.0 * max(len(nodes), 1) ** 0.5
    net = Network(height=height, width="100%", cdn_resources="in_line", bgcolor="#ffffff")
    topics_drawn = []
    for i in nodes:
        t = graph.titles[i]
        topic = graph.topics[i] if graph.topics else None
        if i and topic and topic not in topics_drawn:
            topics_drawn.append(topic)
        small = view == "focus" and i not in ends and i != 0
        net.add_node(
            i,
            label=" " if small else t,
            title=f"{t}" + (f" ({topic})" if topic else ""),
            color=topic_colour(topic) if i else "#000000",
            size=30 if i == 0 else (4 if small else (14 if view == "focus" else 8)),
            x=float(pos[i][0] * scale),
            y=float(pos[i][1] * scale),
        )
    for u, v in edges:
        net.add_edge(u, v, color="#c8c8c8", width=0.5)
    for u, v in extra:
        net.add_edge(u, v, color="#d62728", width=2, dashes=True)
    net.set_options(
        json.dumps(
            {
                "physics": {"enabled": False},
                "interaction": {"hideEdgesOnDrag": True, "tooltipDelay": 100},
                "nodes": {"font": {"size": 10}},
                "edges": {"smooth": False},
            }
        )
    )
    order = {t: k for k, t in enumerate(TOPIC_COLOURS)}
    caption = ""
    if len(nodes) < held:
        caption = (
            f"{len(nodes):,} of {graph.num_nodes:,} nodes, the root's BFS neighbourhood"
            + (" and the predicted links' endpoints" if extra else "")
            if view == "whole"
            else f"{len(nodes):,} of the {held:,} nodes around the predicted links: those nearest the root (BFS)"
        )
    legend = _legend_html(
        0 in keep,
        sorted(topics_drawn, key=lambda t: (order.get(t, len(order)), t)),
        bool(extra),
        view == "focus",
        caption,
    )
    html = offline_html(net).replace("<body>", "<body>\n" + legend, 1)
    out = Path(path)
    atomic_write_text(out, html)
    return out
