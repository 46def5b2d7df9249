"""Interactive pyvis pictures saved as self-contained HTML (no CDN: they render with no network)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from lib.graphio import Graph
from lib.paths import atomic_write_text

# pyvis's template always adds Bootstrap from a CDN even with cdn_resources="in_line"; it is only page chrome.
_REMOTE_TAG = re.compile(r"<(link|script)\b[^>]*\b(?:href|src)=\"https?://[^\"]*\"[^>]*>(?:\s*</script>)?", re.S)

TOPIC_COLOURS = {
    "People": "#e41a1c", "Biology and health sciences": "#4daf4a", "Geography": "#377eb8",
    "Physical sciences": "#984ea3", "Society and social sciences": "#ff7f00", "Arts": "#a65628",
    "Technology": "#f781bf", "History": "#999999", "Everyday life": "#66c2a5", "Philosophy and religion": "#8da0cb",
    "Mathematics": "#e5c494", "Uncategorized": "#b3b3b3",
}


def offline_html(net) -> str:
    """pyvis Network -> HTML with vis-network inlined and every remote tag removed."""
    html = net.generate_html()
    html = _REMOTE_TAG.sub("", html)
    if re.search(r"(?:src|href)=\"https?://", html):
        raise RuntimeError("pyvis HTML still references a remote resource; update lib.viz._REMOTE_TAG")
    return html


def graph_to_html(
    graph: Graph,
    path: str | Path,
    extra_edges: list[tuple[int, int]] | None = None,
    height: str = "750px",
    seed: int = 0,
) -> Path:
    """Write `graph` as an interactive, self-contained HTML picture.

    Nodes are coloured by topic label where known (root drawn larger and black); `extra_edges` (e.g. predicted new
    links) are drawn dashed in red, apart from the existing grey links. The layout is computed here (networkx spring
    layout, seeded) and physics is off in the browser: a live force simulation of 2,000 nodes takes minutes to settle
    on a small CPU, a precomputed one paints at once.
    """
    import networkx as nx
    from pyvis.network import Network

    g = graph.to_networkx()
    g.add_edges_from(extra_edges or [])
    pos = nx.spring_layout(g, seed=seed, iterations=50)
    scale = 60.0 * max(graph.num_nodes, 1) ** 0.5
    net = Network(height=height, width="100%", cdn_resources="in_line", bgcolor="#ffffff")
    for i, t in enumerate(graph.titles):
        topic = graph.topics[i] if graph.topics else None
        net.add_node(
            i, label=t, title=f"{t}" + (f" ({topic})" if topic else ""),
            color=TOPIC_COLOURS.get(topic, "#1f78b4") if i else "#000000", size=30 if i == 0 else 8,
            x=float(pos[i][0] * scale), y=float(pos[i][1] * scale),
        )
    for u, v in graph.edges:
        net.add_edge(int(u), int(v), color="#c8c8c8", width=0.5)
    for u, v in extra_edges or []:
        net.add_edge(int(u), int(v), color="#d62728", width=2, dashes=True)
    net.set_options(json.dumps({
        "physics": {"enabled": False},
        "interaction": {"hideEdgesOnDrag": True, "tooltipDelay": 100},
        "nodes": {"font": {"size": 10}},
        "edges": {"smooth": False},
    }))
    out = Path(path)
    atomic_write_text(out, offline_html(net))
    return out
