"""The batch runner end to end on two tiny notebooks: a 2-profile grid, a failing run, skip-if-complete, summary."""

import json
import os
import subprocess
import sys

import nbformat as nbf
import pytest

from lib.common.paths import ROOT
from lib.embed.encoder import default_model_dir
from lib.run.folder import EXECUTING, kernel_environment
from lib.run.runner import main


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
    tiny_notebook(
        nbs / "01_first.ipynb",
        'run_dir: str = "x"  # run folder\nsize: int = 1  # a size',
        "from lib.common.runinfo import update_metrics\n"
        "update_metrics(run_dir, 'first', {'size': size, 'sq': size * size})",
    )
    tiny_notebook(
        nbs / "02_second.ipynb",
        'run_dir: str = "x"  # run folder\nfail: bool = False  # make this notebook fail',
        "assert not fail, 'asked to fail'\nfrom lib.common.runinfo import update_metrics\n"
        "update_metrics(run_dir, 'second', {'ok': 1})",
    )
    (tmp_path / "a.yaml").write_text("size: 3\n")
    (tmp_path / "b.yaml").write_text("size: 4\nfail: true\n")
    (tmp_path / "c.yaml").write_text("size: 5\n")
    return tmp_path


def folder_bytes(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def run(project, *args):
    return main(["--notebook-dir", str(project / "nbs"), "--outputs", str(project / "out"), *args])


@pytest.mark.slow  # two runs of notebooks in fresh kernels
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

    # a complete run with the same parameters is skipped; other parameters are refused, leaving the folder as it
    # was, unless --force starts it over
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "a") == 0
    assert "already complete" in capsys.readouterr().out
    before = folder_bytes(a)
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "a", "-p", "size=6") == 2
    assert "made with other settings (size)" in capsys.readouterr().err and folder_bytes(a) == before
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "a", "-p", "size=6", "--force") == 0
    assert json.loads((a / "metrics.json").read_text())["first"]["sq"] == 36
    assert json.loads((a / "params.json").read_text())["params"]["size"] == 6


def test_summary_table_compares_runs(project):
    run(project, "--params", str(project / "a.yaml"), "--run-name", "a")
    run(project, "--params", str(project / "c.yaml"), "--run-name", "c", "--summary", str(project / "out" / "s"))
    from lib.run.summary import summarize

    table = summarize(["a", "c", "never"], project / "out" / "sum", outputs=project / "out")
    assert list(table.index) == ["a", "c", "never"] and list(table["first.sq"])[:2] == [9, 25]
    csv = (project / "out" / "sum.csv").read_text().splitlines()
    assert csv[0].startswith("run,complete") and "first.sq" in csv[0] and "notebooks.01_first.ipynb.seconds" in csv[0]
    md = (project / "out" / "sum.md").read_text()
    # the tiny notebooks write no link-prediction metrics: only the notebook table is a headline
    assert "## Notebooks: wall time and peak memory" in md and "Link prediction" not in md
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in md.splitlines() if line.startswith("| a ")]
    assert [r[1] for r in rows] == ["01_first.ipynb", "02_second.ipynb"] and all(r[2] == "ok" for r in rows)
    assert "| never " in md and "not run" in md
    assert "<table" in (project / "out" / "sum.html").read_text()


def _metrics(rows, distill=None):
    return {
        "train_gat": {"mean": rows, "seconds": 1.23456789},
        **({"distill": {"results": distill}} if distill else {}),
    }


def test_summary_headlines_new_protocols_rounded_first_and_full_dump_in_csv(tmp_path):
    from lib.run.summary import summarize

    rows = []
    for protocol, negatives in [("within_graph", "uniform"), ("within_graph", "hard"), ("new_nodes", "uniform")]:
        for sv in ("mp", "disjoint"):
            rows.append(
                {
                    "protocol": protocol,
                    "negatives": negatives,
                    "supervision": sv,
                    "model": "gat_model",
                    "auc": 0.812345678 if sv == "mp" else 0.7,
                    "aauc": 0.61111111,
                }
            )
            rows.append({"protocol": protocol, "negatives": negatives, "supervision": sv, "model": "mlp", "auc": 0.75})
        rows.append(
            {
                "protocol": protocol,
                "negatives": negatives,
                "supervision": "none",
                "model": "cosine",
                "auc": 0.9 if negatives == "uniform" else 0.5,
            }
        )
        rows.append(
            {"protocol": protocol, "negatives": negatives, "supervision": "none", "model": "pref_attach", "auc": 0.6}
        )
    distill = [
        {"student": "3x384", "method": "MiniLM", "seed": s, "polarity_test": v, "topic_test": 0.4}
        for s, v in [(0, 0.5), (1, 0.6)]
    ]
    old_style = [
        {"protocol": "seed", "model": "gat_model", "auc": 0.9, "aauc": 0.7, "seed": 1.0},
        {"protocol": "seed", "model": "adamic_adar", "auc": 0.95},
    ]
    for name, m in {"new": _metrics(rows, distill), "old": _metrics(old_style), "empty": {"train_gat": {}}}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(json.dumps(m))
    summarize(["new", "old", "empty"], tmp_path / "sum", outputs=tmp_path)
    md = (tmp_path / "sum.md").read_text()
    sections = [line for line in md.splitlines() if line.startswith("## ")]
    assert sections[:3] == [
        "## Link prediction: gat_model AUC / A-AUC per protocol",
        "## Best trained model vs best heuristic (AUC)",
        "## Distillation (mean over seeds)",
    ]
    assert "| 0.812 |" in md and "0.812345678" not in md and "0.611" in md
    table = lambda title: [
        [c.strip() for c in line.strip("|").split("|")]  # noqa: E731
        for line in md.split(title)[1].split("## ")[0].splitlines()
        if line.startswith("| ")
    ]
    gat = table("per protocol")
    assert gat[0] == ["run", "protocol", "negatives", "supervision", "auc", "aauc"]
    assert ["new", "new_nodes", "uniform", "disjoint", "0.700", "0.611"] in gat
    assert ["old", "seed", "", "", "0.900", "0.700"] in gat  # a row without the new keys
    best = {(r[0], r[1], r[2]): r for r in table("heuristic (AUC)")[1:]}
    # within_graph/hard: the mp GatModel (0.812) beats the best heuristic pref_attach (0.6); uniform: cosine wins
    # these rows hold no validation score, so the model is picked on test, and the table says so
    assert best[("new", "within_graph", "hard")][3:] == [
        "gat_model (mp)",
        "0.812",
        "pref_attach",
        "0.600",
        "0.212",
        "test",
    ]
    assert best[("new", "within_graph", "uniform")][5:] == ["cosine", "0.900", "-0.088", "test"]
    assert best[("old", "seed", "")][3:] == ["gat_model", "0.900", "adamic_adar", "0.950", "-0.050", "test"]
    dist = table("Distillation")
    assert dist[1] == ["new", "3x384", "MiniLM", "0.550", "0.400"]
    html = (tmp_path / "sum.html").read_text()
    assert html.index("Link prediction") < html.index("Distillation") and "<td>0.812</td>" in html
    assert "0.812345678" not in html
    csv = (tmp_path / "sum.csv").read_text()
    assert "train_gat.seconds" in csv and "1.23456789" in csv  # unrounded, every scalar


def test_unknown_key_in_grid_is_refused_before_any_run(project, capsys):
    (project / "bad.yaml").write_text("sise: 3\n")
    assert run(project, "--params", str(project / "bad.yaml"), "--run-name", "bad") == 2
    assert "unknown parameter 'sise'" in capsys.readouterr().err and not (project / "out" / "bad").exists()


# ---------------------------------------------------------------- partial runs, failures, time and memory


def test_profile_keys_are_checked_against_all_notebooks_and_only_selected_ones_run(project, capsys):
    # c.yaml sets `size` (notebook 01); b2.yaml adds `fail`, declared only by notebook 02, which does not run
    (project / "b2.yaml").write_text("size: 2\nfail: true\n")
    assert run(project, "--params", str(project / "b2.yaml"), "--run-name", "only01", "--notebooks", "01") == 0
    out_dir = project / "out" / "only01"
    assert (out_dir / "01_first.ipynb").is_file() and not (out_dir / "02_second.ipynb").exists()
    assert json.loads((out_dir / "metrics.json").read_text()) == {"first": {"size": 2, "sq": 4}}
    # a key that no notebook declares is still refused, even when its notebook is not selected
    (project / "typo.yaml").write_text("fial: true\n")
    assert run(project, "--params", str(project / "typo.yaml"), "--run-name", "t", "--notebooks", "01") == 2
    assert "unknown parameter 'fial'" in capsys.readouterr().err
    assert run(project, "--params", str(project / "a.yaml"), "--notebooks", "07") == 2
    assert "--notebooks 07: no such notebook" in capsys.readouterr().err


def test_failure_reports_exception_name_message_and_cell(project, capsys):
    assert run(project, "--params", str(project / "b.yaml"), "--run-name", "b") == 1
    out = capsys.readouterr().out
    assert "02_second.ipynb FAILED" in out and "AssertionError: asked to fail" in out
    assert "assert not fail, 'asked to fail'" in out  # the failing cell's source
    entry = json.loads((project / "out" / "b" / "status.json").read_text())["notebooks"]["02_second.ipynb"]
    assert entry["status"] == "failed" and entry["error_name"] == "AssertionError"
    assert entry["error_message"] == "asked to fail" and "assert not fail" in entry["cell_source"]
    # papermill's executed copy holds the injected-parameters cell, so the body cell is at index 2 there
    assert entry["cell_index"] == 2 and entry["seconds"] >= 0


def test_status_records_wall_time_and_kernel_peak_memory(project):
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "a") == 0
    status = json.loads((project / "out" / "a" / "status.json").read_text())
    for entry in status["notebooks"].values():
        assert entry["seconds"] > 0
        # a Python kernel with ipykernel loaded holds tens of MB; far from the 24 GB of the machine
        assert 20 < entry["peak_rss_mb"] < 4000
    assert "VmHWM" in status["peak_rss_mb_measures"]


def test_kernel_peak_sees_a_child_that_allocates_and_frees_300_mb():
    import subprocess
    import sys

    from lib.run.folder import KernelPeak

    code = "import time; b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096]); del b; time.sleep(1.0)"
    with KernelPeak(interval=0.1) as peak:
        subprocess.run([sys.executable, "-c", code], check=True)
    # the memory is freed before the child sleeps; VmHWM still holds the high-water mark
    assert peak.peak_mb is not None and 300 <= peak.peak_mb < 600


def test_dry_run_validates_prints_the_plan_and_runs_nothing(project, capsys):
    (project / "b2.yaml").write_text("size: 2\nfail: true\n")
    assert run(project, "--params", str(project / "b2.yaml"), "--run-name", "d", "--dry-run") == 0
    out = capsys.readouterr().out
    assert "[d] run" in out and '01_first.ipynb: {"size": 2}' in out and '02_second.ipynb: {"fail": true}' in out
    assert not (project / "out").exists()
    (project / "bad.yaml").write_text("sise: 3\n")
    assert run(project, "--params", str(project / "bad.yaml"), "--dry-run") == 2


def _runner_examples() -> list[str]:
    """Every `python -m lib.run.runner ...` command in the runner's --help text, README.md and docs/*.md (fenced
    command blocks and inline code), as argument strings."""
    import re

    import lib.run.runner
    from lib.common.paths import ROOT

    texts = [lib.run.runner.__doc__]
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        md = page.read_text(encoding="utf-8")
        texts += re.findall(r"```[a-z]*\n(.*?)```", md, flags=re.S)
        texts += re.findall(r"`([^`\n]*python -m lib\.run\.runner[^`\n]*)`", re.sub(r"```.*?```", "", md, flags=re.S))
    found = []
    for text in texts:
        for line in text.replace("\\\n", " ").splitlines():  # a command continued with \ is one line
            if "python -m lib.run.runner" in line:
                found.append(line.split("python -m lib.run.runner", 1)[1].split("#", 1)[0].strip())
    return found


def test_every_runner_example_in_help_and_readme_parses(tmp_path, capsys):
    import shlex

    examples = _runner_examples()
    assert len(examples) >= 12, examples  # help has 5, the README and docs more: the extraction itself must work
    own = str(default_model_dir())  # the README's folder of your own, a placeholder the reader fills in
    for ex in examples:  # into an empty outputs folder: a demo run made earlier would refuse other parameters
        ex = ex.replace("/path/to/your/model", own)
        code = main([*shlex.split(ex), "--dry-run", "--outputs", str(tmp_path)])
        if "--rerun" in ex:  # parsed and checked up to its folder: an empty outputs folder has no run to re-run
            assert code == 2 and "needs a complete run folder" in capsys.readouterr().err, ex
            continue
        assert code == 0, f"example does not parse: python -m lib.run.runner {ex}"


def test_rerun_executes_only_the_selected_notebook_into_a_complete_run(project, capsys):
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "r") == 0
    out_dir = project / "out" / "r"
    before = json.loads((out_dir / "status.json").read_text())
    first_nb = (out_dir / "01_first.ipynb").read_text()
    # 02 gains a parameter value of its own (its own keys may change); 01's are the folder's
    (project / "a2.yaml").write_text("size: 3\nfail: false\n")
    rerun_02 = ("--run-name", "r", "--rerun", "--notebooks", "02")
    capsys.readouterr()
    assert run(project, "--params", str(project / "a2.yaml"), *rerun_02, "--dry-run") == 0  # the re-run's own checks
    assert "parameters that change: fail" in capsys.readouterr().out
    assert json.loads((out_dir / "status.json").read_text()) == before  # a dry run writes nothing
    assert run(project, "--params", str(project / "a2.yaml"), *rerun_02) == 0
    after = json.loads((out_dir / "status.json").read_text())
    assert after["complete"] and after["params_hash"] == before["params_hash"]
    assert after["notebooks"]["01_first.ipynb"] == before["notebooks"]["01_first.ipynb"]
    assert (out_dir / "01_first.ipynb").read_text() == first_nb  # not re-executed
    entry = after["notebooks"]["02_second.ipynb"]
    assert entry["status"] == "ok" and entry["rerun"].startswith("re-run alone at commit ")
    assert entry["params_changed"] == {"fail": False}
    # a parameter a notebook that is not re-run uses: refused, naming it
    assert run(project, "--params", str(project / "c.yaml"), "--run-name", "r", "--rerun", "--notebooks", "02") == 2
    assert "other settings (size)" in capsys.readouterr().err
    assert run(project, "--params", str(project / "c.yaml"), *rerun_02, "--dry-run") == 2
    assert "other settings (size)" in capsys.readouterr().err
    # a parameter notebook 01 gained after the folder was made counts as unchanged at its default, not otherwise
    tiny_notebook(
        project / "nbs" / "01_first.ipynb",
        'run_dir: str = "x"  # run folder\nsize: int = 1  # a size\nextra: int = 7  # added later',
        "pass",
    )
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "r", "--rerun", "--notebooks", "02") == 0
    (project / "a3.yaml").write_text("size: 3\nextra: 8\n")
    assert run(project, "--params", str(project / "a3.yaml"), "--run-name", "r", "--rerun", "--notebooks", "02") == 2
    assert "other settings (extra)" in capsys.readouterr().err
    # an incomplete or missing folder, or no --notebooks: refused
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "none", "--rerun", "--notebooks", "02") == 2
    assert "needs a complete run folder" in capsys.readouterr().err
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "r", "--rerun") == 2
    assert "--rerun takes one run" in capsys.readouterr().err


def test_the_runner_gives_each_kernel_the_threads_parameter_as_omp_num_threads(tmp_path, monkeypatch):
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    tiny_notebook(
        nbs / "01_threads.ipynb",
        'run_dir: str = "x"  # run folder\nthreads: int = 0  # CPU threads',
        "import os\nfrom lib.common.runinfo import update_metrics\n"
        "update_metrics(run_dir, 'env', {'omp': os.environ.get('OMP_NUM_THREADS')})",
    )
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    out = tmp_path / "out"
    args = ["--notebook-dir", str(nbs), "--outputs", str(out), "--params", str(nbs / ".." / "t.yaml")]
    (tmp_path / "t.yaml").write_text("{}\n")
    assert main([*args, "--run-name", "one", "-p", "threads=1"]) == 0
    assert json.loads((out / "one" / "metrics.json").read_text())["env"]["omp"] == "1"
    assert json.loads((out / "one" / "status.json").read_text())["notebooks"]["01_threads.ipynb"]["threads"] == 1
    assert main([*args, "--run-name", "dflt"]) == 0  # threads 0: OMP_NUM_THREADS of the runner's environment
    assert json.loads((out / "dflt" / "metrics.json").read_text())["env"]["omp"] == "2"
    # threads says how a run executes, not what it computes: a complete run is not re-run for another value
    import os

    assert os.environ["OMP_NUM_THREADS"] == "2"  # restored after the kernel ran
    status = (out / "one" / "status.json").read_text()
    assert main([*args, "--run-name", "one", "-p", "threads=2"]) == 0
    assert (out / "one" / "status.json").read_text() == status


def test_an_interrupted_run_resumes_at_its_first_unfinished_notebook(project, capsys):
    assert run(project, "--params", str(project / "b.yaml"), "--run-name", "r") == 1  # 02 fails
    out_dir = project / "out" / "r"
    first = json.loads((out_dir / "status.json").read_text())["notebooks"]["01_first.ipynb"]
    executed = (out_dir / "01_first.ipynb").read_text()
    capsys.readouterr()
    # the same parameters again (02 still fails): 01 is kept, not executed again
    assert run(project, "--params", str(project / "b.yaml"), "--run-name", "r") == 1
    assert "01_first.ipynb finished ok earlier with the same parameters; kept" in capsys.readouterr().out
    status = json.loads((out_dir / "status.json").read_text())
    assert status["notebooks"]["01_first.ipynb"] == first and (out_dir / "01_first.ipynb").read_text() == executed
    assert [(e["notebook"], e["status"]) for e in status["executions"]] == [
        ("01_first.ipynb", "ok"),
        ("02_second.ipynb", "failed"),
        ("02_second.ipynb", "failed"),
    ]  # every execution, not only the last
    assert not (out_dir / EXECUTING).exists()
    # a runner killed outright while 02 ran leaves its heartbeat: the next runner records that execution as killed
    (out_dir / EXECUTING).mkdir()
    killed = {
        "notebook": "02_second.ipynb",
        "commit": "abc1234",
        "started": "2026-11-29T10:00:00+0000",
        "seconds": 12.5,
    }
    (out_dir / EXECUTING / "02_second.json").write_text(json.dumps(killed))
    assert run(project, "--params", str(project / "b.yaml"), "--run-name", "r") == 1
    assert "02_second.ipynb was stopped without a record after about 12.5 s" in capsys.readouterr().out
    status = json.loads((out_dir / "status.json").read_text())
    assert status["executions"][3] == {**killed, "status": "killed"} and len(status["executions"]) == 5
    assert not (out_dir / EXECUTING).exists()
    # other parameters (with --force): nothing is kept, the executions of the earlier parameters neither
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "r", "--force") == 0
    assert "kept" not in capsys.readouterr().out
    status = json.loads((out_dir / "status.json").read_text())
    assert [e["status"] for e in status["executions"]] == ["ok", "ok"]
    # 01 ran again: its result is the new size's (timings alone can coincide at 0.1 s resolution)
    assert status["complete"] and json.loads((out_dir / "metrics.json").read_text())["first"] == {"size": 3, "sq": 9}
    assert (out_dir / "01_first.ipynb").read_text() != executed


def test_the_console_names_a_recovery_and_shows_no_kernel_log(tmp_path, capfd):
    nbs = tmp_path / "nbs"
    nbs.mkdir()
    tiny_notebook(
        nbs / "01_first.ipynb",
        'run_dir: str = "x"  # run folder',
        "import warnings\nfrom lib.common.paths import RecoveryWarning\n"
        "warnings.warn('cache c.pt could not be read (cut); moved aside to c.pt.corrupt, rebuilt', "
        "RecoveryWarning)",
    )
    assert main(["--notebook-dir", str(nbs), "--outputs", str(tmp_path / "out"), "--run-name", "r"]) == 0
    out, err = capfd.readouterr()
    assert "[r] 01_first.ipynb recovered: cache c.pt could not be read (cut); moved aside to c.pt.corrupt" in out
    assert "IPKernelApp" not in err and "without encryption" not in err
    entry = json.loads((tmp_path / "out" / "r" / "status.json").read_text())["notebooks"]["01_first.ipynb"]
    assert entry["recovered"] == ["cache c.pt could not be read (cut); moved aside to c.pt.corrupt, rebuilt"]


def test_a_damaged_status_record_is_moved_aside_and_the_run_resumes(project, capsys):
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "d") == 0
    (project / "out" / "d" / "status.json").write_text('{"notebooks": {"01_fi')
    capsys.readouterr()
    assert run(project, "--params", str(project / "a.yaml"), "--run-name", "d") == 0
    assert "recovered: run record" in capsys.readouterr().out
    assert (project / "out" / "d" / "status.json.corrupt").is_file()
    assert json.loads((project / "out" / "d" / "status.json").read_text())["complete"] is True


@pytest.mark.slow  # the runner in a fresh process, interrupted
def test_ctrl_c_prints_only_the_resume_line(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from lib.common.paths import ROOT
    from lib.run.folder import partial_path

    nbs = tmp_path / "nbs"
    nbs.mkdir()
    tiny_notebook(nbs / "01_first.ipynb", 'run_dir: str = "x"  # run folder', "import time\ntime.sleep(60)")
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lib.run.runner",
            "--notebook-dir",
            str(nbs),
            "--outputs",
            str(tmp_path / "out"),
            "--run-name",
            "c",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 120
    while time.time() < deadline and not partial_path(tmp_path / "out" / "c" / "01_first.ipynb").is_file():
        time.sleep(0.5)  # papermill writes the executed copy (to its partial path) as the first cell starts
    time.sleep(3)
    os.killpg(runner.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the runner and its kernel
    out, err = runner.communicate(timeout=120)
    assert runner.returncode == 130
    assert err.strip() == "interrupted: finished notebooks and checkpoints are kept; the same command resumes"
    executed = tmp_path / "out" / "c" / "01_first.ipynb"  # the copy up to the stop, whole
    assert nbf.read(executed, as_version=4).cells and not partial_path(executed).exists()
    (interrupted,) = json.loads((tmp_path / "out" / "c" / "status.json").read_text())["executions"]
    assert interrupted["status"] == "interrupted" and interrupted["seconds"] >= 3


def test_a_heartbeat_says_how_long_a_notebook_has_run_and_goes_when_it_ends(tmp_path):
    import time

    from lib.run.folder import Heartbeat, killed_executions

    with Heartbeat(tmp_path, "03_train_gat.ipynb", "abc1234", interval=0.05) as beat:
        time.sleep(0.3)
        record = json.loads((tmp_path / EXECUTING / "03_train_gat.json").read_text())
    assert record["notebook"] == "03_train_gat.ipynb" and record["commit"] == "abc1234"
    assert 0.1 <= record["seconds"] <= beat.seconds() and record["started"] == beat.record["started"]
    assert not (tmp_path / EXECUTING).exists() and killed_executions(tmp_path) == []
    (tmp_path / EXECUTING).mkdir()  # what a killed runner leaves: its last rewrite, and maybe a cut-short file
    (tmp_path / EXECUTING / "03_train_gat.json").write_text(json.dumps(record))
    (tmp_path / EXECUTING / "04_aauc_analysis.json").write_text('{"notebook": "04_a')
    assert killed_executions(tmp_path) == [{**record, "status": "killed"}]
    assert not (tmp_path / EXECUTING).exists()


def test_a_kernel_imports_the_lib_of_the_checkout_the_runner_runs(tmp_path, monkeypatch):
    """An environment installed from another clone or worktree would give the kernel that one's code and commit."""
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    with kernel_environment(1) as threads:
        assert threads == 1 and os.environ["OMP_NUM_THREADS"] == "1"
        assert os.environ["PYTHONPATH"] == os.pathsep.join([str(ROOT), "/elsewhere"])
        where = subprocess.run(
            [sys.executable, "-c", "import lib; print(lib.__file__)"], cwd=tmp_path, capture_output=True, text=True
        )
        assert where.stdout.strip() == str(ROOT / "lib" / "__init__.py")
    assert os.environ["PYTHONPATH"] == "/elsewhere"
