"""The batch runner end to end on two tiny notebooks: a 2-profile grid, a failing run, skip-if-complete, summary."""
import json

import nbformat as nbf
import pytest

from lib.runner import main


def tiny_notebook(path, params_src, body_src):
    nb = nbf.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "wikigat", "display_name": "Python (wikigat)", "language": "python"}
    p = nbf.v4.new_code_cell(params_src)
    p.metadata["tags"] = ["parameters"]
    nb.cells = [p, nbf.v4.new_code_cell(body_src)]
    nbf.write(nb, path)


@pytest.fixture()
def project(tmp_path):
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    tiny_notebook(nbs / "01_first.ipynb",
                  'run_dir: str = "x"  # run folder\nsize: int = 1  # a size',
                  "from lib.runinfo import update_metrics\nupdate_metrics(run_dir, 'first', {'size': size, 'sq': size * size})")
    tiny_notebook(nbs / "02_second.ipynb",
                  'run_dir: str = "x"  # run folder\nfail: bool = False  # make this notebook fail',
                  "assert not fail, 'asked to fail'\nfrom lib.runinfo import update_metrics\n"
                  "update_metrics(run_dir, 'second', {'ok': 1})")
    (tmp_path / "a.yaml").write_text("size: 3\n")
    (tmp_path / "b.yaml").write_text("size: 4\nfail: true\n")
    (tmp_path / "c.yaml").write_text("size: 5\n")
    return tmp_path


def run(project, *args):
    return main(["--notebook-dir", str(project / "nbs"), "--outputs", str(project / "out"), *args])


def test_grid_with_a_failing_run_goes_on_reports_and_exits_nonzero(project, capsys):
    code_a = run(project, "--params", str(project / "a.yaml"), "--run-name", "a")
    assert code_a == 0
    code_b = run(project, "--params", str(project / "b.yaml"), "--run-name", "b")
    assert code_b == 1
    out = capsys.readouterr().out
    assert "02_second.ipynb FAILED" in out and "failed: b" in out

    a, b = project / "out" / "a", project / "out" / "b"
    assert json.loads((a / "metrics.json").read_text()) == {"first": {"size": 3, "sq": 9}, "second": {"ok": 1}}
    assert json.loads((a / "status.json").read_text())["complete"] is True
    status_b = json.loads((b / "status.json").read_text())
    assert status_b["complete"] is False and status_b["notebooks"]["02_second.ipynb"]["status"] == "failed"
    params = json.loads((a / "params.json").read_text())
    assert params["params"]["size"] == 3 and params["git_commit"] and params["packages"]["papermill"]
    assert (a / "01_first.ipynb").is_file() and (a / "02_second.ipynb").is_file()

    # a complete run with the same parameters is skipped; a changed one re-runs
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "a") == 0
    assert "already complete" in capsys.readouterr().out
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "a", "-p", "size=6") == 0
    assert json.loads((a / "metrics.json").read_text())["first"]["sq"] == 36


def test_summary_table_compares_runs(project):
    run(project, "--params", str(project / "a.yaml"), "--run-name", "a")
    run(project, "--params", str(project / "c.yaml"), "--run-name", "c", "--summary", str(project / "out" / "s"))
    from lib.runner import summarize

    table = summarize(["a", "c"], project / "out" / "sum", outputs=project / "out")
    assert list(table.index) == ["a", "c"] and list(table["first.sq"]) == [9, 25]
    md = (project / "out" / "sum.md").read_text()
    sq_row = next(line for line in md.splitlines() if line.startswith("| first.sq"))
    assert [c.strip() for c in sq_row.strip("|").split("|")] == ["first.sq", "9", "25"]
    assert (project / "out" / "sum.csv").read_text().splitlines()[0].startswith("run,complete")
    assert "<table" in (project / "out" / "sum.html").read_text()


def test_unknown_key_in_grid_is_refused_before_any_run(project, capsys):
    (project / "bad.yaml").write_text("sise: 3\n")
    assert run(project, "--params", str(project / "bad.yaml"), "--run-name", "bad") == 2
    assert "unknown parameter 'sise'" in capsys.readouterr().err and not (project / "out" / "bad").exists()
