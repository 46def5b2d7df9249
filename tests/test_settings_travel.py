"""The GatModel and its training are one typed object (lib.linkpred.config.GatTrainingParams) that every notebook
training a GatModel inherits: a value given with `-p` reaches notebooks 03, 03b, 05 and 05b, and what a notebook sets
itself it declares in GAT_OVERRIDES."""

from __future__ import annotations

import json
from dataclasses import asdict, fields, replace

import pytest

from lib.common import published
from lib.common.params import ParamError, merge
from lib.common.paths import PARAMS, ROOT
from lib.distill.checkpoint import run_settings
from lib.distill.config import DistillParams, read_params_05
from lib.distill.lp import changed_settings, lp_params
from lib.embedders.config import EmbeddersParams
from lib.linkpred import beyond, beyond_stage
from lib.linkpred.config import BeyondParams, GatParams, GatTrainingParams
from lib.linkpred.train import checkpoint_config
from lib.run import runner
from lib.run.reproduce import recorded_command

IN_CHANNELS = 16
POINT = {"dropout": 0.1, "num_levels": 1, "lr": 0.01}  # a sweep point of notebook 03b, unlike every value below


def trained_03(cfg: GatParams):
    return cfg.model_config(IN_CHANNELS), cfg.train_config(cfg.first_seed)


def trained_03b(cfg: BeyondParams):
    """What notebook 03b trains a variant with, on a run whose notebook 03 ran with cfg's settings (as the runner
    hands them to both)."""
    ran = GatParams(**asdict(cfg.gat_training()))
    stored = checkpoint_config("gat_model", ran.model_config(IN_CHANNELS), ran.train_config(cfg.first_seed), "d")
    model_cfg, configs = beyond_stage.configs(stored, cfg)
    return beyond.variant_config("dot", model_cfg, POINT), beyond.variant_train_config(
        "dot", configs[cfg.first_seed], POINT
    )


def trained_lp(cfg):
    params = lp_params(cfg, 0, ("leak_free",), 2, 0.1)
    return params.model_config(IN_CHANNELS), params.train_config(0)


NOTEBOOKS = {GatParams: trained_03, BeyondParams: trained_03b, DistillParams: trained_lp, EmbeddersParams: trained_lp}
"""Each notebook config that trains a GatModel -> what its GatModels are built and trained with."""


def other_value(f):
    """A valid value of GatTrainingParams field `f` other than its default."""
    default, choices = GatTrainingParams.default_of(f.name), f.metadata["choices"]
    if choices:
        return next(c for c in choices if c != default)
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 1
    if isinstance(default, float):
        return default / 2 if default else 0.5
    raise AssertionError(f"give other_value a value for {f.name}: {default!r}")


@pytest.mark.parametrize("cls", list(NOTEBOOKS), ids=lambda c: c.NOTEBOOK)
def test_every_gat_setting_reaches_each_notebook_that_trains_a_gatmodel_unless_it_declares_otherwise(cls):
    """Every field of GatTrainingParams (so one added there too) is a parameter of the notebook and reaches the
    GatModels it trains; a field it names in GAT_OVERRIDES does not (the notebook sets it itself)."""
    assert issubclass(cls, GatTrainingParams)
    assert {f.name for f in fields(GatTrainingParams)} <= set(cls.names())
    assert set(cls.GAT_OVERRIDES) <= set(GatParams.names())  # overrides name notebook 03's settings
    base = GatTrainingParams.of_settings(*NOTEBOOKS[cls](cls()))
    for f in fields(GatTrainingParams):
        value = other_value(f)
        got = getattr(GatTrainingParams.of_settings(*NOTEBOOKS[cls](cls(**{f.name: value}))), f.name)
        if f.name in cls.GAT_OVERRIDES:
            assert got == getattr(base, f.name), f"{cls.NOTEBOOK} declares {f.name} its own, yet it passes through"
        else:
            assert got == value, f"{cls.NOTEBOOK}: {f.name}={value!r} does not reach its GatModels"


@pytest.mark.parametrize("cls", [DistillParams, EmbeddersParams], ids=lambda c: c.NOTEBOOK)
def test_the_link_prediction_study_changes_exactly_the_settings_its_notebooks_declare(cls):
    cfg = cls(gat_dropout=0.3, gat_epochs=3)
    study = lp_params(cfg, 7, ("new_nodes",), 3, 0.2)
    as_given = GatParams(**asdict(cfg.gat_training()))
    changed = {k for k in GatParams.names() if getattr(study, k) != getattr(as_given, k)}
    assert changed == set(cls.GAT_OVERRIDES)
    assert study.gat_dropout == 0.3 and study.gat_epochs == 3


def test_a_gat_setting_given_with_p_shows_in_05_and_05b_resolved_settings_in_the_dry_run(tmp_path, capsys):
    assert (
        runner.main(["-p", "gat_dropout=0.3", "--dry-run", "--notebooks", "05", "05b", "--outputs", str(tmp_path)]) == 0
    )
    lines = dict(
        line.strip().split(": ", 1)
        for line in capsys.readouterr().out.splitlines()
        if line.strip().startswith(("05_", "05b_"))
    )
    assert json.loads(lines["05_attention_distillation.ipynb"])["gat_dropout"] == 0.3
    assert json.loads(lines["05b_node_embedders.ipynb"])["gat_dropout"] == 0.3


def test_the_runner_hands_a_gat_setting_to_every_gatmodel_notebook_trains():
    notebooks = [ROOT / "notebooks" / cls.NOTEBOOK for cls in NOTEBOOKS]
    _, per_nb = runner.plan_run(
        [PARAMS / "demo.yaml", PARAMS / "cpu.yaml"], {"gat_dropout": 0.3, "gat_epochs": 3}, notebooks
    )
    for cls, nb in zip(NOTEBOOKS, notebooks):
        cfg = cls.from_values(per_nb[nb])
        assert cfg.gat_dropout == 0.3 and cfg.gat_epochs == 3, cls.NOTEBOOK
    for cls in (DistillParams, EmbeddersParams):
        model_cfg, train = trained_lp(cls.from_values(per_nb[ROOT / "notebooks" / cls.NOTEBOOK]))
        assert model_cfg.gat_dropout == 0.3 and train.epochs == 3


def test_notebook_03b_refuses_a_gat_setting_other_than_notebook_03s_checkpoint():
    ran = GatParams()
    stored = checkpoint_config("gat_model", ran.model_config(IN_CHANNELS), ran.train_config(0), "d")
    with pytest.raises(
        ParamError,
        match=r"^parameter gat_hidden=64 differs from notebook 03's 128 \(its GatModel "
        r"checkpoint in outputs/demo\); notebook 03b compares with that model, so "
        r"give notebook 03's value \(the runner does\) or re-run notebook 03 with "
        r"this one$",
    ):
        beyond_stage.configs(stored, BeyondParams(gat_hidden=64))
    beyond_stage.configs(stored, BeyondParams(gat_dropout=0.3, gat_epochs=5))  # its own: swept, early-stopped


def test_link_prediction_rows_are_keyed_by_the_gatmodel_settings_they_were_trained_with():
    assert changed_settings(lp_params(DistillParams(), 0, ("leak_free",), 2, 0.1)) == "defaults"
    assert changed_settings(lp_params(DistillParams(gat_epochs=3), 0, ("leak_free",), 2, 0.1)) == "defaults"
    assert (
        changed_settings(lp_params(EmbeddersParams(gat_dropout=0.3, gat_impl="pyg"), 0, ("leak_free",), 2, 0.1))
        == "gat_dropout=0.3;gat_impl=pyg"
    )


def test_older_epoch_names_of_published_runs_read_as_gat_epochs(tmp_path):
    assert published.run_params({"lp_epochs": 2, "gat_epochs": 2, "x": 1}) == {"gat_epochs": 2, "x": 1}
    assert published.run_params({"embedder_lp_epochs": 3}) == {"gat_epochs": 3}
    assert published.run_params({"lp_epochs": 3, "gat_epochs": 2}) == {"lp_epochs": 3, "gat_epochs": 2}
    reference = ROOT / "outputs" / "reference"
    cfg = read_params_05(reference / "distill_cpu" / "params_05.json")
    assert cfg.gat_epochs == 2 and not hasattr(cfg, "lp_epochs")
    # a node-embedder run recorded before the rename (as the embedders run was until it was made again)
    (tmp_path / "params.json").write_text(json.dumps({"params": {"embedder_lp_epochs": 2, "embedder_seeds": 5}}))
    _, overrides, left_out = recorded_command(tmp_path)
    assert overrides["gat_epochs"] == 2 and "embedder_lp_epochs" not in left_out + list(overrides)


def test_no_profile_names_the_gatmodel_epochs_by_an_older_name():
    for path in PARAMS.glob("*.yaml"):
        assert not set(published.OLDER_PARAMETER_NAMES) & set(merge([path])), path.name


def test_a_gat_setting_changes_no_row_of_the_distillation_grid():
    cfg = DistillParams()
    assert run_settings(replace(cfg, gat_dropout=0.3, gat_epochs=4)) == run_settings(cfg)
