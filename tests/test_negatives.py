"""Per-positive negative sets ("heart", "matched") and per-positive ranking, against independent oracles: networkx's
shortest paths and personalised PageRank, a hand-computed resource allocation, and a brute-force ranking."""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from scipy.stats import rankdata

from lib.linkpred import negatives
from lib.linkpred.audit import leak_audit
from lib.linkpred.config import TrainConfig
from lib.linkpred.data import synthetic_graph
from lib.linkpred.heuristics import adjacency
from lib.linkpred.names import PROTOCOLS
from lib.linkpred.negatives import (
    HEART_POOL,
    distance_bins,
    heart_negatives,
    matched_negatives,
    personalized_pagerank,
    resource_allocation,
)
from lib.linkpred.protocols import ProtocolSettings, make_protocol
from lib.linkpred.sampling import TitlePairs, is_member, split_edges
from lib.metrics.link import link_metrics, ranking_metrics, ranks


def _adj(n, edges):
    e = np.array(edges).T
    a = sp.csr_matrix((np.ones(e.shape[1]), (e[0], e[1])), shape=(n, n))
    return ((a + a.T) > 0).astype(np.float64).tocsr()


# a path 0-1-2-3, a triangle 2-4-5 hanging off 2, node 6 isolated (dangling for PageRank)
EDGES = [(0, 1), (1, 2), (2, 3), (2, 4), (4, 5), (5, 2)]
N = 7


def test_personalised_pagerank_matches_networkx_dangling_node_included():
    a = _adj(N, EDGES)
    g = nx.Graph()
    g.add_nodes_from(range(N))
    g.add_edges_from(EDGES)
    anchors = np.array([0, 2, 6])
    ours = personalized_pagerank(a, anchors)
    for row, s in zip(ours, anchors):
        ref = nx.pagerank(g, alpha=0.85, personalization={i: float(i == s) for i in range(N)}, tol=1e-12, max_iter=1000)
        np.testing.assert_allclose(row, [ref[i] for i in range(N)], atol=1e-8)


def test_resource_allocation_by_hand():
    a = _adj(N, EDGES)
    ra = resource_allocation(a, np.array([1, 4]))
    # deg: 0:1, 1:2, 2:4, 3:1, 4:2, 5:2, 6:0
    # RA(1, x): common neighbours of 1 (N = {0, 2}) with x, each weighted 1/deg
    assert ra[0, 3] == pytest.approx(1 / 4)  # via 2
    assert ra[0, 4] == pytest.approx(1 / 4)  # via 2
    assert ra[0, 1] == pytest.approx(1 / 1 + 1 / 4)  # itself: via 0 and 2
    assert ra[0, 6] == 0
    # RA(4, 5): N(4) = {2, 5}, N(5) = {4, 2}: common {2} -> 1/4
    assert ra[1, 5] == pytest.approx(1 / 4)
    assert ra[1, 1] == pytest.approx(1 / 4)  # RA(4, 1): N(4) = {2, 5}, N(1) = {0, 2}: common {2}
    assert ra[1, 0] == 0


def test_distance_bins_match_networkx_shortest_paths():
    data = synthetic_graph(80, 120, 8, seed=3)
    a = adjacency(data.edge_index, data.num_nodes)
    g = nx.Graph()
    g.add_nodes_from(range(data.num_nodes))
    g.add_edges_from(data.edge_index.t().tolist())
    anchors = np.arange(0, 80, 7)
    bins = distance_bins(a, anchors)
    for row, s in zip(bins, anchors):
        d = nx.single_source_shortest_path_length(g, int(s))
        want = [min(d.get(i, 99), 3) for i in range(data.num_nodes)]
        assert row.tolist() == want


def _task(seed=0, n=200, m=500, k=6):
    """A graph with 15% of its edges held out of message passing as positives; every edge is forbidden."""
    data = synthetic_graph(n, m, 16, seed=seed)
    mp, pos = split_edges(data.edge_index, n, 0.15, seed)
    pos = pos[:, pos[0] < pos[1]] if (pos[0] < pos[1]).any() else pos
    tp = TitlePairs([data])
    return data, mp, pos, tp, tp.gids(data), tp.edge_keys(data)


def test_matched_negatives_sit_at_their_positives_distance_and_are_never_links():
    data, mp, pos, tp, gids, forbidden = _task()
    a = adjacency(mp, data.num_nodes)
    neg, owner, missing = matched_negatives(a, data, gids, tp, forbidden, pos, 6, seed=1)
    g = nx.Graph()
    g.add_nodes_from(range(data.num_nodes))
    g.add_edges_from(mp.t().tolist())
    dist = dict(nx.all_pairs_shortest_path_length(g))
    b = lambda u, v: min(dist[u].get(v, 99), 3)  # noqa: E731
    p = pos.numpy()
    for (x, w), i in zip(neg.t().tolist(), owner.tolist()):
        assert x in (p[0, i], p[1, i]) and w != x
        assert b(x, w) == b(int(p[0, i]), int(p[1, i]))
    assert not is_member(tp.keys(gids, neg), forbidden).any()
    counts = np.bincount(owner.numpy(), minlength=pos.size(1))
    assert (counts[counts > 0] <= 6).all() and missing == int((counts == 0).sum()) and missing < pos.size(1) // 10


def test_shortcut_cannot_separate_matched_negatives_but_separates_distance_two_ones():
    """ "No common neighbour => link" scores AUC 0.5 on matched negatives by construction, far from it on dist2."""
    from lib.linkpred.heuristics import heuristic_scores
    from lib.linkpred.sampling import dist2_negatives

    data, mp, pos, tp, gids, forbidden = _task(seed=4, n=400, m=900)
    a = adjacency(mp, data.num_nodes)

    def shortcut(pairs):
        return (heuristic_scores("common_neighbours", data.x, mp, data.num_nodes, pairs) == 0).astype(float)

    neg, owner, _ = matched_negatives(a, data, gids, tp, forbidden, pos, 10, seed=2)
    has = np.bincount(owner.numpy(), minlength=pos.size(1)) == 10  # positives with all their K negatives
    keep = has[owner.numpy()]
    pos_cn = shortcut(pos)
    assert 0.1 < pos_cn.mean() < 0.9  # both strata exist, so the test can fail
    auc = link_metrics(pos_cn[has], shortcut(neg)[keep])["auc"]
    assert auc == pytest.approx(0.5, abs=1e-9)
    d2, _ = dist2_negatives(mp, data, gids, tp, forbidden, pos, seed=2)
    assert link_metrics(pos_cn, shortcut(d2))["auc"] > 0.5 + 0.5 * pos_cn.mean() - 0.01


def test_heart_negatives_come_from_the_best_mean_rank_of_three_independent_heuristics():
    data, mp, pos, tp, gids, forbidden = _task(seed=5, n=120, m=300)
    a = adjacency(mp, data.num_nodes)
    x = data.x.numpy().astype(np.float64)
    k, pool = 4, HEART_POOL
    neg, owner, missing = heart_negatives(a, data, gids, tp, forbidden, pos, k, seed=3)
    assert missing == 0 and neg.size(1) == k * pos.size(1)
    g = nx.Graph()
    g.add_nodes_from(range(data.num_nodes))
    g.add_edges_from(mp.t().tolist())
    deg = dict(g.degree())
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    p = pos.numpy()
    for anchor in sorted(set(neg[0].tolist()))[:12]:
        valid = [
            w
            for w in range(data.num_nodes)
            if w != anchor and not is_member(tp.keys(gids, np.array([[anchor], [w]])), forbidden)[0]
        ]
        ppr = nx.pagerank(g, alpha=0.85, personalization={i: float(i == anchor) for i in g}, tol=1e-12, max_iter=1000)
        ra = [sum(1 / deg[z] for z in nx.common_neighbors(g, anchor, w)) for w in valid]
        cos = [float(unit[anchor] @ unit[w]) for w in valid]
        mean_rank = (
            rankdata(-np.array(ra)) + rankdata(-np.array([ppr[w] for w in valid])) + rankdata(-np.array(cos))
        ) / 3
        requested = [c for i in range(p.shape[1]) for e, c in zip(p[:, i], ((k + 1) // 2, k // 2)) if e == anchor]
        top = set(np.array(valid)[np.argsort(mean_rank, kind="stable")[: pool * max(requested)]].tolist())
        chosen = neg[1][neg[0] == anchor].tolist()
        assert chosen and set(chosen) <= top
    assert not is_member(tp.keys(gids, neg), forbidden).any()
    assert (neg[0] == torch.from_numpy(p[0][owner.numpy()])).sum() + (
        neg[0] == torch.from_numpy(p[1][owner.numpy()])
    ).sum() >= neg.size(1)


def test_the_heart_draws_shortcuts_equal_their_plain_definitions_bit_for_bit():
    """personalized_pagerank's in-place update, _valid's partner look-up and _smallest's partial sort against the
    plain formulas they replace (same floats, same masks, same orders)."""
    data, mp, pos, tp, gids, forbidden = _task(seed=2, n=90, m=260)
    a = adjacency(mp, data.num_nodes).tolil()
    a[0, :] = 0  # a dangling node
    a[:, 0] = 0
    a = a.tocsr()
    a.eliminate_zeros()
    n, anchors = data.num_nodes, np.array([0, 3, 17, 40, 89])
    deg = np.asarray(a.sum(1)).ravel()
    walk = (sp.diags(np.divide(1.0, deg, out=np.zeros(n), where=deg > 0)) @ a).T.tocsr()
    restart = np.zeros((n, len(anchors)))
    restart[anchors, np.arange(len(anchors))] = 1.0
    x = restart.copy()
    for _ in range(1000):
        prev, x = x, 0.85 * (walk @ x + restart * x[deg == 0].sum(0)) + 0.15000000000000002 * restart
        if (np.abs(x - prev).sum(0) < n * 1e-7).all():
            break
    assert np.array_equal(personalized_pagerank(a, anchors, tol=1e-7), x.T)

    gids = gids.copy()
    gids[5] = gids[6]  # one title on two nodes: both are masked with it
    u, w = np.repeat(anchors, n), np.tile(np.arange(n), len(anchors))
    for keys in (forbidden, np.empty(0, dtype=np.int64)):
        plain = ((u != w) & ~is_member(tp.keys(gids, np.stack([u, w])), keys)).reshape(len(anchors), n)
        assert np.array_equal(negatives._valid(tp, gids, keys, anchors, n), plain)

    values = np.random.default_rng(0).integers(0, 6, size=(7, 30)).astype(float)  # many ties
    m = np.array([0, 1, 5, 12, 30, 3, 29])
    full = np.argsort(values, axis=1, kind="stable")
    assert [c.tolist() for c in negatives._smallest(values, m)] == [full[j, :k].tolist() for j, k in enumerate(m)]


def test_per_positive_ranks_by_brute_force_and_ties_count_against():
    pos = np.array([0.9, 0.5, 0.2])
    neg = np.array([0.95, 0.1, 0.5, 0.4, 0.1, 0.3])
    owner = np.array([0, 0, 1, 1, 2, 2])
    r = ranks(pos, neg, owner)
    assert r.tolist() == [2, 2, 2]  # 0.95 beats 0.9; the tie 0.5 counts against; 0.3 beats 0.2
    assert ranks(pos, neg).tolist() == [2, 3, 5]  # shared: 0.2 is beaten by 0.95, 0.5, 0.4 and 0.3
    m = ranking_metrics(pos, neg, owner)
    assert m == {"mrr": pytest.approx(0.5), "hits@1": 0.0, "hits@10": 1.0}
    lone = ranking_metrics(np.array([0.9, 0.1]), np.array([0.2]), np.array([0]))  # positive 1 has no negative
    assert lone["mrr"] == 1.0


@pytest.mark.parametrize("protocol", ["leak_free", "pair_split", "new_nodes"])
def test_protocol_tasks_carry_both_sets_on_validation_too_and_none_is_a_link(protocol):
    graphs = {f"g{i}": synthetic_graph(60, 150, 8, seed=i, graph_id=f"g{i}") for i in range(6)}
    split = make_protocol(
        graphs,
        {"train": ["g0", "g1", "g2"], "val": ["g3"], "test": ["g4", "g5"]},
        protocol,
        seed=0,
        settings=ProtocolSettings(holdout_fraction=0.2, negatives_per_positive=4),
    )
    audit = leak_audit(split)
    assert audit["test_neg_heart_pairs"] > 0 and audit["test_neg_matched_pairs"] > 0
    assert audit["test_neg_heart_true_links"] == 0 and audit["test_neg_matched_true_links"] == 0
    for t in split.val + split.test:
        for name in ("heart", "matched"):
            neg, owner = t.negatives(name), t.owners(name)
            assert neg.size(1) == len(owner) and neg.size(1) > 0
            assert not is_member(split.tp.keys(split.tp.gids(t.data), neg), split.global_links).any()
    assert protocol in PROTOCOLS and TrainConfig().hits_k == 50
    none = make_protocol(
        graphs,
        {"train": ["g0", "g1", "g2"], "val": ["g3"], "test": ["g4", "g5"]},
        protocol,
        seed=0,
        settings=ProtocolSettings(holdout_fraction=0.2, negatives_per_positive=0),
    )
    assert all(t.negatives("heart").size(1) == 0 for t in none.test)


def test_matched_training_negatives_sit_at_a_positives_distance_and_mix_with_the_others():
    from lib.linkpred.train import supervision_pairs, training_negatives

    data = synthetic_graph(150, 400, 8, seed=7)
    cfg = TrainConfig(supervision="disjoint", neg_rate=1.0, negative_mix={"matched": 0.5, "dist2": 0.25}, seed=3)
    mp, pos = supervision_pairs(data, cfg, 1, 0)
    neg = training_negatives(data, mp, pos, cfg, 1, 0)
    n = pos.size(1)
    assert neg.size(1) <= n and neg.size(1) >= n - n // 10  # a quarter dist2, half matched, the rest uniform
    a = adjacency(mp, data.num_nodes)
    links = {tuple(e) for e in data.edge_index.t().tolist()}
    assert not any((u, w) in links for u, w in neg.t().tolist())
    bins = {}
    for u, v in pos.t().tolist():
        bins.setdefault(u, set()).add(int(distance_bins(a, np.array([u]))[0, v]))
    again = training_negatives(data, mp, pos, cfg, 1, 0)
    assert torch.equal(neg, again)  # seeded per (seed, epoch, step)
    only = training_negatives(
        data, mp, pos, TrainConfig(supervision="disjoint", neg_rate=1.0, negative_mix={"matched": 1.0}, seed=3), 1, 0
    )
    assert only.size(1) >= n - n // 10
    for u, w in only.t().tolist():
        assert u in bins and int(distance_bins(a, np.array([u]))[0, w]) in bins[u]
    with pytest.raises(ValueError, match="negative_mix=.*add up to more than 1"):
        TrainConfig(negative_mix={"dist2": 0.6, "matched": 0.6})


def test_per_positive_sets_are_cached_by_content_and_rebuilt_when_an_input_changes(tmp_path, monkeypatch):
    from lib.linkpred import protocols
    from lib.linkpred.negative_sets import heart

    monkeypatch.setattr(protocols, "NEGATIVE_CACHE", tmp_path / "neg")
    graphs = {f"g{i}": synthetic_graph(60, 150, 8, seed=i, graph_id=f"g{i}") for i in range(4)}
    first = make_protocol(
        graphs,
        {"train": ["g0", "g1"], "val": ["g2"], "test": ["g3"]},
        "leak_free",
        0,
        settings=ProtocolSettings(negatives_per_positive=4),
    )
    files = sorted((tmp_path / "neg").glob("*.pt"))
    assert len(files) == 4  # heart and matched of one validation task and one test task
    calls = []
    real = heart.heart_negatives
    monkeypatch.setattr(heart, "heart_negatives", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = make_protocol(
        graphs,
        {"train": ["g0", "g1"], "val": ["g2"], "test": ["g3"]},
        "leak_free",
        0,
        settings=ProtocolSettings(negatives_per_positive=4),
    )
    assert calls == []  # read from the cache, nothing ranked again
    for t0, t1 in zip(first.test + first.val, again.test + again.val):
        for name in ("heart", "matched"):
            assert torch.equal(t0.negatives(name), t1.negatives(name))
            assert (t0.owners(name) == t1.owners(name)).all()
            assert t0.missing(name) == t1.missing(name)
    make_protocol(
        graphs,
        {"train": ["g0", "g1"], "val": ["g2"], "test": ["g3"]},
        "leak_free",
        1,
        settings=ProtocolSettings(negatives_per_positive=4),
    )  # another seed: other sets
    assert calls and len(list((tmp_path / "neg").glob("*.pt"))) > 4
