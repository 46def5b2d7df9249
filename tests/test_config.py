"""The typed stage configs (lib.common.config): one declaration per parameter, checked in one place."""

from __future__ import annotations

import nbformat
import pytest

from lib.common.config import StageParams, stage_params
from lib.common.params import ParamError, notebook_number, numbered_notebooks
from lib.common.paths import NOTEBOOKS
from lib.crawl.config import CrawlParams

CONFIGS = stage_params()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_notebook_parameters_cell_is_the_one_its_config_generates(name):
    """`python -m lib.common.config` regenerates the cell; an edit on either side alone fails here."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assert cell.source == CONFIGS[name].parameters_cell()
    # a committed notebook holds its defaults only: papermill's injected cell of an executed copy is dropped
    assert not [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_demo_defaults_pass_their_own_checks_and_every_field_says_why(name):
    cls = CONFIGS[name]
    cfg = cls()
    assert cfg.to_dict() == cls.defaults()
    assert all(row["why"].strip() for row in cls.reference())


@pytest.mark.parametrize(
    "kwargs,named",
    [
        ({"max_nodes": "abc"}, "max_nodes='abc' is a str; 01_crawl.ipynb declares it int (default 1000); give an int"),
        ({"max_nodes": True}, "max_nodes=True is a bool"),
        ({"max_nodes": 0}, "max_nodes=0 is invalid: must be >= 1"),
        ({"retry_wait": 2}, None),  # an int is a float
        ({"roots": "Water"}, "roots='Water' is a str; 01_crawl.ipynb declares it list[str]"),
        ({"roots": ["Water", 3]}, "roots=['Water', 3] holds 3, a int; give a list of str"),
        ({"overlap_max_nodes": [200, 0]}, "overlap_max_nodes=[200, 0] is invalid: every item must be >= 1"),
        ({"source": "nowhere"}, "source='nowhere' is invalid: must be one of embedded, wikispeedia"),
        ({"source": "snapshot"}, "source='snapshot' needs snapshot_path"),
    ],
)
def test_a_value_is_refused_with_one_sentence_naming_key_value_and_fix(kwargs, named):
    if named is None:
        CrawlParams(**kwargs)
        return
    with pytest.raises(ParamError) as e:
        CrawlParams(**kwargs)
    assert named in str(e.value) and "\n" not in str(e.value)
    assert e.value.key == ("snapshot_path" if "needs" in named else next(iter(kwargs)))


def test_record_leaves_out_speed_settings_and_the_contact_address():
    rec = CrawlParams(contact="me@example.org").record()
    assert "contact" not in rec and "threads" not in rec and rec["max_nodes"] == 1000


def test_from_values_takes_this_stages_names_and_ignores_the_others():
    cfg = CrawlParams.from_values({"max_nodes": 30, "gat_epochs": 5})
    assert cfg.max_nodes == 30 and not hasattr(cfg, "gat_epochs")


def test_a_config_is_frozen():
    with pytest.raises(AttributeError):
        CrawlParams().max_nodes = 5  # type: ignore[misc]


def test_every_numbered_notebook_has_a_config():
    have = {notebook_number(n) for n in CONFIGS}
    assert have == {notebook_number(nb) for nb in numbered_notebooks()}, "a stage without a typed config"


@pytest.mark.parametrize(
    "notebook,kwargs,named",
    [
        ("02_embed.ipynb", {"dataset_precision": "float64"}, "must be one of float32, float16"),
        ("02_embed.ipynb", {"val_fraction": 1.0}, "val_fraction=1.0 is invalid: must be >= 0 and < 1"),
        ("03_train_gat.ipynb", {"protocols": []}, "protocols=[] is invalid: list at least one"),
        ("03_train_gat.ipynb", {"train_supervision": ["both"]}, "every item must be one of mp, disjoint"),
        ("03_train_gat.ipynb", {"gat_epochs": 2.0}, "gat_epochs=2.0 is a float"),
        ("03b_beyond_seed.ipynb", {"beyond_variants": ["dot", "transformer"]}, "every item must be one of dot,"),
        ("03b_beyond_seed.ipynb", {"sweep_lr": [0.001, 0]}, "every item must be > 0"),
        ("04_aauc_analysis.ipynb", {"picture_view": "all"}, "must be one of focus, whole"),
        ("04_aauc_analysis.ipynb", {"t_cos_grid": [0.5, 1.5]}, "every item must be >= -1 and <= 1"),
    ],
)
def test_each_stage_refuses_what_it_cannot_run_naming_the_key(notebook, kwargs, named):
    with pytest.raises(ParamError) as e:
        CONFIGS[notebook](**kwargs)
    assert named in str(e.value) and e.value.key == next(iter(kwargs))


def test_run_as_a_script_it_still_finds_every_stage_config(monkeypatch):
    """`python -m lib.common.config` executes a second copy of the module (as __main__); its StageParams is another
    class, and the copy must still find the stage configs (or --check would compare nothing and say "none")."""
    import importlib.util
    import sys

    import lib.common.config

    spec = importlib.util.spec_from_file_location("a_second_copy", lib.common.config.__file__)
    copy = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "a_second_copy", copy)
    spec.loader.exec_module(copy)
    assert copy.StageParams is not StageParams
    assert set(copy.stage_params()) == set(CONFIGS) != set()


def test_every_shipped_params_file_passes_every_stage_config():
    """A profile's values must pass the bounds and rules of the configs, which a runner's preflight applies."""
    from lib.common.params import merge
    from lib.common.paths import PARAMS

    for path in sorted(PARAMS.glob("*.yaml")):
        for cls in CONFIGS.values():
            cls.from_values(merge([path]))
