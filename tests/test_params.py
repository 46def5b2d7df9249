"""Layered params files and the batch runner's validation (no notebook is executed here)."""

import pytest

from lib.common.params import ParamError, check_known, load_yaml, merge, numbered_notebooks, parse_override
from lib.common.paths import PARAMS
from lib.run.runner import main, plan_run


def test_layering_later_file_wins(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("max_nodes: 10\nsource: embedded\n")
    b.write_text("max_nodes: 20\n")
    assert merge([a, b], {"source": "live"}) == {"max_nodes": 20, "source": "live"}


def test_missing_and_malformed_params_files_are_named(tmp_path):
    with pytest.raises(ParamError, match="nope.yaml does not exist"):
        load_yaml(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(ParamError, match="bad.yaml must be a flat mapping"):
        load_yaml(bad)
    nested = tmp_path / "nested.yaml"
    nested.write_text("a:\n  b: 1\n")
    with pytest.raises(ParamError, match="key 'a' holds a mapping"):
        load_yaml(nested)


def test_unknown_key_is_named():
    with pytest.raises(ParamError, match="unknown parameter 'max_node'"):
        check_known({"max_node": 3}, {"max_nodes"})


def test_override_values_keep_types():
    assert parse_override("max_nodes=300") == ("max_nodes", 300)
    assert parse_override("roots=[A, B]") == ("roots", ["A", "B"])
    with pytest.raises(ParamError, match="key=value"):
        parse_override("max_nodes")


def test_every_shipped_params_file_is_known_to_the_notebooks():
    notebooks = numbered_notebooks()
    for f in sorted(PARAMS.glob("*.yaml")):
        plan_run([f], {}, notebooks)  # raises ParamError naming the key if a profile holds an unknown key


def test_runner_refuses_unknown_key_and_missing_file_before_any_work(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("max_nodez: 5\n")
    assert main(["--params", str(bad), "--run-name", "never"]) == 2
    assert "unknown parameter 'max_nodez'" in capsys.readouterr().err
    assert main(["--size", "no_such_size"]) == 2
    assert "no_such_size.yaml does not exist" in capsys.readouterr().err


def test_every_notebook_documents_typed_parameters_and_the_demo_is_the_defaults():
    """papermill --help-notebook lists every parameter with a type and a why; the demo is the notebooks' own defaults
    (params/demo.yaml changes nothing), and the size profiles that layer on them hold only what they change."""
    import ast

    from lib.common.params import notebook_parameters

    defaults = {}
    for nb in numbered_notebooks():
        params = notebook_parameters(nb)
        assert "run_dir" in params, f"{nb.name} has no run_dir parameter"
        for name, p in params.items():
            assert p["inferred_type_name"] not in ("None", ""), f"{nb.name}: parameter {name} has no type annotation"
            assert p["help"], f"{nb.name}: parameter {name} has no '# why' comment"
            defaults[name] = ast.literal_eval(p["default"])
    assert merge([PARAMS / "demo.yaml"]) == {}
    for path in sorted(PARAMS.glob("*.yaml")):
        if path.name == "wikispeedia.yaml":  # restates defaults on purpose: it is layered after a size profile
            continue  # (seed40.yaml sets the embedded source) and must set them back
        profile = path.stem
        same = [k for k, v in merge([path]).items() if defaults[k] == v]
        assert not same, f"params/{profile}.yaml repeats the notebooks' defaults of {same}; drop them"


def test_papermill_parses_every_parameter_line_of_every_notebook(caplog):
    """papermill skips (and logs "Unable to parse line") any parameter line it cannot read, e.g. one with a second '='
    in its comment; such a parameter could not be overridden."""
    import logging

    import nbformat
    from papermill.translators import PythonTranslator

    for nb in numbered_notebooks():
        cell = next(c for c in nbformat.read(nb, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="papermill"):
            names = [p.name for p in PythonTranslator.inspect(cell)]
        assert not [r.message for r in caplog.records if "Unable to parse" in r.message], nb.name
        declared = [l.split(":")[0] for l in cell.source.splitlines() if l.strip() and not l.startswith("#")]
        assert names == declared, nb.name
