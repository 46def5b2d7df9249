"""Notebooks 03 and 03b on two cores: a second process trains a seed's models ahead of the notebook, and the notebook
then reloads what it finished: the same rows, bit for bit.

- Notebook 03: `python -m lib.linkpred.stage RUN --seeds ...` trains a seed's models ahead; the runner's `--ahead`
  starts that process itself.
- Notebook 03b: a finished training's record (lib.linkpred.beyond.RECORD) is all a later execution needs to give the
  same rows, and `python -m lib.linkpred.beyond_stage RUN --seeds ...` trains a seed's variants ahead.

Both are checked on one run of notebooks 01-03b (crawling, embedding and training notebook 03 once for both)."""

import json
import os
import time
from pathlib import Path

import pytest

from lib.common.ahead import BUSY_SECONDS, busy
from lib.common.params import ParamError
from lib.linkpred import beyond
from lib.linkpred.beyond_stage import main as beyond_ahead_main
from lib.linkpred.stage import main as ahead_main
from lib.linkpred.stage import train_ahead
from lib.run.ahead import ahead_seeds
from lib.run.runner import main as runner_main

# the demo on graphs of 80 nodes, GatModel and the MLP, two seeds of one epoch, two protocols on different graphs;
# notebook 03b: two decoders of two epochs at one sweep point, on the leak-free protocol
SMALL = [
    *("-p", "max_nodes=80", "-p", "overlap_n_roots=4", "-p", "overlap_max_nodes=[80]", "-p", "models=[gat_model, mlp]"),
    *("-p", "n_seeds=2", "-p", "gat_epochs=1", "-p", "baseline_epochs=1", "-p", "protocols=[seed, leak_free]"),
    *("-p", "beyond_protocols=[leak_free]", "-p", "beyond_variants=[dot, ncn_feat]", "-p", "beyond_epochs=2"),
    *("-p", "sweep_dropout=[0.5]"),
]


def _run(out: Path, *extra: str) -> int:
    return runner_main(
        [
            *("--size", "demo", "--device", "cpu", *SMALL),
            *("--outputs", str(out), "--run-name", "ahead", "--summary", str(out / "summary"), *extra),
        ]
    )


@pytest.mark.slow  # notebooks 01-03b through the runner, then 03 twice and 03b once more
def test_notebooks_03_and_03b_give_the_same_rows_from_trainings_done_ahead(tmp_path):
    out = tmp_path / "runs"
    assert _run(out, "--notebooks", "01", "02", "03", "03b") == 0
    run = out / "ahead"
    rows = (run / "train_gat_rows.csv").read_text()
    beyond_rows = (run / "beyond_rows.csv").read_text()

    # notebook 03
    seed1 = run / "checkpoints" / "seed1"
    folders = sorted({p.parent for p in seed1.rglob("*.pt")})
    assert {f.relative_to(seed1).as_posix() for f in folders} >= {"graphs-mp/gat_model", "leak_free-disjoint/mlp"}
    for f in seed1.rglob("*.pt"):  # seed 1 was never trained by the notebook ...
        f.unlink()

    assert ahead_main([str(run), "--seeds", "1"]) == 0  # ... but by a second process
    assert sorted({p.parent for p in seed1.rglob("*.pt")}) == folders
    assert train_ahead(str(run), [1], progress=False) == []  # its own fresh checkpoints: another process is there

    ahead = {f: f.stat().st_mtime_ns for f in seed1.rglob("epoch_*.pt")}
    assert _run(out, "--rerun", "--notebooks", "03") == 0
    assert (run / "train_gat_rows.csv").read_text() == rows  # bit for bit
    assert {f: f.stat().st_mtime_ns for f in seed1.rglob("epoch_*.pt")} == ahead  # reloaded, not trained again

    # the runner's --ahead starts that second process itself; whoever trains a model, the rows are the same
    for f in seed1.rglob("*.pt"):
        f.unlink()
    assert _run(out, "--rerun", "--notebooks", "03", "--ahead") == 0
    assert (run / "train_gat_rows.csv").read_text() == rows
    assert json.loads((run / "status.json").read_text())["notebooks"]["03_train_gat.ipynb"]["ahead"] == [1]
    assert sorted({p.parent for p in seed1.rglob("*.pt")}) == folders

    # notebook 03b
    ckpt = run / "checkpoints" / "beyond"
    beyond_seed1 = sorted(ckpt.glob("seed1-*/*"))
    assert beyond_seed1 and all((f / beyond.RECORD).is_file() for f in beyond_seed1)
    for f in ckpt.rglob("*.pt"):  # a new machine: the records came along, the epoch files did not
        f.unlink()
    for folder in beyond_seed1:  # and seed 1 is trained ahead by a second process
        (folder / beyond.RECORD).unlink()

    assert beyond_ahead_main([str(run), "--seeds", "1"]) == 0
    assert all((f / beyond.RECORD).is_file() for f in beyond_seed1)
    assert not any(ckpt.glob("seed0-*/*/*.pt"))  # seed 0 (and its sweep) untouched

    ahead = {f: f.stat().st_mtime_ns for f in ckpt.rglob("*.pt")}  # seed 1's, trained ahead
    assert _run(out, "--rerun", "--notebooks", "03b") == 0
    assert (run / "beyond_rows.csv").read_text() == beyond_rows  # bit for bit, with nothing trained again
    assert {f: f.stat().st_mtime_ns for f in ckpt.rglob("*.pt")} == ahead


def test_the_second_process_takes_the_seeds_after_the_first_from_the_last_down():
    assert ahead_seeds({"n_seeds": 4}) == [3, 2, 1] and ahead_seeds({"first_seed": 5, "n_seeds": 2}) == [6]
    assert ahead_seeds({"n_seeds": 1}) == []


def test_training_ahead_needs_the_notebook_started(tmp_path):
    with pytest.raises(ParamError, match="start notebook 03 on it first"):
        ahead_main([str(tmp_path), "--seeds", "1"])


def test_training_ahead_needs_the_notebooks_sweep(tmp_path):
    with pytest.raises(ParamError, match="run notebook 03b on it until its sweep is written"):
        beyond_ahead_main([str(tmp_path), "--seeds", "1"])


def test_a_unit_is_busy_while_its_checkpoints_are_fresh(tmp_path):
    folder = tmp_path / "seed1" / "test-message_passing" / "gat_model"
    assert not busy(folder)  # not started
    folder.mkdir(parents=True)
    (folder / "epoch_001.pt").write_bytes(b"")
    assert busy(folder) and not busy(folder, seconds=0.0)  # fresh, unless nothing counts as fresh
    old = time.time() - 2 * BUSY_SECONDS
    os.utime(folder / "epoch_001.pt", (old, old))
    assert not busy(folder)  # left by an earlier execution: free to resume
