import random
from dataclasses import asdict, replace

import numpy as np
import pandas as pd
import pytest
import torch
from torch_geometric.data import Data

from lib.common.device import get_device
from lib.embed.dataset import split_graphs
from lib.linkpred.checkpoint import data_fingerprint, epoch_checkpoints, load_checkpoint
from lib.linkpred.config import GatParams, TrainConfig, TrainingDiverged, stored_settings
from lib.linkpred.data import graph_problem, synthetic_graph
from lib.linkpred.heuristics import HEURISTICS, heuristic_scores
from lib.linkpred.model import ModelConfig
from lib.linkpred.negative_sets.registry import DEFAULT_NEGATIVE_SETS
from lib.linkpred.protocols import graph_task
from lib.linkpred.sampling import sample_negatives
from lib.linkpred.stage import run_experiment
from lib.linkpred.train import Checkpointing, checkpoint_config, supervision_pairs, train_model
from lib.metrics.link import gat_verdicts, link_metrics, summary_table
from lib.metrics.selection import choose_on_validation

SMALL = ModelConfig(in_channels=32, gat_hidden=16, gat_out=8, gat_levels=2, gat_heads=2, gat_dropout=0.1)


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


def test_zero_negatives_are_an_empty_long_tensor_so_small_graphs_train():
    # one positive at neg_rate 0.3 asks for round(0.3) = 0 negatives; PyG would return a float tensor there
    g = synthetic_graph(12, 10, in_channels=8, seed=0)
    neg = sample_negatives(g.edge_index, g.num_nodes, 0, seed=1)
    assert neg.shape == (2, 0) and neg.dtype == torch.long
    cfg = TrainConfig(epochs=1, neg_rate=0.01, seed=0)
    train_model("gat_model", replace(SMALL, in_channels=8), [g], [g], cfg, progress=False)


def test_the_within_graph_protocol_keeps_held_out_edges_out_of_message_passing():
    g = synthetic_graph(150, 600, in_channels=8, seed=1)
    task = graph_task(g, "within_graph", seed=3)
    mp, pos, neg = task.mp_edge_index, task.pos, task.negatives("uniform")
    full, mp_set = _edge_set(g.edge_index), _edge_set(mp)
    n_und = g.edge_index.size(1) // 2
    assert pos.size(1) == round(0.1 * n_und) == neg.size(1)
    for u, v in pos.t().tolist():
        assert (u, v) in full and (u, v) not in mp_set and (v, u) not in mp_set
    assert mp.size(1) == 2 * (n_und - pos.size(1))
    assert mp_set <= full
    assert not (_edge_set(neg) & full)
    # the seed protocol scores the message-passing edges themselves
    sp = graph_task(g, "seed", seed=0)
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
    np.testing.assert_allclose(heuristic_scores("resource_allocation", x, ei, 4, pairs), [1 / 3, 1 / 3, 1 / 3])


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


def test_device_precision_and_a_checkpoint_config_this_code_does_not_read():
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA GPU is visible"):
            get_device("cuda")
    with pytest.raises(TypeError, match="amp"):
        TrainConfig(amp=True)  # no alias: precision says it
    config = checkpoint_config("gat_model", SMALL, TrainConfig(), "d")
    assert stored_settings(config, "checkpoint x") == (SMALL, TrainConfig())
    other = {**config, "train": {**config["train"], "amp": True}}
    with pytest.raises(ValueError, match="checkpoint x holds settings this code does not read"):
        stored_settings(other, "checkpoint x")
    with pytest.raises(ValueError, match="precision='half' is unknown"):
        TrainConfig(precision="half")
    with pytest.raises(ValueError, match="holdout_fraction"):
        TrainConfig(holdout_fraction=1.0)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_short_low_precision_training_of_the_fused_model_is_finite_and_learns(tmp_path, precision):
    """The CUDA profile's path (fused GatModel + autocast; fp16 with a GradScaler) on CPU autocast: no NaN, the
    weights and checkpoint stay float32, and the eval-mode AUC of the last steps matches a float32 run within 0.05."""
    graphs = _graphs(4)
    model_cfg = replace(SMALL, gat_impl="fused")
    runs = {}
    for prec in ("fp32", precision):
        cfg = TrainConfig(epochs=3, seed=1, lr=5e-3, precision=prec, log_aauc=False)
        model, res = train_model(
            "gat_model", model_cfg, graphs, [], cfg, Checkpointing(tmp_path / prec, "four"), progress=False
        )
        assert all(np.isfinite(h["loss"]) for h in res.history)
        assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in model.parameters())
        runs[prec] = np.mean([h["auc_eval"] for h in res.history[-4:]])
        ck = torch.load(epoch_checkpoints(tmp_path / prec)[3], weights_only=True)
        assert ck["config"]["train"]["precision"] == prec
        assert all(v.dtype in (torch.float32, torch.int64) for v in ck["model"].values())
    assert runs[precision] > 0.6 and abs(runs[precision] - runs["fp32"]) < 0.05, runs


def test_checkpoints_store_auto_resolved(tmp_path, monkeypatch):
    from lib.common import device as dev

    monkeypatch.setattr(dev, "cpu_bf16_support", lambda: (False, "simulated CPU without bf16"))
    cfg = TrainConfig(epochs=1, seed=0, precision="auto", log_aauc=False, log_eval=False)
    assert cfg.resolved().precision == "fp32"
    train_model("gat_model", SMALL, _graphs(2), [], cfg, Checkpointing(tmp_path, "two"), progress=False)
    ck = torch.load(epoch_checkpoints(tmp_path)[1], weights_only=True)
    assert ck["config"]["train"]["precision"] == "fp32"  # what ran, not "auto"
    _, r = train_model("gat_model", SMALL, _graphs(2), [], cfg, Checkpointing(tmp_path, "two"), progress=False)
    assert r.resumed_from == 1  # "auto" resolving to the same precision resumes


def _graphs(n=5, seed=0):
    return [synthetic_graph(120, 400, in_channels=32, seed=seed + i, graph_id=f"g{i}") for i in range(n)]


def test_resume_reproduces_an_uninterrupted_run(tmp_path):
    graphs = _graphs()
    cfg = TrainConfig(epochs=2, seed=4, r_cos=0.5, t_cos=0.3, supervision="disjoint")
    fid = data_fingerprint(graphs)
    m_full, r_full = train_model(
        "gat_model", SMALL, graphs[:4], graphs[4:], cfg, Checkpointing(tmp_path / "a", fid), progress=False
    )
    # interrupted inside epoch 2: only epoch 1's checkpoint exists, then resume
    train_model(
        "gat_model", SMALL, graphs[:4], graphs[4:], cfg, Checkpointing(tmp_path / "b", fid), progress=False, max_steps=6
    )
    assert list(epoch_checkpoints(tmp_path / "b")) == [1]
    m_res, r_res = train_model(
        "gat_model", SMALL, graphs[:4], graphs[4:], cfg, Checkpointing(tmp_path / "b", fid), progress=False
    )
    assert r_res.resumed_from == 1
    assert r_res.history == [{**h, "seconds": r} for h, r in zip(r_full.history, [h["seconds"] for h in r_res.history])]
    assert r_res.val == r_full.val
    for (k, a), b in zip(m_full.state_dict().items(), m_res.state_dict().values()):
        assert torch.equal(a, b), k
    model, ck = load_checkpoint(epoch_checkpoints(tmp_path / "a")[2])
    assert ck["config"]["model"] == asdict(SMALL) and ck["epoch"] == 2 and len(ck["history"]) == 8


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
    graphs = _graphs()[:4]
    cfg = TrainConfig(epochs=1, seed=0, log_aauc=False)
    train_model("gat_model", SMALL, graphs, [], cfg, Checkpointing(tmp_path, "four-graphs"), progress=False)
    # the same data (as its data_id says) diverges in epoch 2: features finite but overflowing the first layer
    for g in graphs:
        g.x = g.x * 3e37
    with pytest.raises(TrainingDiverged, match="epoch_1.pt"):
        train_model(
            "gat_model",
            SMALL,
            graphs,
            [],
            TrainConfig(epochs=2, seed=0, log_aauc=False),
            Checkpointing(tmp_path, "four-graphs"),
            progress=False,
        )
    assert list(epoch_checkpoints(tmp_path)) == [1]


def test_checkpoints_resume_only_on_the_same_non_empty_data_id(tmp_path):
    graphs, other = _graphs()[:3], _graphs(3, seed=20)
    cfg = TrainConfig(epochs=1, seed=0, log_aauc=False, log_eval=False)
    fid = data_fingerprint(graphs)
    assert fid != data_fingerprint(other) and fid == data_fingerprint(_graphs()[:3])
    _, r0 = train_model("gat_model", SMALL, graphs, [], cfg, Checkpointing(tmp_path, fid), progress=False)
    assert r0.resumed_from == 0
    _, r = train_model("gat_model", SMALL, graphs, [], cfg, Checkpointing(tmp_path, fid), progress=False)
    assert r.resumed_from == 1 and r.history == r0.history  # finished run reloaded, nothing trained again
    with pytest.raises(ValueError, match=r"other settings \(data_id\)"):
        train_model(
            "gat_model", SMALL, other, [], cfg, Checkpointing(tmp_path, data_fingerprint(other)), progress=False
        )
    # an empty data id matches nothing, not even a checkpoint also made with an empty id: training starts over
    train_model(
        "gat_model",
        SMALL,
        other,
        [],
        TrainConfig(epochs=2, seed=0, log_aauc=False, log_eval=False),
        Checkpointing(tmp_path / "e"),
        progress=False,
    )
    _, r = train_model("gat_model", SMALL, graphs, [], cfg, Checkpointing(tmp_path / "e"), progress=False)
    assert r.resumed_from == 0 and len(r.history) == 3
    assert list(epoch_checkpoints(tmp_path / "e")) == [1]  # the other run's epoch 2 is gone, not selectable


def test_a_checkpoint_of_other_settings_is_refused_and_one_of_another_layout_moved_aside(tmp_path):
    graphs = _graphs()[:2]
    cfg = TrainConfig(epochs=1, seed=0, log_aauc=False, log_eval=False)
    _, r0 = train_model("gat_model", SMALL, graphs, [], cfg, Checkpointing(tmp_path, "two"), progress=False)
    last = tmp_path / "last.pt"
    ck = torch.load(last, weights_only=True)
    renamed = {"hidden_channels" if k == "gat_hidden" else k: v for k, v in ck["config"]["model"].items()}
    torch.save({**ck, "config": {**ck["config"], "model": renamed}}, last)
    with pytest.raises(ValueError, match=r"other settings \(model.gat_hidden, model.hidden_channels\)"):
        train_model("gat_model", SMALL, graphs, [], cfg, Checkpointing(tmp_path, "two"), progress=False)
    torch.save({k: v for k, v in ck.items() if k != "layout"}, last)  # a checkpoint of another layout
    with pytest.warns(UserWarning, match="moved aside"):
        _, r = train_model("gat_model", SMALL, graphs, [], cfg, Checkpointing(tmp_path, "two"), progress=False)
    untimed = [[{k: v for k, v in h.items() if k != "seconds"} for h in x.history] for x in (r, r0)]
    assert r.resumed_from == 0 and untimed[0] == untimed[1]  # trained again, the same way
    assert (tmp_path / "last.pt.corrupt").is_file() and list(epoch_checkpoints(tmp_path)) == [1]
    epoch_file = epoch_checkpoints(tmp_path)[1]
    ck = torch.load(epoch_file, weights_only=True)
    torch.save({**ck, "config": {**ck["config"], "model": renamed}}, epoch_file)
    with pytest.raises(ValueError, match="holds settings this code does not read"):
        load_checkpoint(epoch_file)


def test_disjoint_supervision_never_scores_its_own_message_passing_edges():
    g = synthetic_graph(150, 600, in_channels=8, seed=2)
    cfg = TrainConfig(supervision="disjoint", disjoint_ratio=0.3, seed=5)
    n_und = g.edge_index.size(1) // 2
    for step in range(3):
        mp, pos = supervision_pairs(g, cfg, 1, step)
        mp_set = _edge_set(mp)
        assert pos.size(1) == round(0.3 * n_und) and mp.size(1) == 2 * (n_und - pos.size(1))
        assert not any((u, v) in mp_set or (v, u) in mp_set for u, v in pos.t().tolist())
        assert _edge_set(pos) <= _edge_set(g.edge_index)
        mp2, pos2 = supervision_pairs(g, cfg, 1, step)
        assert torch.equal(mp, mp2) and torch.equal(pos, pos2)  # seeded per (seed, epoch, step)
    assert not torch.equal(supervision_pairs(g, cfg, 1, 0)[1], supervision_pairs(g, cfg, 1, 1)[1])
    mp, pos = supervision_pairs(g, TrainConfig(), 1, 0)  # the seed's way: positives are the message-passing edges
    assert torch.equal(mp, pos) and torch.equal(mp, g.edge_index)
    with pytest.raises(ValueError, match="supervision"):
        TrainConfig(supervision="both")


def test_experiment_learns_and_reports_every_protocol_and_negative_set(tmp_path):
    graphs = {g.graph_id: g for g in _graphs(6, seed=10)}
    train, val, test = split_graphs(list(graphs), 0, 2, 0.25, seed=0)
    assert (len(train), len(val), len(test)) == (3, 1, 2)
    params = GatParams(
        gat_epochs=2,
        baseline_epochs=2,
        gat_lr=5e-3,
        r_cos=0.5,
        t_cos=0.3,
        gat_hidden=16,
        gat_out=8,
        gat_levels=2,
        gat_dropout=0.1,
    )
    roles = {"train": train, "val": val, "test": test}
    out = run_experiment(
        graphs,
        roles,
        params,
        0,
        32,
        tmp_path,
        scorers=("gat_model", "mlp", "cosine", "common_neighbours"),
        progress=False,
    )
    rows = {(r["model"], r["protocol"], r["supervision"], r["negatives"]): r for r in out["rows"]}
    protocols = ("seed", "within_graph", "leak_free", "pair_split", "new_nodes")
    # under "seed" the positives are message-passing edges (distance 1): a matched negative would be a link, so none
    sets = {p: [n for n in DEFAULT_NEGATIVE_SETS if (p, n) != ("seed", "matched")] for p in protocols}
    assert set(rows) == {
        (m, p, sv, n) for m in ("gat_model", "mlp") for p in protocols for sv in ("mp", "disjoint") for n in sets[p]
    } | {(m, p, "none", n) for m in ("cosine", "common_neighbours") for p in protocols for n in sets[p]}
    heart = rows[("gat_model", "leak_free", "mp", "heart")]
    assert {"mrr", "hits@1", "hits@10", "auc_cn", "auc_no_cn", "mrr_cn", "mrr_no_cn", "pos_no_cn"} <= set(heart)
    assert "hits@50" not in heart and "hits@50" in rows[("gat_model", "leak_free", "mp", "uniform")]
    assert rows[("common_neighbours", "leak_free", "none", "matched")]["auc_no_cn"] is not None
    # seed and within_graph share their training graphs, so one model each; the clean protocols train their own
    assert sorted(out["train"]) == sorted(
        f"{t}/{sv}/{k}"
        for t in ("graphs", "leak_free", "pair_split", "new_nodes")
        for sv in ("mp", "disjoint")
        for k in ("gat_model", "mlp")
    )
    assert rows[("gat_model", "leak_free", "mp", "uniform")]["auc"] > 0.7  # clusters make edges learnable
    assert rows[("cosine", "leak_free", "none", "uniform")]["auc"] > 0.7
    audit = {a["protocol"]: a for a in out["audit"]}
    assert (
        audit["leak_free"]["test_pos_seen"]
        == audit["pair_split"]["test_pos_seen"]
        == audit["new_nodes"]["test_pos_seen"]
        == 0
    )
    table = summary_table(out["rows"])
    assert table.loc[("leak_free", "uniform", "mp", "gat_model"), "n_seeds"] == 1
    # a trained model's rows carry its selected epoch's validation score on that negative set; a heuristic's do not
    res = out["train"]["leak_free/mp/gat_model"]
    chosen = next(v for v in res["val"] if v["epoch"] == res["best_epoch"])
    assert heart["val_auc"] == chosen["auc_heart"] and heart["val_mrr"] == chosen["mrr_heart"]
    assert rows[("gat_model", "leak_free", "mp", "uniform")]["val_auc"] == chosen["auc"]
    assert "val_auc" not in rows[("cosine", "leak_free", "none", "uniform")]
    with pytest.raises(ValueError, match="exceed"):
        split_graphs(list(graphs), 10, 2, 0.1, seed=0)
    with pytest.raises(ValueError, match="scorer 'leaky' does not exist"):
        run_experiment(graphs, roles, params, 0, 32, None, scorers=("leaky",))


def _choice_rows(with_val: bool = True) -> pd.DataFrame:
    """Two seeds of one protocol × negative set: on test, disjoint supervision looks better; on validation, mp is."""
    rows = []
    for seed in (0, 1):
        rows += [
            {
                "seed": seed,
                "protocol": "leak_free",
                "negatives": "uniform",
                "model": "gat_model",
                "supervision": "mp",
                "auc": 0.70,
                **({"val_auc": 0.90} if with_val else {}),
            },
            {
                "seed": seed,
                "protocol": "leak_free",
                "negatives": "uniform",
                "model": "gat_model",
                "supervision": "disjoint",
                "auc": 0.80,
                **({"val_auc": 0.85} if with_val else {}),
            },
            {
                "seed": seed,
                "protocol": "leak_free",
                "negatives": "uniform",
                "model": "cosine",
                "supervision": "none",
                "auc": 0.75,
            },
        ]
    return pd.DataFrame(rows)


def test_the_best_model_is_chosen_on_validation_and_falls_back_to_test_only_without_it():
    rows = _choice_rows().assign(candidate=lambda d: d["model"] + " · " + d["supervision"])
    cands = ["gat_model · mp", "gat_model · disjoint"]
    assert choose_on_validation(rows, cands, key="candidate") == (
        "gat_model · mp",
        "validation",
        "gat_model · disjoint",
    )
    old = _choice_rows(with_val=False).assign(candidate=lambda d: d["model"] + " · " + d["supervision"])
    assert choose_on_validation(old, cands, key="candidate") == ("gat_model · disjoint", "test", "gat_model · disjoint")


def test_notebook_03_verdict_takes_the_supervision_validation_prefers():
    table, sentences = gat_verdicts(_choice_rows(), HEURISTICS)
    row = table.iloc[0]
    assert row["best GatModel"] == "mp: 0.700 ± 0.000" and row["supervision chosen on"] == "validation"
    assert row["gap"] == pytest.approx(-0.05)
    assert sentences == [
        "leak_free / uniform negatives: GatModel (mp supervision, chosen on validation) 0.700 AUC trails "
        "the best heuristic, cosine at 0.750, by 0.050."
    ]


def test_the_batch_summary_chooses_the_best_model_on_validation():
    from lib.run.summary import best_vs_heuristic

    mean = _choice_rows().drop(columns="seed").groupby(["protocol", "negatives", "model", "supervision"]).mean()
    out = best_vs_heuristic({"run": {"train_gat": {"mean": mean.reset_index().to_dict("records")}}}).iloc[0]
    assert (out["best_model"], out["model_chosen_on"], out["best_heuristic"]) == (
        "gat_model (mp)",
        "validation",
        "cosine",
    )
    assert out["model_minus_heuristic"] == pytest.approx(-0.05)


def test_notebook_03_parameters_are_what_the_model_trainer_and_protocols_read():
    from lib.common.params import ParamError

    p = GatParams(first_seed=5, n_seeds=2, gat_epochs=3, baseline_epochs=1, gat_hidden=32, holdout_fraction=0.2)
    assert p.seeds == [5, 6] and p.train_config(6).seed == 6 and p.train_config(5).epochs == 3
    assert (
        p.train_config(5, "mlp", "disjoint").epochs == 1
        and p.train_config(5, "mlp", "disjoint").supervision == "disjoint"
    )
    assert p.model_config(384).gat_hidden == 32 and p.model_config(384).in_channels == 384
    assert p.protocol_settings().holdout_fraction == 0.2
    assert p.protocol_settings().negatives_per_positive == p.negatives_per_positive
    # every setting the model, the trainer and the protocols share with the notebook arrives under its notebook name
    for target in (p.model_config(384), p.train_config(5), p.protocol_settings()):
        shared = {f for f in asdict(target) if f in GatParams.names() and f != "seed"}
        same = lambda a, b: tuple(a) == tuple(b) if isinstance(b, list) else a == b  # noqa: E731 (list -> tuple)
        assert shared and all(same(getattr(target, f), getattr(p, f)) for f in shared), type(target)
    with pytest.raises(ParamError, match="protocols"):
        GatParams(protocols=["leaky"])
