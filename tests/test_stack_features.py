"""The heuristic stack's features are a setting checked against the heuristic registry (notebook 03b's
`stack_features`, a checkpoint's own list), and training negatives are a mix of registered negative sets."""

from dataclasses import asdict

import numpy as np
import pandas as pd
import pytest
import torch

from lib.common import published
from lib.common.params import ParamError
from lib.common.seeding import derive_seed
from lib.linkpred import beyond_stage
from lib.linkpred.checkpoint import load_checkpoint, save_checkpoint
from lib.linkpred.config import BeyondParams, TrainConfig, stored_settings
from lib.linkpred.data import synthetic_graph
from lib.linkpred.decoders import DECODERS
from lib.linkpred.heuristics import (
    REGISTRY,
    STACK,
    Heuristic,
    HeuristicStack,
    register,
    stack_features,
)
from lib.linkpred.model import GatModel, ModelConfig
from lib.linkpred.negative_sets.base import NegativeSet
from lib.linkpred.negative_sets.registry import REGISTRY as NEGATIVE_SETS
from lib.linkpred.protocols import make_protocol
from lib.linkpred.sampling import sample_negatives
from lib.linkpred.train import (
    Checkpointing,
    checkpoint_config,
    supervision_pairs,
    train_model,
    training_negatives,
)

SMALL = ModelConfig(in_channels=16, gat_hidden=8, gat_out=4, gat_levels=1, gat_heads=1, gat_dropout=0.1)
PUBLISHED = ["cosine", "common_neighbours", "adamic_adar", "pref_attach"]  # what the published checkpoints read


@pytest.fixture
def degree_sum():
    """A heuristic registered for one test only: deg(u) + deg(v), log1p, first order in the mean degree."""
    register(
        Heuristic(
            "degree_sum",
            "deg(u) + deg(v)",
            lambda v: v.structure.deg[v.pairs[0].numpy()] + v.structure.deg[v.pairs[1].numpy()],
            "log1p_ds",
            1,
            np.log1p,
        )
    )
    yield "degree_sum"
    REGISTRY.pop("degree_sum")


def _split(n_nodes=60, n_edges=180):
    graphs = {f"g{i}": synthetic_graph(n_nodes, n_edges, in_channels=16, seed=i, graph_id=f"g{i}") for i in range(4)}
    return make_protocol(graphs, {"train": ["g0"], "val": ["g1"], "test": ["g2", "g3"]}, "leak_free", seed=0)


@pytest.mark.parametrize("build", [lambda f: BeyondParams(stack_features=f), lambda f: ModelConfig(stack_features=f)])
def test_a_stack_feature_must_be_a_registered_heuristic_said_in_one_line(build):
    with pytest.raises(
        ParamError,
        match=r"stack_features=\['katz'\] is invalid: heuristic 'katz' is unknown; use one "
        r"of \('cosine', 'pref_attach'",
    ) as e:
        build(["katz"])
    assert e.value.key == "stack_features" and "\n" not in str(e.value)
    with pytest.raises(ParamError, match="stack_features=\\[\\] is invalid: list at least one"):
        build([])
    assert build(["cosine"]).stack_features == ["cosine"]


def test_a_registered_heuristic_joins_the_stack_bar_and_an_ncn_stack_decoder_with_no_code_edit(degree_sum, tmp_path):
    features = [*STACK, degree_sum]
    params = BeyondParams(
        stack_features=features,
        beyond_epochs=1,
        beyond_patience=0,
        beyond_select_metric="auc",
        decoder_hidden=8,
        n_seeds=1,
        beyond_dist2_share=0.25,
        **{k: getattr(SMALL, k) for k in ("gat_hidden", "gat_out", "gat_heads")},
    )  # notebook 03's
    model_cfg, cfgs = beyond_stage.configs(checkpoint_config("gat_model", SMALL, TrainConfig(), "d"), params)
    assert model_cfg.stack_features == features and cfgs[0].negative_mix == {"dist2": 0.25}
    sp = _split()
    rows, coef, log = beyond_stage.run_all(
        {(0, "leak_free"): sp},
        ["ncn_stack"],
        model_cfg,
        cfgs,
        {"ncn_stack": None},
        tmp_path,
        progress=False,
        heuristics=[degree_sum],
    )
    assert list(coef[0])[2:] == list(stack_features(features))  # the bar is the stack of these features
    assert {"heuristic_stack", "gat_ncn_stack", degree_sum} <= set(pd.DataFrame(rows)["model"])
    assert log["0/leak_free/ncn_stack"]["epochs_run"] == 1  # one epoch of one training graph: one step

    model, ck = load_checkpoint(next((tmp_path / "seed0-leak_free" / "ncn_stack").glob("epoch_*.pt")))
    assert model.cfg.stack_features == features and ck["config"]["model"]["stack_features"] == features
    width = len(features)
    assert model.decoder.feat_linear.in_features == width
    assert model.decoder.mlp[0].in_features == DECODERS["ncn"].width(SMALL.gat_out) + width
    g = sp.test[0]
    with torch.no_grad():
        logits = model.decode(model(g.data.x, g.mp_edge_index), g.pos, g.mp_edge_index, g.data.x)
    assert logits.shape == (g.pos.size(1),) and torch.isfinite(logits).all()


def test_a_checkpoint_without_a_feature_list_or_with_the_older_share_names_loads_as_published(tmp_path):
    cfg = ModelConfig(**{**asdict(SMALL), "decoder": "ncn", "decoder_features": True})
    model = GatModel(cfg)
    old = checkpoint_config("gat_model", cfg, TrainConfig(), "d")
    del old["model"]["stack_features"]  # as every published checkpoint was written
    del old["train"]["negative_mix"]
    old["train"] |= {"dist2_negative_share": 0.5, "matched_negative_share": 0.0}
    path = save_checkpoint(tmp_path / "epoch_1.pt", model, torch.optim.AdamW(model.parameters()), old, 1, [], [])
    loaded, _ = load_checkpoint(path)
    assert loaded.cfg.stack_features == PUBLISHED and loaded.decoder.feat_linear.in_features == len(PUBLISHED)
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), model.state_dict().values()))
    assert stored_settings(old, "x")[1].negative_mix == {"dist2": 0.5}
    assert published.train_settings({"lr": 0.1, "dist2_negative_share": 0.0, "matched_negative_share": 0.5}) == {
        "lr": 0.1,
        "negative_mix": {"matched": 0.5},
    }


def test_a_decoder_starts_only_from_a_stack_of_its_own_features():
    graphs = [synthetic_graph(60, 200, in_channels=16, seed=s) for s in range(2)]
    m = GatModel(
        ModelConfig(
            **{
                **asdict(SMALL),
                "decoder": "ncn",
                "decoder_features": True,
                "decoder_init": "stack",
                "stack_features": ["cosine", "common_neighbours"],
            }
        )
    )
    with pytest.raises(ValueError, match="the stack was fitted on .* but the decoder reads .*'common_neighbours'\\)"):
        m.decoder.init_from_stack(HeuristicStack(seed=0).fit(graphs))
    m.decoder.init_from_stack(HeuristicStack(seed=0, features=["cosine", "common_neighbours"]).fit(graphs))


@pytest.mark.parametrize(
    "mix, named",
    [
        ({"katz": 0.5}, "negative set 'katz' is unknown; use one of"),
        ({"heart": 0.5}, "'heart' cannot be mixed into training"),
        ({"uniform": 0.5}, "'uniform' cannot be mixed into training"),
        ({"dist2": 1.5}, "use a share in \\[0, 1\\]"),
        ({"dist2": 0.6, "matched": 0.6}, "add up to more than 1"),
    ],
)
def test_a_training_mix_names_registered_sets_with_a_training_draw(mix, named):
    with pytest.raises(ValueError, match=f"parameter negative_mix=.* is invalid: .*{named}") as e:
        TrainConfig(negative_mix=mix)
    assert "\n" not in str(e.value)
    assert TrainConfig(negative_mix={"matched": 0.5, "dist2": 0.0}).negative_mix == {"matched": 0.5}


def test_a_registered_negative_set_is_mixed_into_training_by_name_with_no_edit_of_the_trainer():
    calls = []

    def far_pairs(ctx, n):
        calls.append(n)
        return sample_negatives(ctx.excluded, ctx.data.num_nodes, n, ctx.step_seed("far"))

    entry = NegativeSet("far", "far", lambda ctx: None, "a set for this test", order=50, train=far_pairs)
    NEGATIVE_SETS.add(entry)
    try:
        data = synthetic_graph(80, 300, in_channels=16, seed=2)
        cfg = TrainConfig(supervision="disjoint", neg_rate=1.0, negative_mix={"far": 0.25, "dist2": 0.25}, seed=3)
        assert list(cfg.negative_mix) == ["dist2", "far"]  # registry order: uniform, then dist2, then the new set
        mp, pos = supervision_pairs(data, cfg, 1, 0)
        neg = training_negatives(data, mp, pos, cfg, 1, 0)
        n = round(pos.size(1) * 0.25)
        assert calls == [n]
        far = sample_negatives(data.edge_index, data.num_nodes, n, derive_seed(3, "far", 1, 0))
        assert torch.equal(neg[:, -far.size(1) :], far)  # the new set's pairs, after uniform and dist2
        plain = training_negatives(
            data, mp, pos, TrainConfig(supervision="disjoint", neg_rate=1.0, seed=3, negative_mix={"dist2": 0.25}), 1, 0
        )
        assert neg.size(1) - far.size(1) < plain.size(1)  # uniform gave up the new set's share
        _, res = train_model(
            "gat_model",
            SMALL,
            [data],
            [data],
            TrainConfig(epochs=1, seed=0, log_aauc=False, log_eval=False, negative_mix={"far": 0.5}),
            progress=False,
        )
        assert len(res.history) == 1 and len(calls) >= 2
    finally:
        NEGATIVE_SETS.pop("far")


def test_a_run_folder_checkpointed_with_the_older_names_resumes_as_one_uninterrupted_run(tmp_path):
    data = synthetic_graph(80, 300, in_channels=16, seed=2, graph_id="g")
    mcfg = ModelConfig(**{**asdict(SMALL), "decoder": "ncn", "decoder_features": True})
    cfg = TrainConfig(
        epochs=2, seed=1, supervision="disjoint", negative_mix={"dist2": 0.5}, log_aauc=False, log_eval=False
    )
    _, whole = train_model("gat_model", mcfg, [data], [data], cfg, progress=False)
    ckpt = Checkpointing(tmp_path, "d")
    train_model("gat_model", mcfg, [data], [data], cfg, ckpt, progress=False, max_steps=1)
    last = torch.load(tmp_path / "last.pt", weights_only=True)
    del last["config"]["model"]["stack_features"], last["config"]["train"]["negative_mix"]
    last["config"]["train"] |= {"dist2_negative_share": 0.5, "matched_negative_share": 0.0}  # as written before
    torch.save(last, tmp_path / "last.pt")
    _, resumed = train_model("gat_model", mcfg, [data], [data], cfg, ckpt, progress=False)
    assert resumed.resumed_from == 1 and [r["loss"] for r in resumed.history] == [r["loss"] for r in whole.history]
