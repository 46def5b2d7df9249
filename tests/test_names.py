"""One name per concept: a module is imported under its own name (torch.nn.functional as F is PyTorch's own
convention), in lib, tests, scripts, benchmarks and the notebooks' code cells alike; "seed" alone is the source
report, and the first random seed is `first_seed` (a published record's `seed` reads as it); the `kd_` prefix is
notebook 06's, notebook 05's L_OUT settings are `out_temperature` and `out_soft_share`; a function is named for what
it returns, by one module of lib."""

from __future__ import annotations

import ast
import json
from dataclasses import replace

import pytest

from lib.aauc.config import AaucParams
from lib.common import published
from lib.common.config import stage_params
from lib.common.params import numbered_notebooks
from lib.common.paths import OUTPUTS, ROOT
from lib.common.runinfo import load_json
from lib.distill.checkpoint import NOT_IN_ROWS, GridCheckpoint
from lib.distill.config import DistillParams, read_params_05
from lib.distill.stage import student_folder
from lib.embed.config import EmbedParams
from lib.kd.config import KdParams
from lib.linkpred.config import BeyondParams, GatParams
from lib.run.runner import main

SCANNED = ("lib", "tests", "scripts", "benchmarks")
CONVENTIONS = {("torch.nn.functional", "F")}


def one_letter_aliases(code: str, where: str) -> list[str]:
    """'where: import X as Y' for every import of `code` under a one-letter name other than a convention."""
    hits = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for a in node.names:
                full = f"{node.module}.{a.name}" if isinstance(node, ast.ImportFrom) else a.name
                if a.asname and len(a.asname) == 1 and (full, a.asname) not in CONVENTIONS:
                    hits.append(f"{where}: {full} as {a.asname}")
    return hits


def sources() -> dict[str, str]:
    """Where -> code: every Python file of SCANNED and every code cell of the numbered notebooks."""
    out = {
        str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
        for folder in SCANNED
        for p in sorted((ROOT / folder).rglob("*.py"))
    }
    for nb in numbered_notebooks():
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(c for c in cells if c["cell_type"] == "code"):
            out[f"{nb.relative_to(ROOT)} code cell {i}"] = "".join(cell["source"])
    return out


def test_no_module_is_imported_under_a_one_letter_name():
    hits = [h for where, code in sources().items() for h in one_letter_aliases(code, where)]
    assert not hits, "import the module under its own name: " + "; ".join(hits)


def test_the_alias_scan_finds_a_planted_alias_and_spares_the_convention():
    code = "import torch.nn.functional as F\nfrom lib.linkpred import beyond as B\nimport numpy.linalg as L\n"
    assert one_letter_aliases(code, "x.py") == ["x.py: lib.linkpred.beyond as B", "x.py: numpy.linalg as L"]
    assert one_letter_aliases("from torch.nn import functional as F\nimport numpy as np\n", "y.py") == []


def test_no_parameter_is_named_just_seed():
    named = {cls.NOTEBOOK: [n for n in cls.names() if n == "seed"] for cls in stage_params().values()}
    assert not any(named.values()), named
    assert {cls.NOTEBOOK for cls in (EmbedParams, GatParams, BeyondParams, AaucParams)} <= {
        cls.NOTEBOOK for cls in stage_params().values() if "first_seed" in cls.names()
    }


FIRST_SEED_RECORDS = {
    "params_02_embed.json": EmbedParams,
    "params_03_train_gat.json": GatParams,
    "params_03b_beyond.json": BeyondParams,
    "params_04_aauc_analysis.json": AaucParams,
}


def test_every_published_record_of_the_first_seed_reads_as_first_seed():
    paths = sorted(p for name in FIRST_SEED_RECORDS for p in (OUTPUTS / "reference").glob(f"**/{name}"))
    assert len(paths) >= 10, paths
    for path in paths:
        raw = load_json(path)["params"]
        assert ("seed" in raw) != ("first_seed" in raw), path  # recorded under the older name or the current one
        cfg = FIRST_SEED_RECORDS[path.name].from_values(published.run_params(raw))
        assert cfg.first_seed == raw.get("seed", raw.get("first_seed")), path
        assert "seed" not in published.run_params(raw), path
    runs = sorted((OUTPUTS / "reference").glob("*/params.json"))
    assert all("seed" not in published.run_params(load_json(p)["params"]) for p in runs)
    assert published.run_params({"seed": 3, "n_seeds": 2}) == {"first_seed": 3, "n_seeds": 2}


def test_seed_given_with_p_is_refused_naming_first_seed(tmp_path, capsys):
    assert main(["--outputs", str(tmp_path / "out"), "--dry-run", "--size", "tiny", "-p", "seed=3"]) == 2
    err = capsys.readouterr().err
    assert "unknown parameter 'seed' in -p overrides; no notebook declares it. Did you mean first_seed?" in err
    assert not (tmp_path / "out").exists()


def test_a_parameter_published_under_another_name_is_refused_naming_the_one_it_has_now(tmp_path, capsys):
    assert main(["--outputs", str(tmp_path / "out"), "--dry-run", "--size", "tiny", "-p", "lp_epochs=3"]) == 2
    assert "unknown parameter 'lp_epochs' in -p overrides; no notebook declares it. Did you mean gat_epochs? " in (
        capsys.readouterr().err
    )


def test_the_kd_prefix_is_notebook_06s_alone():
    assert not [n for n in DistillParams.names() if n.startswith("kd_")]
    assert KdParams.NOTEBOOK == "06_kd_probing.ipynb" and "kd_seeds" in KdParams.names()


def test_every_published_params_05_reads_l_outs_settings_under_their_out_names():
    paths = sorted((OUTPUTS / "reference").glob("**/params_05.json"))
    assert len(paths) >= 3, paths
    for path in paths:
        raw, cfg = load_json(path)["params"], read_params_05(path)
        assert (cfg.out_temperature, cfg.out_soft_share) == (raw["kd_temperature"], raw["kd_alpha"]), path


def test_a_grid_folder_whose_settings_name_l_out_with_the_kd_prefix_resumes_and_still_refuses_other_settings(tmp_path):
    cfg, folder = DistillParams(), tmp_path / "ck"
    folder.mkdir()
    kd_names = {"out_temperature": "kd_temperature", "out_soft_share": "kd_alpha"}
    settings = {kd_names.get(k, k): v for k, v in cfg.record().items() if k not in NOT_IN_ROWS}
    (folder / "settings.json").write_text(json.dumps(settings))
    GridCheckpoint(folder, cfg)
    with pytest.raises(ValueError, match=r"other settings \(out_soft_share\)"):
        GridCheckpoint(folder, replace(cfg, out_soft_share=0.25))


def test_student_folder_and_describe_each_name_one_thing():
    defined = {
        name: sorted(
            str(p.relative_to(ROOT))
            for p in (ROOT / "lib").rglob("*.py")
            for n in ast.parse(p.read_text(encoding="utf-8")).body
            if isinstance(n, ast.FunctionDef) and n.name == name
        )
        for name in ("student_folder", "parse_student_folder", "describe", "encoder_kind_rows", "plan_sentence")
    }
    assert defined == {
        "student_folder": ["lib/distill/stage.py"],
        "parse_student_folder": ["lib/common/published.py"],
        "describe": [],
        "encoder_kind_rows": ["lib/embedders/encoders.py"],
        "plan_sentence": ["lib/linkpred/beyond_stage.py"],
    }
    built = student_folder(3, 384, 2, "MiniLM", "assistant")
    assert published.parse_student_folder(built) == ("student", "3x384", "assistant")
