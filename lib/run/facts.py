"""The facts that the findings (lib.run.findings), the results tables (lib.run.tables) and the run summaries
(lib.run.summary) share, each computed by one function from a run's metrics.json: its link source and training-set
size, GatModel's rows, the best single heuristic, notebook 03b's goal per cell, and MiniLM minus its undistilled
control as stage 3's node embedder."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd

from lib.common.paths import OUTPUTS
from lib.common.runinfo import load_json
from lib.linkpred.names import MODEL_KINDS
from lib.metrics.selection import goal_verdict

REFERENCE_RUNS = OUTPUTS / "reference"
"""The folder of the committed reference runs, one sub-folder per run."""
LINKS = {
    "embedded": "title mentions (proxy)",
    "wikispeedia": "Wikispeedia hyperlinks",
    "snapshot": "own link list",
    "live": "live Wikipedia",
    "graphs": "imported graphs",
}
"""What a run's links are, by its notebook-01 `source`: the README shows each finding on every link source."""
REPRODUCED = "reproduced.json"
"""A reference run's record of its last reproduction check (`python -m lib.run.reproduce RUN --record`): the prefix
and notebooks re-run, the commits they were re-run at, the date, the tolerance and the drift table."""


def run_commits(folder: Path) -> tuple[str, ...]:
    """The commits a run folder's numbers were made at, short, sorted: its params.json and every notebook's
    params_<notebook>.json, beside it or under distill/ (a notebook re-run later records its own); "+dirty" kept, as
    such a run matches no commit."""
    found = set()
    for f in [
        folder / "params.json",
        *sorted(folder.glob("params_*.json")),
        *sorted(folder.glob("distill/params_*.json")),
    ]:
        commit = str((load_json(f) or {}).get("git_commit") or "") if f.is_file() else ""
        if commit:
            found.add(commit[:7] + ("+dirty" if commit.endswith("+dirty") else ""))
    return tuple(sorted(found))


def notebook_runs(folder: Path) -> pd.DataFrame:
    """How each notebook of a run folder ran, from its status.json and the notebook's params_<number>_*.json (the
    folder's params.json for a notebook that writes none): one row per notebook in run order (notebook, commit, status,
    seconds and kernel peak RSS of its last execution, and "re-run alone" where the runner's --rerun executed it on a
    finished folder). Where status.json lists every execution (runs made since the runner kept that list), also how
    many executions each notebook had and their seconds in all, killed ones up to their last heartbeat. Empty for a
    folder without status.json."""
    status = load_json(folder / "status.json") if (folder / "status.json").is_file() else {}
    executions = status.get("executions")
    rows = []
    for name, entry in sorted((status.get("notebooks") or {}).items()):
        number = name.split("_", 1)[0]
        record = next(iter(sorted(folder.glob(f"params_{number}_*.json"))), folder / "params.json")
        commit = str((load_json(record) or {}).get("git_commit") or "") if record.is_file() else ""
        rss = entry.get("peak_rss_mb")
        rows.append(
            {
                "notebook": Path(name).stem,
                "commit": commit[:7] + ("+dirty" if commit.endswith("+dirty") else ""),
                "status": entry.get("status", ""),
                "seconds (last execution)": entry.get("seconds"),
                "peak RSS MB": None if rss is None else round(rss),
                "how": "re-run alone" if entry.get("rerun") else "",
            }
        )
        if executions is not None:
            mine = [e for e in executions if e.get("notebook") == name]
            rows[-1]["executions"] = len(mine)
            rows[-1]["seconds (all executions)"] = round(sum(float(e.get("seconds") or 0) for e in mine), 1)
    return pd.DataFrame(rows)


def reproduced(folder: Path) -> dict | None:
    """A reference run's reproduction record (REPRODUCED), or None where it has none."""
    return load_json(folder / REPRODUCED) if (folder / REPRODUCED).is_file() else None


def reproduced_table(record: dict) -> pd.DataFrame:
    """A reproduction record's drift per result table: metrics compared, rows re-made, the fewest rows equal to the
    last bit over its metrics, the largest absolute drift and how many metrics lie within the tolerance."""
    drift = pd.DataFrame(record["table"])
    return (
        drift.groupby("table", sort=False)
        .agg(
            metrics=("metric", "size"),
            rows=("rows", "max"),
            exact=("exact", "min"),
            max_drift=("max_drift", "max"),
            within=("ok", "sum"),
        )
        .reset_index()
        .rename(
            columns={
                "exact": "rows exact (all metrics)",
                "max_drift": "max drift",
                "within": f"metrics within {record['tolerance']:g}",
            }
        )
    )


def reproduced_exactly(record: dict) -> bool:
    """Whether a reproduction record found every row of every metric equal to the last bit (a row not made again is
    not)."""
    drift = pd.DataFrame(record["table"])
    return bool((drift["exact"] == drift["rows"]).all())


def reproduced_verdict(record: dict) -> str:
    """What a reproduction record found, in a few words: every metric equal to the last bit, or how many lie within
    its tolerance and the largest drift, or the drift of each metric beyond it."""
    if reproduced_exactly(record):
        return "every metric equal to the last bit"
    drift = pd.DataFrame(record["table"])
    beyond = drift[~drift["ok"]]
    return f"{int(drift['ok'].sum())} of {len(drift)} metrics within {record['tolerance']:g} " + (
        f"(largest drift {drift['max_drift'].max():.3g})"
        if beyond.empty
        else f"(beyond it: {', '.join(f'{m} {d:.3g}' for m, d in zip(beyond['metric'], beyond['max_drift']))})"
    )


def reproduced_line(checks: dict[str, dict]) -> str | None:
    """The README's line on the reproduction records of the runs `checks` ({run: record}), or None for none: the runs
    whose every metric came out equal to the last bit, those within their tolerance with the largest drift, and each
    one beyond it with its metrics (a run's README names its prefix, commits and drift table)."""
    if not checks:
        return None
    exact, within, beyond = [], [], []
    for run, r in sorted(checks.items()):
        drift = pd.DataFrame(r["table"])
        if reproduced_exactly(r):
            exact.append(f"`{run}`")
        elif drift["ok"].all():
            within.append((f"`{run}`", float(drift["max_drift"].max()), r["tolerance"]))
        else:
            beyond.append(f"`{run}` ({reproduced_verdict(r)})")
    parts = [f"every metric equal to the last bit in {', '.join(exact)}"] if exact else []
    if within:
        parts.append(
            f"within {max(t for *_, t in within):g} in {', '.join(r for r, *_ in within)} "
            f"(largest drift {max(d for _, d, _ in within):.2g})"
        )
    parts += [f"not all within it in {b}" for b in beyond]
    return (
        "Re-run in part by later code with `python -m lib.run.reproduce` (each run's README has the prefix, commits "
        "and drift table): " + "; ".join(parts) + "."
    )


def reproduced_options(record: dict) -> str:
    """The reproduce command's options a reproduction record was made with: its prefix, then the prefix's own options
    (a distillation run's student) or the notebooks re-run."""
    options = record.get("options")
    shown = " ".join(f'"{o}"' if " " in o else o for o in options) if options else ""
    return f"--prefix {record['prefix']} " + (shown or f"--notebooks {' '.join(record['notebooks'])}")


def reproduced_sentence(record: dict) -> str:
    """One line saying what a reproduction record checked and found."""
    at = ", ".join(f"`{c}`" for c in record["rerun_at"])
    made = ", ".join(f"`{c}`" for c in record["recorded_at"])
    verdict, command = reproduced_verdict(record), f"python -m lib.run.reproduce {record['run']}"
    return (
        f"Re-run at {at} on {record['date']} (`{command} {reproduced_options(record)}`; published at {made}): "
        f"{verdict}."
    )


def common_commit(commits: dict[str, tuple[str, ...]]) -> str | None:
    """The commit most runs were made at (a run counts once per commit it names; ties go to the first in sorted
    order), or None for no commit at all."""
    votes = Counter(c for cs in commits.values() for c in cs)
    return min(votes, key=lambda c: (-votes[c], c)) if votes else None


def links_of(m: dict) -> str:
    """The link source of a reference run's metrics (lib.run.report.reference_runs records it; embedded if not)."""
    return LINKS.get(m.get("link_source", "embedded"), m.get("link_source", "embedded"))


def n_train(m: dict) -> int:
    """Training graphs of a run's notebook 03 (its first seed's train and validation graphs)."""
    s = m["train_gat"]["splits"]
    first = s[sorted(s, key=int)[0]]
    return len(first["train"]) + len(first["val"])


def gat_model_rows(
    rows: pd.DataFrame, protocol: str | None = None, supervision: str | None = "mp", negatives: str | None = "uniform"
) -> pd.DataFrame:
    """GatModel's rows of notebook 03's table `rows` (train_gat.mean); by default as the seed trains it (mp
    supervision, uniform negatives). A filter given as None, or whose column `rows` lacks, keeps every value."""
    if rows.empty:
        return rows
    sel = rows["model"] == "gat_model"
    for col, value in (("protocol", protocol), ("supervision", supervision), ("negatives", negatives)):
        if value is not None and col in rows:
            sel &= rows[col] == value
    return rows[sel]


def is_heuristic(rows: pd.DataFrame) -> pd.Series:
    """Which rows score with a heuristic: a scorer trained on nothing, that is a model outside MODEL_KINDS with
    supervision 'none' (how notebook 03 writes every scorer of lib.linkpred.heuristics.REGISTRY); none without a
    supervision column."""
    if "supervision" not in rows:
        return pd.Series(False, index=rows.index)
    return ~rows["model"].isin(MODEL_KINDS) & rows["supervision"].eq("none")


def best_heuristic(rows: pd.DataFrame, metric: str = "auc") -> pd.Series | None:
    """The heuristic row of `rows` (one protocol and negative set) with the highest `metric` (the first on a tie);
    None when `rows` holds no heuristic with that metric."""
    h = rows[is_heuristic(rows)].dropna(subset=[metric])
    return None if h.empty else h.loc[h[metric].idxmax()]


def goal_cells(m: dict) -> dict[tuple[str, str], str]:
    """{(protocol, negatives): notebook 03b's goal there, "met", "missed" or "undecided" (lib.metrics.selection.
    goal_verdict)} of a run's metrics; empty when notebook 03b did not run."""
    return {(g["protocol"], g["negatives"]): goal_verdict(g) for g in (m.get("beyond") or {}).get("gaps") or []}


def lp_minus_control(lp: pd.DataFrame) -> pd.DataFrame:
    """Notebook 05's link-prediction rows `lp`: per protocol and MiniLM-distilled student embedder, GatModel test AUC
    (mean over seeds) minus that of the same student undistilled. Columns: protocol, embedder, diff."""
    rows = []
    if lp.empty or "embedder" not in lp:
        return pd.DataFrame(rows, columns=["protocol", "embedder", "diff"])
    for protocol, g in lp[lp["model"] == "gat_model"].groupby("protocol", sort=False):
        auc = g.groupby("embedder")["auc"].mean()
        rows += [
            {"protocol": protocol, "embedder": e, "diff": auc[e] - auc[e.replace(" MiniLM", " no distillation")]}
            for e in auc.index
            if e.endswith(" MiniLM") and e.replace(" MiniLM", " no distillation") in auc.index
        ]
    return pd.DataFrame(rows, columns=["protocol", "embedder", "diff"])
