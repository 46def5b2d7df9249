"""A finished row is a whole row: a rows file cut inside a line (a kill, a full disk) keeps its whole rows, names the
rows it drops, and their work is done again; damaged files are kept as evidence, epoch checkpoints nobody loads yet
are checked, and failed writes and missing folders say what the user can act on."""

import errno
import json
import re
import tempfile

import pandas as pd
import pytest
import torch

from lib.common.paths import RecoveryWarning, WriteError, append_csv_rows, atomic_write_text, csv_rows, read_rows
from lib.embed.encoder import EmbedError, check_model_dir
from lib.linkpred.checkpoint import data_fingerprint, epoch_checkpoints, load_checkpoint
from lib.linkpred.config import TrainConfig
from lib.linkpred.train import Checkpointing, train_model
from tests.test_recovery import cut, fake_link_prediction, grid_with_two_finished_runs, moved_aside
from tests.test_train import SMALL, _graphs


def cut_last_line(data: bytes) -> bytes:
    """A kill inside the last row: its first fields are there, the rest and the line break are not."""
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    return data[: last + 20]


def cut_inside_last_field(data: bytes) -> bytes:
    """A kill inside the last field of the last row: as many fields as the header, but no line break."""
    return data[:-2]


def middle_row_without_its_last_fields(data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    lines[2] = b",".join(lines[2].split(b",")[:4]) + b"\n"
    return b"".join(lines)


LP_DAMAGE = {  # damage, the cut row's line, its seed (the pair scored again)
    "cut inside the last line": (cut_last_line, 5, 1),
    "cut inside the last field": (cut_inside_last_field, 5, 1),
    "a middle row without its last fields": (middle_row_without_its_last_fields, 3, 0),
}


@pytest.mark.parametrize("damage", LP_DAMAGE)
def test_a_cut_link_prediction_row_is_named_dropped_and_its_pair_scored_again_to_the_same_rows(
    tmp_path, monkeypatch, damage
):
    run, scored, rows_file = fake_link_prediction(tmp_path, monkeypatch, mrr=0.25)
    first = run()
    make, line, seed = LP_DAMAGE[damage]
    data = make(rows_file.read_bytes())
    rows_file.write_bytes(data)
    if make is cut_inside_last_field:  # the case a field count alone would take for a whole row
        assert data.splitlines()[-1].count(b",") == data.splitlines()[0].count(b",")
    with pytest.warns(RecoveryWarning) as caught:
        again = run()
    (warning,) = [str(w.message) for w in caught if issubclass(w.category, RecoveryWarning)]
    assert re.fullmatch(
        rf"link-prediction rows {re.escape(str(rows_file))} could not be read \(1 row is not whole, cut short or "
        rf"overwritten: line {line} with embedder=reference, seed={seed}, model_id=\S+\); moved aside to "
        rf"lp_rows\.csv\.corrupt, its 3 whole rows are written back and the cut one dropped: their \(embedder, seed\) "
        rf"pairs are scored again",
        warning,
    ), warning
    assert scored == [0, 1, seed] and rows_file.with_name("lp_rows.csv.corrupt").read_bytes() == data
    pd.testing.assert_frame_equal(again, first)
    in_order = ["seed", "model"]  # a pair scored again is written after the others
    pd.testing.assert_frame_equal(
        read_rows(rows_file, "rows", "-").sort_values(in_order, ignore_index=True),
        first.sort_values(in_order, ignore_index=True),
    )


def test_rows_with_too_few_or_too_many_fields_are_named_and_the_whole_ones_kept_with_their_quoted_line_breaks(tmp_path):
    path = tmp_path / "rows.csv"
    data = (
        b'row_id,text,score\nr1,"two\nlines",0.5\nr2,cut\nr3,"one",0.7\nr4,x,0.8,extra\nr5,"three\n\nlines",0.9\n'
        b"r6,last,0."
    )
    path.write_bytes(data)
    reason = (
        "3 rows are not whole, cut short or overwritten: line 4 with row_id=r2, text=cut; line 6 with row_id=r4, "
        "text=x, score=0.8; line 10 with row_id=r6, text=last, score=0."
    )
    with pytest.warns(
        RecoveryWarning,
        match=moved_aside(
            path,
            "finished rows",
            re.escape(reason),
            "its 3 whole rows are written back and the 3 cut ones dropped: they are made again",
        ),
    ):
        rows = read_rows(path, "finished rows", "they are made again", columns=["row_id"])
    assert rows.values.tolist() == [["r1", "two\nlines", 0.5], ["r3", "one", 0.7], ["r5", "three\n\nlines", 0.9]]
    assert path.read_bytes() == b'row_id,text,score\nr1,"two\nlines",0.5\nr3,"one",0.7\nr5,"three\n\nlines",0.9\n'
    assert path.with_name("rows.csv.corrupt").read_bytes() == data
    assert csv_rows(path)[1] == ""  # written back whole: read without a word


def test_notebook_03b_refuses_notebook_03s_rows_with_a_cut_row_at_every_run_until_notebook_03_writes_them(tmp_path):
    from lib.common.params import ParamError
    from lib.linkpred.beyond_stage import load_stage3
    from lib.linkpred.config import BeyondParams

    (tmp_path / "metrics.json").write_text(json.dumps({"train_gat": {}}))
    path = tmp_path / "train_gat_rows.csv"
    data = b"protocol,seed,model,auc\nleak_free,0,gat_model,0.8\nleak_free,0,mlp,0.7\nleak_free,0,gat"
    path.write_bytes(data)
    with (
        pytest.warns(
            RecoveryWarning,
            match=moved_aside(
                path,
                "notebook 03's rows",
                "1 row is not whole, cut short or overwritten: line 4 with protocol=leak_free, seed=0, model=gat",
                r"its 2 whole rows with it \(without the cut "
                r"one they would pass for the whole table\): run notebook 03 "
                r"on this run_dir again to write them",
            ),
        ),
        pytest.raises(ParamError, match=r"run notebook 03 \(train_gat\) on this run_dir first"),
    ):
        load_stage3(BeyondParams(run_dir=str(tmp_path)))
    assert path.with_name("train_gat_rows.csv.corrupt").read_bytes() == data
    with pytest.raises(ParamError, match=r"run notebook 03 \(train_gat\) on this run_dir first"):
        load_stage3(BeyondParams(run_dir=str(tmp_path)))


def test_appending_to_a_file_cut_inside_a_quoted_field_keeps_its_whole_rows_before_the_new_ones(tmp_path):
    path = tmp_path / "builds.csv"
    data = b'encoder,seed,auc\ncontrol,0,0.5\n"cont'
    path.write_bytes(data)
    with pytest.warns(
        RecoveryWarning,
        match=moved_aside(
            path,
            "rows file",
            "1 row is not whole, cut short or overwritten: line 3 with encoder=cont",
            "its 1 whole row is written back and the cut one dropped: the rows added now follow the whole ones",
        ),
    ):
        append_csv_rows(path, [{"encoder": "control", "seed": 1, "auc": 0.6}])
    assert pd.read_csv(path).values.tolist() == [["control", 0, 0.5], ["control", 1, 0.6]]
    assert path.with_name("builds.csv.corrupt").read_bytes() == data


def test_a_published_table_with_a_cut_row_is_not_read_as_whole(tmp_path):
    path = tmp_path / "results.csv"
    path.write_bytes(b"model,stage,auc\nS1,reference,0.5\nS2,refer")
    assert csv_rows(path) == (None, "1 row is not whole, cut short or overwritten: line 3 with model=S2, stage=refer")


def test_a_second_damage_keeps_the_evidence_of_the_first(tmp_path):
    path = tmp_path / "rows.csv"
    for data, aside in [(b"", "rows.csv.corrupt"), (b"\xff\xfe", "rows.csv.corrupt.1"), (b"", "rows.csv.corrupt.2")]:
        path.write_bytes(data)
        with pytest.warns(RecoveryWarning, match=rf"moved aside to {re.escape(aside)}, again$"):
            read_rows(path, "rows", "again")
        assert not path.exists() and (tmp_path / aside).read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "rows.csv.corrupt",
        "rows.csv.corrupt.1",
        "rows.csv.corrupt.2",
    ]


def test_a_torn_last_line_of_a_grids_finished_rows_is_named_and_kept_aside(tmp_path):
    from lib.distill.checkpoint import GridCheckpoint

    cfg, path = grid_with_two_finished_runs(tmp_path)
    whole = path.read_bytes()
    first = whole.splitlines(keepends=True)[0]
    path.write_bytes(whole + first[:-8])  # a kill tore the line of the next run
    with pytest.warns(
        RecoveryWarning,
        match=rf"finished-run rows {re.escape(str(path))} could not be read \(its line "
        rf"3 is cut short\); copied aside to rows\.jsonl\.corrupt, it is cut off "
        rf"the file and the run S1 is trained again",
    ):
        assert set(GridCheckpoint(tmp_path, cfg).rows) == {"S1", "S2"}
    assert path.read_bytes() == whole and path.with_name("rows.jsonl.corrupt").read_bytes() == whole + first[:-8]


def test_a_resumed_run_names_damaged_epoch_checkpoints_it_does_not_load_and_writes_the_last_one_again(tmp_path):
    graphs = _graphs()
    cfg = TrainConfig(epochs=4, seed=3, lr=0.005, log_aauc=False)  # selects epoch 3 of 4, kernels or not
    ckpt = Checkpointing(tmp_path, data_id=data_fingerprint(graphs))
    _, r_full = train_model("gat_model", SMALL, graphs[:4], graphs[4:], cfg, ckpt, progress=False)
    assert r_full.best_epoch == 3
    files = epoch_checkpoints(tmp_path)
    last = load_checkpoint(files[4])[0].state_dict()
    cut(files[1])
    cut(files[4])
    with pytest.warns(RecoveryWarning) as caught:
        _, r_again = train_model("gat_model", SMALL, graphs[:4], graphs[4:], cfg, ckpt, progress=False)
    said = [str(w.message) for w in caught if issubclass(w.category, RecoveryWarning)]
    assert said == [
        f"epoch checkpoint {files[1]} could not be read (cut short or overwritten); moved aside to epoch_1.pt.corrupt, "
        f"it cannot be written again: its weights are kept nowhere else (later notebooks load only the selected "
        f"epoch, 3)",
        f"epoch checkpoint {files[4]} could not be read (cut short or overwritten); moved aside to epoch_4.pt.corrupt, "
        f"it is written again from the weights kept in last.pt",
    ]
    assert r_again.best_epoch == 3 and list(epoch_checkpoints(tmp_path)) == [2, 3, 4]
    assert (tmp_path / "epoch_1.pt.corrupt").is_file() and (tmp_path / "epoch_4.pt.corrupt").is_file()
    for (k, a), b in zip(last.items(), load_checkpoint(files[4])[0].state_dict().values()):
        assert torch.equal(a, b), k


@pytest.mark.parametrize(
    "fail, message",
    [
        (
            "mkstemp",
            "{path} cannot be written by this user; pass --outputs a folder you can write, or make it writable",
        ),
        ("replace", "{path}: Input/output error"),
    ],
)
def test_a_failed_write_names_the_file_being_written_not_its_temp_file(tmp_path, monkeypatch, fail, message):
    path = tmp_path / "run" / "status.json"
    temp = str(path.with_name(".status.json.k3j9x2.tmp"))

    def refuse(*args, **kwargs):
        if fail == "mkstemp":
            raise PermissionError(errno.EACCES, "Permission denied", temp)
        raise OSError(errno.EIO, "Input/output error", args[0], None, args[1])

    monkeypatch.setattr(tempfile, "mkstemp", refuse) if fail == "mkstemp" else monkeypatch.setattr(
        "lib.common.paths.os.replace", refuse
    )
    with pytest.raises(WriteError) as e:
        atomic_write_text(path, json.dumps({"state": "running"}))
    monkeypatch.undo()
    assert str(e.value) == message.format(path=path) and ".tmp" not in str(e.value)
    assert not list(path.parent.glob(".*.tmp"))


def test_a_missing_model_folder_is_said_not_to_exist_and_a_file_not_to_be_a_folder(tmp_path):
    with pytest.raises(EmbedError) as e:
        check_model_dir(tmp_path / "nope")
    assert str(e.value).startswith(
        f"model_dir '{tmp_path / 'nope'}' does not exist; check the path, or pass a folder "
        f"saved with SentenceTransformer.save(folder)"
    ) and "\n" not in str(e.value)
    (tmp_path / "file").write_text("x")
    with pytest.raises(EmbedError, match=r"model_dir '.+file' is not a folder; pass a folder saved with"):
        check_model_dir(tmp_path / "file")
