"""The README's findings and docs/results.md are generated from the committed reference runs, and the reference folder
holds small files only."""

import json
import re
import shutil

import pandas as pd
import pytest

from lib.common.paths import OUTPUTS, ROOT
from lib.run import report
from lib.run.publish import publish


def test_generated_blocks_and_pages_match_the_committed_runs_and_configs():
    assert report.main(["--check"]) == 0, "run `python -m lib.run.report` and commit README.md and docs/"


def test_reference_runs_hold_small_files_only():
    ref = OUTPUTS / "reference"
    files = [p for p in ref.rglob("*") if p.is_file()] if ref.is_dir() else []
    for p in files:
        assert p.stat().st_size <= 2_000_000, f"{p} is over 2 MB; reference runs keep small files only"
        assert p.suffix not in (".pt", ".sqlite", ".npy"), f"{p}: checkpoints, caches and datasets stay out of git"
        assert not {"checkpoints", "dataset", "cache", "crawl"} & set(p.relative_to(ref).parts), p


def _fake_run(auc_seed, std_seed, aauc):
    mean = [
        {"protocol": p, "negatives": n, "supervision": sv, "model": m, "auc": auc_seed + d, "aauc": aauc, "mrr": 0.1}
        for p, d in (("seed", 0.0), ("leak_free", -0.05))
        for n in ("uniform", "hard")
        for sv, m in (("mp", "gat_model"), ("none", "cosine"))
    ]
    std = [{**r, "auc": std_seed} for r in mean]
    return {
        "train_gat": {
            "mean": mean,
            "std": std,
            "seeds": [0, 1, 2],
            "splits": {"0": {"train": ["a"] * 36, "val": ["b"] * 4, "test": ["c"] * 10}},
        }
    }


def test_render_puts_each_runs_numbers_beside_the_seeds():
    text = report.render({"fake40": _fake_run(0.8123, 0.0456, 0.7)})
    row = next(line for line in text.splitlines() if line.startswith("| fake40") and "| seed " in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:8] == [
        "fake40",
        "title mentions (proxy)",
        "40",
        "3",
        "seed",
        "0.812 ± 0.046",
        "0.700",
        "0.900",
    ]  # seed report at 40 graphs
    lf = next(line for line in text.splitlines() if line.startswith("| fake40") and "| leak_free " in line)
    assert "0.762 ± 0.046" in lf and "0.900" not in lf  # the seed report has no leak-free number
    assert text.startswith(report.BEGIN) and text.endswith(report.END)


@pytest.mark.slow  # every generated page rendered from the reference runs, three times
def test_check_fails_when_a_generated_block_or_page_is_stale(tmp_path, capsys):
    runs = report.reference_runs()
    readme, results, params = tmp_path / "README.md", tmp_path / "results.md", tmp_path / "parameters.md"
    current_readme = (
        f"# x\n{report.render_findings(runs)}\n\n{report.render_timings(report.load_timings())}\n\n"
        f"{report.render_own_links()}\n"
    )
    current_results, current_params = f"# Results\n{report.render(runs)}\n", report.parameters_page.current()
    readme.write_text(current_readme)
    results.write_text(current_results)
    params.write_text(current_params)
    args = ["--check", "--readme", str(readme), "--results", str(results), "--parameters", str(params)]
    assert report.main(args) == 0
    # each check renders every page (about five seconds), so one check finds three stale pages and names each
    readme.write_text(current_readme.replace(report.FEND, "old findings\n" + report.FEND))
    results.write_text(f"# Results\n{report.BEGIN}\nold numbers\n{report.END}\n")
    params.write_text("# Parameters\nold\n")
    assert report.main(args) == 1
    named = capsys.readouterr().err
    assert all(str(path) in named for path in (readme, results, params)), named
    readme.write_text(current_readme.replace(report.TEND, "old timings\n" + report.TEND))
    results.write_text(current_results)
    params.write_text(current_params)
    assert report.main(args) == 1
    named = capsys.readouterr().err
    assert str(readme) in named and str(results) not in named and str(params) not in named, named
    readme.write_text("# no markers\n")
    with pytest.raises(ValueError, match="no generated-block markers"):
        report.main(args)


def test_publish_copies_small_results_keeps_the_run_notes_and_leaves_checkpoints_out(tmp_path):
    src, ref = tmp_path / "out" / "r", tmp_path / "ref"
    (src / "checkpoints").mkdir(parents=True)
    (src / "figures").mkdir()
    (src / "metrics.json").write_text("{}")
    (src / "figures" / "a.png").write_bytes(b"png")
    (src / "checkpoints" / "e1.pt").write_bytes(b"x")
    (src / "big.csv").write_bytes(b"0" * 2_000_001)
    (ref / "r").mkdir(parents=True)
    (ref / "r" / "README.md").write_text("how this run was made")
    (ref / "r" / "stale.csv").write_text("old")
    publish("r", outputs=tmp_path / "out", ref=ref)
    got = sorted(p.relative_to(ref / "r").as_posix() for p in (ref / "r").rglob("*") if p.is_file())
    assert got == ["README.md", "figures/a.png", "metrics.json"]
    assert (ref / "r" / "README.md").read_text() == "how this run was made"


def test_publish_copies_a_stage_folders_tables_and_parameters_but_not_its_checkpoints(tmp_path):
    src, ref = tmp_path / "out" / "r", tmp_path / "ref"
    (src / "distill" / "checkpoint" / "curves").mkdir(parents=True)
    (src / "distill" / "students").mkdir()
    (src / "metrics.json").write_text("{}")
    for name in (
        "distill/results.csv",
        "distill/params_05.json",
        "distill/checkpoint/rows.jsonl",
        "distill/checkpoint/curves/a.csv",
        "distill/students/config.json",
    ):
        (src / name).write_text("x")
    publish("r", outputs=tmp_path / "out", ref=ref)
    got = sorted(p.relative_to(ref / "r").as_posix() for p in (ref / "r").rglob("*") if p.is_file())
    assert got == ["distill/params_05.json", "distill/results.csv", "metrics.json"]


def test_publish_keeps_files_of_notebooks_the_run_did_not_list_out(tmp_path):
    src, ref = tmp_path / "out" / "r", tmp_path / "ref"
    (src / "figures").mkdir(parents=True)
    (src / "metrics.json").write_text("{}")
    (src / "status.json").write_text(json.dumps({"notebooks": {"01_crawl.ipynb": {}, "03b_beyond.ipynb": {}}}))
    for name in ("01_crawl.ipynb", "03b_beyond.ipynb", "05_other.ipynb"):
        (src / name).write_text("{}")
    for name in ("01_degrees.png", "03b_beyond.png", "05_maps.png", "size_trend.png"):
        (src / "figures" / name).write_bytes(b"png")
    publish("r", outputs=tmp_path / "out", ref=ref)
    got = sorted(p.relative_to(ref / "r").as_posix() for p in (ref / "r").rglob("*") if p.is_file())
    assert got == [
        "01_crawl.ipynb",
        "03b_beyond.ipynb",
        "figures/01_degrees.png",
        "figures/03b_beyond.png",
        "figures/size_trend.png",
        "metrics.json",
        "status.json",
    ]


def test_render_shows_distilled_students_beside_their_controls_and_as_node_embedders():
    res = [
        {
            "stage": "task-agnostic",
            "student": "3x384",
            "init": "assistant",
            "method": meth,
            "seed": s,
            "polarity_test": pol + s / 100,
            "topic_test": 0.7,
            "fid_cosine": 0.4,
        }
        for s in (0, 1)
        for meth, pol in (("MiniLM", 0.63), ("no distillation", 0.61), ("Value-MSE", 0.5))
    ]
    lp = [
        {"embedder": e, "seed": s, "protocol": "leak_free", "model": mdl, "auc": auc, "mrr": 0.2}
        for s in (0, 1)
        for e, auc in (("3x384 MiniLM", 0.70 + s / 10), ("3x384 no distillation", 0.65))
        for mdl in ("gat_model", "cosine")
    ]
    text = report.render({"d": {"distill": {"results": res, "link_prediction": lp}}})
    lines = text.splitlines()
    row = next(x for x in lines if x.startswith("| d ") and "| MiniLM " in x)
    assert "0.635 ± 0.007" in row and "Value-MSE" not in text  # ablations stay in the run's own table
    assert any("| no distillation " in x and "0.615 ± 0.007" in x for x in lines)
    lp_row = next(x for x in lines if x.startswith("| d ") and "| 3x384 MiniLM " in x)
    assert "0.750 ± 0.071" in lp_row and "| 2 " in lp_row
    # a grid that took d's runs (reuse_runs) and added its own: the taken rows stay under d
    taken = [{**r, "reused_from": "outputs/reference/d"} for r in res if r["method"] != "Value-MSE"]
    wider = report.distill_table(
        {
            "d": {"distill": {"results": res}},
            "e": {"distill": {"results": taken + [{**res[0], "seed": 2, "reused_from": None}]}},
        }
    )
    assert wider[wider.run == "e"][["method", "seeds"]].values.tolist() == [["MiniLM", 1]]


def test_render_shows_kd_students_beside_their_controls_with_probing_gain():
    rows = [
        {
            "task": "polarity",
            "student": "bilstm",
            "method": meth,
            "seed": s,
            "test": acc + s / 100,
            "agree_test": 0.9,
            "params_total": 49_756_874,
        }
        for s in (0, 1)
        for meth, acc in (("kd", 0.80), ("control", 0.70))
    ]
    probing = [
        {"model": m, "length": a, "tense": a}
        for m, a in (
            ("bilstm kd (polarity)", 0.6),
            ("bilstm control (polarity)", 0.5),
            ("teacher fine-tuned (polarity)", 0.7),
            ("majority", 0.2),
        )
    ]
    text = report.render(
        {"k": {"kd": {"rows": rows, "probing": probing, "teacher": [{"task": "polarity", "test": 0.85}]}}}
    )
    lines = text.splitlines()
    kd = next(x for x in lines if x.startswith("| k ") and "| bilstm kd " in x)
    assert "0.805 ± 0.007" in kd and "49.8" in kd and "+0.400" in kd
    assert any("| bilstm control " in x and "0.705 ± 0.007" in x and "+0.300" in x for x in lines)
    assert any("| teacher (fine-tuned) " in x and "0.850" in x and "+0.500" in x for x in lines)


def test_render_sets_validation_beside_test_structure_where_03b_stored_it():
    run = _fake_run(0.8, 0.01, 0.7)
    assert "common neighbour" not in report.render({"fake40": run})
    run["beyond"] = {
        "protocols": ["leak_free"],
        "structure": [
            {"protocol": "leak_free", "role": "val", "mp_degree": 4.0, "pos_no_cn": 0.73},
            {
                "protocol": "leak_free",
                "role": "test",
                "mp_degree": 8.13,
                "pos_no_cn": 0.36,
                "shortcut_dist2_auc": 0.68,
                "shortcut_dist2_mrr": 0.361,
                "shortcut_matched_auc": 0.5,
                "shortcut_matched_mrr": 0.048,
            },
        ],
        "gaps": [
            {
                "protocol": "leak_free",
                "negatives": "dist2",
                "best graph model": "gat_ncn_stack",
                "AUC best model": "0.663 ± 0.007",
                "MRR best model": "0.377 ± 0.013",
                "AUC heuristic_stack": "0.586 ± 0.010",
                "bar": "cosine",
                "auc_margin": -0.01,
                "auc_margin_std": 0.006,
                "mrr_margin": 0.32,
            },
            {
                "protocol": "leak_free",
                "negatives": "matched",
                "best graph model": "gat_ncn_stack_matched",
                "AUC best model": "0.810 ± 0.004",
                "MRR best model": "0.577 ± 0.010",
                "bar": "cosine",
                "auc_margin": 0.03,
                "auc_margin_std": 0.006,
                "mrr_margin": 0.02,
            },
        ],
        "mean": [
            {
                "protocol": "leak_free",
                "negatives": "dist2",
                "model": "gat_ncn_stack",
                "val_auc": 0.899,
                "auc": 0.663,
                "mrr": 0.377,
            }
        ],
    }
    rows = [
        [c.strip() for c in line.strip("|").split("|")]
        for line in report.render({"fake40": run}).splitlines()
        if line.startswith("| fake40") and "73%" in line
    ]
    # a set without a chosen model's validation row shows none
    assert rows == [
        [
            "fake40",
            "leak_free",
            "dist2",
            "73% / 36%",
            "0.680 / 0.361",
            "gat_ncn_stack",
            "0.899",
            "0.663 ± 0.007, 0.377 ± 0.013",
        ],
        [
            "fake40",
            "leak_free",
            "matched",
            "73% / 36%",
            "0.500 / 0.048",
            "gat_ncn_stack_matched",
            "",
            "0.810 ± 0.004, 0.577 ± 0.010",
        ],
    ]


def test_readme_test_count_is_within_ten_percent_of_the_collected_tests(request):
    """The README's timing sentence (generated from outputs/reference/loop/timings.json) names how many tests
    `make test` ran; re-measure with scripts/time_loop.py when the suite has grown or shrunk by more than 10%. Under
    `make test` this session collected the whole suite, so its count is the one; a partial run collects it again."""
    import sys

    timings = report.load_timings()
    assert timings.get("idle", {}).get("tests_collected"), "no measured test count: run python scripts/time_loop.py"
    measured = timings["idle"]["tests_collected"]
    opt, items = request.config.option, request.session.items
    whole = not (opt.keyword or opt.markexpr or opt.deselect) and {i.nodeid.split("/", 1)[0] for i in items} >= {
        "tests",
        "notebooks",
    }
    if whole:  # the README's own command, `pytest tests notebooks ...`
        collected = len(items)
    else:
        collected = report.collected_tests(sys.executable)
    assert report.test_count_current(measured, collected), (
        f"README says {measured} tests, {collected} are collected: re-measure with python scripts/time_loop.py"
    )
    assert f" {measured} tests" in report.readme_block(
        (ROOT / "README.md").read_text(encoding="utf-8"), report.TBEGIN, report.TEND
    )


def test_timing_sentence_is_rendered_from_the_record():
    t = {
        "idle": {
            "cores": 2,
            "machine": "x86_64",
            "commit": "abc1234",
            "date": "2026-11-24",
            "setup_seconds": 95.0,
            "demo_seconds": 420.0,
            "test_seconds": 600.0,
            "tests": {"passed": 290, "skipped": 2},
            "tests_collected": 292,
            "notebooks": {"01_crawl.ipynb": {"seconds": 20.4}, "03b_beyond_seed.ipynb": {"seconds": 80.0}},
        }
    }
    text = report.render_timings(t)
    assert (
        "`make demo` 7.0 min (notebooks 01 20 s, 03b 80 s)" in text and "for 292 tests (290 passed, 2 skipped)" in text
    )
    assert text.startswith(report.TBEGIN) and text.endswith(report.TEND)
    assert "on 2 idle cores (x86_64; commit abc1234" in text  # a record that names no CPU
    named = report.render_timings({"idle": {**t["idle"], "cpu": "Intel(R) Xeon(R) Processor, model 207"}})
    assert "on 2 idle cores (Intel(R) Xeon(R) Processor, model 207; x86_64; commit abc1234" in named
    partial = report.render_timings(
        {"idle": {k: v for k, v in t["idle"].items() if k not in ("test_seconds", "tests")}}
    )
    assert "`make test` collects 292 tests" in partial and "`make demo` 7.0 min" in partial


def test_reference_tables_give_minilm_minus_its_control_and_each_ablation_with_intervals():
    res = [
        {
            "stage": "task-agnostic",
            "student": "3x384",
            "init": "random",
            "method": m,
            "seed": s,
            "polarity_test": 0.6 + s / 100 + gain * (1 + s / 10),
            "topic_test": 0.5,
            "fid_cosine": 0.4,
        }
        for s in (0, 1, 2)
        for m, gain in (("MiniLM", 0.1), ("no distillation", 0.0))
    ]
    res.append(
        {
            "stage": "task-agnostic",
            "student": "3x384",
            "init": "random",
            "method": "Value-MSE",
            "seed": 0,
            "polarity_test": 0.75,
            "topic_test": 0.45,
            "fid_cosine": 0.5,
        }
    )
    t = report.distill_differences_table({"long": {"distill": {"results": res}}})
    assert t["MiniLM minus"].tolist() == ["no distillation", "Value-MSE"]
    # polarity gains 0.10, 0.11, 0.12: mean 0.110, 95% t-interval 0.110 -/+ 4.303 * 0.01 / sqrt(3)
    assert t.iloc[0]["polarity"] == "+0.110 [+0.085, +0.135]" and t.iloc[0]["seeds"] == 3
    assert t.iloc[1].to_dict() | {} == {
        "run": "long",
        "student": "3x384",
        "init": "random",
        "MiniLM minus": "Value-MSE",
        "seeds": 1,
        "polarity": "-0.050",
        "topic": "+0.050",
        "fidelity cosine": "-0.100",
    }
    assert "Which parts of MiniLM matter" in report.run_tables("long", {"distill": {"results": res}})


def test_a_result_published_under_several_run_names_is_listed_once():
    from lib.run.tables import once

    t = pd.DataFrame(
        [
            {"run": r, "student": s, "auc": a}
            for r in ("a", "b", "c")
            for s, a in (("3x384", 0.6 if r != "c" else 0.5), ("6x384", 0.7))
        ]
    )
    got = once(t)
    assert got["run"].tolist() == ["a (also b)", "a (also b)", "c", "c"]
    assert got["auc"].tolist() == [0.6, 0.7, 0.5, 0.7]


def test_reference_readmes_get_their_own_full_tables_in_a_generated_block():
    text = report.run_tables("fake40", _fake_run(0.8123, 0.0456, 0.7))
    assert text.startswith(report.RBEGIN) and text.endswith(report.REND)
    assert "Every protocol and negative set against the heuristics" in text and "| fake40" not in text
    notes = "# fake40\n\nHow it was made.\n"
    once_added = report.with_run_tables(notes, text)
    assert once_added.startswith(notes.rstrip("\n")) and once_added.count(report.RBEGIN) == 1
    assert report.with_run_tables(once_added, text) == once_added  # replaced in place, not appended again


def test_published_notebooks_keep_no_path_of_the_machine_that_ran_them(tmp_path):
    src, ref = tmp_path / "out" / "r", tmp_path / "ref"
    src.mkdir(parents=True)
    (src / "metrics.json").write_text("{}")
    nb = {
        "cells": [],
        "metadata": {
            "papermill": {
                "input_path": "/home/someone/wikigat/notebooks/03_train_gat.ipynb",
                "output_path": "/scratch/x/outputs/r/03_train_gat.ipynb",
            }
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (src / "03_train_gat.ipynb").write_text(json.dumps(nb))
    publish("r", outputs=tmp_path / "out", ref=ref)
    pm = json.loads((ref / "r" / "03_train_gat.ipynb").read_text())["metadata"]["papermill"]
    assert pm == {"input_path": "notebooks/03_train_gat.ipynb", "output_path": "outputs/r/03_train_gat.ipynb"}
    # a run made with --outputs elsewhere: its run_dir, in the parameters, the code and the printouts, and in params
    nb["metadata"]["papermill"]["parameters"] = {"run_dir": "/scratch/x/outputs/r"}
    nb["cells"] = [
        {
            "cell_type": "code",
            "source": ['run_dir = "/scratch/x/outputs/r"\n'],
            "outputs": [
                {"output_type": "stream", "name": "stdout", "text": ["wrote /scratch/x/outputs/r/metrics.json\n"]}
            ],
        }
    ]
    (src / "03_train_gat.ipynb").write_text(json.dumps(nb))
    (src / "params_03_train_gat.json").write_text(json.dumps({"params": {"run_dir": "/scratch/x/outputs/r"}}))
    files = ["/home/someone/wikigat/params/seed40.yaml", "mine.yaml"]  # a size profile is recorded by its full path
    (src / "params.json").write_text(json.dumps({"params": {"_files": files, "run_dir": "/scratch/x/outputs/r"}}))
    shutil.rmtree(ref / "r")
    publish("r", outputs=tmp_path / "out", ref=ref)
    text = (ref / "r" / "03_train_gat.ipynb").read_text()
    assert "/scratch" not in text and "wrote outputs/r/metrics.json" in text
    assert json.loads((ref / "r" / "params_03_train_gat.json").read_text())["params"]["run_dir"] == "outputs/r"
    params = json.loads((ref / "r" / "params.json").read_text())["params"]
    assert params == {"_files": ["params/seed40.yaml", "mine.yaml"], "run_dir": "outputs/r"}


def test_committed_reference_notebooks_name_no_absolute_path_in_their_papermill_record():
    for p in sorted((OUTPUTS / "reference").glob("*/*.ipynb")):
        pm = json.loads(p.read_text(encoding="utf-8")).get("metadata", {}).get("papermill", {})
        for key in ("input_path", "output_path"):
            assert not str(pm.get(key, "")).startswith("/"), f"{p}: papermill {key} is {pm[key]!r}"


def test_every_reference_run_reads_with_the_dist2_negative_set_under_its_name():
    runs = report.reference_runs()
    text = json.dumps({name: {k: m.get(k) for k in ("train_gat", "beyond")} for name, m in runs.items()})
    assert "dist2" in text and not re.search(r"(?<![a-z0-9])hard(?![a-z0-9])", text)


def _cost_run(src, complete=True):
    (src / "figures").mkdir(parents=True)
    status = {"01_crawl.ipynb": {"status": "ok", "seconds": 120.0, "peak_rss_mb": 2048.0, "threads": 2}}
    status["03_train_gat.ipynb"] = {"status": "ok" if complete else "failed", "seconds": 600.0, "peak_rss_mb": 3072.0}
    (src / "status.json").write_text(json.dumps({"complete": complete, "notebooks": status}))
    (src / "params.json").write_text(json.dumps({"git_commit": "abc", "platform": "Linux"}))
    crawl = {"graphs": 389, "total_nodes": 7_780_000, "unique_titles": 916_582, "shared_node_share": 0.88}
    (src / "metrics.json").write_text(json.dumps({"crawl": crawl, "train_gat": {"mean": [{"auc": 0.7}]}}))
    for name in ("01_crawl.ipynb", "03_train_gat.ipynb"):
        (src / name).write_text("{}")
    (src / "figures" / "03_curves.png").write_bytes(b"png")
    (src / "rows.csv").write_text("auc\n0.7\n")


def test_publish_cost_only_keeps_parameters_status_and_a_cost_record_and_no_result(tmp_path):
    src, ref = tmp_path / "out" / "r", tmp_path / "ref"
    _cost_run(src)
    publish("r", outputs=tmp_path / "out", ref=ref, cost_only=True)
    got = sorted(p.relative_to(ref / "r").as_posix() for p in (ref / "r").rglob("*") if p.is_file())
    assert got == ["cost.json", "params.json", "status.json"]
    cost = json.loads((ref / "r" / "cost.json").read_text())
    assert cost["git_commit"] == "abc" and cost["total_seconds"] == 720.0 and cost["peak_rss_mib"] == 3072.0
    assert cost["crawl"]["unique_titles"] == 916_582 and cost["crawl"]["total_edges"] is None  # not measured: None
    assert "auc" not in json.dumps(cost)  # sizes and costs, never a score
    table = report.cost_table(cost)
    assert "| 03_train_gat.ipynb | 10.0 min | 3.00 GiB |" in table and "**12.0 min**" in table
    assert report.cost_block(cost).startswith(report.RBEGIN + "\n\nNotebooks 01, 03 took 12.0 min together on a ")


def test_publish_cost_only_refuses_an_unfinished_run_and_keeps_the_published_one(tmp_path):
    src, ref = tmp_path / "out" / "r", tmp_path / "ref"
    _cost_run(src, complete=False)
    (ref / "r").mkdir(parents=True)
    (ref / "r" / "cost.json").write_text("{}")
    with pytest.raises(ValueError, match="r is not complete .*03_train_gat.ipynb.*lib.run.runner"):
        publish("r", outputs=tmp_path / "out", ref=ref, cost_only=True)
    assert (ref / "r" / "cost.json").read_text() == "{}"


def test_a_run_readme_says_how_each_notebook_ran_with_the_commit_of_its_own_record(tmp_path):
    from lib.run.facts import notebook_runs

    run = tmp_path / "r"
    run.mkdir()
    status = {
        "01_crawl.ipynb": {"status": "ok", "seconds": 4.5, "peak_rss_mb": 800.4},
        "03b_beyond_seed.ipynb": {"status": "ok", "seconds": 90.0, "peak_rss_mb": None, "rerun": "re-run alone at x"},
        "05b_node_embedders.ipynb": {"status": "failed", "seconds": 1.0},
    }
    (run / "status.json").write_text(json.dumps({"notebooks": status}))
    (run / "params.json").write_text(json.dumps({"git_commit": "aaaaaaaaaa"}))
    (run / "params_03b_beyond.json").write_text(json.dumps({"git_commit": "bbbbbbbbbb+dirty"}))
    ran = notebook_runs(run)
    assert ran["notebook"].tolist() == ["01_crawl", "03b_beyond_seed", "05b_node_embedders"]
    assert ran["commit"].tolist() == [
        "aaaaaaa",
        "bbbbbbb+dirty",
        "aaaaaaa",
    ]  # a notebook without a record: the folder's
    assert ran["how"].tolist() == ["", "re-run alone", ""] and ran["peak RSS MB"].tolist()[0] == 800
    assert notebook_runs(tmp_path).empty
    assert "**How each notebook ran**" in report.run_tables("seed40", report.reference_runs()["seed40"])
    assert "executions" not in ran  # a folder made before the runner listed every execution
    executions = [
        {"notebook": "03b_beyond_seed.ipynb", "status": "killed", "seconds": 600.0},
        {"notebook": "03b_beyond_seed.ipynb", "status": "ok", "seconds": 90.0},
        {"notebook": "01_crawl.ipynb", "status": "ok", "seconds": 4.5},
    ]
    (run / "status.json").write_text(json.dumps({"notebooks": status, "executions": executions}))
    ran = notebook_runs(run).set_index("notebook")
    assert ran["executions"].tolist() == [1, 2, 0] and ran["seconds (all executions)"].tolist() == [4.5, 690.0, 0.0]


def test_a_run_readme_states_its_reproduction_check_where_it_has_one(monkeypatch):
    runs = report.reference_runs()
    checked = [r for r in runs if (report.REFERENCE_RUNS / r / "reproduced.json").is_file()]
    assert checked  # the published runs later code re-ran
    for r in checked:
        assert "**Does today's code give these numbers?** Re-run at `" in report.run_tables(r, runs[r])
    monkeypatch.setattr(report, "reproduced", lambda folder: None)  # a run no later code re-ran
    assert "Does today's code give these numbers?" not in report.run_tables(checked[0], runs[checked[0]])


def test_the_example_link_list_run_readme_prints_its_verdicts_and_each_part_of_the_goal(tmp_path):
    folder = tmp_path / report.OWN_LINKS_RUN
    shutil.copytree(report.REFERENCE_RUNS / report.OWN_LINKS_RUN, folder)
    text = report.verdicts_block(folder)
    assert text.startswith(report.RBEGIN) and text.endswith(report.REND)
    assert "**How each notebook ran**" in text and "**Does today's code give these numbers?**" in text
    for title in ("AUC over the bar", "MRR over the bar", "AUC over the shortcut", "MRR over the shortcut"):
        assert title in text and title in report.render_own_links()
    rows = pd.read_csv(folder / "beyond_rows.csv")
    rows = rows[rows.seed < 2]  # fewer seeds: the sentence and the table follow the rows, nothing is typed
    rows.to_csv(folder / "beyond_rows.csv", index=False)
    assert "(2 seeds)" in report.verdicts_block(folder) and "(10 seeds)" in text


def test_a_measured_test_count_is_current_within_ten_percent_of_the_collected_one():
    assert report.test_count_current(91, 100) and report.test_count_current(110, 100)
    assert not report.test_count_current(89, 100) and not report.test_count_current(111, 100)
    assert not report.test_count_current(None, 100) and not report.test_count_current(0, 100)
