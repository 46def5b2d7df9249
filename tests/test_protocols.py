"""Protocols across overlapping graphs, hard negatives and the leak audit, on hand-built graphs with known answers."""

import networkx as nx
import numpy as np
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected

from lib.linkpred.audit import leak_audit
from lib.linkpred.config import TrainConfig
from lib.linkpred.data import synthetic_graph
from lib.linkpred.evaluate import evaluate_heuristic
from lib.linkpred.heuristics import HEURISTICS
from lib.linkpred.names import PROTOCOLS
from lib.linkpred.protocols import ProtocolSettings, graph_task, make_protocol
from lib.linkpred.sampling import TitlePairs, dist2_negatives, sample_global_negatives, sample_negatives

ROLES = {"train": ["A", "C"], "val": ["V"], "test": ["B"]}  # of the graphs most tests build
QUARTER = ProtocolSettings(holdout_fraction=0.25)


def _graph(gid, titles, edges, topics=None, seed=0):
    """A graph of named nodes; edges as (title, title) pairs."""
    pos = {t: i for i, t in enumerate(titles)}
    ei = torch.tensor([[pos[a] for a, b in edges], [pos[b] for a, b in edges]])
    g = torch.Generator().manual_seed(seed)
    return Data(
        x=torch.randn(len(titles), 8, generator=g),
        edge_index=to_undirected(ei, num_nodes=len(titles)),
        num_nodes=len(titles),
        titles=list(titles),
        topics=topics or [None] * len(titles),
        graph_id=gid,
        root=titles[0],
    )


def _title_pairs(data, pairs):
    return {frozenset((data.titles[u], data.titles[v])) for u, v in pairs.t().tolist()}


def _overlapping():
    """Test graph B's every edge is also an edge of training graph A (the campaign's overlap, to the extreme)."""
    ring = [f"t{i}" for i in range(12)]
    b_edges = [(ring[i], ring[(i + 1) % 12]) for i in range(12)] + [
        (ring[i], ring[(i + 3) % 12]) for i in range(0, 12, 2)
    ]
    a = _graph("A", ring + ["a1", "a2"], b_edges + [("t0", "a1"), ("a1", "a2"), ("a2", "t5")], seed=1)
    b = _graph("B", ring, b_edges, seed=2)
    c = _graph(
        "C", ring[:8] + ["c1"], [(ring[i], ring[i + 1]) for i in range(7)] + [("c1", "t3"), ("c1", "t6")], seed=3
    )
    v = _graph(
        "V",
        ring[4:] + ["v1", "v2"],
        [(ring[4 + i], ring[5 + i]) for i in range(7)] + [("v1", "t4"), ("v2", "v1")],
        seed=4,
    )
    return {g.graph_id: g for g in (a, b, c, v)}


def test_leak_free_removes_a_test_graphs_held_out_pairs_from_every_training_graph():
    graphs = _overlapping()
    within = make_protocol(graphs, ROLES, "within_graph", seed=0, settings=QUARTER)
    clean = make_protocol(graphs, ROLES, "leak_free", seed=0, settings=QUARTER)
    held = _title_pairs(graphs["B"], clean.test[0].pos)
    assert len(held) == round(0.25 * 18)
    a_edges = _title_pairs(graphs["A"], graphs["A"].edge_index)
    assert held <= a_edges  # before the fix: every held-out pair of B is an ordinary training edge of A
    train_a = next(g for g in clean.train if g.graph_id == "A")
    assert not held & _title_pairs(train_a, train_a.edge_index)  # after: gone from A's message passing/supervision
    for g in clean.train:
        assert not held & _title_pairs(g, g.edge_index)
    for t in clean.val:
        assert not held & _title_pairs(t.data, t.data.edge_index)
    # the audit counts them under the within-graph rule and finds none under leak_free
    w, c = leak_audit(within), leak_audit(clean)
    assert w["test_pos_seen"] == len(_title_pairs(graphs["B"], within.test[0].pos)) > 0
    assert c["test_pos_seen"] == 0 and c["test_pos_pairs"] == len(held)
    # validation graphs' own held-out pairs are out of the training graphs too
    v_held = _title_pairs(clean.val[0].data, clean.val[0].pos)
    assert v_held and all(not v_held & _title_pairs(g, g.edge_index) for g in clean.train)
    # the test graph's message passing lacks exactly its held-out pairs
    t = clean.test[0]
    assert _title_pairs(t.data, t.mp_edge_index) == _title_pairs(graphs["B"], graphs["B"].edge_index) - held


def test_leak_free_held_out_pairs_are_never_training_negatives_uniform_or_hard():
    from lib.linkpred.heuristics import stack_training_pairs
    from lib.linkpred.train import training_negatives

    graphs = _overlapping()
    clean = make_protocol(graphs, ROLES, "leak_free", seed=0, settings=QUARTER)
    held = _title_pairs(graphs["B"], clean.test[0].pos) | _title_pairs(clean.val[0].data, clean.val[0].pos)
    train_a = next(g for g in clean.train if g.graph_id == "A")
    in_a = {p for p in held if p <= set(train_a.titles)}
    assert in_a and _title_pairs(train_a, train_a.held_out_pairs) == in_a  # every held-out pair A holds is listed
    seen = set()
    for hs in (0.0, 1.0):
        cfg = TrainConfig(seed=1, neg_rate=3.0, negative_mix={"dist2": hs})
        for step in range(40):
            for g in clean.train:
                neg = training_negatives(g, g.edge_index, g.edge_index, cfg, 1, step)
                seen |= _title_pairs(g, neg)
    assert len(seen) > 20 and not seen & held  # many non-edges drawn, none of them a held-out link
    # before the fix A's held-out pairs were ordinary non-edges there: a sampler blind to them draws them
    blind = set()
    for step in range(40):
        blind |= _title_pairs(train_a, sample_negatives(train_a.edge_index, train_a.num_nodes, 40, step))
    assert blind & in_a
    feats, labels = stack_training_pairs(clean.train, 0.3, 0)
    assert len(labels) > 0  # the stack's negatives go through the same exclusion (training_exclusions)


def test_leak_free_negatives_are_links_in_no_graph_of_the_dataset():
    graphs = _overlapping()
    every_link = set().union(*(_title_pairs(g, g.edge_index) for g in graphs.values()))
    for seed in range(5):
        sp = make_protocol(graphs, ROLES, "leak_free", seed=seed, settings=QUARTER)
        t = sp.test[0]
        for pairs in (t.negatives("uniform"), t.negatives("dist2")):
            assert pairs.size(1) > 0
            assert not _title_pairs(t.data, pairs) & every_link
            assert (pairs[0] != pairs[1]).all()
        assert leak_audit(sp)["test_neg_true_links"] == 0 == leak_audit(sp)["test_neg_dist2_true_links"]


def test_pair_split_strips_every_held_out_pair_from_every_graph_alike():
    from lib.linkpred.train import training_negatives

    graphs = _overlapping()
    sp = make_protocol(graphs, ROLES, "pair_split", seed=0, settings=QUARTER)
    test_held = set().union(*(_title_pairs(t.data, t.pos) for t in sp.test))
    val_held = set().union(*(_title_pairs(t.data, t.pos) for t in sp.val))
    b_links = _title_pairs(graphs["B"], graphs["B"].edge_index)
    assert len(test_held) == round(0.25 * len(b_links)) and not test_held & val_held
    held = test_held | val_held
    # the defining property: no graph, whatever its role, passes messages over (or trains on) a held-out pair
    for g in sp.train:
        assert not held & _title_pairs(g, g.edge_index)
    for t in sp.val + sp.test:
        assert not held & _title_pairs(t.data, t.mp_edge_index)
    # B's message passing lost the validation pairs it holds too, not only its own positives (unlike leak_free)
    t = sp.test[0]
    assert _title_pairs(t.data, t.mp_edge_index) == b_links - held
    assert (b_links & val_held) and not (b_links & val_held) & _title_pairs(t.data, t.mp_edge_index)
    # negatives of validation and test are links in no graph, so never a held-out pair
    every_link = set().union(*(_title_pairs(g, g.edge_index) for g in graphs.values()))
    for t in sp.val + sp.test:
        for pairs in (t.negatives("uniform"), t.negatives("dist2")):
            assert not _title_pairs(t.data, pairs) & every_link
    seen = set()
    for hs in (0.0, 1.0):
        cfg = TrainConfig(seed=1, neg_rate=3.0, negative_mix={"dist2": hs})
        for step in range(40):
            for g in sp.train:
                seen |= _title_pairs(g, training_negatives(g, g.edge_index, g.edge_index, cfg, 1, step))
    assert len(seen) > 20 and not seen & held
    assert leak_audit(sp)["test_pos_seen"] == 0


def test_leak_free_validation_negatives_are_never_test_pairs():
    graphs = _overlapping()
    for seed in range(5):
        sp = make_protocol(graphs, ROLES, "leak_free", seed=seed, settings=QUARTER)
        test_held = set().union(*(_title_pairs(t.data, t.pos) for t in sp.test))
        for t in sp.val:
            for pairs in (t.negatives("uniform"), t.negatives("dist2")):
                assert not _title_pairs(t.data, pairs) & test_held


def test_new_nodes_never_lets_a_held_out_title_into_training():
    graphs = {f"g{i}": synthetic_graph(80, 300, in_channels=8, seed=i, graph_id=f"g{i}") for i in range(6)}
    sp = make_protocol(
        graphs,
        {"train": ["g0", "g1", "g2"], "val": ["g3"], "test": ["g4", "g5"]},
        "new_nodes",
        seed=3,
        settings=ProtocolSettings(new_node_fraction=0.1),
    )
    unseen = set(sp.unseen_titles)
    assert len(unseen) == round(0.1 * 80)  # the synthetic graphs share their 80 titles
    for g in sp.train:
        assert not unseen & set(g.titles)
    for t in sp.val:
        assert not unseen & set(t.data.titles)
    every_link = set().union(*(_title_pairs(g, g.edge_index) for g in graphs.values()))
    for t in sp.test:
        for pairs in (t.pos, t.negatives("uniform"), t.negatives("dist2")):
            assert all({t.data.titles[u], t.data.titles[v]} & unseen for u, v in pairs.t().tolist())
        assert not _title_pairs(t.data, t.negatives("uniform")) & every_link
        assert not _title_pairs(t.data, t.pos) & _title_pairs(t.data, t.mp_edge_index)
    a = leak_audit(sp)
    assert a["test_pos_seen"] == 0 and a["test_neg_true_links"] == 0 and a["test_titles_seen_share"] < 1
    # validation's unseen titles are out of the training graphs as well
    val_unseen = {tt for t in sp.val for u, v in t.pos.t().tolist() for tt in (t.data.titles[u], t.data.titles[v])}
    trained = set().union(*(set(g.titles) for g in sp.train))
    assert val_unseen - trained  # each validation positive has an unseen endpoint


def test_dist2_negatives_are_non_edges_at_distance_exactly_two_and_prefer_the_anchors_topic():
    g = synthetic_graph(120, 360, in_channels=8, seed=7)
    topics = ["Science" if i % 3 else "Arts" for i in range(120)]
    g.topics = topics
    t = graph_task(g, "within_graph", seed=1)
    nxg = nx.Graph(t.mp_edge_index.t().tolist())
    full = {frozenset(e) for e in g.edge_index.t().tolist()}
    assert t.negatives("dist2").size(1) + t.missing("dist2") == t.pos.size(1)
    n_same = 0
    for u, w in t.negatives("dist2").t().tolist():
        assert nx.shortest_path_length(nxg, u, w) == 2
        assert frozenset((u, w)) not in full
        c2 = {
            x
            for x in nx.single_source_shortest_path_length(nxg, u, cutoff=2)
            if nx.shortest_path_length(nxg, u, x) == 2 and frozenset((u, x)) not in full
        }
        if any(topics[x] == topics[u] for x in c2):
            assert topics[w] == topics[u]
            n_same += 1
    assert n_same > 0
    # a path a-b-c: the only distance-2 pair of a is c; a star centre has none and falls back to the other endpoint
    p = _graph("P", ["a", "b", "c", "d"], [("a", "b"), ("b", "c"), ("c", "d")])
    tp = TitlePairs([p])
    neg, missing = dist2_negatives(p.edge_index, p, tp.gids(p), tp, tp.edge_keys(p), torch.tensor([[0], [1]]), seed=0)
    assert neg.tolist() == [[0], [2]] and missing == 0


def test_every_protocol_is_deterministic_for_a_seed_and_changes_with_it():
    graphs = {f"g{i}": synthetic_graph(60, 200, in_channels=8, seed=i, graph_id=f"g{i}") for i in range(5)}
    for protocol in PROTOCOLS:
        a, b, c = (
            make_protocol(graphs, {"train": ["g0", "g1"], "val": ["g2"], "test": ["g3", "g4"]}, protocol, seed=s)
            for s in (4, 4, 5)
        )
        for x, y in zip(a.test + a.val, b.test + b.val):
            for k in ("mp_edge_index", "pos"):
                assert torch.equal(getattr(x, k), getattr(y, k)), (protocol, k)
            for n in x.negative_sets:
                assert torch.equal(x.negatives(n), y.negatives(n)), (protocol, n)
        for x, y in zip(a.train, b.train):
            assert torch.equal(x.edge_index, y.edge_index) and x.titles == y.titles
        assert any(not torch.equal(x.negatives("uniform"), y.negatives("uniform")) for x, y in zip(a.test, c.test)), (
            protocol
        )


def test_heuristics_and_models_see_the_same_pairs():
    graphs = _overlapping()
    sp = make_protocol(graphs, ROLES, "leak_free", seed=0, settings=QUARTER)
    cfg = TrainConfig()
    r1 = evaluate_heuristic("common_neighbours", sp.test, cfg)
    # common neighbours counted by hand on the task's message-passing graph
    t = sp.test[0]
    nxg = nx.Graph(t.mp_edge_index.t().tolist())
    nxg.add_nodes_from(range(t.data.num_nodes))
    from lib.metrics.link import link_metrics

    cn = lambda pairs: np.array([len(list(nx.common_neighbors(nxg, u, v))) for u, v in pairs.t().tolist()])
    assert r1["mean"]["uniform"]["auc"] == pytest.approx(link_metrics(cn(t.pos), cn(t.negatives("uniform")))["auc"])
    assert set(HEURISTICS) >= {"common_neighbours"}


def test_bad_protocol_inputs_fail_clearly():
    graphs = _overlapping()
    with pytest.raises(ValueError, match="protocol 'leaky' does not exist"):
        make_protocol(graphs, {"train": ["A"], "val": [], "test": ["B"]}, "leaky", seed=0)
    with pytest.raises(ValueError, match="negative set 'easy' is unknown"):
        graph_task(graphs["B"], "seed", 0).negatives("easy")
    with pytest.raises(ValueError, match="holdout_fraction"):
        make_protocol(
            graphs,
            {"train": ["A"], "val": [], "test": ["B"]},
            "leak_free",
            seed=0,
            settings=ProtocolSettings(holdout_fraction=1.0),
        )
    # a complete test graph: every pair of its nodes is a link, so no global negative exists -> error naming it
    k4 = _graph("K4", ["p", "q", "r", "s"], [(a, b) for a in "pqrs" for b in "pqrs" if a < b])
    with pytest.raises(ValueError, match="graph K4: no pair"):
        make_protocol({**graphs, "K4": k4}, {"train": ["A"], "val": [], "test": ["K4"]}, "leak_free", seed=0)
    tp = TitlePairs([k4])
    with pytest.raises(ValueError, match="graph K4"):
        sample_global_negatives(k4, tp.gids(k4), tp, tp.edge_keys(k4), 3, seed=0)
    # a training graph made only of the test graph's held-out pairs is skipped, counted and named
    b = graphs["B"]
    sp = make_protocol(graphs, {"train": ["A", "C"], "val": [], "test": ["B"]}, "leak_free", seed=0, settings=QUARTER)
    held = [(b.titles[u], b.titles[v]) for u, v in sp.test[0].pos.t().tolist()]
    only_held = _graph("H", sorted({t for e in held for t in e}), held)
    sp = make_protocol(
        {**graphs, "H": only_held},
        {"train": ["A", "H"], "val": [], "test": ["B"]},
        "leak_free",
        seed=0,
        settings=QUARTER,
    )
    assert [s["graph_id"] for s in sp.skipped] == ["H"] and "fewer than 2 edges" in sp.skipped[0]["reason"]
    assert [g.graph_id for g in sp.train] == ["A"] and leak_audit(sp)["skipped"] == 1
