import itertools
import json
import math

import numpy as np
import pytest
import torch

from lib.aauc import plots as aauc_plots
from lib.aauc import stage
from lib.aauc.stage import load_run_models
from lib.common.seeding import derive_seed
from lib.metrics.aauc import (
    aauc,
    aauc_by_group,
    aauc_inside_across,
    aauc_on_pairs,
    sample_nodes,
    sampled_pairs,
    top_new_links,
)

# Four nodes: 0 and 1 point the same way (cos 1), 2 is close to them (cos 0.8), 3 is orthogonal.
X = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
# Embeddings chosen so the logits z_i·z_j of the 6 pairs are known.
Z = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])


def test_hand_computed_without_self_pairs():
    # pairs (i<j): cos > 0.7 -> positives (0,1) cos 1, (0,2) 0.8, (1,2) 0.8; negatives (0,3) 0, (1,3) 0, (2,3) 0.6
    # logits: (0,1)=1, (0,2)=0, (1,2)=0 | (0,3)=.5, (1,3)=.5, (2,3)=.5
    # positive>negative: (0,1) beats all 3; (0,2),(1,2) beat none -> AUC = 3/9
    r = aauc(Z, X, r_cos=1.0, t_cos=0.7, seed=0)
    assert r.defined and r.n_nodes == 4 and (r.n_pos, r.n_neg) == (3, 3)
    assert r.value == pytest.approx(3 / 9)


def test_hand_computed_with_self_pairs_seed_variant():
    # Full 4x4 matrix: each off-diagonal pair twice (6 pos, 6 neg) plus 4 self-pairs, all positive (cos 1),
    # with logits |z_i|^2 = 1, 1, 1, 0.5.  Positives: 2×{1, 0, 0} + {1, 1, 1, 0.5}; negatives: 6 × 0.5.
    # wins against 0.5: logit 1 -> 2 + 3 = 5 positives win, 0.5 -> 1 tie, 0 -> 4 lose
    # AUC = (5·6 + 0.5·1·6) / (10·6) = 33/60
    r = aauc(Z, X, r_cos=1.0, t_cos=0.7, seed=0, include_self=True)
    assert (r.n_pos, r.n_neg) == (10, 6)
    assert r.value == pytest.approx(33 / 60)


def test_deterministic_under_seed_and_depends_on_it():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(500, 8, generator=g)
    z = x[:, :4] + 0.3 * torch.randn(500, 4, generator=g)
    a, b = aauc(z, x, 0.2, 0.3, seed=5), aauc(z, x, 0.2, 0.3, seed=5)
    c = aauc(z, x, 0.2, 0.3, seed=6)
    assert a == b
    assert a.value != c.value
    assert torch.equal(sample_nodes(500, 0.2, 5), sample_nodes(500, 0.2, 5))
    assert sample_nodes(500, 0.2, 5).numel() == 100


def test_undefined_cases_are_nan_with_reason():
    r = aauc(Z, X, r_cos=1.0, t_cos=1.0, seed=0)  # no pair has cosine > 1
    assert not r.defined and math.isnan(r.value) and "no positive" in r.reason
    r = aauc(Z, X, r_cos=1.0, t_cos=-1.0, seed=0)  # every pair is positive
    assert not r.defined and "no negative" in r.reason
    r = aauc(Z, X, r_cos=0.25, seed=0)  # one node sampled
    assert not r.defined and "1 node" in r.reason
    r = aauc(Z * float("nan"), X, r_cos=1.0, seed=0)
    assert not r.defined and "NaN" in r.reason
    assert r.to_dict()["value"] is None


@pytest.mark.parametrize("include_self", [False, True])
def test_chunked_equals_unchunked(include_self):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(900, 6, generator=g)
    z = torch.round(x[:, :3] * 2) / 2  # coarse embeddings -> many tied scores
    full = aauc(z, x, 1.0, 0.5, seed=0, include_self=include_self)
    chunked = aauc(z, x, 1.0, 0.5, seed=0, include_self=include_self, chunk_size=97, exact_limit=0)
    assert full.defined
    assert chunked.value == pytest.approx(full.value, abs=1e-12)
    assert (chunked.n_pos, chunked.n_neg) == (full.n_pos, full.n_neg)


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="r_cos"):
        aauc(Z, X, r_cos=0.0)
    with pytest.raises(ValueError, match="r_cos"):
        aauc(Z, X, r_cos=1.5)
    with pytest.raises(ValueError, match="t_cos"):
        aauc(Z, X, t_cos=2.0)
    with pytest.raises(ValueError, match="same N"):
        aauc(Z[:3], X)


# ---------------------------------------------------------------- stage-4 analysis helpers


def test_aauc_on_pairs_hand_computed_and_equal_to_aauc_on_all_pairs():
    # (0,1) positive, logit 1; (0,2) positive, logit 0; (0,3) negative, logit 0.5 -> 1 of 2 positives wins: 1/2
    r = aauc_on_pairs(Z, X, torch.tensor([[0, 0, 0], [1, 2, 3]]), t_cos=0.7)
    assert (r.n_pos, r.n_neg, r.n_nodes) == (1 + 1, 1, 4) and r.value == pytest.approx(1 / 2)
    every = aauc_on_pairs(Z, X, sampled_pairs(4, 1.0, 0), t_cos=0.7, chunk_size=2)
    assert every == aauc(Z, X, r_cos=1.0, t_cos=0.7, seed=0)
    assert not aauc_on_pairs(Z, X, torch.empty((2, 0), dtype=torch.long)).defined
    with pytest.raises(ValueError, match="t_cos"):
        aauc_on_pairs(Z, X, torch.tensor([[0], [1]]), t_cos=1.5)


def test_aauc_by_group_hand_computed():
    # group a = nodes {0, 1, 3}: (0,1) positive logit 1 beats (0,3), (1,3) negatives logit 0.5 -> 1.0
    out = aauc_by_group(Z, X, ["a", "a", "b", "a"], r_cos=1.0, t_cos=0.7, seed=0)
    assert set(out) == {"a", "b"}
    assert out["a"].value == 1.0 and (out["a"].n_pos, out["a"].n_neg) == (1, 2)
    assert not out["b"].defined and "no pairs" in out["b"].reason  # a one-node group has no pair
    assert set(aauc_by_group(Z, X, ["a", "a", None, "a"], r_cos=1.0)) == {"a"}
    with pytest.raises(ValueError, match="one label per node"):
        aauc_by_group(Z, X, ["a"], r_cos=1.0)


def test_aauc_inside_across_hand_computed():
    # branches {0,1} and {2,3}: inside (0,1) pos logit 1 vs (2,3) neg 0.5 -> 1.0;
    # across (0,2), (1,2) pos logit 0 vs (0,3), (1,3) neg 0.5 -> 0.0
    out = aauc_inside_across(Z, X, [1, 1, 2, 2], r_cos=1.0, t_cos=0.7, seed=0)
    assert out["inside"].value == 1.0 and (out["inside"].n_pos, out["inside"].n_neg) == (1, 1)
    assert out["across"].value == 0.0 and (out["across"].n_pos, out["across"].n_neg) == (2, 2)
    # the root (branch 0) is in no pair; all other nodes in one branch leave no across pair
    out = aauc_inside_across(Z, X, [0, 1, 1, 1], r_cos=1.0, t_cos=0.7, seed=0)
    assert out["inside"].value == 0.0 and (out["inside"].n_pos, out["inside"].n_neg) == (1, 2)
    assert not out["across"].defined


def _brute_top(z, edges, k):
    e = {(min(u, v), max(u, v)) for u, v in edges}
    cand = [((z[i] @ z[j]).item(), i, j) for i, j in itertools.combinations(range(z.size(0)), 2) if (i, j) not in e]
    cand.sort(key=lambda t: -t[0])
    return cand[:k]


@pytest.mark.parametrize("k", [1, 10, 500])
def test_top_new_links_matches_brute_force(k):
    g = torch.Generator().manual_seed(3)
    z = torch.randn(30, 5, generator=g, dtype=torch.float64)
    edges = torch.randint(0, 30, (2, 200), generator=g)
    edges = edges[:, edges[0] != edges[1]]
    pairs, vals = top_new_links(z, edges, k, chunk_size=7)  # one direction only: both must still be masked
    want = _brute_top(z, edges.T.tolist(), k)
    assert pairs.size(1) == len(want) == min(k, pairs.size(1))
    assert [(i, j) for _, i, j in want] == list(map(tuple, pairs.T.tolist()))
    assert vals.tolist() == pytest.approx([s for s, _, _ in want])
    e = {(min(u, v), max(u, v)) for u, v in edges.T.tolist()}
    assert all(i < j and (i, j) not in e for i, j in pairs.T.tolist())
    with pytest.raises(ValueError, match="k"):
        top_new_links(z, edges, 0)


def test_bfs_branches_on_a_crawled_graph(tmp_path):
    from lib.common.graphio import read_graph, write_graph
    from lib.crawl.bfs import bfs_branches, bfs_crawl
    from lib.crawl.pages import Snapshot
    from lib.crawl.sources import SnapshotSource

    snap = Snapshot(links={"A": ["B", "C"], "B": ["D", "C"], "C": ["E"], "D": ["A"], "E": []})
    g = bfs_crawl(SnapshotSource(snap), "A", max_nodes=10)
    assert g.titles == ["A", "B", "C", "D", "E"]
    # D was reached through B, E through C
    assert bfs_branches(g) == [0, 1, 2, 1, 2]
    write_graph(tmp_path / "g.json", g)
    assert bfs_branches(read_graph(tmp_path / "g.json")) == [0, 1, 2, 1, 2]


def test_load_run_models_errors_name_the_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"(?s)no metrics\.json.*notebook 03"):
        load_run_models(tmp_path)
    (tmp_path / "metrics.json").write_text(json.dumps({"embed": {}}))
    with pytest.raises(FileNotFoundError, match="train_gat"):
        load_run_models(tmp_path)
    (tmp_path / "metrics.json").write_text(
        json.dumps(
            {
                "train_gat": {
                    "splits": {"0": {"train": ["a"], "val": [], "test": ["b"]}},
                    "checkpoints": {"0": {"gat_model": {"best_epoch": 2, "checkpoint": "/elsewhere/epoch_2.pt"}}},
                }
            }
        )
    )
    with pytest.raises(FileNotFoundError, match=r"(?s)seed0.gat_model.epoch_2\.pt.*notebook 03"):
        load_run_models(tmp_path)


def test_load_run_models_reads_checkpoints_from_the_run_folder(tmp_path):
    from lib.linkpred.checkpoint import save_checkpoint
    from lib.linkpred.config import TrainConfig, build_model
    from lib.linkpred.model import ModelConfig
    from lib.linkpred.train import checkpoint_config

    cfg = ModelConfig(in_channels=8, gat_hidden=8, gat_out=4, gat_levels=1, gat_heads=2)
    torch.manual_seed(0)
    model = build_model("gat_model", cfg)
    opt = torch.optim.AdamW(model.parameters())
    save_checkpoint(
        tmp_path / "checkpoints/seed0/gat_model/epoch_2.pt",
        model,
        opt,
        checkpoint_config("gat_model", cfg, TrainConfig(), "d"),
        2,
        [],
        [],
    )
    split = {"train": ["a"], "val": [], "test": ["b"]}
    (tmp_path / "metrics.json").write_text(
        json.dumps(
            {
                "train_gat": {  # recorded path from another clone
                    "splits": {"0": split},
                    "checkpoints": {"0": {"gat_model": {"best_epoch": 2, "checkpoint": "/x/epoch_2.pt"}}},
                }
            }
        )
    )
    run = load_run_models(tmp_path)
    assert run["seeds"] == [0] and run["splits"][0] == split
    assert run["configs"][0]["gat_model"] == (cfg, TrainConfig())
    loaded = run["models"][0]["gat_model"]
    assert not loaded.training
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.state_dict().values()))


def test_reference_scorers_and_nested_subsets():
    from lib.aauc.stage import nested_subsets, reference_embeddings
    from lib.common.runinfo import jsonable
    from lib.linkpred.data import synthetic_graph

    data = synthetic_graph(num_nodes=120, num_edges=300, in_channels=16, seed=0)
    # the features' own cosine reproduces the labels exactly: A-AUC 1.0 by construction, with and without self-pairs
    z = reference_embeddings("features", data, 8, seed=0)
    assert aauc(z, data.x, 0.5, 0.3, seed=1).value == 1.0
    assert aauc(z, data.x, 0.5, 0.3, seed=1, include_self=True).value == 1.0
    r1, r2 = (reference_embeddings("random", data, 8, seed=0) for _ in range(2))
    assert torch.equal(r1, r2) and not torch.equal(r1, reference_embeddings("random", data, 8, seed=1))
    with pytest.raises(ValueError, match="reference scorer"):
        reference_embeddings("nope", data, 8, seed=0)
    subs = nested_subsets(list("abcdefghi"), [8, 2, 4], seed=3)
    assert [len(v) for v in subs.values()] == [2, 4, 8]
    assert subs[2] == subs[4][:2] and subs[4] == subs[8][:4]
    assert subs == nested_subsets(list("abcdefghi"), [2, 4, 8], seed=3)
    with pytest.raises(ValueError, match="size_grid"):
        nested_subsets(list("abc"), [2, 4], seed=0)
    assert jsonable({"a": np.float64("nan"), ("x", 1): [np.int64(3)]}) == {"a": None, "('x', 1)": [3]}


def test_trend_slopes_fit_log_size_and_skip_undefined_aauc():
    import pandas as pd

    rows = [
        dict(protocol="seed", train_graphs=n, seed=s, auc=0.5 + 0.1 * np.log(n) + 0.01 * s, aauc=None)
        for n in (2, 4, 8)
        for s in (0, 1)
    ]
    rows += [dict(protocol="leak_free", train_graphs=n, seed=0, auc=0.7, aauc=0.9 - 0.05 * np.log(n)) for n in (2, 4)]
    rows += [dict(protocol="leak_free", train_graphs=8, seed=0, auc=0.7, aauc=None)]
    sl = stage.trend_slopes(pd.DataFrame(rows))
    assert sl["seed"]["auc"] == pytest.approx(0.1)
    assert np.isnan(sl["seed"]["aauc"])
    assert sl["leak_free"]["aauc"] == pytest.approx(-0.05)  # the size without an A-AUC is left out, not a zero
    assert sl["leak_free"]["auc"] == pytest.approx(0.0, abs=1e-12)
    aauc_plots.plot_trend(pd.DataFrame(rows))  # an undefined A-AUC is not drawn and does not fail


def test_topic_table_of_a_source_without_topics_is_empty_with_the_columns():
    from lib.aauc.stage import topic_table

    g = torch.Generator().manual_seed(0)
    z, x = torch.randn(30, 4, generator=g), torch.randn(30, 8, generator=g)
    rows = [{"topic": t, **r.to_dict()} for t, r in aauc_by_group(z, x, [None] * 30, 0.5, 0.0, 0).items()]
    t = topic_table(rows)
    assert t.empty and list(t.columns) == ["aauc", "aauc_std", "defined", "graphs", "n_pos", "n_neg"]
    labels = ["p" if i % 2 else "q" for i in range(30)]
    rows = [{"topic": k, **r.to_dict()} for k, r in aauc_by_group(z, x, labels, 1.0, 0.0, 0).items()]
    full = topic_table(rows)
    assert set(full.index) == {"p", "q"} and (full["graphs"] == 1).all()
    assert full["n_pos"].sum() + full["n_neg"].sum() == 2 * 15 * 14 // 2  # every pair inside one of the two groups


def test_sensitivity_rows_are_the_metric_at_each_setting_and_the_figure_is_written(tmp_path):
    import pandas as pd
    from torch_geometric.data import Data

    gen = torch.Generator().manual_seed(3)
    graphs = {g: Data(x=torch.randn(60, 8, generator=gen)) for g in ("a", "b")}
    z = {g: torch.randn(60, 4, generator=gen) for g in graphs}
    by_t, by_r = stage.sensitivity(z, graphs, 0, 0.5, 0.3, [0.2, 0.3], [0.25, 0.5], samples=2)
    assert len(by_t) == 2 * 2 and len(by_r) == 2 * 2 * 2
    row = by_t[(by_t["graph_id"] == "b") & (by_t["t_cos"] == 0.2)].iloc[0]
    ref = aauc(z["b"], graphs["b"].x, 0.5, 0.2, derive_seed(0, "eval-aauc", "b"))
    assert row["n_pos"] == ref.n_pos and row["aauc"] == ref.to_dict()["value"]
    assert by_t.groupby("t_cos")["n_pos"].sum()[0.2] >= by_t.groupby("t_cos")["n_pos"].sum()[0.3]  # lower T, more pairs
    fig = aauc_plots.plot_sensitivity(by_t, by_r, 0.5, 0.3, tmp_path / "s.png")
    assert (tmp_path / "s.png").is_file() and len(fig.axes) == 3
    trend = pd.DataFrame(
        [
            {"protocol": "seed", "train_graphs": n, "seed": s, "auc": 0.7, "aauc": 0.7 + 0.01 * n}
            for n in (2, 8)
            for s in (0, 1)
        ]
    )
    slope = stage.trend_slopes(trend)
    seed_slope = stage.seed_slopes(
        [{"train_graphs": 10, "auc": 0.9, "aauc": 0.8}, {"train_graphs": 100, "auc": 0.92, "aauc": 0.6}]
    )
    assert seed_slope["aauc"] < 0 < slope["seed"]["aauc"]
    (line,) = stage.trend_sentences(trend, slope, seed_slope, [2, 8])
    assert line.startswith("seed: A-AUC rises") and "the opposite direction to the seed" in line and "smaller" in line


def test_untrained_rows_score_the_initialisation_stage_3_starts_from_and_reference_scores_cover_every_scorer():
    from lib.linkpred.config import TrainConfig
    from lib.linkpred.data import synthetic_graph
    from lib.linkpred.evaluate import evaluate_model
    from lib.linkpred.model import ModelConfig
    from lib.linkpred.protocols import ProtocolSettings, make_protocol
    from lib.linkpred.train import init_model

    graphs = {f"g{i}": synthetic_graph(60, 150, 8, seed=i, graph_id=f"g{i}") for i in range(4)}
    splits = {0: {"train": ["g0", "g1"], "val": ["g2"], "test": ["g3"]}}
    model_cfg = ModelConfig(in_channels=8, gat_hidden=8, gat_out=4, gat_levels=1, gat_heads=1)
    cfg = TrainConfig(seed=0)
    (row,) = stage.untrained_rows(graphs, splits, [0], ["leak_free"], cfg, model_cfg)
    tasks = make_protocol(
        graphs,
        {"train": ["g0", "g1"], "val": ["g2"], "test": ["g3"]},
        "leak_free",
        0,
        settings=ProtocolSettings(negatives_per_positive=0),
    ).test
    want = evaluate_model(
        init_model("gat_model", model_cfg, [], cfg, "cpu"), tasks, cfg, progress=False, negative_sets=("uniform",)
    )["mean"]["uniform"]
    assert row["auc"] == want["auc"] and row["label"] == "untrained GatModel"
    models = {0: {k: init_model("gat_model", model_cfg, [], cfg, "cpu") for k in ("mlp", "plain_gat", "gat_model")}}
    from lib.aauc.config import AaucParams

    ref = stage.reference_scores(models, splits, graphs, model_cfg, AaucParams(n_seeds=1, r_cos=0.5, t_cos=0.3))
    assert list(ref["scorer"]) == list(stage.REFERENCE_SCORERS) and set(ref["graph_id"]) == {"g3"}
    assert ref.loc[ref["scorer"] == "gat_model", "aauc"].item() == ref.loc[ref["scorer"] == "mlp", "aauc"].item()


def test_branch_table_and_tradeoff_points_by_hand(tmp_path):
    import pandas as pd

    from lib.aauc import groups

    branches = pd.DataFrame(
        [
            {"pairs": "inside", "value": 0.6, "n_pos": 3, "n_neg": 7},
            {"pairs": "inside", "value": 0.8, "n_pos": 1, "n_neg": 9},
            {"pairs": "across", "value": 0.5, "n_pos": 0, "n_neg": 10},
        ]
    )
    t = groups.branch_table(branches)
    assert t.loc["inside", "aauc"] == pytest.approx(0.7) and t.loc["inside", "share_pos"] == pytest.approx(0.2)
    assert t.loc["across", "n_neg"] == 10 and t.loc["across", "share_pos"] == 0
    topics = pd.DataFrame(
        {"aauc": [0.7, None], "aauc_std": [0.1, None]}, index=pd.Index(["Art", "Maths"], name="topic")
    )
    groups.plot_groups(topics, t, tmp_path / "g.png")
    assert (tmp_path / "g.png").stat().st_size > 0
    trend = pd.DataFrame(
        [{"train_graphs": 4, "seed": 0, "protocol": "leak_free", "auc": 0.7, "aauc": 0.6, "aauc_self": 0.7}]
    )
    s3 = pd.DataFrame(
        [
            {
                "model": m,
                "seed": s,
                "protocol": p,
                "negatives": n,
                "supervision": sv,
                "auc": 0.8,
                "aauc": 0.5,
                "aauc_self": 0.6,
            }
            for m in ("gat_model", "cosine")
            for s in (0, 1)
            for p in ("leak_free", "seed")
            for n in ("uniform", "heart")
            for sv in ("mp", "disjoint")
        ]
    )
    pts = stage.tradeoff_points(
        trend,
        s3,
        [
            {
                "label": "untrained GatModel",
                "seed": 0,
                "protocol": "leak_free",
                "auc": 0.5,
                "aauc": 0.5,
                "aauc_self": 0.5,
            }
        ],
        [0],
        "mp",
    )
    assert pts["label"].tolist() == ["GatModel, 4 train graphs", "stage 3: gat_model", "untrained GatModel"]
