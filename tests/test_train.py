import random

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from lib.device import get_device
from lib.model import ModelConfig
from lib.train import (TrainConfig, TrainingDiverged, epoch_checkpoints, eval_pairs, graph_problem,
                       heuristic_scores, leak_free_split, link_metrics, load_checkpoint, run_experiment,
                       sample_negatives, split_graphs, summary_table, synthetic_graph, train_model)

SMALL = ModelConfig(in_channels=32, hidden_channels=16, out_channels=8, num_levels=2, heads=2, dropout=0.1).to_dict()


def _edge_set(ei):
    return set(map(tuple, ei.t().tolist()))


def test_negatives_never_contain_positives_and_are_seeded():
    g = synthetic_graph(200, 2000, in_channels=8, seed=0)
    pos = _edge_set(g.edge_index)
    state = random.getstate()
    a = sample_negatives(g.edge_index, g.num_nodes, 1500, seed=7)
    assert random.getstate() == state  # the caller's random stream is untouched
    b = sample_negatives(g.edge_index, g.num_nodes, 1500, seed=7)
    c = sample_negatives(g.edge_index, g.num_nodes, 1500, seed=8)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.size(1) > 1400
    assert not (_edge_set(a) & pos)
    assert (a[0] != a[1]).all()


def test_leak_free_split_keeps_held_out_edges_out_of_message_passing():
    g = synthetic_graph(150, 600, in_channels=8, seed=1)
    mp, pos, neg = leak_free_split(g.edge_index, g.num_nodes, 0.1, seed=3)
    full, mp_set = _edge_set(g.edge_index), _edge_set(mp)
    n_und = g.edge_index.size(1) // 2
    assert pos.size(1) == round(0.1 * n_und) == neg.size(1)
    for u, v in pos.t().tolist():
        assert (u, v) in full and (u, v) not in mp_set and (v, u) not in mp_set
    assert mp.size(1) == 2 * (n_und - pos.size(1))
    assert mp_set <= full
    assert not (_edge_set(neg) & full)
    # the seed protocol scores the message-passing edges themselves
    sp = eval_pairs(g, "seed", TrainConfig(), seed=0)
    assert torch.equal(sp.pos, sp.mp_edge_index)


def test_link_metrics_known_values():
    m = link_metrics(np.array([3.0, 2.0]), np.array([1.0, 0.0]), hits_k=1)
    assert m == {"auc": 1.0, "ap": 1.0, "hits@1": 1.0, "mrr": 1.0}
    # positives 0.5 and 2.5 against negatives 1, 2, 3: ranks 4 and 2
    m = link_metrics(np.array([0.5, 2.5]), np.array([1.0, 2.0, 3.0]), hits_k=2)
    assert m["auc"] == pytest.approx(2 / 6)
    assert m["mrr"] == pytest.approx((1 / 4 + 1 / 2) / 2)
    assert m["hits@2"] == pytest.approx(0.5)  # 2nd best negative is 2; only 2.5 beats it


def test_heuristics_on_toy_graph_with_known_answer():
    # 0-1, 0-2, 1-2, 2-3 (triangle plus a tail); degrees 2, 2, 3, 1
    ei = torch.tensor([[0, 1, 0, 2, 1, 2, 2, 3], [1, 0, 2, 0, 2, 1, 3, 2]])
    x = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    pairs = torch.tensor([[0, 0, 1], [3, 1, 3]])
    assert heuristic_scores("common_neighbours", x, ei, 4, pairs).tolist() == [1, 1, 1]
    assert heuristic_scores("pref_attach", x, ei, 4, pairs).tolist() == [2, 4, 2]
    aa = heuristic_scores("adamic_adar", x, ei, 4, pairs)
    np.testing.assert_allclose(aa, [1 / np.log(3), 1 / np.log(3), 1 / np.log(3)])
    np.testing.assert_allclose(heuristic_scores("cosine", x, ei, 4, pairs), [1 / np.sqrt(2), 1.0, 1 / np.sqrt(2)])


def test_bad_graphs_are_skipped_with_a_reason_or_a_clear_error():
    x = torch.randn(5, 32)
    assert graph_problem(Data(x=x, edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=5)) == "no edges"
    assert "1 node" in graph_problem(Data(x=x[:1], edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=1))
    bad = x.clone()
    bad[0, 0] = float("nan")
    ei = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
    assert "NaN" in graph_problem(Data(x=bad, edge_index=ei, num_nodes=5))
    with pytest.raises(ValueError, match="width 32"):
        graph_problem(Data(x=torch.randn(5, 16), edge_index=ei, num_nodes=5, graph_id="g"), 32)


def test_device_and_amp_errors():
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA GPU is visible"):
            get_device("cuda")
    with pytest.raises(ValueError, match="amp=True needs device='cuda'"):
        TrainConfig(amp=True, device="cpu")
    with pytest.raises(ValueError, match="holdout_fraction"):
        TrainConfig(holdout_fraction=1.0)


def _graphs(n=5, seed=0):
    return [synthetic_graph(120, 400, in_channels=32, seed=seed + i, graph_id=f"g{i}") for i in range(n)]


def test_resume_reproduces_an_uninterrupted_run(tmp_path):
    graphs = _graphs()
    cfg = TrainConfig(epochs=2, seed=4, r_cos=0.5, t_cos=0.3)
    m_full, r_full = train_model("gat_model", SMALL, graphs[:4], graphs[4:], cfg, tmp_path / "a", progress=False)
    # interrupted inside epoch 2: only epoch 1's checkpoint exists, then resume
    train_model("gat_model", SMALL, graphs[:4], graphs[4:], cfg, tmp_path / "b", progress=False, max_steps=6)
    assert list(epoch_checkpoints(tmp_path / "b")) == [1]
    m_res, r_res = train_model("gat_model", SMALL, graphs[:4], graphs[4:], cfg, tmp_path / "b", progress=False)
    assert r_res.resumed_from == 1
    assert r_res.history == [{**h, "seconds": r} for h, r in zip(r_full.history, [h["seconds"] for h in r_res.history])]
    assert r_res.val == r_full.val
    for (k, a), b in zip(m_full.state_dict().items(), m_res.state_dict().values()):
        assert torch.equal(a, b), k
    model, ck = load_checkpoint(epoch_checkpoints(tmp_path / "a")[2])
    assert ck["config"]["model"] == SMALL and ck["epoch"] == 2 and len(ck["history"]) == 8


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
    graphs = _graphs()
    cfg = TrainConfig(epochs=1, seed=0, log_aauc=False)
    train_model("gat_model", SMALL, graphs[:4], [], cfg, tmp_path, progress=False)
    poisoned = [synthetic_graph(120, 400, in_channels=32, seed=9, graph_id="huge")]
    poisoned[0].x = poisoned[0].x * 3e37  # finite, but overflows to inf in the first linear layer
    with pytest.raises(TrainingDiverged, match="epoch_1.pt"):
        train_model("gat_model", SMALL, poisoned, [], TrainConfig(epochs=2, seed=0, log_aauc=False), tmp_path,
                    progress=False)
    assert list(epoch_checkpoints(tmp_path)) == [1]


def test_experiment_learns_and_reports_both_protocols(tmp_path):
    graphs = {g.graph_id: g for g in _graphs(6, seed=10)}
    train, val, test = split_graphs(list(graphs), 0, 2, 0.25, seed=0)
    assert (len(train), len(val), len(test)) == (3, 1, 2)
    cfg = TrainConfig(epochs=2, seed=0, lr=5e-3, r_cos=0.5, t_cos=0.3)
    out = run_experiment(graphs, train, val, test, SMALL, cfg, tmp_path, models=("gat_model", "mlp"),
                         heuristics=("cosine", "common_neighbours"), progress=False)
    rows = {(r["model"], r["protocol"]): r for r in out["rows"]}
    assert set(rows) == {(m, p) for m in ("gat_model", "mlp", "cosine", "common_neighbours")
                         for p in ("seed", "leak_free")}
    assert rows[("gat_model", "leak_free")]["auc"] > 0.7  # clusters make edges learnable
    assert rows[("cosine", "leak_free")]["auc"] > 0.7
    table = summary_table(out["rows"])
    assert table.loc[("leak_free", "gat_model"), "n_seeds"] == 1
    with pytest.raises(ValueError, match="exceed"):
        split_graphs(list(graphs), 10, 2, 0.1, seed=0)
