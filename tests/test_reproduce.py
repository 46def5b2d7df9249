"""The reproduction check (lib.run.reproduce): a published run's rows made again at HEAD, compared metric by metric."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from lib.distill.config import DistillParams
from lib.distill.loss_spec import DistillError
from lib.distill.stage import retrain_first_steps
from lib.linkpred import kernels
from lib.run import facts, reproduce
from lib.run.facts import REFERENCE_RUNS

TABLE = reproduce.TABLES[0]  # train_gat_rows.csv


def _rows(seeds=(0, 1), shift=0.0):
    return pd.DataFrame(
        [
            {
                "seed": s,
                "model": m,
                "protocol": "leak_free",
                "supervision": "mp",
                "negatives": "uniform",
                "auc": 0.7 + 0.01 * s + (shift if m == "gat_model" else 0.0),
                "mrr": np.nan,
                "seconds": 10.0 + s,
            }
            for s in seeds
            for m in ("gat_model", "cosine")
        ]
    )


def test_equal_rows_drift_zero_and_timings_and_nan_are_not_drift():
    made = _rows().assign(seconds=99.0)
    d = reproduce.drift(_rows(), made, TABLE).set_index("metric")
    assert set(d.index) == {"auc", "mrr"}  # seconds is a timing, never compared
    assert d.loc["auc", "max_drift"] == 0.0 and d.loc["mrr", "exact"] == 4 and d["ok"].all()


def test_a_drift_beyond_the_tolerance_or_a_row_not_made_again_fails():
    d = reproduce.drift(_rows(), _rows(shift=2e-6), TABLE).set_index("metric")
    assert d.loc["auc", "max_drift"] == pytest.approx(2e-6) and d.loc["auc", "exact"] == 2
    assert not d.loc["auc", "ok"] and d.loc["mrr", "ok"]
    assert reproduce.drift(_rows(), _rows(shift=2e-6), TABLE, tolerance=1e-5)["ok"].all()
    made = _rows().iloc[1:]  # seed 0's gat_model row is missing
    assert not reproduce.drift(_rows(), made, TABLE)["ok"].any()
    one_seed = reproduce.drift(_rows(), _rows(seeds=(0,)), TABLE)  # a one-seed prefix is compared on its own seed
    assert one_seed["ok"].all() and one_seed["rows"].iloc[0] == 2


def test_a_prefix_of_notebooks_is_compared_on_the_tables_those_notebooks_write(tmp_path):
    ref, made = tmp_path / "ref", tmp_path / "made"
    for d in (ref, made):
        d.mkdir()
        _rows().to_csv(d / "train_gat_rows.csv", index=False)
    (ref / "beyond_rows.csv").write_text("seed,model,protocol,negatives,auc\n0,dot,leak_free,uniform,0.9\n")
    d = reproduce.compare(ref, made, notebooks=["01", "02", "03"])  # notebook 03b did not run again
    assert set(d["table"]) == {"train_gat_rows.csv"} and d["ok"].all()
    with pytest.raises(reproduce.ReproduceError, match="made no beyond_rows.csv"):
        reproduce.compare(ref, made)


def test_the_recorded_command_passes_every_declared_parameter_and_names_those_left_out(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "params.json").write_text(
        json.dumps(
            {
                "git_commit": "abc",
                "params": {
                    "_files": ["params/tiny.yaml", "params/gone.yaml"],
                    "run_dir": "outputs/r",
                    "n_seeds": 3,
                    "max_nodes": 500,
                    "beyond_hard_share": 0.5,  # an older name: passed under its current one
                    "amp": True,  # a parameter no notebook declares today
                },
            }
        )
    )
    files, overrides, left_out = reproduce.recorded_command(run, "one-seed")
    assert files == ["params/tiny.yaml"] and left_out == ["amp"]
    assert overrides == {"n_seeds": 1, "embedder_seeds": 1, "max_nodes": 500, "beyond_dist2_share": 0.5}
    with pytest.raises(reproduce.ReproduceError, match="prefix 'two-seeds' is unknown; use one of whole, one-seed"):
        reproduce.recorded_command(run, "two-seeds")
    with pytest.raises(reproduce.ReproduceError, match="has no params.json; name a published run folder"):
        reproduce.recorded_command(tmp_path / "nothing")


def test_a_notebook_re_run_alone_is_reproduced_with_the_parameters_it_ran_with(tmp_path):
    """--rerun leaves params.json as the folder was made; the re-run's own parameters come from its status entry."""
    run = tmp_path / "r"
    run.mkdir()
    (run / "params.json").write_text(json.dumps({"params": {"n_seeds": 3, "beyond_variants": ["dot"]}}))
    status = {"ok": {"status": "ok"}, "rerun": {"status": "ok", "params_changed": {"beyond_variants": ["dot", "x"]}}}
    (run / "status.json").write_text(json.dumps({"complete": True, "notebooks": status}))
    _, overrides, _ = reproduce.recorded_command(run)
    assert overrides == {"n_seeds": 3, "beyond_variants": ["dot", "x"]}
    # the published seed40 re-ran notebook 03b with a thirteenth decoder: its command is the one 03b ran with
    seed40 = REFERENCE_RUNS / "seed40"
    ran = json.loads((seed40 / "params_03b_beyond.json").read_text())["params"]["beyond_variants"]
    assert reproduce.recorded_command(seed40)[1]["beyond_variants"] == ran and len(ran) == 13


@pytest.mark.slow
def test_the_published_prefix_is_made_again_by_todays_code_and_a_moved_number_fails(tmp_path, capsys):
    """A change that moves a published number fails here until the prefix run is made again (its README says how)."""
    # the prefix was made with the C++ kernels; the torch ops' sums differ in the last bits
    if kernels.kernels_status() != "built":
        pytest.skip(f"the fused step's C++ CPU kernels are {kernels.kernels_status()} here (lib.linkpred.kernels)")
    assert reproduce.main(["reproduce_demo", "--outputs", str(tmp_path / "made")]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "metrics within 1e-06" in out and "beyond it" not in out
    moved = tmp_path / "reference"
    shutil.copytree(REFERENCE_RUNS / "reproduce_demo", moved)
    rows = pd.read_csv(moved / "train_gat_rows.csv")
    rows.loc[rows["model"] == "gat_model", "auc"] += 0.001
    rows.to_csv(moved / "train_gat_rows.csv", index=False)
    d = reproduce.compare(moved, tmp_path / "made" / "reproduce_demo").set_index(["table", "metric"])
    assert not d.loc[("train_gat_rows.csv", "auc"), "ok"] and d.drop(("train_gat_rows.csv", "auc"))["ok"].all()


def _run_folder(folder, commit, n_seeds, rows):
    folder.mkdir(parents=True)
    for name in ("params.json", "params_03_train_gat.json"):
        (folder / name).write_text(json.dumps({"git_commit": commit, "params": {"n_seeds": n_seeds}}))
    (folder / "status.json").write_text(json.dumps({"notebooks": {"03_train_gat.ipynb": {"status": "ok"}}}))
    rows.to_csv(folder / "train_gat_rows.csv", index=False)


def test_a_kept_re_run_is_compared_and_recorded_into_the_published_run(tmp_path, monkeypatch, capsys):
    ref = tmp_path / "reference"
    monkeypatch.setattr(reproduce, "REFERENCE_RUNS", ref)
    _run_folder(ref / "r", "a" * 40, 2, _rows())
    _run_folder(tmp_path / "made", "b" * 40, 1, _rows(seeds=(0,)))
    argv = ["r", "--prefix", "one-seed", "--made", str(tmp_path / "made"), "--record"]

    assert reproduce.main(argv) == 0, capsys.readouterr().err
    check = facts.reproduced(ref / "r")
    assert check["rerun_at"] == ["bbbbbbb"] and check["recorded_at"] == ["aaaaaaa"] and check["notebooks"] == ["03"]
    assert "at `bbbbbbb`" in facts.reproduced_sentence(check) and "equal to the last bit" in facts.reproduced_sentence(
        check
    )
    assert facts.reproduced_table(check)["rows exact (all metrics)"].tolist() == [2]

    assert reproduce.main(["r", "--prefix", "whole", "--made", str(tmp_path / "made")]) == 2  # the made run is no whole
    assert "was not run with prefix 'whole' (n_seeds=1)" in capsys.readouterr().err
    _run_folder(tmp_path / "dirty", "c" * 40 + "+dirty", 1, _rows(seeds=(0,), shift=0.01))
    assert reproduce.main(["r", "--prefix", "one-seed", "--made", str(tmp_path / "dirty"), "--record"]) == 2
    assert "uncommitted code" in capsys.readouterr().err and facts.reproduced(ref / "r")["rerun_at"] == ["bbbbbbb"]


def test_the_node_embedder_run_is_compared_on_its_tables_and_not_on_its_speeds(tmp_path):
    ref, made = tmp_path / "ref", tmp_path / "made"
    lp = "embedder,seed,source,model,protocol,auc\n" + "".join(
        f"m,{s},w,gat_model,leak_free,0.{7 + s}\n" for s in (0, 1)
    )
    for d, speed in ((ref, 1000.0), (made, 1200.0)):
        (d / "embedders").mkdir(parents=True)
        (d / "embedders" / "lp_rows.csv").write_text(lp if d == ref else lp.rsplit("m,1", 1)[0])  # one seed made
        (d / "embedders" / "validation.csv").write_text("encoder,cos_validation\nm,0.9\n")
        (d / "embedders" / "speed.csv").write_text(f"encoder,titles_per_s\nm,{speed}\n")
    d = reproduce.compare(ref, made, notebooks=["05b"])
    assert set(d["table"]) == {"embedders/lp_rows.csv", "embedders/validation.csv"} and d["ok"].all()
    assert d.set_index("table").loc["embedders/lp_rows.csv", "rows"] == 1  # seed 0 only


def _distill_run(folder, points):
    """A published notebook-05 run folder: its params record and the learning curve of one student."""
    (folder / "distill").mkdir(parents=True)
    record = {"git_commit": "a" * 40, "params": {"distill_steps": 1000, "eval_every": 500}}
    (folder / "distill" / "params_05.json").write_text(json.dumps(record))
    (folder / "params.json").write_text(json.dumps(record))
    pd.DataFrame(
        [{"run": "3x384 MiniLM random s1", "step": s, "polarity_test": 0.6 + s / 1e4, "train_s": s} for s in points]
    ).to_csv(folder / "distill" / "curves.csv", index=False)


def test_a_distillation_student_is_compared_on_its_curve_and_recorded_with_its_options(tmp_path, monkeypatch, capsys):
    ref = tmp_path / "reference"
    _distill_run(ref / "dl", (0, 500, 1000))
    monkeypatch.setattr(reproduce, "REFERENCE_RUNS", ref)
    monkeypatch.setattr(reproduce, "git_commit", lambda: "b" * 40)
    for name in ("ensure_teacher", "assistant_path", "load_encoder", "build_datasets"):
        monkeypatch.setattr(reproduce, name, lambda *a, **k: None)
    calls = []

    def retrain(cfg, run, steps, *models_and_data):
        calls.append((cfg.distill_steps, run, steps))
        return pd.DataFrame({"step": [0, steps], "polarity_test": [0.6, 0.6 + steps / 1e4 + shift], "train_s": 9.0})

    monkeypatch.setattr(reproduce, "retrain_first_steps", retrain)
    shift = 0.0
    argv = ["dl", "--prefix", "one-student", "--student", "3x384 MiniLM random s1", "--steps", "500", "--record"]
    assert reproduce.main(argv) == 0, capsys.readouterr().err
    assert calls == [(1000, "3x384 MiniLM random s1", 500)]  # the whole run's schedule, its first 500 steps
    check = facts.reproduced(ref / "dl")
    assert check["notebooks"] == ["05"] and check["rerun_at"] == ["bbbbbbb"] and check["recorded_at"] == ["aaaaaaa"]
    assert facts.reproduced_table(check)[["rows", "rows exact (all metrics)"]].values.tolist() == [[2, 2]]  # 0, 500
    assert '--prefix one-student --student "3x384 MiniLM random s1" --steps 500`' in facts.reproduced_sentence(check)
    assert "every metric equal to the last bit in `dl`." in facts.reproduced_line({"dl": check})

    shift = 0.001  # a curve point that moved fails the check
    assert reproduce.main(argv[:-1]) == 1 and "beyond it: distill/curves.csv:polarity_test" in capsys.readouterr().out
    assert reproduce.main([*argv[:4], "3x384 MiniLM random s7"]) == 2
    assert "has no score of '3x384 MiniLM random s7' up to step 500" in capsys.readouterr().err

    # an older run (its files beside the notebook, no learning curve) is compared on its results row, whole runs only
    old = ref / "old"
    old.mkdir()
    record = {"git_commit": "c" * 40, "params": {"steps": 60}}  # the older name of distill_steps
    (old / "params_05.json").write_text(json.dumps(record))
    (old / "results.csv").write_text(
        f"model,stage,polarity_test,final_loss\n3x384 MiniLM random s1,task-agnostic,{0.6 + 60 / 1e4!r},3\n"
    )
    shift, calls[:] = 0.0, []
    assert reproduce.main(["old", *argv[1:5], "--steps", "60", "--record"]) == 0, capsys.readouterr().err
    assert calls == [(60, "3x384 MiniLM random s1", 60)]
    table = facts.reproduced(old)["table"]
    assert [(r["table"], r["metric"], r["exact"]) for r in table] == [("results.csv", "polarity_test", 1)]
    assert reproduce.main(["old", *argv[1:5], "--steps", "30"]) == 2  # no score before its end


def test_the_one_student_prefix_names_what_it_is_for(tmp_path, monkeypatch, capsys):
    ref = tmp_path / "reference"
    _run_folder(ref / "r", "a" * 40, 2, _rows())
    monkeypatch.setattr(reproduce, "REFERENCE_RUNS", ref)
    assert reproduce.main(["r", "--prefix", "one-student", "--student", "x"]) == 2
    assert "use one-seed or whole for the others" in capsys.readouterr().err
    assert reproduce.main(["r", "--prefix", "one-student"]) == 2 and "pass --student" in capsys.readouterr().err
    (ref / "kd").mkdir()
    (ref / "kd" / "rows.csv").write_text("row_id,test\npolarity_bilstm_kd_s0,0.7\n")
    params = {"kd_tasks": ["polarity"], "kd_students": ["bilstm"], "kd_seeds": [0, 1]}
    (ref / "kd" / "params_06.json").write_text(json.dumps({"git_commit": "a" * 40, "params": params}))
    assert reproduce.main(["kd", "--prefix", "one-student", "--student", "topic bilstm s0"]) == 2
    assert "with task in ['polarity'], kind in ['bilstm'] and seed in [0, 1]" in capsys.readouterr().err


def test_only_a_task_agnostic_run_of_the_grid_is_re_trained_alone():
    cfg = DistillParams(distill_steps=100)
    for run, why in (("3x384 MiniLM (w/ TA) random s0", "cannot be re-trained alone"), ("3x256 MiniLM random s0", "")):
        with pytest.raises(DistillError, match=why or r"not in this grid \(384-wide students, 100 steps\)"):
            retrain_first_steps(cfg, run, 10, None, None, {})
    with pytest.raises(DistillError, match="1 to 100 steps"):
        retrain_first_steps(cfg, "3x384 MiniLM random s0", 101, None, None, {})
