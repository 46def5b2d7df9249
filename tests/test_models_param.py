"""Notebook 03 can train GatModel without its two baselines (`models`), and notebook 04 then scores what exists."""

import pytest

from lib.aauc import stage
from lib.aauc.config import AaucParams
from lib.common.params import ParamError
from lib.linkpred.config import GatParams, TrainConfig
from lib.linkpred.data import synthetic_graph
from lib.linkpred.model import ModelConfig
from lib.linkpred.names import MODEL_KINDS
from lib.linkpred.train import init_model


def test_every_model_kind_by_default_and_gat_model_required():
    assert GatParams().models == list(MODEL_KINDS)
    assert GatParams(models=["gat_model"]).models == ["gat_model"]
    with pytest.raises(ParamError, match="models=\\['mlp'\\] lacks 'gat_model'"):
        GatParams(models=["mlp"])
    with pytest.raises(ParamError, match="models"):
        GatParams(models=["gat_model", "gcn"])


def test_reference_scores_leave_out_the_baselines_a_run_did_not_train():
    graphs = {"g": synthetic_graph(60, 150, 8, seed=0, graph_id="g")}
    model_cfg = ModelConfig(in_channels=8, gat_hidden=8, gat_out=4, gat_levels=1, gat_heads=1)
    models = {0: {"gat_model": init_model("gat_model", model_cfg, [], TrainConfig(seed=0), "cpu")}}
    splits = {0: {"train": [], "val": [], "test": ["g"]}}
    ref = stage.reference_scores(models, splits, graphs, model_cfg, AaucParams(n_seeds=1, r_cos=0.5, t_cos=0.3))
    assert list(ref["scorer"]) == ["features", "random", "untrained", "gat_model"]
