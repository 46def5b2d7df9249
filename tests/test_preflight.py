"""Every value is checked before the runner touches a run folder; a folder has one writer and one parameter set;
readers name their file; input files may start with a byte-order mark."""

import json
import os
import signal
import subprocess
import sys
import time
import warnings

import pytest
import torch

from lib.common.paths import PARAMS, ROOT
from lib.run.folder import run_folder_lock
from lib.run.runner import BUSY, main
from tests.test_runner import (  # noqa: F401  (project fixture below)
    folder_bytes,
    project,  # noqa: F401
    run,
    tiny_notebook,
)

NO_GPU = not torch.cuda.is_available()


def dry(tmp_path, *args):
    return main(["--outputs", str(tmp_path / "out"), "--dry-run", *args])


@pytest.mark.parametrize(
    "override, named",
    [
        ("max_nodes=abc", "max_nodes='abc' (-p) is a str; 01_crawl.ipynb declares it int"),
        ("gat_epochs=abc", "gat_epochs='abc' (-p) is a str; 03_train_gat.ipynb declares it int"),
        ("n_seeds=-1", "n_seeds=-1 is invalid: must be >= 1"),
        ("gat_lr=true", "gat_lr=True (-p) is a bool; 03_train_gat.ipynb declares it float"),
        ("protocols=[leak_free, nowhere]", "protocols=['leak_free', 'nowhere'] is invalid"),
        ("source=nowhere", "source='nowhere' is invalid: must be one of embedded, wikispeedia, snapshot, live, graphs"),
        ("ablation_students=[5]", "ablation_students=[5] is invalid: ablations run on students that are in `students`"),
        ("kd_tasks=[]", "kd_tasks=[] is invalid: use a non-empty subset of ['polarity', 'topic']"),
        ("reuse_runs=nowhere", "reuse_runs='nowhere': " + str(ROOT / "nowhere/distill/params_05.json")),
        (
            "reuse_runs=outputs/reference/distill_long",  # a published grid of other settings is not extended
            "reuse_runs='outputs/reference/distill_long': its runs was made with other settings (distill_batch_size",
        ),
    ],
)
def test_a_bad_value_is_refused_by_dry_run_and_run_before_anything_is_written(tmp_path, capsys, override, named):
    assert dry(tmp_path, "--size", "tiny", "-p", override) == 2
    err = capsys.readouterr().err
    assert named in err and "(-p)" in err and err.count("\n") == 1
    assert main(["--outputs", str(tmp_path / "out"), "--size", "tiny", "-p", override]) == 2
    assert not (tmp_path / "out").exists()


def test_a_published_grid_with_a_damaged_table_is_refused_before_any_work(tmp_path, capsys):
    grid = tmp_path / "published" / "distill"
    grid.mkdir(parents=True)
    (grid / "params_05.json").write_text("{}")
    (grid / "results.csv").write_bytes(b'model,stage\n"S1,task')  # cut inside a quote
    assert dry(tmp_path, "--size", "tiny", "--notebooks", "01", "-p", f"reuse_runs={grid.parent}") == 2
    err = capsys.readouterr().err
    assert f"reuse_runs='{grid.parent}': {grid / 'results.csv'} is not a readable CSV table (" in err
    assert "restore it" in err and err.count("\n") == 1 and not (tmp_path / "out").exists()


def test_a_bad_value_names_the_params_file_it_came_from(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text("gat_epochs: two\n")
    assert dry(tmp_path, "--params", str(PARAMS / "tiny.yaml"), str(tmp_path / "bad.yaml")) == 2
    assert f"gat_epochs='two' (params file {tmp_path / 'bad.yaml'})" in capsys.readouterr().err


@pytest.mark.skipif(not NO_GPU, reason="checks the refusal on a machine without CUDA")
def test_cuda_without_a_gpu_is_refused_up_front_also_with_params_files(tmp_path, capsys):
    assert dry(tmp_path, "--size", "tiny", "--device", "cuda") == 2
    assert "device='cuda' requested but no CUDA GPU is visible" in capsys.readouterr().err
    # --device is layered after --params files, not dropped
    assert dry(tmp_path, "--params", str(PARAMS / "tiny.yaml"), "--device", "cuda") == 2
    assert "no CUDA GPU" in capsys.readouterr().err


def test_two_runs_into_one_folder_and_a_run_name_for_a_grid_are_errors(tmp_path, capsys):
    assert dry(tmp_path, "--params", str(PARAMS / "tiny.yaml"), "--size", "tiny", "--run-name", "n") == 2
    assert "--run-name names one run folder, but 2 runs are planned" in capsys.readouterr().err


def test_a_params_file_that_is_not_utf8_is_one_line(tmp_path, capsys):
    (tmp_path / "latin.yaml").write_bytes("picture_root: Zürich\n".encode("latin-1"))
    assert dry(tmp_path, "--params", str(tmp_path / "latin.yaml")) == 2
    err = capsys.readouterr().err
    assert "is not UTF-8 text" in err and "save it as UTF-8" in err and err.count("\n") == 1


def test_a_byte_order_mark_starts_no_title(tmp_path):
    from lib.crawl.campaign import read_roots
    from lib.crawl.sources import read_snapshot, read_topics

    (tmp_path / "links.tsv").write_bytes("\ufeffArticle 000\tArticle 001\nArticle 001\tArticle 000\n".encode())
    (tmp_path / "roots.txt").write_bytes("\ufeffArticle 000\n".encode())
    (tmp_path / "topics.tsv").write_bytes("\ufeffArticle 000\tArts\n".encode())
    (tmp_path / "comment.tsv").write_bytes("\ufeff# a comment\nA\tB\n".encode())
    assert set(read_snapshot(tmp_path / "links.tsv").links) == {"Article 000", "Article 001"}
    assert read_roots(tmp_path / "roots.txt") == ["Article 000"]
    assert read_topics(tmp_path / "topics.tsv") == {"Article 000": "Arts"}
    assert set(read_snapshot(tmp_path / "comment.tsv").links) == {"A"}


def test_a_folder_made_with_other_parameters_is_refused_untouched_also_by_dry_run(project, capsys):  # noqa: F811
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "x") == 0
    before = folder_bytes(project / "out" / "x")
    assert run(project, "--params", str(project / "c.yaml"), "--run-name", "x", "--dry-run") == 2
    assert run(project, "--params", str(project / "c.yaml"), "--run-name", "x", "--notebooks", "01") == 2
    assert "made with other settings (size)" in capsys.readouterr().err
    assert folder_bytes(project / "out" / "x") == before


def test_force_on_a_subset_keeps_the_other_notebooks_entries(project):  # noqa: F811
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "s") == 0
    status = json.loads((project / "out" / "s" / "status.json").read_text())
    executed = (project / "out" / "s" / "02_second.ipynb").read_text()
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "s", "--force", "--notebooks", "02") == 0
    after = json.loads((project / "out" / "s" / "status.json").read_text())
    assert after["complete"] and after["notebooks"]["01_first.ipynb"] == status["notebooks"]["01_first.ipynb"]
    # 02 ran again: its executed copy is new (papermill stamps each execution; status timings alone can coincide)
    assert after["notebooks"]["02_second.ipynb"]["status"] == "ok"
    assert (project / "out" / "s" / "02_second.ipynb").read_text() != executed


def test_a_folder_being_written_is_refused_naming_its_holder_and_a_dead_holder_is_taken_over(project, capsys):  # noqa: F811
    out = project / "out"
    with run_folder_lock(out, "busy"):
        assert run(project, "--params", str(project / "a.yaml"), "--run-name", "busy") == BUSY
        assert f"is being written by pid {os.getpid()}" in capsys.readouterr().err
    assert not (out / "busy").exists() and not (out / "summary.md").exists()  # nothing written, not even the summary
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; "
            "from lib.run.folder import run_folder_lock\n"
            f"with run_folder_lock(Path({str(out)!r}), 'busy'):\n"
            "    print('held', flush=True); time.sleep(600)",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "busy") == 0


def test_ctrl_c_ends_with_one_line_saying_the_same_command_resumes(project, capsys, monkeypatch):  # noqa: F811
    import lib.run.runner as runner

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_one", interrupted)
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "i") == 130
    err = capsys.readouterr().err.strip()
    assert err == "interrupted: finished notebooks and checkpoints are kept; the same command resumes"


def test_unreadable_files_are_named_and_a_cut_checkpoint_is_moved_aside(tmp_path):
    from lib.common.runinfo import read_json
    from lib.common.tensorfiles import read_checkpoint
    from lib.crawl.sources import PageCache

    (tmp_path / "store.json").write_text('{"format": 1, "mod')
    with pytest.raises(ValueError, match=r"store\.json is not valid JSON .*delete it and re-run"):
        read_json(tmp_path / "store.json")
    ck = tmp_path / "last.pt"
    torch.save({"config": {"a": 1}, "w": torch.zeros(1000)}, ck)
    ck.write_bytes(ck.read_bytes()[:200])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert read_checkpoint(ck) is None
    assert not ck.exists() and (tmp_path / "last.pt.corrupt").is_file()
    assert any("last.pt could not be read" in str(w.message) for w in caught)
    (tmp_path / "pages.sqlite").write_bytes(b"not a database" * 100)
    with pytest.warns(UserWarning, match=r"pages\.sqlite could not be read"):
        cache = PageCache(tmp_path / "pages.sqlite")
    assert len(cache) == 0 and (tmp_path / "pages.sqlite.corrupt").is_file()
    cache.close()


def test_gat_training_moves_a_cut_checkpoint_aside_and_trains_again_to_the_same_result(tmp_path):
    from lib.linkpred.config import TrainConfig
    from lib.linkpred.data import synthetic_graph
    from lib.linkpred.model import ModelConfig
    from lib.linkpred.train import LAST, Checkpointing, train_model

    graphs = [synthetic_graph(40, 120, in_channels=8, seed=i, graph_id=f"g{i}") for i in range(2)]
    model_cfg = ModelConfig(in_channels=8, gat_hidden=8, gat_out=4, gat_levels=1, gat_heads=1)
    cfg = TrainConfig(epochs=1, seed=0, log_aauc=False, log_eval=False)
    first, _ = train_model("gat_model", model_cfg, graphs, [], cfg, Checkpointing(tmp_path, "data"), progress=False)
    (tmp_path / LAST).write_bytes(b"PK\x03\x04 cut short")
    with pytest.warns(UserWarning, match="last.pt could not be read"):
        again, res = train_model(
            "gat_model", model_cfg, graphs, [], cfg, Checkpointing(tmp_path, "data"), progress=False
        )
    assert res.resumed_from == 0 and res.steps == 2 and (tmp_path / (LAST + ".corrupt")).is_file()
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), again.state_dict().values()))


def test_the_lock_file_lives_beside_the_run_folders(tmp_path):
    with run_folder_lock(tmp_path, "r"):
        assert f"pid {os.getpid()}" in (tmp_path / ".locks" / "r.lock").read_text()
        time.sleep(0)
    assert (tmp_path / ".locks" / "r.lock").read_text() == ""


@pytest.mark.parametrize(
    "args, named",
    [
        (
            ["-p", "gat_epochs=abc"],
            "gat_epochs='abc' (-p) is a str; 03_train_gat.ipynb declares it int (default 2); give an int",
        ),
        (["-p", "n_seeds=-1"], "n_seeds=-1 is invalid: must be >= 1"),
        (["-p", "reuse_runs=nowhere"], "reuse_runs='nowhere'"),
        pytest.param(["--device", "cuda"], "no CUDA GPU", marks=pytest.mark.skipif(not NO_GPU, reason="needs no GPU")),
    ],
)
def test_values_of_notebooks_that_do_not_run_are_checked_too(tmp_path, capsys, args, named):
    assert main(["--outputs", str(tmp_path / "out"), "--size", "tiny", "--notebooks", "01", *args]) == 2
    err = capsys.readouterr().err
    assert named in err and err.count("\n") == 1 and not (tmp_path / "out").exists()


def test_an_outputs_folder_that_cannot_be_written_is_one_line_also_in_a_dry_run(tmp_path, capsys, monkeypatch):
    locked = tmp_path / "ro"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p).startswith(str(locked)) else real(p, mode))
    for extra in (["--dry-run"], []):
        assert main(["--outputs", str(locked / "out"), "--size", "tiny", *extra]) == 2
        err = capsys.readouterr().err
        assert f"cannot be written by this user (it would be made in {locked})" in err and err.count("\n") == 1
    assert list(locked.iterdir()) == []


def test_a_full_disk_names_the_file_and_the_fix(tmp_path, monkeypatch):
    import errno

    from lib.common.paths import atomic_write_text

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match=rf"no space left on the device of {tmp_path / 'status.json'}; free space there"):
        atomic_write_text(tmp_path / "status.json", "{}")
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_an_empty_roots_file_is_named_with_where_it_came_from(tmp_path, capsys):
    (tmp_path / "roots.txt").write_text("# only a comment\n\n")
    assert dry(tmp_path, "--size", "tiny", "-p", f"roots_file={tmp_path / 'roots.txt'}", "-p", "source=embedded") == 2
    err = capsys.readouterr().err
    assert f"roots_file='{tmp_path / 'roots.txt'}' holds no title" in err and "(-p)" in err and "default of" not in err


def test_messages_are_short_and_show_what_differs(tmp_path, capsys, project):  # noqa: F811
    assert dry(tmp_path, "--size", "tiny", "-p", "gat_epoch=3") == 2
    err = capsys.readouterr().err
    assert "unknown parameter 'gat_epoch' in -p overrides" in err and "Did you mean gat_epochs" in err
    assert len(err) < 300
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "x") == 0
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "x", "-p", "size=6", "--dry-run") == 2
    assert "(it has size=3; this run has size=6)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "make, missing",
    [
        (lambda d: None, "has no config.json and no modules.json"),
        (lambda d: (d / "config.json").write_bytes(b"\xff\xfe garbage"), "config.json is not UTF-8 JSON"),
        (lambda d: (d / "config.json").write_text('{"hidden_size": 8}'), "config.json names no model_type"),
        (lambda d: (d / "config.json").write_text('{"model_type": "bert"}'), "holds no weights"),
    ],
)
def test_a_folder_that_is_not_a_model_is_refused_before_any_work(tmp_path, capsys, make, missing):
    folder = tmp_path / "not_a_model"
    folder.mkdir()
    make(folder)
    assert dry(tmp_path, "--size", "tiny", "--notebooks", "01", "-p", f"model_dir={folder}") == 2
    err = capsys.readouterr().err
    assert f"model_dir '{folder}' is not a model folder: " in err and missing in err and err.count("\n") == 1


def test_notebook_05bs_folder_encoder_that_is_not_a_model_is_refused_whichever_notebooks_run(tmp_path, capsys):
    folder = tmp_path / "not_a_model"
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 8}')
    assert dry(tmp_path, "--size", "tiny", "--notebooks", "01", "-p", f"embedder_encoders=['folder:{folder}']") == 2
    err = capsys.readouterr().err
    assert f"the folder '{folder}' is not a model folder: its config.json names no model_type" in err
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()
