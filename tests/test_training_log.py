"""What notebook 03 logs while it trains (A-AUC and the eval-mode pass) is a setting that changes no weight."""

from dataclasses import replace

import pytest
import torch

from lib.linkpred.checkpoint import data_fingerprint
from lib.linkpred.config import GatParams, TrainConfig
from lib.linkpred.data import synthetic_graph
from lib.linkpred.model import ModelConfig
from lib.linkpred.train import Checkpointing, log_aauc_rate, train_model

SMALL = ModelConfig(in_channels=32, gat_hidden=16, gat_out=8, gat_levels=2, gat_heads=2, gat_dropout=0.1)


def _graphs(n=5):
    return [synthetic_graph(120, 400, in_channels=32, seed=i, graph_id=f"g{i}") for i in range(n)]


def test_log_every_logs_a_auc_and_the_eval_pass_on_every_nth_step_and_changes_no_weight():
    graphs = _graphs()
    cfg = TrainConfig(epochs=2, seed=3, r_cos=0.5, t_cos=0.3)
    m_all, r_all = train_model("gat_model", SMALL, graphs[:4], graphs[4:], cfg, progress=False)
    m_thin, r_thin = train_model("gat_model", SMALL, graphs[:4], graphs[4:], replace(cfg, log_every=3), progress=False)
    assert len(r_thin.history) == len(r_all.history) == 8
    for i, (a, b) in enumerate(zip(r_all.history, r_thin.history)):
        assert a["loss"] == b["loss"] and a["auc"] == b["auc"]  # every step keeps its loss and training AUC
        step_in_epoch = i % 4
        if step_in_epoch % 3 == 0:
            assert {k: b[k] for k in ("aauc", "auc_eval", "aauc_eval")} == {
                k: a[k] for k in ("aauc", "auc_eval", "aauc_eval")
            }
        else:
            assert not {"aauc", "auc_eval", "aauc_eval"} & set(b), b
    for (k, a), b in zip(m_all.state_dict().items(), m_thin.state_dict().values()):
        assert torch.equal(a, b), k
    assert r_thin.val == r_all.val


def test_the_training_a_auc_samples_at_most_log_aauc_nodes():
    cfg = TrainConfig(r_cos=0.1, log_every=1)
    assert log_aauc_rate(cfg, 20_000) == 0.1  # 0 with log_every 1: the seed's r_cos sample (2,000 nodes)
    capped = replace(cfg, log_aauc_nodes=500)
    assert round(log_aauc_rate(capped, 20_000) * 20_000) == 500
    assert log_aauc_rate(capped, 2_000) == 0.1  # the cap binds only where r_cos · N exceeds it
    with pytest.raises(ValueError, match="log_every"):
        TrainConfig(log_every=-1)


def test_a_run_resumes_under_other_logging_settings(tmp_path):
    graphs = _graphs()
    cfg = TrainConfig(epochs=2, seed=4, r_cos=0.5, t_cos=0.3)
    fid = data_fingerprint(graphs)
    m_full, _ = train_model("gat_model", SMALL, graphs[:4], graphs[4:], cfg, progress=False)
    train_model(
        "gat_model", SMALL, graphs[:4], graphs[4:], cfg, Checkpointing(tmp_path, fid), progress=False, max_steps=6
    )
    m_res, r_res = train_model(
        "gat_model",
        SMALL,
        graphs[:4],
        graphs[4:],
        replace(cfg, log_every=4, log_eval=False),
        Checkpointing(tmp_path, fid),
        progress=False,
    )
    assert r_res.resumed_from == 1
    for (k, a), b in zip(m_full.state_dict().items(), m_res.state_dict().values()):
        assert torch.equal(a, b), k


def test_notebook_03s_logging_parameters_reach_the_training_settings():
    p = GatParams(log_every=10, log_aauc_nodes=500)
    assert p.train_config(0).log_every == 10 and p.train_config(0, "mlp").log_aauc_nodes == 500
