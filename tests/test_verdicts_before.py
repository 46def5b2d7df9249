"""`python -m lib.run.verdicts RUN --before EARLIER`: an earlier run's verdict per cell beside this run's."""

from test_verdicts import beyond_rows

from lib.run.verdicts import before_after, main, run_verdicts


def test_a_remade_run_is_set_beside_the_published_one_cell_by_cell(tmp_path, capsys):
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    beyond_rows(0.001, 0.02, seeds=3).to_csv(tmp_path / "old" / "beyond_rows.csv", index=False)
    beyond_rows(0.10, 0.01, seeds=10).to_csv(tmp_path / "new" / "beyond_rows.csv", index=False)
    table = before_after(run_verdicts(tmp_path / "old"), run_verdicts(tmp_path / "new"))
    row = table.iloc[0]
    assert (row["protocol"], row["negatives"]) == ("leak_free", "uniform")
    assert (row["before · seeds"], row["after · seeds"]) == (3, 10)
    assert row["before · goal"] != "met" and row["after · goal"] == "met"
    assert row["after · AUC margin, cn positives"].startswith("+0.")
    assert main([str(tmp_path / "new"), "--before", str(tmp_path / "old")]) == 0
    out = capsys.readouterr().out
    assert "before: goal met in 0" in out and "after: goal met in 1" in out and "(10 seeds)" in out


def test_an_earlier_folder_without_notebook_03b_is_one_line(tmp_path, capsys):
    (tmp_path / "new").mkdir()
    beyond_rows(0.10, 0.01).to_csv(tmp_path / "new" / "beyond_rows.csv", index=False)
    assert main([str(tmp_path / "new"), "--before", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "missing" in err and err.count("\n") == 1
