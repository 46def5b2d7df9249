"""The findings: each record's numbers pinned once against the committed reference runs, each renderer's format once,
and the rules that pick a finding's rows on small made-up runs."""

import json
import re
import textwrap

import pandas as pd
import pytest

from lib.run import distill_findings, link_findings
from lib.run.embedder_findings import node_embedders
from lib.run.findings import WIDTH, fact_table, readme_lines
from lib.run.report import reference_runs

PROXY, WIKI = "title mentions (proxy)", "Wikispeedia hyperlinks"


@pytest.fixture(scope="module")
def facts():
    return {type(r).__name__: r for r in fact_table(reference_runs())}


def _points(side):
    return [(p.run, p.n_train, p.value) for p in side]


def test_each_records_numbers_match_the_committed_runs(facts):
    assert list(facts) == [
        "Reproduction",
        "AaucTrend",
        "Leakage",
        "Beyond",
        "GainStrata",
        "HarderNegatives",
        "Distillation",
        "Ablations",
        "NodeEmbedders",
        "KdDifferences",
    ]
    repro = dict(facts["Reproduction"].sides)
    assert list(repro) == [PROXY, WIKI]  # the embedded proxy first
    assert _points(repro[PROXY]) == [("seed40", 40, 0.7486), ("seed180", 180, 0.8741), ("seed315", 315, 0.8761)]
    assert [p.value for p in repro[WIKI]] == [0.7133, 0.9425, 0.9645]
    trend = dict(facts["AaucTrend"].sides)
    assert [p.value for p in trend[PROXY]] == [0.8297, 0.8469, 0.8483]
    assert [p.value for p in trend[WIKI]] == [0.7462, 0.6411, 0.6349]
    # each change is judged on Welch's interval over every seed of both runs (10 at seed40, 3 at seed315)
    changes = facts["AaucTrend"].changes
    assert [(c["seeds_first"], c["seeds_last"], c["verdict"]) for c in changes] == [
        (10, 3, "undecided"),
        (10, 3, "missed"),
    ]
    assert (
        "moves [0.830][seed40] → [0.848][seed315] (+0.019 [-0.022, +0.060], undecided)" in facts["AaucTrend"].readme()
    )
    assert "falls [0.746][wikispeedia_seed40] → [0.635][wikispeedia_seed315] (-0.111 [-0.208, -0.014])" in (
        facts["AaucTrend"].readme().replace("\n", " ")
    )
    leak = dict(facts["Leakage"].sides)
    assert [(r.run, r.gat_auc, r.heuristic, r.heuristic_auc) for r in leak[PROXY]] == [
        ("seed40", 0.7164, "cosine", 0.8642),
        ("seed180", 0.6321, "cosine", 0.8648),
        ("seed315", 0.6002, "cosine", 0.865),
    ]
    assert [(r.gat_auc, r.heuristic_auc) for r in leak[WIKI]] == [(0.6834, 0.7994), (0.7139, 0.7962), (0.7276, 0.7975)]
    # GatModel minus cosine paired by seed: below in every run
    assert [r.versus["verdict"] for r in leak[PROXY]] == ["missed"] * 3
    assert [r.versus["verdict"] for r in leak[WIKI]] == ["missed"] * 3
    goal = dict(facts["Beyond"].sides)
    # judged by the one rule on the runs' own per-seed rows (lib.run.report.judge_gaps)
    assert (goal[PROXY].run, goal[PROXY].met, goal[PROXY].missed, goal[PROXY].cells) == ("seed40", 11, 1, 12)
    assert (goal[WIKI].run, goal[WIKI].met, goal[WIKI].missed, goal[WIKI].cells) == ("wikispeedia_seed40", 11, 0, 12)
    assert (goal[PROXY].seeds, goal[WIKI].seeds) == (10, 10)
    assert [p for p, *_ in goal[PROXY].uniform_margins] == ["leak_free", "pair_split", "new_nodes"]
    assert goal[PROXY].uniform_margins[0][1] == pytest.approx(0.0288, abs=1e-4)
    # the chosen model's AUC margin over the bar by stratum of positives: cells above / below 0 under the one rule
    assert goal[PROXY].strata == (("cn", 11, 0), ("no_cn", 12, 0)) and goal[WIKI].strata == (
        ("cn", 12, 0),
        ("no_cn", 12, 0),
    )
    assert dict(facts["GainStrata"].sides)[WIKI] == goal[WIKI]
    harder = dict(facts["HarderNegatives"].sides)[PROXY]
    assert harder.protocols == 3 and [n for n, *_ in harder.sets] == ["dist2", "heart", "matched"]
    assert harder.sets[0][1:] == (3, 0, 3, 0) and harder.sets[1][1:] == (3, 0, 3, 0)  # dist2, heart: above / below 0
    d = facts["Distillation"]
    assert "(95% interval above 0 in 3 of 6, below in 0, 3 seeds)" in d.readme()  # the one rule over its probes
    assert (d.runs, d.steps, d.checks, d.is_result) == (
        ("distill_long",),
        5000,
        ("distill_cpu", "distill_lp_cpu"),
        True,
    )
    assert d.lp[["protocol", "embedder"]].values.tolist() == [["leak_free", "3x384 assistant MiniLM"]]
    assert d.lp["diff"].iloc[0] == pytest.approx(0.0018, abs=1e-4)
    topic = d.probes[(d.probes["init"] == "random") & (d.probes["metric"] == "topic_test")].iloc[0]
    assert (topic["diff"], topic["seeds"]) == (pytest.approx(0.114, abs=5e-4), 3)
    a = facts["Ablations"]
    assert (a.run, a.above, a.below, len(a.differences)) == ("distill_ablations", 0, 3, 9)
    unseen = facts["NodeEmbedders"]
    assert (unseen.run, unseen.seeds, unseen.protocols) == ("embedders", 5, ("leak_free", "new_nodes"))
    assert not any(e.met for e in unseen.encoders) and len(unseen.encoders) == 6
    best = unseen.best(static=False)
    assert (best.name, best.ratio, dict(best.worst)) == (
        "student 0,2,5",
        pytest.approx(1.8673, abs=1e-4),
        pytest.approx({"cosine": -0.0762, "gat_model": -0.1023}, abs=1e-4),
    )
    assert unseen.best(static=True).name == "static trained nopca" and unseen.sources == 2
    closest = unseen.best()  # none meets its goal: the one whose binding bound comes closest to its margin
    assert (closest.name, closest.binding()) == (
        "student 0,2,5",
        ("gat_model", pytest.approx(-0.1023, abs=1e-4), 0.02),
    )
    assert unseen.readme().endswith(
        "none meets its goal, so all-MiniLM-L6-v2 stays the choice; the closest, student "
        "0,2,5, gives [1.9×][embedders] its titles/s for GatModel AUC -0.102 at worst (goal > −0.02)."
    )
    kd = facts["KdDifferences"]
    assert kd.run == "kd_cpu" and [(s, [t for t, _ in diffs]) for s, diffs in kd.students] == [
        ("bilstm", ["polarity", "topic"]),
        ("bert", ["polarity", "topic"]),
    ]
    assert [j["diff"] for _, diffs in kd.students for _, j in diffs] == pytest.approx(
        [-0.0025, 0.0575, 0.0208, -0.0875], abs=1e-4
    )
    assert {j["seeds"] for _, diffs in kd.students for _, j in diffs} == {3}


def test_readme_renderer_gives_two_lines_at_most_with_every_number_linked(facts):
    for rec in facts.values():
        text = rec.readme()
        if text is None:  # a finding only the results page carries
            continue
        assert (
            len(
                textwrap.wrap(
                    text,
                    WIDTH,
                    initial_indent="- ",
                    subsequent_indent="  ",
                    break_on_hyphens=False,
                    break_long_words=False,
                )
            )
            <= 2
        ), text[:60]
        assert "](outputs/" not in text and re.search(r"\[\w+\]", text), text[:60]  # a reference link to a run
    assert facts["Reproduction"].readme() == (
        "**Reproduction.** The seed's GatModel and protocol, test AUC with 40 / 180 / 315 training graphs: "
        "[0.749][seed40] / [0.874][seed180] / [0.876][seed315] on title mentions; [0.713][wikispeedia_seed40] / "
        "[0.943][wikispeedia_seed180] / [0.965][wikispeedia_seed315] on Wikispeedia; the seed report (its live crawl): "
        "0.900 / 0.922 / 0.927."
    )


def test_page_renderer_gives_every_row_and_links_each_run(facts):
    for rec in facts.values():
        assert "](outputs/reference/" in rec.page()
    assert facts["KdDifferences"].page() == (
        "**Classic KD.** A student distilled from the fine-tuned teacher's logits minus the same student trained with "
        "cross-entropy alone, test accuracy paired by seed (95% interval above 0 in 1 of 4, below in 1, 3 seeds): "
        "bilstm -0.002 [-0.030, +0.025] polarity, +0.057 [+0.004, +0.111] topic; bert +0.021 [-0.070, +0.111] "
        "polarity, -0.088 [-0.119, -0.056] topic ([kd_cpu](outputs/reference/kd_cpu/))."
    )


def _fake_run(auc_seed, aauc, n=40, **extra):
    mean = [
        {"protocol": p, "negatives": "uniform", "supervision": sv, "model": m, "auc": auc_seed + d, "aauc": aauc}
        for p, d in (("seed", 0.0), ("leak_free", -0.05))
        for sv, m in (("mp", "gat_model"), ("none", "cosine"))
    ]
    return {
        "train_gat": {"mean": mean, "seeds": [0], "splits": {"0": {"train": ["a"] * (n - 4), "val": ["b"] * 4}}},
        **extra,
    }


def test_link_findings_pick_the_seed_way_rows_per_link_source_the_proxy_first(tmp_path):
    runs = {
        "fake40": _fake_run(0.8123, 0.7),
        "fake180": _fake_run(0.85, 0.75, n=180),
        "real40": _fake_run(0.9, 0.6, link_source="wikispeedia"),
    }
    rec = fact_table(runs, tmp_path)
    assert [type(r).__name__ for r in rec] == ["Reproduction", "AaucTrend", "Leakage"]  # no 03b, 05 or 06 rows
    assert (
        rec[0]
        .page()
        .startswith(
            "**Reproduction.** Under the seed's own protocol its GatModel scores on title "
            "mentions (proxy), test AUC 0.812 / 0.850 with 40 / 180 training graphs"
        )
    )
    assert "on Wikispeedia hyperlinks, it rises" not in rec[1].page() and "it rises, 0.700 → 0.750" in rec[1].page()
    assert "0.762 / 0.800 with 40 / 180 training graphs against cosine 0.762 / 0.800" in rec[2].page()
    assert (
        "[0.812][fake40] / [0.850][fake180] with 40 / 180 on title mentions; [0.900][real40] with 40 on "
        "Wikispeedia;" in rec[0].readme()
    )
    lines = readme_lines(rec, runs)
    assert lines[-4:] == [
        "[fake40]: outputs/reference/fake40/",
        "[fake180]: outputs/reference/fake180/",
        "[real40]: outputs/reference/real40/",
        "",
    ]


def test_the_goal_count_and_harder_margins_come_from_03bs_cells_judged_on_their_intervals(tmp_path):
    def gap(p, n, auc_m, mrr_m, sc_auc, sc_mrr, half=0.005):
        margins = {
            "auc_margin": auc_m,
            "mrr_margin": mrr_m,
            "auc_margin_shortcut": sc_auc,
            "mrr_margin_shortcut": sc_mrr,
        }
        return {
            "protocol": p,
            "negatives": n,
            "seeds": 3,
            **margins,
            **{f"{k}_{side}": v + sign * half for k, v in margins.items() for side, sign in (("low", -1), ("high", 1))},
        }

    gaps = [
        gap("leak_free", "uniform", 0.03, 0.01, 0.5, 0.2),
        gap("leak_free", "matched", 0.01, 0.02, 0.3, 0.1),
        gap("new_nodes", "uniform", 0.022, 0.01, 0.5, 0.2),
        gap("new_nodes", "matched", 0.05, 0.03, 0.2, -0.1),
    ]
    runs = {"r": {"beyond": {"gaps": gaps}}}
    goal = link_findings.beyond(runs, tmp_path)
    # leak_free/uniform clears +0.02 AUC and MRR; new_nodes/uniform's AUC interval [+0.017, +0.027] holds +0.02
    assert (goal.sides[0][1].met, goal.sides[0][1].missed, goal.sides[0][1].undecided) == (1, 2, 1)
    assert "+0.030 [+0.025, +0.035] / +0.022 [+0.017, +0.027] under leak_free / new_nodes" in goal.page()
    assert "[1 of 4][r] cells on title mentions (2 missed, 1 undecided, 3 seeds)" in goal.readme()
    harder = link_findings.harder_negatives(runs, tmp_path)
    # matched: AUC margins +0.01 / +0.05 over the bar (+-0.005): both intervals above 0, none below
    assert (
        "of 2 protocols" in harder.page() and "matched 2 / 0 over the bar and 2 / 0 over the shortcut" in harder.page()
    )
    assert harder.readme() is None
    assert (
        link_findings.beyond({"x": {}}, tmp_path) is None
        and link_findings.harder_negatives({"x": {}}, tmp_path) is None
    )


def _params_05(folder, steps):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "params_05.json").write_text(json.dumps({"params": {"steps": steps}}))


def _probe_rows(gain, seeds=(0, 1, 2), methods=("MiniLM", "no distillation")):
    return [
        {
            "stage": "task-agnostic",
            "student": "3x384",
            "init": "random",
            "method": m,
            "seed": s,
            "polarity_test": 0.6 + s / 100 + (gain * (1 + s / 10) if m == "MiniLM" else 0),
            "topic_test": 0.5 + s / 100,
            "fid_cosine": 0.4 + (s / 100 if m == "MiniLM" else -s / 50),
        }
        for s in seeds
        for m in methods
    ]


LP = [
    {"protocol": "leak_free", "embedder": e, "model": "gat_model", "seed": 0, "auc": a}
    for e, a in (("3x384 random MiniLM", 0.80), ("3x384 random no distillation", 0.75))
]


def test_the_distillation_finding_comes_from_the_longest_result_run_and_names_the_pipeline_checks(tmp_path):
    runs = {
        "long": {"distill": {"results": _probe_rows(0.1), "link_prediction": LP}},
        "short": {"distill": {"results": _probe_rows(0.0)}},
        "copy": {"distill": {"results": _probe_rows(0.0)}},
    }
    _params_05(tmp_path / "long" / "distill", 5000)  # published with its stage folder, or flat
    _params_05(tmp_path / "short", 60)
    d = distill_findings.distillation(runs, tmp_path)
    assert (d.runs, d.steps, d.checks) == (("long",), 5000, ("short",))  # the same rows under another name: once
    # polarity gains 0.10, 0.11, 0.12 over the seeds: mean 0.110, 95% t-interval 0.110 -/+ 4.303 * 0.01 / sqrt(3)
    assert "At 5,000 optimiser steps per student" in d.page() and "polarity +0.110 [+0.085, +0.135]" in d.page()
    assert "GatModel test AUC 3x384 +0.050 under leak_free ([long]" in d.page()
    assert "The shorter runs ([short](outputs/reference/short/)) are pipeline checks" in d.page()
    assert d.readme().startswith("**Distillation.** After [5,000 steps][long] per student")
    assert d.readme().endswith(
        "3x384 random init polarity +0.110, topic +0.000, fidelity +0.030; as stage 3's node "
        "embedder, GatModel AUC +0.050."
    )
    _params_05(tmp_path / "long" / "distill", 500)  # no run reaches the result budget: the pipeline-check line
    check = distill_findings.distillation(runs, tmp_path)
    assert check.readme() is None and "at 500 optimiser steps per student, a pipeline check" in check.page()
    assert "[long]" in check.page() and "3x384 +0.050 under leak_free" in check.page()


def test_the_ablation_finding_needs_two_seeds_and_counts_the_intervals_against_the_paper(tmp_path):
    def rows(ablation_seeds):
        out = _probe_rows(0.1)
        return out + [
            {**r, "method": "Value-MSE"}
            for r in out
            if r["method"] == "no distillation" and r["seed"] in ablation_seeds
        ]

    runs = {
        "a_one_seed": {"distill": {"results": rows([0]), "link_prediction": LP}},
        "b_three": {"distill": {"results": rows([0, 1, 2])}},
    }
    for run in runs:
        _params_05(tmp_path / run, 5000)
    # Value-MSE equals the control here: polarity below MiniLM's by 0.110 [0.085, 0.135]; topic 0 (no spread: an
    # empty interval at 0 counts neither above nor below); fidelity gains 0, 0.03, 0.06
    a = distill_findings.ablations(runs, tmp_path)
    assert (a.run, a.above, a.below, len(a.differences)) == ("b_three", 1, 0, 3)
    assert "Value-MSE (3x384 random init, 3 seeds): polarity +0.110 [+0.085, +0.135]" in a.page()
    assert "in 1 of 3 (ablation, probe) cells, below it in 0, and the other 2 intervals hold 0" in a.page()
    assert (
        "[3 seeds][b_three] (3x384 random init, test, 95% interval; the paper has MiniLM above all): above 0 in 1 "
        "of 3 cells, below 0 in 0: Value-MSE polarity +0.110 [+0.085, +0.135]." in a.readme()
    )
    assert distill_findings.ablations({"a_one_seed": runs["a_one_seed"]}, tmp_path) is None  # one seed: no interval
    # at equal steps the distillation finding stays with the run that also scored the students as node embedders
    assert distill_findings.distillation(runs, tmp_path).runs == ("a_one_seed",)
    _params_05(tmp_path / "b_three", 60)
    assert distill_findings.ablations(runs, tmp_path) is None  # a pipeline check measures nothing


def _embedders_run(ref):
    """A committed notebook-05b run: a student that meets its goal, a faster one that does not, a static model."""
    run = ref / "emb"
    (run / "embedders").mkdir(parents=True)
    encoders = {
        "all-MiniLM-L6-v2": ("reference", 6),
        "student a": ("student", 3),
        "student b": ("student", 2),
        "static s": ("static-trained", 0),
    }
    (run / "metrics.json").write_text(
        json.dumps(
            {
                "node_embedders": {
                    "encoders": {k: {"kind": v[0], "layers": v[1]} for k, v in encoders.items()},
                    "sentences": ["student a: goal met."],
                }
            }
        )
    )
    pd.DataFrame(
        [
            {
                "encoder": "student a",
                "layers": 3,
                "ratio": 2.2,
                "worst_cosine": -0.004,
                "worst_gat_model": -0.01,
                "met": True,
            },
            {
                "encoder": "student b",
                "layers": 2,
                "ratio": 2.9,
                "worst_cosine": -0.02,
                "worst_gat_model": -0.01,
                "met": False,
            },
            {"encoder": "static s", "layers": 0, "ratio": 80.0, "worst_cosine": -0.05, "met": False},
        ]
    ).to_csv(run / "embedders" / "goals.csv", index=False)
    pd.DataFrame(
        [
            {"source": s, "protocol": "leak_free", "seed": seed}
            for s in ("wikispeedia", "vital_heldout")
            for seed in range(5)
        ]
    ).to_csv(run / "embedders" / "lp.csv", index=False)
    pd.DataFrame(
        [
            {"role": "held out", "what": "wikispeedia", "count": 300, "mentioned_inside": 0.2},
            {"role": "held out", "what": "vital_heldout", "count": 100, "mentioned_inside": 0.4},
        ]
    ).to_csv(run / "embedders" / "texts.csv", index=False)
    return {"emb": json.loads((run / "metrics.json").read_text())}


def test_the_unseen_title_finding_names_the_best_choice_and_its_trade_off_in_one_sentence(tmp_path):
    assert node_embedders({}, tmp_path) is None
    n = node_embedders(_embedders_run(tmp_path), tmp_path)
    assert (n.run, n.seeds, n.protocols, n.sources, n.mentioned) == ("emb", 5, ("leak_free",), 2, pytest.approx(0.25))
    assert n.best(static=False).name == "student a" and n.best(static=True).name == "static s"
    assert n.best().name == "student a"  # the only one meeting its goal; the faster student b does not
    assert n.readme() == (
        "**A smaller node embedder, on unseen titles** (2 link sources, 5 seeds, lowest 95% bounds against "
        "all-MiniLM-L6-v2): the best choice is student a, [2.2×][emb] its titles/s for cosine-scorer AUC -0.004 at "
        "worst (goal > −0.01)."
    )  # cosine's bound is the closer to its margin
    assert n.readme().count(". ") == 0  # one sentence
    assert n.page().count("goal met") == 1 and "25% of them occur inside one" in n.page()
