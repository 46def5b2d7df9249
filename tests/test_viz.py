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


def test_the_notebook_figures_are_drawn_and_written_by_lib(tmp_path):
    import numpy as np
    import pandas as pd

    from lib.linkpred.plots import protocol_bars
    from lib.viz.figures import pca_topics

    rng = np.random.default_rng(0)
    titles = [f"t{i}" for i in range(40)]
    fig = pca_topics(
        titles,
        rng.normal(size=(40, 8)),
        {t: ("A" if i % 2 else "Uncategorized") for i, t in enumerate(titles[:30])},
        0,
        tmp_path / "f" / "pca.png",
    )
    assert (tmp_path / "f" / "pca.png").stat().st_size > 0  # the folder is made first
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == [
        "Uncategorized (15)",
        "unknown (10)",
        "A (15)",
    ]
    means = pd.DataFrame(
        [
            {"protocol": p, "negatives": n, "model": m, "supervision": sv, "auc": auc, "auc_std": 0.01}
            for p in ("seed", "leak_free")
            for n in ("uniform", "dist2")
            for m, sv, auc in (
                ("gat_model", "mp", 0.7),
                ("gat_model", "disjoint", 0.7),
                ("cosine", "none", 0.8),
                ("pref_attach", "none", 0.6),
            )
            if (p, n) != ("seed", "dist2")
        ]
    )  # a set a protocol cannot have has no rows
    fig = protocol_bars(
        means,
        ["gat_model", "cosine", "pref_attach"],
        ["uniform", "dist2"],
        ["seed", "leak_free"],
        3,
        tmp_path / "p.png",
    )
    assert len(fig.axes) == 2 and (tmp_path / "p.png").is_file()
    # two gat_model · supervision bars and the strongest heuristic, named on its bar, at each of two protocols
    assert len(fig.axes[0].patches) == 3 * 2 and [t.get_text() for t in fig.axes[0].texts] == ["cosine", "cosine"]
    assert [t.get_text() for t in fig.axes[1].texts] == ["cosine", "no dist2\nnegatives"]


def test_the_03b_figure_shows_the_chosen_model_beside_the_bar_and_the_shortcut(tmp_path):
    import pandas as pd

    from lib.linkpred.plots import beyond_bars

    score = {"gat_a": 0.9, "gat_b": 0.8, "heuristic_stack": 0.85, "cosine": 0.7, "no_cn_shortcut": 0.4, "mlp": 0.6}
    rows = pd.DataFrame(
        [
            {
                "seed": s,
                "protocol": p,
                "negatives": n,
                "model": m,
                "auc": a - s / 100,
                "mrr": a / 2,
                "val_auc": {"gat_a": 0.7, "gat_b": 0.8}.get(m),
            }
            for s in (0, 1)
            for p in ("leak_free", "new_nodes")
            for n in ("uniform", "dist2")
            for m, a in score.items()
        ]
    )
    fig = beyond_bars(rows, [m for m in score if m != "mlp"], 2, hatched=("heuristic_stack",), path=tmp_path / "b.png")
    auc, mrr = fig.axes[0], fig.axes[2]  # rows: AUC, MRR; columns: uniform, dist2
    assert [a.get_title() for a in fig.axes[:2]] == ["uniform negatives", "dist2 negatives (distance 2)"]
    assert len(auc.patches) == 3 * 2 and len(mrr.patches) == 3 * 2  # chosen, bar, shortcut at two protocols
    # chosen on validation (gat_b), not the test-best gat_a; the bar is the stack, hatched; the rest is left out
    assert [t.get_text() for t in auc.texts] == ["gat_b", "gat_b", "heuristic_stack", "heuristic_stack"]
    assert [p.get_hatch() for p in auc.patches] == [None, None, "//", "//", None, None]
    assert round(auc.patches[0].get_height(), 3) == 0.795 and (tmp_path / "b.png").is_file()


def test_degree_distribution_counts_degrees_and_writes_the_png(tmp_path):
    import pandas as pd

    from lib.viz.figures import degree_distribution

    star = Graph(["Hub", "A", "B", "C"], [(0, 1), (0, 2), (0, 3)], [None] * 4, {"root": "Hub"})
    fig = degree_distribution([star], pd.DataFrame({"root": ["Hub"], "leaf_share": [0.75]}), tmp_path / "d.png")
    x, y = fig.axes[0].lines[0].get_data()
    assert list(x) == [1, 2, 3] and list(y) == [1, 0.25, 0.25]  # share of nodes of degree >= k: 3 leaves, a hub of 3
    assert (tmp_path / "d.png").stat().st_size > 0


def test_a_crowded_figure_is_saved_without_a_warning_that_names_a_source_path(tmp_path):
    import warnings

    import matplotlib.pyplot as plt

    from lib.viz.figures import saved

    fig, ax = plt.subplots(figsize=(1, 0.3))  # too small for its title and labels: tight_layout gives up
    ax.set(title="x" * 10, xlabel="y", ylabel="z")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        saved(fig, tmp_path / "f.png")
    assert (tmp_path / "f.png").is_file() and not [w for w in caught if "Tight layout" in str(w.message)]
    plt.close(fig)
