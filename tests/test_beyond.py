"""Notebook 03b's orchestration: the sweep reads validation graphs only, and the gap table's margins by hand."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from lib.linkpred import beyond
from lib.linkpred.config import TrainConfig
from lib.linkpred.data import synthetic_graph
from lib.linkpred.evaluate import evaluate_heuristic
from lib.linkpred.heuristics import HEURISTICS
from lib.linkpred.model import ModelConfig
from lib.linkpred.protocols import make_protocol
from lib.metrics.paired import verdict
from lib.metrics.selection import goal_verdict

SMALL = ModelConfig(in_channels=16, gat_hidden=8, gat_out=4, gat_levels=1, gat_heads=1, gat_dropout=0.1)


def test_sweep_picks_a_grid_point_from_validation_scores_only(tmp_path):
    graphs = {f"g{i}": synthetic_graph(80, 240, in_channels=16, seed=i, graph_id=f"g{i}") for i in range(5)}
    sp = make_protocol(graphs, {"train": ["g0", "g1"], "val": ["g2"], "test": ["g3", "g4"]}, "leak_free", seed=0)
    cfg = TrainConfig(
        epochs=2,
        seed=0,
        supervision="disjoint",
        select_metric="mrr_both",
        patience=1,
        negative_mix={"dist2": 0.5},
        steps_per_graph=2,
        log_aauc=False,
        log_eval=False,
    )
    grid = beyond.sweep_grid([0.5, 0.1], [1], [0.01])
    rows = beyond.sweep(sp, "ncn_feat", SMALL, cfg, grid, tmp_path, progress=False)
    assert len(rows) == 2 and {
        "val_mrr_both",
        "val_auc_both",
        "val_mrr_dist2",
        "val_mrr_heart",
        "val_auc_matched",
        "val_mrr_all",
    } <= set(rows.columns)
    best = beyond.best_point(rows, "mrr_both")
    assert best in grid and best == grid[int(rows["val_mrr_both"].idxmax())]
    again = beyond.sweep(
        sp, "ncn_feat", SMALL, cfg, grid, tmp_path, progress=False
    )  # reloaded from finished checkpoints
    assert (rows["seconds"] > 0).all() and again["seconds"].tolist() == rows["seconds"].tolist()
    sp.test = []  # the sweep must not need the test tasks at all
    assert beyond.sweep(sp, "dot", SMALL, cfg, grid[:1], tmp_path, progress=False)["val_auc"].notna().all()
    with pytest.raises(ValueError, match="model variant 'bilinear'"):
        beyond.check_variants(["bilinear"])


def test_gap_table_margins_against_the_stronger_heuristic_scorer():
    rows = []
    for seed, (model_auc, stack_auc, cos_auc) in enumerate([(0.90, 0.85, 0.80), (0.92, 0.86, 0.84)]):
        for name, auc in (("gat_ncn", model_auc), ("heuristic_stack", stack_auc), ("cosine", cos_auc)):
            rows.append(
                {
                    "seed": seed,
                    "protocol": "leak_free",
                    "negatives": "uniform",
                    "model": name,
                    "auc": auc,
                    "mrr": auc / 10,
                }
            )
        for name, auc in (("gat_ncn", 0.60), ("heuristic_stack", 0.55), ("cosine", 0.65 + seed * 0.01)):
            rows.append(
                {
                    "seed": seed,
                    "protocol": "leak_free",
                    "negatives": "dist2",
                    "model": name,
                    "auc": auc,
                    "mrr": auc / 10,
                }
            )
    g = beyond.gap_table(pd.DataFrame(rows)).set_index("negatives")
    assert g.loc["uniform", "bar"] == "heuristic_stack" and g.loc["dist2", "bar"] == "cosine"
    assert g.loc["uniform", "auc_margin"] == pytest.approx(((0.90 - 0.85) + (0.92 - 0.86)) / 2)
    assert g.loc["dist2", "auc_margin"] == pytest.approx(((0.60 - 0.65) + (0.60 - 0.66)) / 2)


def test_variant_training_overrides_apply_to_sweep_and_run_and_pick_their_own_metric():
    cfg = TrainConfig(negative_mix={"dist2": 0.5}, select_metric="mrr_both", lr=0.01)
    u = beyond.variant_train_config("ncn_stack_uniform", cfg, {"lr": 0.003})
    assert (u.negative_mix, u.select_metric, u.lr) == ({}, "mrr", 0.003)
    s = beyond.variant_train_config("ncn_stack", cfg)
    assert (s.negative_mix, s.select_metric, s.lr) == ({"dist2": 0.5}, "mrr_both", 0.01)
    assert beyond.variant_train_config("ncn_stack_matched", cfg).negative_mix == {"matched": 0.5}
    d = beyond.variant_train_config("mplp_stack_dist2", cfg)  # a valid TrainConfig: the mix and metric pass its checks
    assert (d.negative_mix, d.select_metric) == ({"dist2": 1.0}, "mrr_dist2")
    assert beyond.check_variants(["mplp_stack_dist2"]) == ["mplp_stack_dist2"]
    assert beyond.variant_select_metric("ncn_stack_uniform", "mrr_both") == "mrr"
    assert beyond.variant_select_metric("ncn_feat", "mrr_both") == "mrr_both"


def test_gap_table_counts_the_rescaled_stack_as_a_bar_where_it_ran():
    rows = []
    for seed in range(2):
        for name, auc in (
            ("gat_ncn_stack_rescaled", 0.93),
            ("heuristic_stack", 0.90),
            ("heuristic_stack_rescaled", 0.92 + seed * 0.002),
            ("cosine", 0.85),
        ):
            rows.append(
                {
                    "seed": seed,
                    "protocol": "leak_free",
                    "negatives": "uniform",
                    "model": name,
                    "auc": auc,
                    "mrr": auc / 10,
                }
            )
    g = beyond.gap_table(pd.DataFrame(rows)).iloc[0]
    assert g["bar"] == "heuristic_stack_rescaled" and g["best graph model"] == "gat_ncn_stack_rescaled"
    assert g["auc_margin"] == pytest.approx(0.93 - 0.921)
    assert g["AUC heuristic_stack"] == "0.900 ± 0.000" and g["AUC heuristic_stack_rescaled"] == "0.921 ± 0.001"
    assert beyond.rescaled(["dot", "ncn_stack_uniform_rescaled"]) and not beyond.rescaled(["ncn_stack"])


def test_rescaled_variant_starts_from_the_rescaled_stack_of_its_training_graphs(tmp_path):
    from lib.linkpred.heuristics import HeuristicStack, reference_degree

    graphs = {f"g{i}": synthetic_graph(80, 240 + 60 * i, in_channels=16, seed=i, graph_id=f"g{i}") for i in range(5)}
    sp = make_protocol(graphs, {"train": ["g0", "g1"], "val": ["g2"], "test": ["g3", "g4"]}, "leak_free", seed=0)
    cfg = TrainConfig(epochs=1, seed=0, supervision="disjoint", log_aauc=False, log_eval=False)
    mean, coef = beyond.evaluate_stack(sp, cfg, rescale=True)
    plain, _ = beyond.evaluate_stack(sp, cfg)
    assert set(mean) == {"uniform", "dist2", "heart", "matched"} and mean != plain
    assert len(coef) == len(SMALL.stack_features)  # the default list
    mean, res = beyond.run_variant(sp, "ncn_stack_uniform_rescaled", SMALL, cfg, None, tmp_path)
    assert 0 <= mean["uniform"]["auc"] <= 1
    from lib.linkpred.checkpoint import load_checkpoint

    model, _ = load_checkpoint(tmp_path / res["checkpoint"])
    want = reference_degree(sp.train, cfg.disjoint_ratio)
    assert float(model.decoder.ref_degree) == pytest.approx(want, rel=1e-6)
    assert HeuristicStack(ratio=cfg.disjoint_ratio, seed=0, rescale=True).fit(sp.train).ref_degree == pytest.approx(
        want
    )


def test_gap_table_picks_the_best_graph_model_on_validation_not_on_test():
    rows = []
    for seed in range(2):
        for name, auc, val in (
            ("gat_a", 0.95, 0.80),
            ("gat_b", 0.93, 0.85),
            ("gat_c", 0.99, None),
            ("heuristic_stack", 0.90, None),
            ("cosine", 0.85, None),
        ):
            rows.append(
                {
                    "seed": seed,
                    "protocol": "leak_free",
                    "negatives": "uniform",
                    "model": name,
                    "auc": auc,
                    "mrr": auc / 10,
                    "val_auc": val,
                    "val_mrr": None,
                }
            )
    g = beyond.gap_table(pd.DataFrame(rows)).iloc[0]
    assert (g["best graph model"], g["chosen on"], g["best on test"]) == ("gat_b", "validation", "gat_c")
    assert g["auc_margin"] == pytest.approx(0.93 - 0.90)
    res = {
        "best_epoch": 2,
        "val": [
            {"epoch": 1, "auc": 0.5, "mrr": 0.1},
            {"epoch": 2, "auc": 0.7, "mrr": 0.2, "auc_dist2": 0.6, "mrr_dist2": 0.3},
        ],
    }
    assert beyond.validation_of(res, "uniform") == {"val_auc": 0.7, "val_mrr": 0.2}
    assert beyond.validation_of(res, "dist2") == {"val_auc": 0.6, "val_mrr": 0.3}
    assert beyond.validation_of({**res, "best_epoch": 1}, "dist2") == {"val_auc": None, "val_mrr": None}


def test_structure_profile_counts_common_neighbours_by_hand():
    import torch
    from torch_geometric.data import Data
    from torch_geometric.utils import to_undirected

    from lib.linkpred.negative_sets.base import Draw
    from lib.linkpred.protocols import EvalTask

    # path 0-1-2 plus 2-3; held out: (0, 2) has one common neighbour (1), (0, 3) none
    mp = to_undirected(torch.tensor([[0, 1, 2], [1, 2, 3]]), num_nodes=5)
    data = Data(x=torch.randn(5, 3), num_nodes=5)
    t = EvalTask(
        "g",
        "leak_free",
        data,
        mp,
        pos=torch.tensor([[0, 0], [2, 3]]),
        negative_sets={"uniform": Draw(torch.tensor([[0, 4], [4, 1]])), "dist2": Draw(torch.tensor([[1], [3]]))},
    )
    p = beyond.structure_profile([t])
    assert p["positives"] == 2 and p["tasks"] == 1
    assert p["pos_no_cn"] == 0.5 and p["pos_cn"] == 0.5
    assert p["dist2_no_cn"] == 0.0  # (1, 3) share node 2
    assert p["uniform_no_cn"] == 1.0
    assert p["mp_degree"] == pytest.approx(6 / 5)
    # the shortcut ranks (0, 3) above the hard negative and ties (0, 2) with it: AUC (1 + 0.5) / 2, MRR (1 + 1/2) / 2
    assert p["shortcut_dist2_auc"] == pytest.approx(0.75) and p["shortcut_dist2_mrr"] == pytest.approx(0.75)


def test_shortcut_is_reported_beside_the_goal_never_as_a_graph_model_or_bar():
    rows = []
    for seed in (0, 1):
        for name, auc, mrr in (
            ("gat_ncn", 0.70, 0.30),
            ("heuristic_stack", 0.60, 0.05),
            ("cosine", 0.65, 0.06),
            (beyond.SHORTCUT, 0.75 + seed * 0.01, 0.50),
        ):
            rows.append(
                {"seed": seed, "protocol": "leak_free", "negatives": "dist2", "model": name, "auc": auc, "mrr": mrr}
            )
    g = beyond.gap_table(pd.DataFrame(rows)).iloc[0]
    assert g["best graph model"] == "gat_ncn" and g["bar"] == "cosine"  # the shortcut is neither
    assert g["auc_margin"] == pytest.approx(0.05)
    assert g["auc_margin_shortcut"] == pytest.approx(0.70 - 0.755) and g["mrr_margin_shortcut"] == pytest.approx(-0.2)
    assert g[f"AUC {beyond.SHORTCUT}"] == "0.755 ± 0.007"


def test_shortcut_scores_one_exactly_for_pairs_without_a_common_neighbour():
    import torch
    from torch_geometric.data import Data
    from torch_geometric.utils import to_undirected

    from lib.linkpred.negative_sets.base import Draw
    from lib.linkpred.protocols import EvalTask

    mp = to_undirected(torch.tensor([[0, 1, 2], [1, 2, 3]]), num_nodes=5)
    t = EvalTask(
        "g",
        "leak_free",
        Data(x=torch.randn(5, 3), num_nodes=5),
        mp,
        pos=torch.tensor([[0], [2]]),
        negative_sets={"uniform": Draw(torch.tensor([[0], [4]])), "dist2": Draw(torch.tensor([[1], [3]]))},
    )
    assert beyond.shortcut_scores(t, torch.tensor([[0, 0, 1, 0], [2, 3, 3, 4]])).tolist() == [0.0, 1.0, 0.0, 1.0]


def test_gap_table_leaves_out_a_negative_set_the_tasks_do_not_hold():
    import numpy as np
    import pandas as pd

    from lib.linkpred.beyond import gap_table

    rows = [
        {
            "seed": s,
            "protocol": "new_nodes",
            "negatives": n,
            "model": m,
            "auc": a,
            "mrr": a / 2,
            "val_auc": (a if m.startswith("gat_") else np.nan),
        }
        for s in (0, 1)
        for m, base in (("gat_dot", 0.8), ("cosine", 0.7), ("heuristic_stack", 0.75))
        for n, a in (("uniform", base + 0.01 * s), ("dist2", np.nan))
    ]
    g = gap_table(pd.DataFrame(rows))
    assert list(zip(g["protocol"], g["negatives"])) == [("new_nodes", "uniform")]
    assert g["best graph model"].iloc[0] == "gat_dot" and g["bar"].iloc[0] == "heuristic_stack"


def _interval(name: str, mean: float, half: float) -> dict:
    return {name: mean, f"{name}_low": mean - half, f"{name}_high": mean + half}


def test_goal_needs_the_shortcut_beaten_too_except_on_uniform_negatives_each_part_judged_on_its_interval():
    row = {
        "protocol": "leak_free",
        "negatives": "matched",
        "best graph model": "gat_ncn_stack_matched",
        "chosen on": "validation",
        "best on test": "gat_ncn_stack_matched",
        "bar": "cosine",
        "seeds": 3,
        **_interval("auc_margin", 0.05, 0.01),
        **_interval("mrr_margin", 0.02, 0.01),
        **_interval("auc_margin_shortcut", 0.3, 0.1),
        **_interval("mrr_margin_shortcut", 0.4, 0.1),
        **_interval("auc_cn_margin", 0.06, 0.02),
        **_interval("auc_no_cn_margin", -0.01, 0.02),
    }
    assert goal_verdict(row) == "met"
    assert goal_verdict({**row, **_interval("auc_margin_shortcut", 0.01, 0.005)}) == "missed"  # the bar beaten only
    assert goal_verdict({**row, **_interval("mrr_margin", -0.01, 0.005)}) == "missed"
    assert goal_verdict({**row, **_interval("auc_margin", 0.025, 0.01)}) == "undecided"  # the interval holds +0.02
    assert goal_verdict({**row, **_interval("auc_margin", 0.05, float("nan"))}) == "undecided"  # one seed
    assert goal_verdict({**row, "negatives": "uniform", **_interval("auc_margin_shortcut", -0.5, 0.01)}) == "met"
    assert goal_verdict({k: v for k, v in row.items() if "shortcut" not in k}) == "met"  # rows without the shortcut
    assert goal_verdict({k: v for k, v in row.items() if not k.endswith(("_low", "_high"))}) == "undecided"
    (line,) = beyond.gap_sentences(pd.DataFrame([{**row, **_interval("auc_margin_shortcut", 0.01, 0.005)}]))
    assert "3 seeds: goal missed" in line and "AUC over no_cn_shortcut missed: +0.010 [+0.005, +0.015] < +0.020" in line
    assert "AUC over cosine met: +0.050 [+0.040, +0.060] > +0.020" in line
    assert "cn +0.060 [+0.040, +0.080], no_cn -0.010 [-0.030, +0.010]" in line


def test_the_gap_table_judges_each_cell_on_the_paired_per_seed_margins():
    rows = []
    for s, (model_auc, stack_auc) in enumerate([(0.90, 0.85), (0.92, 0.86), (0.91, 0.88)]):
        for model, auc, mrr in (("gat_dot", model_auc, 0.5), ("heuristic_stack", stack_auc, 0.3), ("cosine", 0.7, 0.2)):
            rows.append(
                {
                    "protocol": "leak_free",
                    "negatives": "uniform",
                    "seed": s,
                    "model": model,
                    "auc": auc,
                    "mrr": mrr + 0.01 * s,
                    "val_auc": auc if model == "gat_dot" else np.nan,
                }
            )
    (g,) = beyond.gap_table(pd.DataFrame(rows)).to_dict("records")
    d = np.array([0.05, 0.06, 0.03])  # per-seed AUC margins over the stack
    half = 4.302653 * d.std(ddof=1) / np.sqrt(3)  # t(0.975, 2)
    assert g["seeds"] == 3 and g["auc_margin"] == pytest.approx(d.mean())
    assert (g["auc_margin_low"], g["auc_margin_high"]) == pytest.approx((d.mean() - half, d.mean() + half))
    assert g["goal"] == verdict(g["auc_margin_low"], g["auc_margin_high"], 0.02) == "undecided"


def test_run_all_scores_bar_shortcut_and_variants_on_the_same_split_and_keeps_stage3_rows(tmp_path):
    from lib.linkpred import beyond_stage
    from lib.linkpred.config import BeyondParams

    graphs = {f"g{i}": synthetic_graph(60, 180, in_channels=16, seed=i, graph_id=f"g{i}") for i in range(5)}
    sp = make_protocol(graphs, {"train": ["g0", "g1"], "val": ["g2"], "test": ["g3", "g4"]}, "leak_free", seed=0)
    params = BeyondParams(
        beyond_epochs=1,
        beyond_patience=0,
        beyond_select_metric="auc",
        decoder_hidden=8,
        n_seeds=1,
        gat_hidden=8,
        gat_out=4,
        gat_heads=1,
    )  # notebook 03's, as the runner hands them on
    from lib.linkpred.train import checkpoint_config

    stored = checkpoint_config("gat_model", SMALL, TrainConfig(epochs=2, lr=0.01), "d")
    model_cfg, cfgs = beyond_stage.configs(stored, params)
    assert (
        model_cfg.decoder_hidden == 8
        and model_cfg.gat_hidden == SMALL.gat_hidden
        and cfgs[0].lr == 0.01
        and cfgs[0].epochs == 1
        and cfgs[0].seed == 0
    )
    assert cfgs[0].supervision == "disjoint" and not cfgs[0].log_aauc
    rows, coef, log = beyond_stage.run_all(
        {(0, "leak_free"): sp}, ["dot"], model_cfg, cfgs, {"dot": None}, tmp_path, progress=False
    )
    df = pd.DataFrame(rows)
    assert set(df["model"]) == {"heuristic_stack", beyond.SHORTCUT, "gat_dot", *HEURISTICS} and len(coef) == 1
    cn = df[df.model == "common_neighbours"].set_index("negatives")["auc"]
    want = evaluate_heuristic("common_neighbours", sp.test, cfgs[0])["mean"]
    assert cn.to_dict() == {n: m["auc"] for n, m in want.items() if m}  # the rows notebook 03 computes, here
    assert log == {"0/leak_free/dot": {"best_epoch": 1, "epochs_run": 1}}
    assert df[df.model == "gat_dot"]["val_auc"].notna().all() and df[df.model != "gat_dot"]["val_auc"].isna().all()
    rows03 = pd.DataFrame(
        [
            {
                "seed": 0,
                "protocol": "leak_free",
                "negatives": "uniform",
                "model": "gat_model",
                "supervision": "mp",
                "auc": 0.6,
            },
            {
                "seed": 0,
                "protocol": "leak_free",
                "negatives": "uniform",
                "model": "gat_model",
                "supervision": "disjoint",
                "auc": 0.7,
            },
            {
                "seed": 1,
                "protocol": "leak_free",
                "negatives": "uniform",
                "model": "cosine",
                "supervision": "none",
                "auc": 0.8,
            },
            {
                "seed": 0,
                "protocol": "leak_free",
                "negatives": "uniform",
                "model": "cosine",
                "supervision": "none",
                "auc": 0.9,
            },
        ]
    )
    both = beyond_stage.with_stage3_rows(rows03, rows, ["leak_free"], [0])
    assert both["model"].iloc[0] == "gat_model (seed)" and both["auc"].iloc[0] == 0.6  # the seed's way, seed 0 only
    assert len(both) == 1 + len(rows) and "supervision" not in both.columns  # the heuristics: notebook 03b's own
    rows, _, _ = beyond_stage.run_all(
        {(0, "leak_free"): sp}, [], model_cfg, cfgs, {}, tmp_path, progress=False, heuristics=["resource_allocation"]
    )
    assert set(pd.DataFrame(rows)["model"]) == {"heuristic_stack", beyond.SHORTCUT, "resource_allocation"}
    with pytest.raises(ValueError, match="heuristic 'katz' is unknown"):
        beyond_stage.run_all({(0, "leak_free"): sp}, [], model_cfg, cfgs, {}, tmp_path, heuristics=["katz"])


def _recorded_split():
    graphs = {f"g{i}": synthetic_graph(60, 180, in_channels=16, seed=i, graph_id=f"g{i}") for i in range(5)}
    sp = make_protocol(graphs, {"train": ["g0", "g1"], "val": ["g2"], "test": ["g3", "g4"]}, "leak_free", seed=0)
    cfg = TrainConfig(epochs=2, seed=0, supervision="disjoint", log_aauc=False, log_eval=False)
    return sp, cfg


def test_a_finished_training_is_read_back_from_its_record_without_its_checkpoints(tmp_path, monkeypatch):
    sp, cfg = _recorded_split()
    point = {"dropout": 0.1, "num_levels": 1, "lr": 0.01}
    mean, res = beyond.run_variant(sp, "ncn_feat", SMALL, cfg, point, tmp_path / "run")
    rows = beyond.sweep(sp, "ncn_feat", SMALL, cfg, [point], tmp_path / "sweep", progress=False)
    assert (tmp_path / "run" / beyond.RECORD).is_file() and res["seconds"] > 0
    assert rows.loc[0, "best_epoch"] == res["best_epoch"]  # the same training, once in the sweep
    for f in tmp_path.rglob("*.pt"):  # another machine: the records travel, the epoch files do not
        f.unlink()

    def no_training(*a, **k):
        raise AssertionError("retrained although its record holds it")

    monkeypatch.setattr(beyond, "train_model", no_training)
    again, res_again = beyond.run_variant(sp, "ncn_feat", SMALL, cfg, point, tmp_path / "run")
    assert again == mean and res_again == res  # the same floats, bit for bit
    assert beyond.sweep(sp, "ncn_feat", SMALL, cfg, [point], tmp_path / "sweep", progress=False).equals(rows)
    with pytest.raises(AssertionError, match="retrained"):  # a record holds one training: another point trains
        beyond.run_variant(sp, "ncn_feat", SMALL, cfg, {**point, "dropout": 0.2}, tmp_path / "run")


def test_the_chosen_point_on_the_sweeps_split_resumes_the_sweep_run_instead_of_training_it_again(tmp_path):
    sp, cfg = _recorded_split()
    point = {"dropout": 0.1, "num_levels": 1, "lr": 0.01}
    split_dir = tmp_path / "seed0-leak_free"  # as notebook 03b lays out the sweep and the units of its split
    rows = beyond.sweep(sp, "ncn_feat", SMALL, cfg, [point], split_dir, progress=False)
    sweep_run = split_dir / "sweep-ncn_feat-0"
    mean, res = beyond.run_variant(sp, "ncn_feat", SMALL, cfg, point, split_dir / "ncn_feat")
    assert (split_dir / "ncn_feat" / "last.pt").stat().st_ino == (sweep_run / "last.pt").stat().st_ino
    assert res["seconds"] == rows.loc[0, "seconds"]  # the sweep's logged steps: none were run again
    alone, res_alone = beyond.run_variant(sp, "ncn_feat", SMALL, cfg, point, tmp_path / "alone")  # trained here
    assert alone == mean and res_alone["best_epoch"] == res["best_epoch"] and res_alone["val"] == res["val"]
    beyond.run_variant(sp, "ncn_feat", SMALL, cfg, {**point, "dropout": 0.2}, split_dir / "other")  # another training
    assert (split_dir / "other" / "last.pt").stat().st_ino != (sweep_run / "last.pt").stat().st_ino


def test_a_record_scored_on_other_test_tasks_is_scored_again(tmp_path):
    sp, cfg = _recorded_split()
    mean, _ = beyond.run_variant(sp, "dot", SMALL, cfg, None, tmp_path)
    fewer = replace(sp, test=sp.test[:1])  # the same training, one test graph instead of two
    mean_fewer, _ = beyond.run_variant(fewer, "dot", SMALL, cfg, None, tmp_path)
    assert mean_fewer != mean
    assert beyond.run_variant(sp, "dot", SMALL, cfg, None, tmp_path)[0] == mean
