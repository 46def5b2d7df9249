"""Notebook 03b across processes and machines: a finished training's record (lib.linkpred.beyond.RECORD) is all a
later execution needs to give the same rows, and `python -m lib.linkpred.beyond_stage RUN --seeds ...` trains a
seed's variants ahead of the notebook in a second process, whose records the notebook then reads back."""

from pathlib import Path

import pytest

from lib.linkpred import beyond
from lib.linkpred.beyond_stage import main as ahead_main
from lib.run.runner import main as runner_main

pytestmark = pytest.mark.slow  # notebooks 01-03b through the runner, twice for 03b

# the demo on graphs of 80 nodes, GatModel only, two seeds, two decoders of two epochs at one sweep point
SMALL = [
    *("-p", "max_nodes=80", "-p", "overlap_n_roots=4", "-p", "overlap_max_nodes=[80]", "-p", "models=[gat_model]"),
    *("-p", "n_seeds=2", "-p", "gat_epochs=1", "-p", "beyond_variants=[dot, ncn_feat]", "-p", "beyond_epochs=2"),
    *("-p", "sweep_dropout=[0.5]"),
]


def _run(out: Path, *extra: str) -> int:
    return runner_main(
        [
            "--size",
            "demo",
            "--device",
            "cpu",
            *SMALL,
            "--outputs",
            str(out),
            "--run-name",
            "ahead",
            "--summary",
            str(out / "summary"),
            *extra,
        ]
    )


def test_notebook_03b_gives_the_same_rows_from_records_and_from_trainings_done_ahead(tmp_path):
    out = tmp_path / "runs"
    assert _run(out, "--notebooks", "01", "02", "03", "03b") == 0
    run = out / "ahead"
    rows = (run / "beyond_rows.csv").read_text()
    ckpt = run / "checkpoints" / "beyond"
    seed1 = sorted(ckpt.glob("seed1-*/*"))
    assert seed1 and all((f / beyond.RECORD).is_file() for f in seed1)
    for f in ckpt.rglob("*.pt"):  # a new machine: the records came along, the epoch files did not
        f.unlink()
    for folder in seed1:  # and seed 1 is trained ahead by a second process
        (folder / beyond.RECORD).unlink()

    assert ahead_main([str(run), "--seeds", "1"]) == 0
    assert all((f / beyond.RECORD).is_file() for f in seed1)
    assert not any(ckpt.glob("seed0-*/*/*.pt"))  # seed 0 (and its sweep) untouched

    ahead = {f: f.stat().st_mtime_ns for f in ckpt.rglob("*.pt")}  # seed 1's, trained ahead
    assert _run(out, "--rerun", "--notebooks", "03b") == 0
    assert (run / "beyond_rows.csv").read_text() == rows  # bit for bit, with nothing trained again
    assert {f: f.stat().st_mtime_ns for f in ckpt.rglob("*.pt")} == ahead


def test_training_ahead_needs_the_notebooks_sweep(tmp_path):
    from lib.common.params import ParamError

    with pytest.raises(ParamError, match="run notebook 03b on it until its sweep is written"):
        ahead_main([str(tmp_path), "--seeds", "1"])
