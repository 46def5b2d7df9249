"""Pictures of seed-scale graphs: the pyvis page draws at most a cap of nodes, the root's BFS neighbourhood, and says so
(its layout is quadratic in the nodes drawn)."""

import json
import re

import numpy as np
import pytest

import lib.linkpred.negative_sets.dist2 as dist2
from lib.aauc import stage as aauc_stage
from lib.common.graphio import Graph
from lib.crawl.bfs import bfs_crawl, bfs_order
from lib.crawl.pages import Snapshot
from lib.crawl.sources import SnapshotSource
from lib.linkpred.config import TrainConfig
from lib.linkpred.data import synthetic_graph
from lib.linkpred.model import ModelConfig
from lib.viz.graph import MAX_DRAWN_NODES, drawn_nodes, graph_to_html


def drawn(html: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Node ids and edges of the vis DataSets in a pyvis page."""
    nodes = json.loads(re.search(r"nodes = new vis\.DataSet\((\[.*?\])\);", html, re.S).group(1))
    edges = json.loads(re.search(r"edges = new vis\.DataSet\((\[.*?\])\);", html, re.S).group(1))
    return [n["id"] for n in nodes], [(e["from"], e["to"]) for e in edges]


def legend(html: str) -> str:
    return re.search(r'<div id="wikigat-legend".*?</div>', html, re.S).group(0)


@pytest.fixture(scope="module")
def source():
    """A seeded link list of 3,000 titles, four links each."""
    rng = np.random.default_rng(0)
    links = {f"T{i}": [f"T{j}" for j in rng.choice(3000, size=4, replace=False) if j != i] for i in range(3000)}
    return SnapshotSource(Snapshot(links=links))


def test_a_graph_past_the_cap_is_drawn_as_the_roots_bfs_neighbourhood(source, tmp_path):
    big = bfs_crawl(source, "T0", 2500)
    html = graph_to_html(big, tmp_path / "w.html", max_drawn_nodes=200).read_text(encoding="utf-8")
    nodes, edges = drawn(html)
    # the nodes a crawl capped at the picture's size would have found, with every link among them
    assert {big.titles[i] for i in nodes} == set(bfs_crawl(source, "T0", 200).titles)
    keep = set(nodes)
    assert sorted(edges) == sorted((u, v) for u, v in big.edges if u in keep and v in keep)
    assert "200 of 2,500 nodes, the root's BFS neighbourhood" in legend(html)
    # by default as many as the seed's Figure 1 drew
    assert MAX_DRAWN_NODES == 2000 and drawn_nodes(big) == (list(range(2000)), 2500)


def test_a_graph_within_the_cap_is_drawn_whole_without_a_caption(source, tmp_path):
    small = bfs_crawl(source, "T0", 60)
    html = graph_to_html(small, tmp_path / "s.html", max_drawn_nodes=60).read_text(encoding="utf-8")
    assert sorted(drawn(html)[0]) == list(range(60)) and "BFS neighbourhood" not in legend(html)


def test_predicted_links_keep_their_endpoints_in_either_view(source, tmp_path):
    big = bfs_crawl(source, "T0", 400)
    nodes, held = drawn_nodes(big, [(350, 399)], "whole", max_drawn_nodes=50)
    assert held == 400 and len(nodes) == 50 and {350, 399} <= set(nodes) and set(range(48)) <= set(nodes)
    focus, held = drawn_nodes(big, [(350, 399)], "focus", max_drawn_nodes=3)
    assert held > 3 and len(focus) == 3 and {350, 399} <= set(focus)
    html = graph_to_html(big, tmp_path / "f.html", [(350, 399)], view="focus", max_drawn_nodes=3).read_text("utf-8")
    assert sorted(drawn(html)[0]) == focus and f"3 of the {held:,} nodes around the predicted links" in legend(html)
    with pytest.raises(ValueError, match="max_drawn_nodes=0 must be an integer >= 1"):
        drawn_nodes(big, max_drawn_nodes=0)


def test_an_imported_graph_is_ordered_by_a_bfs_over_its_links():
    # a path 0 - 3 - 1 - 2 - 4 numbered out of BFS order (as a user's own graph file may be), and a lone node 5
    g = Graph(titles=[f"T{i}" for i in range(6)], edges=[(2, 4), (0, 3), (1, 2), (3, 1)])
    assert bfs_order(g) == [0, 3, 1, 2, 4, 5]
    assert drawn_nodes(g, max_drawn_nodes=3) == ([0, 1, 3], 6)
    # a crawled graph's ids are its crawl's order already
    star = Graph(titles=["R", "A", "B", "C"], edges=[(0, 1), (0, 2), (1, 3), (2, 1)])
    assert bfs_order(star) == [0, 1, 2, 3]


def test_components_are_counted_without_a_networkx_graph(monkeypatch):
    """A campaign counts each graph's components twice (crawl and stats); a networkx Graph of 20,000 nodes took half
    a second each time, scipy's sparse count a few milliseconds."""
    import networkx

    from lib.crawl.bfs import count_components
    from lib.crawl.campaign import graph_stats

    def no_graph(*args, **kwargs):
        raise AssertionError("count_components built a networkx Graph")

    monkeypatch.setattr(networkx, "Graph", no_graph)
    assert count_components(0, []) == 0 and count_components(3, []) == 3
    assert count_components(6, [(0, 1), (1, 2), (4, 3)]) == 3  # {0, 1, 2}, {3, 4}, {5}
    lone = Graph(titles=["R", "A", "B"], edges=[(0, 1)])
    assert graph_stats(lone)["connected"] is False


def test_notebook_04_draws_only_the_uniform_negatives_it_scores(monkeypatch):
    """The size trend and the untrained GatModel are scored on uniform negatives; drawing dist2 for each test graph
    as well took about half a minute per 20,000-node graph and protocol, for nothing."""

    def no_draw(*args, **kwargs):
        raise AssertionError("dist2 negatives drawn")

    monkeypatch.setattr(dist2, "dist2_negatives", no_draw)
    graphs = {f"g{i}": synthetic_graph(60, 150, 8, seed=i, graph_id=f"g{i}") for i in range(4)}
    splits = {0: {"train": ["g0", "g1"], "val": ["g2"], "test": ["g3"]}}
    model_cfg = ModelConfig(in_channels=8, gat_hidden=8, gat_out=4, gat_levels=1, gat_heads=1)
    rows = aauc_stage.untrained_rows(graphs, splits, [0], ["seed", "leak_free"], TrainConfig(seed=0), model_cfg)
    assert [r["protocol"] for r in rows] == ["seed", "leak_free"] and all(0 <= r["auc"] <= 1 for r in rows)
    assert aauc_stage.uniform_only(TrainConfig()).negative_sets == ("uniform",)


def test_the_seed_scale_profile_draws_uniform_negatives_only():
    """At 20,000 nodes the seed protocol's other negative sets (every edge a positive) would outlast the campaign."""
    import yaml

    from lib.common.paths import ROOT

    profile = yaml.safe_load((ROOT / "params" / "seed_scale.yaml").read_text())
    assert profile["negative_sets"] == ["uniform"] and profile["protocols"] == ["seed"]
