"""What the runner takes in and writes out: inputs it can check are checked before any folder exists, every file it
writes is whole (also on a full disk), its errors are one line, and the shared summary lists every run.

Most tests replace papermill's execute_notebook by a stand-in that writes the executed copy as papermill does (so no
kernel starts); one slow test runs real kernels."""

import errno
import json
import os

import nbformat
import papermill
import pytest

import lib.common.paths as paths
import lib.run.summary as summary
from lib.common.paths import WriteError, atomic_write_text, os_error_line
from lib.run.runner import main
from tests.test_runner import project, run  # noqa: F401  (project fixture)

NO_SPACE = "No space left on device"


class FakePapermill:
    """papermill.execute_notebook without a kernel: writes the input notebook, with papermill's metadata, to the output
    path, then fails when a parameter says so. `cut_short`: write half of it, then fail as a full disk does."""

    def __init__(self):
        self.cut_short = False
        self.outputs = []

    def __call__(self, input_path, output_path, parameters=None, **kwargs):
        nb = nbformat.read(input_path, as_version=4)
        nb.metadata["papermill"] = {"input_path": input_path, "output_path": output_path, "parameters": parameters}
        text = nbformat.writes(nb)
        self.outputs.append(output_path)
        with open(output_path, "w", encoding="utf-8") as f:
            if self.cut_short:
                f.write(text[: len(text) // 2])
                raise OSError(errno.ENOSPC, NO_SPACE)
            f.write(text)
        if (parameters or {}).get("fail") or (parameters or {}).get("size") == 13:
            raise RuntimeError("asked to fail")
        return nb


@pytest.fixture()
def fake(monkeypatch):
    stand_in = FakePapermill()
    monkeypatch.setattr(papermill, "execute_notebook", stand_in)
    return stand_in


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def test_an_executed_notebook_is_whole_or_absent_when_its_write_fails(project, fake, capsys):  # noqa: F811
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "x") == 0
    folder = project / "out" / "x"
    executed = nbformat.read(folder / "01_first.ipynb", as_version=4)  # whole, and it names itself, not its temp
    assert executed.metadata["papermill"]["output_path"] == str(folder / "01_first.ipynb")
    assert all(o != str(folder / "01_first.ipynb") for o in fake.outputs)  # papermill never wrote the file itself
    capsys.readouterr()
    fake.cut_short = True  # the disk fills while papermill writes the executed copy
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "x", "--force") == 1
    out = capsys.readouterr().out
    assert (
        f" s: OSError: no space left on the device of {folder / '01_first.ipynb'}; free space there" in out
        and "01_first.ipynb FAILED after " in out
        and "executed notebook:" not in out
    )
    # no half notebook anywhere: the cut copy is gone, and so is the earlier copy the failed entry replaced
    assert sorted(p.name for p in folder.iterdir()) == ["02_second.ipynb", "params.json", "status.json"]
    assert json.loads((folder / "status.json").read_text())["notebooks"]["01_first.ipynb"]["status"] == "failed"


def test_a_full_disk_while_writing_the_summary_is_one_line(project, fake, capsys, monkeypatch):  # noqa: F811
    def full(path, text):
        raise WriteError(errno.ENOSPC, os_error_line(OSError(errno.ENOSPC, NO_SPACE), path), str(path))

    monkeypatch.setattr(summary, "atomic_write_text", full)
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "x") == 1
    captured = capsys.readouterr()
    assert one_line(captured.err) == (
        f"error: summary not written: no space left on the device of {project / 'out' / 'summary.csv'}; free space "
        f"there (or pass --outputs a folder on another disk) and run the same command again: it resumes"
    )
    assert captured.out.splitlines()[-1] == "1 of 1 run(s) complete"


def test_a_disk_full_from_the_start_is_one_line_per_failed_write(project, fake, capsys, monkeypatch):  # noqa: F811
    def full(fd):
        raise OSError(errno.ENOSPC, NO_SPACE)

    monkeypatch.setattr(os, "fsync", full)
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "x") == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 2, err
    run_line, summary_line = err.splitlines()
    assert run_line.startswith(f"error: [x] no space left on the device of {project / 'out' / 'x'}")
    assert summary_line.startswith("error: summary not written: no space left on the device of ")


def test_a_full_disk_in_the_cache_names_wikigat_cache(tmp_path, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, NO_SPACE)

    monkeypatch.setattr(paths, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as cached:
        atomic_write_text(tmp_path / "cache" / "pages.json", "{}")
    assert str(cached.value) == (
        f"no space left on the device of {tmp_path / 'cache' / 'pages.json'}; free space "
        f"there (or set WIKIGAT_CACHE to a folder on another disk) and run the same command "
        f"again: it resumes"
    )
    with pytest.raises(OSError, match=r"\(or pass --outputs a folder on another disk\)"):
        atomic_write_text(tmp_path / "run" / "status.json", "{}")
    denied = os_error_line(PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "cache" / "x.sqlite")))
    assert denied.endswith(
        "cannot be written by this user; set WIKIGAT_CACHE to a folder you can write, or make it writable"
    )


def missing_inputs(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "links.tsv").write_text("A\tB\n")
    return [
        (
            ["source=snapshot", f"snapshot_path={tmp_path / 'nope.tsv'}"],
            f"snapshot_path='{tmp_path / 'nope.tsv'}' does not exist; pass a TSV link list",
        ),
        (
            ["source=snapshot", f"snapshot_path={tmp_path / 'empty'}"],
            f"snapshot_path='{tmp_path / 'empty'}' is a folder; pass a TSV link list",
        ),
        (
            ["source=graphs", f"snapshot_path={tmp_path / 'nope'}"],
            f"snapshot_path='{tmp_path / 'nope'}' does not exist; pass a folder of graph JSON files",
        ),
        (
            ["source=graphs", f"snapshot_path={tmp_path / 'empty'}"],
            f"snapshot_path='{tmp_path / 'empty'}' holds no .json graph files; pass a folder of graph JSON files",
        ),
        (
            ["source=snapshot", f"snapshot_path={tmp_path / 'links.tsv'}", f"topics_file={tmp_path / 'topics.tsv'}"],
            f"topics_file='{tmp_path / 'topics.tsv'}' does not exist; pass a TSV of title TAB topic lines",
        ),
        (["overlap_roots_file=params/nope.txt"], "overlap_roots_file='params/nope.txt' does not exist (read as "),
    ]


@pytest.mark.parametrize("case", range(6))
def test_a_missing_input_file_is_refused_before_the_folder_exists(tmp_path, capsys, case):
    overrides, named = missing_inputs(tmp_path)[case]
    p = [a for o in overrides for a in ("-p", o)]
    for extra in (["--dry-run"], []):
        assert main(["--outputs", str(tmp_path / "out"), "--size", "tiny", "--notebooks", "01", *p, *extra]) == 2
        err = one_line(capsys.readouterr().err)
        assert err.startswith("error: 01_crawl.ipynb: ") and named in err and err.endswith("(-p)")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "selected, reader, file, writer, to_run",
    [
        (["03"], "03_train_gat.ipynb", "dataset/index.json", "02", "notebooks 01 02"),
        (["02", "03"], "02_embed.ipynb", "crawl/manifest.json", "01", "notebook 01"),
        (["04"], "04_aauc_analysis.ipynb", "train_gat_rows.csv", "03", "notebooks 01 02 03"),
    ],
)
def test_a_notebook_whose_inputs_no_notebook_wrote_is_refused_naming_them(
    tmp_path, capsys, selected, reader, file, writer, to_run
):
    for extra in (["--dry-run"], []):
        assert main(["--outputs", str(tmp_path / "out"), "--size", "tiny", "--notebooks", *selected, *extra]) == 2
        assert one_line(capsys.readouterr().err) == (
            f"error: {reader} reads {file} from the run folder, which notebook {writer} writes and "
            f"{tmp_path / 'out' / 'tiny-cpu'} does not hold; run {to_run} first, or drop --notebooks"
        )
    assert not (tmp_path / "out").exists()
    # once the folder holds what the notebooks before wrote, the same selection is planned
    for file in ("crawl/manifest.json", "dataset/index.json", "train_gat_rows.csv"):
        (tmp_path / "out" / "tiny-cpu" / file).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "out" / "tiny-cpu" / file).write_text("{}")
    assert main(["--outputs", str(tmp_path / "out"), "--size", "tiny", "--notebooks", *selected, "--dry-run"]) == 0


def test_the_corrected_command_is_accepted_when_no_notebook_finished(project, fake, capsys):  # noqa: F811
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "x", "-p", "size=13") == 1  # 01 fails
    assert "01_first.ipynb FAILED" in capsys.readouterr().out
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "x", "-p", "size=5") == 0
    assert (
        "no notebook finished with the folder's earlier parameters; it starts over with these"
        in capsys.readouterr().out
    )
    folder = project / "out" / "x"
    assert json.loads((folder / "params.json").read_text())["params"]["size"] == 5
    assert json.loads((folder / "status.json").read_text())["complete"] is True
    # a folder where a notebook finished keeps its parameters: its results were made with them
    assert run(project, "--params", str(project / "b.yaml"), "--run-name", "y") == 1  # 01 ok, 02 fails
    capsys.readouterr()
    assert run(project, "--params", str(project / "b.yaml"), "--run-name", "y", "-p", "fail=false", "-p", "size=5") == 2
    assert "made with other settings (fail, size)" in capsys.readouterr().err


def test_the_shared_summary_lists_every_run_of_the_outputs_folder(project, fake, capsys):  # noqa: F811
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "first") == 0
    assert run(project, "--params", str(project / "c.yaml"), "--run-name", "second") == 0
    assert "summary of 2 run(s)" in capsys.readouterr().out
    (project / "out" / "damaged").mkdir()
    (project / "out" / "damaged" / "status.json").write_text('{"complete": tr')  # another runner's, cut short
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "first") == 0
    md = (project / "out" / "summary.md").read_text()
    assert all(f"| {name} " in md for name in ("first", "second", "damaged"))
    csv = (project / "out" / "summary.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in csv[1:]] == ["damaged", "first", "second"]


def test_a_params_file_that_is_not_there_names_it_and_what_is_accepted(tmp_path, capsys):
    assert main(["--outputs", str(tmp_path / "out"), "--params", str(tmp_path / "mine.yaml"), "--dry-run"]) == 2
    err = one_line(capsys.readouterr().err)
    assert err.startswith(
        f"error: params file {tmp_path / 'mine.yaml'} does not exist; name an existing YAML file of "
        f"`key: value` lines, or one of the profiles in params/: beyond.yaml, cpu.yaml"
    )
    assert "tiny.yaml" in err and "[]" not in err


@pytest.mark.slow
def test_a_real_run_fails_on_a_bad_value_and_the_corrected_one_completes(project, capsys):  # noqa: F811
    assert run(project, "--params", str(project / "b.yaml"), "--run-name", "r", "--notebooks", "02") == 1
    folder = project / "out" / "r"
    executed = nbformat.read(folder / "02_second.ipynb", as_version=4)  # papermill's copy with the error, whole
    assert executed.metadata["papermill"]["output_path"] == str(folder / "02_second.ipynb")
    assert "executed notebook:" in capsys.readouterr().out
    assert run(project, "--params", str(project / "b.yaml"), "--run-name", "r", "-p", "fail=false") == 0
    assert json.loads((folder / "status.json").read_text())["complete"] is True
    assert not [p for p in folder.iterdir() if ".partial" in p.name]
