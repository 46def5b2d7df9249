import numpy as np
import pandas as pd

from lib.run import verdicts
from lib.run.link_findings import GainStrata, GoalCount, stratum_counts


def beyond_rows(margin_auc: float, spread: float, seeds: int = 4) -> pd.DataFrame:
    """notebook 03b rows of one protocol × negative set: a graph model `margin_auc` above the stack on AUC (per-seed
    noise `spread`), MRR above it by 0.05, and the common-neighbour strata of the AUC."""
    rng = np.random.default_rng(0)
    rows = []
    for s in range(seeds):
        noise = spread * rng.standard_normal()
        for model, auc in (
            ("gat_ncn_stack", 0.80 + margin_auc + noise),
            ("heuristic_stack", 0.80),
            ("common_neighbours", 0.75),
        ):
            rows.append(
                {
                    "seed": s,
                    "protocol": "leak_free",
                    "negatives": "uniform",
                    "model": model,
                    "auc": auc,
                    "mrr": auc - 0.3 + (0.05 if model == "gat_ncn_stack" else 0.0),
                    "val_auc": auc if model == "gat_ncn_stack" else np.nan,
                    "auc_cn": auc - 0.1,
                    "auc_no_cn": auc + 0.05,
                }
            )
    return pd.DataFrame(rows)


def test_a_run_folders_verdict_table_judges_each_cell_by_its_interval(tmp_path):
    beyond_rows(0.10, 0.01).to_csv(tmp_path / "beyond_rows.csv", index=False)
    table = verdicts.run_verdicts(tmp_path)
    row = table.iloc[0]
    assert (row["chosen model"], row["bar"], row["goal"], row["seeds"]) == (
        "gat_ncn_stack",
        "heuristic_stack",
        "met",
        4,
    )
    assert row["AUC over the bar"].startswith("met: +0.1") and row["AUC over the bar"].endswith("> +0.020")
    assert row["AUC over the shortcut"] == "—"  # uniform negatives: the shortcut is no part of the goal
    assert row["AUC margin, cn positives"].startswith("+0.1") and "[" in row["AUC margin, cn positives"]
    assert (
        verdicts.summary(table)
        == "goal met in 1, missed in 0, undecided in 0 of 1 protocol × negative-set cells (4 seeds)"
    )

    beyond_rows(0.02, 0.05).to_csv(tmp_path / "beyond_rows.csv", index=False)  # a margin at the bar, within the noise
    assert verdicts.run_verdicts(tmp_path).iloc[0]["goal"] == "undecided"
    beyond_rows(-0.05, 0.005).to_csv(tmp_path / "beyond_rows.csv", index=False)
    assert verdicts.run_verdicts(tmp_path).iloc[0]["goal"] == "missed"


def test_a_folder_without_notebook_03b_gets_one_line_naming_it(tmp_path, capsys):
    assert verdicts.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "beyond_rows.csv does not exist" in err and "--notebooks 01 02 03 03b" in err


def test_the_command_prints_a_published_runs_table_and_its_count(capsys):
    assert verdicts.main(["outputs/reference/wikispeedia_seed40", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| protocol" in out and "goal met in" in out and "of 12 protocol × negative-set cells" in out


def test_the_beyond_finding_counts_cells_by_stratum_under_the_one_rule():
    gaps = [
        {"auc_cn_margin_low": 0.01, "auc_cn_margin_high": 0.05},
        {"auc_cn_margin_low": -0.02, "auc_cn_margin_high": 0.03},
        {"auc_cn_margin_low": -0.09, "auc_cn_margin_high": -0.01},
        {},
    ]
    assert stratum_counts(gaps, "cn") == (1, 1)  # one above 0, one below, one straddling, one without an interval
    count = GoalCount("run", 1, 0, 4, 10, (), (("cn", 1, 1), ("no_cn", 4, 0)))
    text = GainStrata((("Wikispeedia hyperlinks", count),)).readme()
    assert text.endswith("[Wikispeedia][run] with a common neighbour 1 above / 1 below, without one 4 / 0.")
    assert "(4 cells, [run](outputs/reference/run/))" in GainStrata((("Wikispeedia hyperlinks", count),)).page()


def test_the_readme_shows_the_published_example_runs_verdict_table(tmp_path):
    from lib.run.report import OBEGIN, OEND, render_own_links

    block = render_own_links()
    assert block.startswith(OBEGIN) and block.endswith(OEND) and "| protocol" in block and "(10 seeds)" in block
    assert block in open("README.md", encoding="utf-8").read()
    assert render_own_links(tmp_path) == f"{OBEGIN}\nNot published yet.\n{OEND}"
