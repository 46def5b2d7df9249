"""The pyvis picture helpers: which nodes a focused view keeps, and what the written HTML holds."""
import json
import re

import pytest

from lib.common.graphio import Graph
from lib.viz.graph import focus_nodes, graph_to_html


def drawn(html: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Node ids and edges of the vis DataSets in a pyvis page."""
    nodes = json.loads(re.search(r"nodes = new vis\.DataSet\((\[.*?\])\);", html, re.S).group(1))
    edges = json.loads(re.search(r"edges = new vis\.DataSet\((\[.*?\])\);", html, re.S).group(1))
    return [n["id"] for n in nodes], [(e["from"], e["to"]) for e in edges]


def path_graph() -> Graph:
    # 0-1-2-3-4-5 a path, 6-7 far away, 2-8 a side branch; topics on some nodes
    titles = [f"T{i}" for i in range(9)]
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (6, 7), (2, 8), (5, 6)]
    topics = [None, "Arts", "Arts", "History", "Geography", None, "Mathematics", "Mathematics", "People"]
    return Graph(titles=titles, edges=edges, topics=topics)


def test_focus_nodes_are_link_endpoints_and_their_neighbours():
    g = path_graph()
    # endpoints 1 and 4; neighbours of 1: 0, 2; of 4: 3, 5. Not 6, 7 (two hops) nor 8 (neighbour of a neighbour).
    assert focus_nodes(g.edges, [(1, 4)]) == [0, 1, 2, 3, 4, 5]
    assert focus_nodes(g.edges, [(7, 8)]) == [2, 6, 7, 8]
    assert focus_nodes(g.edges, []) == []


def test_focused_picture_draws_only_the_neighbourhood_with_a_legend(tmp_path):
    g = path_graph()
    html = graph_to_html(g, tmp_path / "f.html", extra_edges=[(1, 4)], view="focus").read_text(encoding="utf-8")
    nodes, edges = drawn(html)
    assert sorted(nodes) == [0, 1, 2, 3, 4, 5]
    # the existing links among the kept nodes (0-1 ... 4-5) and the predicted link; none to 6, 7 or 8
    assert sorted(edges) == [(0, 1), (1, 2), (1, 4), (2, 3), (3, 4), (4, 5)]
    legend = re.search(r'<div id="wikigat-legend".*?</div>', html, re.S).group(0)
    assert "predicted new link" in legend and "root" in legend
    assert all(t in legend for t in ("Arts", "History", "Geography")) and "Mathematics" not in legend
    assert not re.search(r"<(script|link)\b[^>]*(src|href)=\"https?://", html)


def test_whole_picture_keeps_every_node_and_views_are_checked(tmp_path):
    g = path_graph()
    nodes, edges = drawn(graph_to_html(g, tmp_path / "w.html", extra_edges=[(1, 4)]).read_text(encoding="utf-8"))
    assert sorted(nodes) == list(range(9)) and len(edges) == len(g.edges) + 1
    with pytest.raises(ValueError, match="view='focus' needs extra_edges"):
        graph_to_html(g, tmp_path / "x.html", view="focus")
    with pytest.raises(ValueError, match="unknown; use 'whole'"):
        graph_to_html(g, tmp_path / "x.html", extra_edges=[(1, 4)], view="zoom")
