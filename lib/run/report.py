"""Generated documentation: the README's findings and timings, docs/results.md (every results table, from the committed
reference runs in outputs/reference/<run>/), docs/parameters.md (from the typed stage configs and params/*.yaml) and
the lists of negative sets, heuristics, decoders, encoder kinds and link sources (from their registries,
lib.run.registry_lists).

    python -m lib.run.report                  # rewrite every generated block and page, and the size figure
    python -m lib.run.report --publish seed40 # copy outputs/seed40's small result files to
                                              # outputs/reference/seed40/ first
    python -m lib.run.report --publish-cost seed_scale  # a run that is cost evidence only: parameters, status and
                                              # cost.json (lib.run.cost), no metrics or notebooks
    python -m lib.run.report --check          # exit 1 when a generated block or page differs (a test runs this)

Nothing here is typed by hand: every number comes from a reference run's metrics.json (written by the notebooks),
the seed report's numbers from lib.metrics.link.SEED_REPORTED.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pandas as pd

from lib.common import published
from lib.common.paths import OUTPUTS, ROOT, atomic_write_text
from lib.common.runinfo import jsonable, load_json, read_json
from lib.linkpred.beyond import gap_table
from lib.linkpred.names import PROTOCOLS
from lib.linkpred.negative_sets.registry import DEFAULT_NEGATIVE_SETS, REGISTRY
from lib.metrics.link import SEED_REPORTED
from lib.metrics.selection import PART_TITLES
from lib.run import parameters_page, registry_lists
from lib.run.cost import COST_FILE, cost_sentence, cost_table
from lib.run.embedder_findings import NODE_EMBEDDERS, embedders_run, embedders_table
from lib.run.facts import (
    REFERENCE_RUNS,
    n_train,
    notebook_runs,
    reproduced,
    reproduced_sentence,
    reproduced_table,
    run_commits,
)
from lib.run.findings import fact_table, page_lines, readme_lines
from lib.run.publish import publish
from lib.run.tables import (
    distill_differences_table,
    distill_lp_table,
    distill_table,
    goal_table,
    heuristic_table,
    kd_table,
    once,
    overlap_table,
    seed_rows,
    seed_table,
    strata_table,
    structure_table,
)
from lib.run.verdicts import run_verdicts, summary
from lib.viz.figures import saved

RESULTS = ROOT / "docs" / "results.md"
BEGIN, END = "<!-- results:begin (python -m lib.run.report) -->", "<!-- results:end -->"  # in docs/results.md
FBEGIN, FEND = "<!-- findings:begin (python -m lib.run.report) -->", "<!-- findings:end -->"  # in README.md
FIGURE = "auc_aauc_vs_size.png"
# How long the README's two commands take, measured from a fresh clone by scripts/time_loop.py.
TIMINGS = REFERENCE_RUNS / "loop" / "timings.json"
TBEGIN, TEND = "<!-- timings:begin (python -m lib.run.report) -->", "<!-- timings:end -->"
OBEGIN, OEND = "<!-- own-links:begin (python -m lib.run.report) -->", "<!-- own-links:end -->"  # in README.md
OWN_LINKS_RUN = "own_links_example"
"""The published run of notebook 03b on the example link list (params/own_links_example.yaml) the README shows."""
RBEGIN, REND = "<!-- tables:begin (python -m lib.run.report) -->", "<!-- tables:end -->"  # in each reference README


def reference_runs(ref: Path = REFERENCE_RUNS) -> dict[str, dict]:
    """{run name: metrics dict} of every reference run folder with a metrics.json, the seed-experiment runs first by
    number of training graphs, then the others (e.g. distillation) by name."""
    runs = {p.parent.name: published.metrics(load_json(p)) for p in ref.glob("*/metrics.json")}
    for name, m in runs.items():  # the link source, for the tables and findings that show each source side by side
        crawl = read_json(ref / name / "params_01_crawl.json").get("params") or {}
        m.setdefault("link_source", crawl.get("source", "embedded"))
        judge_gaps(m, ref / name)
    return dict(
        sorted(runs.items(), key=lambda kv: (0, n_train(kv[1]), kv[0]) if "train_gat" in kv[1] else (1, 0, kv[0]))
    )


def judge_gaps(m: dict, run_dir: Path) -> None:
    """Notebook 03b's gap rows in `m` (a run's metrics) judged by the project's one rule: a run written before the
    rule kept means without intervals, so its gap rows are made again by lib.linkpred.beyond.gap_table from the run's
    own beyond_rows.csv (which reproduces every stored margin and choice); a run without that file keeps its rows,
    whose goal is then undecided."""
    gaps = (m.get("beyond") or {}).get("gaps")
    rows = run_dir / "beyond_rows.csv"
    if gaps and "goal" not in gaps[0] and rows.is_file():
        m["beyond"]["gaps"] = jsonable(gap_table(pd.read_csv(rows)).to_dict("records"))


def plot_size(runs: dict[str, dict], path: Path):
    """Test AUC and A-AUC of GatModel (seed protocol, uniform negatives) against training graphs, with the seed's."""
    matplotlib.use("Agg")

    t = seed_rows(runs)
    t = t[t["protocol"].isin(["seed", "leak_free", "pair_split", "new_nodes"])] if len(t) else t
    sources = list(dict.fromkeys(t["links"])) or ["no run"]
    fig, axes = plt.subplots(1, len(sources), figsize=(5.2 * len(sources) + 1.8, 4.2), sharey=True, squeeze=False)
    for ax, links in zip(axes[0], sources):
        ax.plot([r["train_graphs"] for r in SEED_REPORTED], [r["auc"] for r in SEED_REPORTED], "k*-", label="seed AUC")
        ax.plot(
            [r["train_graphs"] for r in SEED_REPORTED], [r["aauc"] for r in SEED_REPORTED], "k*:", label="seed A-AUC"
        )
        for p, g in t[t["links"] == links].groupby("protocol"):
            i = PROTOCOLS.index(p)  # one colour per protocol in every panel
            g = g.sort_values("n_train")
            ax.plot(g["n_train"], g["auc"], "o-", color=f"C{i}", label=f"AUC · {p}")
            ax.plot(g["n_train"], g["aauc"], "s:", color=f"C{i}", label=f"A-AUC · {p}")
        ticks = sorted({r["train_graphs"] for r in SEED_REPORTED} | set(t[t["links"] == links]["n_train"]))
        ax.set(xscale="log", xlabel="training graphs (incl. validation)", title=f"links: {links}")
        ax.set_xticks(ticks, [str(n) for n in ticks])
        ax.minorticks_off()
    axes[0][0].set_ylabel("test score (GatModel, uniform negatives)")
    handles, labels = axes[0][-1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.suptitle("GatModel: AUC and A-AUC against training-set size, per link source (the seed's in black)")
    saved(fig, path, 110, outer_legend=True)
    plt.close(fig)


SEED_TEXT = (
    "GatModel as the seed trained it (message-passing supervision, 2 epochs), test graphs, uniform negatives, "
    "mean ± std over seeds; the seed report's numbers are its single run on 20,000-node live graphs. The last "
    "column is the share of the training graphs' edges the protocol removed (notebook 03's audit): the offline "
    "graphs share most title pairs, so keeping the test links out of training removes them from every "
    "training graph that holds them, and those graphs are then sparser than the test graphs."
)
GOAL_TEXT = (
    "Notebook 03b, mean over seeds: the graph model chosen on validation against the bar — the strongest "
    "heuristic scorer by mean test AUC (the heuristic stack, the stack on rescaled counts where it ran, or the "
    "best single heuristic) — and the no-common-neighbour shortcut. The goal: ≥ +0.02 AUC and a higher MRR than "
    "the bar, and than the shortcut on every set but uniform."
)
STRUCTURE_TEXT = (
    "Notebook 03b, pairs and message passing only, mean over seeds; the shortcut scores 1 for a pair "
    "without a common neighbour. The negative sets: "
    + "; ".join(f"`{n}`, {REGISTRY[n].summary}" for n in DEFAULT_NEGATIVE_SETS[1:])
    + ". Where validation and test differ in the share of positives without a common neighbour, "
    "validation measures another task than test."
)
STRATA_TEXT = (
    "Notebook 03b, mean over seeds: the graph model chosen on validation minus the bar, computed separately "
    "over the test positives that have a common neighbour in the message passing and over those that have "
    "none (each against the same negatives). A model that only wins where a common neighbour exists has "
    "learned the heuristics' signal, not more."
)
OVERLAP_TEXT = "Notebook 01; the seed's live campaign shared 0.92 of a graph's nodes over ~620,000 titles."
DISTILL_TEXT = (
    "Notebook 05's task-agnostic stage: each MiniLM student beside its undistilled control (same "
    "architecture, initialisation and seeds; an assistant-initialised control is the first layers of "
    "all-MiniLM-L6-v2, so it does not vary with the seed), linear probes on frozen sentence embeddings, test "
    "accuracy, and cosine fidelity to the teacher, mean ± std over seeds."
)
DIFF_TEXT = (
    "Notebook 05's task-agnostic stage: MiniLM minus its undistilled control and minus each ablation on the "
    "same student, initialisation and seed, test probes and fidelity cosine, mean difference with its 95% "
    "t-interval over the paired seeds (no interval with one seed). The paper puts MiniLM above every ablation."
)
LP_TEXT = (
    "Each embedder as the node embedder of the seed's GatModel (2 epochs), test graphs of the run's split per "
    "seed, uniform negatives; `cosine` scores the features alone."
)
EMBEDDERS_TEXT = (
    "Notebook 05b: every encoder as the node embedder of the seed's GatModel (mp supervision, uniform "
    "negatives) and as the feature-cosine heuristic on two link sources none of whose titles was a "
    "training text (Wikispeedia; the held-out vital-article topics), leak_free, minus all-MiniLM-L6-v2 "
    "on the same seed with its 95% interval; `cos`: mean cosine to all-MiniLM-L6-v2's embedding of the "
    "same title; titles/s on one thread relative to all-MiniLM-L6-v2's in the same repetitions."
)
KD_TEXT = (
    "Each student distilled from the fine-tuned teacher's logits beside the same student trained on the labelled "
    "texts with CE for as many steps (`control`); test accuracy and agreement with the teacher's predictions, mean "
    "± std over seeds; `probing gain` is the mean probe accuracy above the majority class over eight probing "
    "tasks."
)
HEURISTIC_TEXT = (
    "Every protocol and negative set: GatModel as the seed trained it beside the best single heuristic "
    "(mean test AUC) and, where notebook 03b ran, its best graph model (chosen on validation), the "
    "heuristic stack, and that model's margin over the bar and over the shortcut."
)


def _md(t) -> str:
    return t.to_markdown(index=False, disable_numparse=True)


def _sections(runs: dict[str, dict], full: bool) -> list[tuple[str, str, object]]:
    """(question, what the table holds, table) of the results; `full` adds the long per-set heuristic table (the
    reference READMEs) where the README keeps to one small table per question."""
    structure = structure_table(runs)
    out = [("Does the seed's GatModel reproduce, and does it predict links it never saw?", SEED_TEXT, seed_table(runs))]
    if full:
        out.append(("Every protocol and negative set against the heuristics", HEURISTIC_TEXT, heuristic_table(runs)))
    return (
        out
        + [
            ("Do learned decoders beat the heuristics (notebook 03b)?", GOAL_TEXT, goal_table(runs)),
            (
                "Can one structural bit solve a negative set, and does validation measure what test measures?",
                STRUCTURE_TEXT,
                structure,
            ),
        ]
        + (
            [("Does the model win with and without a common neighbour?", STRATA_TEXT, strata_table(runs))]
            if full
            else []
        )
        + [
            ("How much do the offline graphs overlap?", OVERLAP_TEXT, overlap_table(runs)),
            (
                "Does MiniLM distillation beat its undistilled control (notebook 05)?",
                DISTILL_TEXT,
                once(distill_table(runs)),
            ),
            ("Does a distilled student serve as stage 3's node embedder?", LP_TEXT, once(distill_lp_table(runs))),
            ("Does classic knowledge distillation beat cross-entropy alone (notebook 06)?", KD_TEXT, kd_table(runs)),
        ]
        + (
            [
                (
                    "Which parts of MiniLM matter (the paper's Tables 5-7)?",
                    DIFF_TEXT,
                    once(distill_differences_table(runs)),
                )
            ]
            if full
            else []
        )
    )


def render(runs: dict[str, dict], ref: Path = REFERENCE_RUNS, base: str = "../") -> str:
    """The results block (Markdown) of docs/results.md for these runs: the findings' long form (lib.run.findings),
    then one table per question, each run listed once. `base` leads from the page to the repository root."""
    if not runs:
        return f"{BEGIN}\nNo reference run is committed yet.\n{END}"
    parts = [BEGIN, "", "**Findings** (each line printed from the committed runs' files by `lib/run/findings.py`):", ""]
    parts += page_lines(fact_table(runs, ref), base) + [""]
    for i, (question, text, table) in enumerate(_sections(runs, full=False)):
        if len(table):
            parts += [f"### {question}", "", text, "", _md(table), ""]
        if i == 0:
            parts += [f"![AUC and A-AUC against training-set size]({base}outputs/reference/{FIGURE})", ""]
    unseen, run = embedders_table(runs, ref), embedders_run(runs)
    if len(unseen):
        parts += [
            f"### How small can the node embedder be, on titles it never saw ([{run}]({base}outputs/reference/"
            f"{run}/))?",
            "",
            EMBEDDERS_TEXT,
            "",
            _md(unseen),
            "",
            f"![AUC minus all-MiniLM-L6-v2's against titles per second]({base}outputs/reference/{run}/figures/"
            f"05b_embedders_frontier.png)",
            "",
        ]
        parts += [f"- {g}" for g in runs[run][NODE_EMBEDDERS]["sentences"]] + [""]
    notes = [n for n in runs if (ref / n / "README.md").is_file()]
    if notes:
        parts += [
            "Every run's full tables (every negative set, every heuristic) are in its reference README: "
            + ", ".join(f"[{n}]({base}outputs/reference/{n}/README.md)" for n in notes)
            + ".",
            "",
        ]
    return "\n".join(parts + [END])


def render_findings(runs: dict[str, dict], ref: Path = REFERENCE_RUNS) -> str:
    """The README's findings block: the short form of every finding (lib.run.findings) and its links."""
    if not runs:
        return f"{FBEGIN}\nNo reference run is committed yet.\n{FEND}"
    commits = {r: run_commits(ref / r) for r in runs if (ref / r).is_dir()}
    checks = {r: c for r in runs if (c := reproduced(ref / r))}
    return "\n".join([FBEGIN, *readme_lines(fact_table(runs, ref), runs, commits=commits, checks=checks), FEND])


RAN_TEXT = (
    "From the run's status.json and each notebook's own params record: the commit its numbers were made at, and the "
    "wall time and kernel peak memory of its last execution (a notebook resumed from its checkpoints over several "
    "executions took longer in all; the run's README says how it was made)."
)


def run_record(folder: Path) -> list[str]:
    """The lines a reference run's Tables block opens with: how each notebook ran (facts.notebook_runs) and, where the
    run has one, its reproduction check."""
    lines = []
    ran = notebook_runs(folder)
    if len(ran):
        lines += [f"**How each notebook ran** {RAN_TEXT}", "", _md(ran), ""]
    check = reproduced(folder)
    if check:
        lines += [
            f"**Does today's code give these numbers?** {reproduced_sentence(check)}",
            "",
            _md(reproduced_table(check)),
            "",
        ]
    return lines


def run_tables(name: str, metrics: dict, ref: Path = REFERENCE_RUNS) -> str:
    """The generated Tables block of one reference run's README: how each notebook ran (facts.notebook_runs), then its
    result tables."""
    parts = [RBEGIN, "", *run_record(ref / name)]
    for question, text, table in _sections({name: metrics}, full=True):
        if len(table):
            parts += [f"**{question}** {text}", "", _md(table.drop(columns="run", errors="ignore")), ""]
    unseen = embedders_table({name: metrics}, ref)
    if len(unseen):
        parts += [
            f"**How small can the node embedder be, on titles it never saw?** {EMBEDDERS_TEXT}",
            "",
            _md(unseen),
            "",
            *[f"- {g}" for g in metrics[NODE_EMBEDDERS]["sentences"]],
            "",
        ]
    return "\n".join(parts + [REND])


def cost_block(cost: dict) -> str:
    """The generated Tables block of a cost-only reference run's README: its cost.json per notebook."""
    return "\n".join([RBEGIN, "", cost_sentence(cost), "", cost_table(cost), "", REND])


def with_run_tables(readme: str, block: str) -> str:
    """`readme` with its Tables block replaced by `block` (appended under a heading where it has none)."""
    if RBEGIN in readme and REND in readme:
        return readme.replace(readme_block(readme, RBEGIN, REND), block)
    return readme.rstrip("\n") + "\n\n## Tables\n\n" + block + "\n"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def _machine(record: dict) -> str:
    """The machine of a timing record: its CPU where the record names one (records before that name none)."""
    return f"{record['cpu']}; {record['machine']}" if "cpu" in record else record["machine"]


def render_timings(t: dict) -> str:
    """The README's timing sentences from scripts/time_loop.py's record (timings.json); parts not measured are left
    out."""
    idle = t.get("idle")
    if not idle:
        return f"{TBEGIN}\nNot measured yet (python scripts/time_loop.py).\n{TEND}"
    nb = lambda r: ", ".join(f"{k.split('_')[0]} {v['seconds']:.0f} s" for k, v in r["notebooks"].items())
    done = []
    if "setup_seconds" in idle:
        installer = idle.get("installer", "pip")  # records made before the set-up used uv name none
        done.append(f"set-up {_minutes(idle['setup_seconds'])} with {installer}, its package cache warm")
    if "demo_seconds" in idle:
        done.append(f"`make demo` {_minutes(idle['demo_seconds'])} (notebooks {nb(idle)})")
    count = f"{idle['tests_collected']} tests" if "tests_collected" in idle else "the tests"
    if "test_seconds" in idle:
        outcome = ", ".join(f"{n} {k}" for k, n in idle["tests"].items())
        after = ", after the demo in the same clone (its caches warm)" if "demo_seconds" in idle else ""
        done.append(f"`make test` {_minutes(idle['test_seconds'])} for {count} ({outcome}){after}")
    elif "tests_collected" in idle:
        done.append(f"`make test` collects {count}")
    lines = [
        TBEGIN,
        f"Measured from a fresh clone on {idle['cores']} idle cores ({_machine(idle)}; commit "
        f"{idle['commit']}, {idle['date']}, `python scripts/time_loop.py`):",
        "",
    ]
    lines += [f"- {d}" for d in done]
    shared = t.get("shared")
    if shared and "demo_seconds" in shared:
        lines.append(
            f"- with {shared['condition']} (commit {shared['commit']}, {shared['date']}): `make demo` "
            f"{_minutes(shared['demo_seconds'])} (notebooks {nb(shared)})"
        )
    lines.append(TEND)
    return "\n".join(lines)


VERDICT_COLUMNS = ["protocol", "negatives", "chosen model", "goal", *PART_TITLES.values()]
"""The verdict table's columns the READMEs show: every part of the goal, so a missed goal shows which part missed."""
VERDICT_TEXT = (
    "Per protocol × negative set: the graph model chosen on validation, the bar it must beat (the heuristic scorer or "
    "stack of the best mean test AUC) and each part of the goal: the mean margin across seeds with its 95% interval "
    "against the required margin, over the bar and, on every negative set but uniform, over the shortcut (a positive "
    "pair without a common neighbour ranked first): met where the interval lies above it, missed where it lies below, "
    "undecided where it holds it; the goal is met when every part is met "
    '(docs/honesty.md, "How a claim is judged").'
)


def render_own_links(ref: Path = REFERENCE_RUNS) -> str:
    """The README's verdict table of notebook 03b on the example link list (OWN_LINKS_RUN; lib.run.verdicts), the
    table a user's own run prints."""
    run = ref / OWN_LINKS_RUN
    if not (run / "beyond_rows.csv").is_file():
        return f"{OBEGIN}\nNot published yet.\n{OEND}"
    table = run_verdicts(run)
    commit = str(load_json(run / "params.json").get("git_commit", ""))[:7]
    return "\n".join(
        [
            OBEGIN,
            f"`python -m lib.run.verdicts outputs/reference/{OWN_LINKS_RUN}` (made at {commit}; "
            f"[its folder](outputs/reference/{OWN_LINKS_RUN}/)): {summary(table)}.",
            "",
            table[VERDICT_COLUMNS].to_markdown(index=False),
            OEND,
        ]
    )


def verdicts_block(folder: Path) -> str:
    """The generated Tables block of a reference run without metrics.json whose notebook 03b rows are published (the
    example link list): how each notebook ran, the reproduction check, and the verdict table of lib.run.verdicts."""
    parts = [RBEGIN, "", *run_record(folder)]
    table = run_verdicts(folder)
    parts += [
        "**Does the model chosen on validation beat the heuristics and the shortcut?** "
        f"`python -m lib.run.verdicts outputs/reference/{folder.name}`: {summary(table)}. {VERDICT_TEXT}",
        "",
        _md(table[[*VERDICT_COLUMNS[:3], "bar", *VERDICT_COLUMNS[3:]]]),
        "",
    ]
    return "\n".join(parts + [REND])


def load_timings(path: Path = TIMINGS) -> dict:
    return read_json(path)


def test_count_current(measured: int | None, collected: int) -> bool:
    """Whether the README's measured test count still describes a suite of `collected` tests: within 10% of it (the
    suite checks it; scripts/time_loop.py re-measures it)."""
    return bool(measured) and abs(collected - measured) <= 0.1 * collected


def collected_tests(python: str | Path, cwd: Path = ROOT, env: dict | None = None) -> int:
    """How many tests `make test` runs in the checkout `cwd` with that `python`: pytest's collection of tests and
    notebooks (the timing sentence names it)."""
    out = subprocess.run(
        [
            str(python),
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "tests",
            "notebooks",
            "--nbval-lax",
            "-p",
            "no:cacheprovider",
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    return int(re.search(r"(\d+) tests? collected", out).group(1))


def readme_block(text: str, begin: str = BEGIN, end: str = END) -> str:
    if begin not in text or end not in text:
        raise ValueError(f"the page has no generated-block markers; add a line {begin!r} and a line {end!r}")
    return text[text.index(begin) : text.index(end) + len(end)]


def _with(text: str, block: str, begin: str, end: str) -> str:
    return text.replace(readme_block(text, begin, end), block)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m lib.run.report", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--check", action="store_true", help="exit 1 if a generated block or page is out of date")
    ap.add_argument("--readme", default=str(ROOT / "README.md"))
    ap.add_argument("--results", default=str(RESULTS), help="the results page")
    ap.add_argument("--parameters", default=str(parameters_page.PAGE), help="the parameters page")
    ap.add_argument(
        "--publish",
        action="append",
        default=[],
        metavar="RUN",
        help="copy outputs/RUN's small result files to outputs/reference/RUN first",
    )
    ap.add_argument(
        "--publish-cost",
        action="append",
        default=[],
        metavar="RUN",
        help="copy outputs/RUN's parameters and status and write its cost record (lib.run.cost); no metrics, notebooks",
    )
    ap.add_argument(
        "--outputs", default=str(OUTPUTS), help="the folder holding the run folders to publish (default: outputs)"
    )
    a = ap.parse_args(argv)
    outputs = Path(a.outputs)
    for run in a.publish:
        print(f"published {len(publish(run, outputs))} files of {outputs / run} to outputs/reference/{run}")
    for run in a.publish_cost:
        n = len(publish(run, outputs, cost_only=True))
        print(f"published the cost of {outputs / run} to outputs/reference/{run} ({n} files)")
    runs = reference_runs()
    readme, results, params = Path(a.readme), Path(a.results), Path(a.parameters)
    old = {p: p.read_text(encoding="utf-8") if p.is_file() else "" for p in (readme, results, params)}
    new = {
        readme: _with(
            _with(
                _with(old[readme], render_findings(runs), FBEGIN, FEND), render_timings(load_timings()), TBEGIN, TEND
            ),
            render_own_links(),
            OBEGIN,
            OEND,
        ),
        results: _with(old[results], render(runs), BEGIN, END),
        params: parameters_page.current(),
    }
    for page in registry_lists.pages():
        old.setdefault(page, page.read_text(encoding="utf-8"))
        new[page] = registry_lists.with_lists(new.get(page, old[page]))
    stale = [
        name
        for name in runs
        if (REFERENCE_RUNS / name / "README.md").is_file()
        and with_run_tables(
            (REFERENCE_RUNS / name / "README.md").read_text(encoding="utf-8"), run_tables(name, runs[name])
        )
        != (REFERENCE_RUNS / name / "README.md").read_text(encoding="utf-8")
    ]
    own = REFERENCE_RUNS / OWN_LINKS_RUN
    if (own / "README.md").is_file() and (own / "beyond_rows.csv").is_file():
        old.setdefault(own / "README.md", (own / "README.md").read_text(encoding="utf-8"))
        new[own / "README.md"] = with_run_tables(old[own / "README.md"], verdicts_block(own))
    for path in sorted(REFERENCE_RUNS.glob(f"*/{COST_FILE}")):  # a cost-only run's README shows its cost.json
        readme_path = path.parent / "README.md"
        if readme_path.is_file():
            old.setdefault(readme_path, readme_path.read_text(encoding="utf-8"))
            new[readme_path] = with_run_tables(old[readme_path], cost_block(load_json(path)))
    if a.check:
        differ = [str(p) for p in new if new[p] != old[p]] + [f"outputs/reference/{n}/README.md" for n in stale]
        if differ:
            print(
                f"generated text differs from the committed runs and configs in {', '.join(differ)}; run "
                "python -m lib.run.report",
                file=sys.stderr,
            )
            return 1
        return 0
    for name in stale:
        path = REFERENCE_RUNS / name / "README.md"
        atomic_write_text(path, with_run_tables(path.read_text(encoding="utf-8"), run_tables(name, runs[name])))
    for path, text in new.items():
        if text != old[path]:
            atomic_write_text(path, text)
    if runs:
        plot_size(runs, REFERENCE_RUNS / FIGURE)
    print(f"README findings, {results.name} and {params.name} rewritten from {len(runs)} reference run(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
