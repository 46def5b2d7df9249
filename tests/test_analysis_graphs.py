"""Notebook 04 can score the first N test graphs of each seed only (the seed's scale has 39 of 20,000 nodes)."""

from types import SimpleNamespace

import pytest

from lib.aauc.config import AaucParams
from lib.aauc.stage import analysed_splits, picture_graph
from lib.common.params import ParamError

SPLITS = {
    0: {"train": ["a", "b"], "val": ["c"], "test": ["d", "e", "f"]},
    1: {"train": ["d"], "val": [], "test": ["a"]},
}


def test_zero_keeps_every_test_graph_and_n_keeps_the_first_n():
    assert analysed_splits(SPLITS, 0) == SPLITS
    cut = analysed_splits(SPLITS, 2)
    assert cut[0] == {"train": ["a", "b"], "val": ["c"], "test": ["d", "e"]}
    assert cut[1]["test"] == ["a"]
    assert SPLITS[0]["test"] == ["d", "e", "f"]  # stage 3's splits are left as they are


def test_a_negative_count_is_refused_by_name():
    with pytest.raises(ParamError, match="analysis_graphs=-1"):
        analysed_splits(SPLITS, -1)
    with pytest.raises(ParamError, match="analysis_graphs"):
        AaucParams.from_namespace({"analysis_graphs": -1})


def test_a_picture_root_the_dataset_lacks_is_refused_with_some_of_its_roots():
    graphs = {f"g{i}": SimpleNamespace(titles=[f"Root {i:02d}", "x"], root=f"Root {i:02d}") for i in range(12)}
    assert picture_graph(graphs, "Root 03") == "g3"
    with pytest.raises(ParamError, match=r"picture_root='Nowhere'.*12 roots: 'Root 00', .*'Root 09' and 2 more"):
        picture_graph(graphs, "Nowhere")
