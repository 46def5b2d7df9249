"""The degree-biased ("popular") negative set: per positive, its own pairs sharing an endpoint with it, the other
node drawn in proportion to its message-passing degree, never a link."""

import numpy as np
import torch

from lib.linkpred.audit import leak_audit
from lib.linkpred.data import synthetic_graph
from lib.linkpred.negative_sets.registry import DEFAULT_NEGATIVE_SETS, REGISTRY
from lib.linkpred.protocols import ProtocolSettings, make_protocol
from lib.linkpred.sampling import is_member

ROLES = {"train": ["g0", "g1", "g2"], "val": ["g3"], "test": ["g4", "g5"]}
SETTINGS = ProtocolSettings(
    holdout_fraction=0.2, negatives_per_positive=6, negative_sets=(*DEFAULT_NEGATIVE_SETS, "popular")
)


def test_popular_negatives_share_an_endpoint_avoid_every_link_and_favour_high_degree():
    graphs = {f"g{i}": synthetic_graph(80, 240, 8, seed=i, graph_id=f"g{i}") for i in range(6)}
    split = make_protocol(graphs, ROLES, "leak_free", 0, SETTINGS)
    assert REGISTRY["popular"].per_positive and not REGISTRY["popular"].default
    picked, uniform = [], []
    for t in split.test + split.val:
        neg, owner = t.negatives("popular"), t.owners("popular")
        assert neg.size(1) == len(owner) > 0 and neg.size(1) <= 6 * t.pos.size(1)
        anchors = t.pos[:, torch.from_numpy(owner)]
        assert ((neg[0] == anchors[0]) | (neg[0] == anchors[1])).all()  # the anchor is one of its positive's ends
        assert not is_member(split.tp.keys(split.tp.gids(t.data), neg), split.global_links).any()
        deg = np.bincount(t.mp_edge_index[0].numpy(), minlength=t.data.num_nodes)
        picked.append(deg[neg[1].numpy()])
        uniform.append(deg[t.negatives("uniform")[1].numpy()])
        assert (deg[neg[1].numpy()] > 0).all()
    assert np.concatenate(picked).mean() > np.concatenate(uniform).mean()  # size-biased: E[d²] / E[d] > E[d]
    audit = leak_audit(split)
    assert audit["test_neg_popular_pairs"] > 0 and audit["test_neg_popular_true_links"] == 0
    again = make_protocol(graphs, ROLES, "leak_free", 0, SETTINGS)
    assert all(torch.equal(a.negatives("popular"), b.negatives("popular")) for a, b in zip(split.test, again.test))


def test_popular_negatives_under_new_nodes_hold_an_unseen_title():
    graphs = {f"g{i}": synthetic_graph(80, 240, 8, seed=i, graph_id=f"g{i}") for i in range(6)}
    split = make_protocol(graphs, ROLES, "new_nodes", 0, SETTINGS)
    unseen = set(split.unseen_titles)
    for t in split.test:
        assert all(t.data.titles[u] in unseen for u in t.negatives("popular")[0].tolist())
