"""The negative-set registry: every set registered once, the default selection the published one, and a selection
that names an unknown set or leaves out uniform refused."""

import pytest
import torch

from lib.linkpred.audit import audit_columns, leak_audit
from lib.linkpred.data import synthetic_graph
from lib.linkpred.negative_sets.base import OWN, SHARED
from lib.linkpred.negative_sets.registry import (
    DEFAULT_NEGATIVE_SETS,
    NEGATIVE_SETS,
    REGISTRY,
    SELECT_METRICS,
    check_selection,
)
from lib.linkpred.protocols import ProtocolSettings, make_protocol

ROLES = {"train": ["g0", "g1"], "val": ["g2"], "test": ["g3"]}


def test_the_registry_holds_the_published_sets_first_and_by_default():
    assert NEGATIVE_SETS[:4] == DEFAULT_NEGATIVE_SETS == ("uniform", "dist2", "heart", "matched")
    assert all(
        REGISTRY[n].ranking in (SHARED, OWN) and REGISTRY[n].label and REGISTRY[n].summary for n in NEGATIVE_SETS
    )
    assert {f"auc_{n}" for n in NEGATIVE_SETS[1:]} <= set(SELECT_METRICS)
    assert audit_columns("true_links") == [
        "test_neg_true_links",
        "test_neg_dist2_true_links",
        "test_neg_heart_true_links",
        "test_neg_matched_true_links",
    ]


def test_a_selection_draws_exactly_its_sets_and_refuses_unknown_ones():
    graphs = {f"g{i}": synthetic_graph(60, 150, 8, seed=i, graph_id=f"g{i}") for i in range(4)}
    only = make_protocol(graphs, ROLES, "leak_free", 0, ProtocolSettings(negative_sets=("dist2", "uniform")))
    full = make_protocol(graphs, ROLES, "leak_free", 0, ProtocolSettings(negatives_per_positive=4))
    for t, u in zip(only.test + only.val, full.test + full.val):
        assert list(t.negative_sets) == ["uniform", "dist2"]  # registry order, whatever the selection's
        assert list(u.negative_sets) == list(DEFAULT_NEGATIVE_SETS)
        for n in t.negative_sets:  # each set draws from its own stream: the others do not move it
            assert torch.equal(t.negatives(n), u.negatives(n))
        assert t.negatives("heart").size(1) == 0
    assert leak_audit(only)["test_neg_heart_pairs"] == 0  # a default set is always a column
    with pytest.raises(ValueError, match="negative set 'easy' is unknown"):
        ProtocolSettings(negative_sets=("uniform", "easy"))
    with pytest.raises(ValueError, match="lacks 'uniform'"):
        check_selection(["dist2"])
