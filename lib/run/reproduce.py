"""Does today's code still give a published run's numbers? Re-run its recorded command, or a named cheap prefix of it,
at HEAD in a scratch folder and print each metric's drift against the committed rows.

    python -m lib.run.reproduce reproduce_demo                      # the prefix `make test` checks (about two minutes)
    python -m lib.run.reproduce wikispeedia_seed40 --prefix one-seed --notebooks 01 02 03
    python -m lib.run.reproduce seed40 --tolerance 0.01 --outputs /scratch/repro

The command is the run's own: its params.json records every resolved parameter, and each is passed to the runner as
`-p` (so a profile file edited since does not change it); a recorded parameter that no notebook declares today is
named and left out. A prefix changes a few parameters (`one-seed`: `n_seeds=1`, and `embedder_seeds=1` for notebook
05b) and compares only the rows it makes. The rows compared are the run's result tables (TABLES), matched on their
key columns; per table and metric the check prints how many rows match exactly and the largest absolute drift, and
exits 1 when a drift exceeds `--tolerance` (default TOLERANCE) or a committed row was not made again. Timing columns
are never compared. The re-run fills a cache of its own (`--warm-cache` uses the shared one).

    python -m lib.run.reproduce seed180 --prefix one-seed --notebooks 01 02 03 --made /scratch/repro/seed180 --record

    python -m lib.run.reproduce distill_long --prefix one-student --student "3x384 MiniLM random s1" --steps 500
    python -m lib.run.reproduce kd_cpu --prefix one-student --student "polarity bilstm s0"

The distillation runs (notebooks 05 and 06) take the prefix `one-student`, run in this process with the run's
recorded settings: for notebook 05, one task-agnostic student of the grid re-trained alone for its first `--steps`
steps with the whole run's learning-rate schedule (lib.distill.stage.retrain_first_steps), compared on its learning
curve (distill/curves.csv) at the steps it reached and, re-trained for all its steps, on its results row (results.csv;
a run without learning curves, eval_every 0, is compared so); for notebook 06, one task, student kind and seed, its
distilled row and its control, each trained as the whole grid trains it from a task teacher fine-tuned again (the
rows of rows.csv; the probing representations are not compared).

`--made` compares a re-run kept earlier with `--outputs` (its run folder) instead of running again, and `--record`
writes the check into the published run as `reproduced.json` (facts.REPRODUCED: prefix, notebooks, the commits the
re-run and the published run were made at, date, tolerance, drift table), which its README and the README's findings
then state.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

from lib.common import published
from lib.common.device import get_device
from lib.common.errors import WikigatError
from lib.common.params import notebook_number, numbered_notebooks
from lib.common.paths import atomic_write_text, shown
from lib.common.runinfo import git_commit, load_json, read_json
from lib.distill.config import read_params_05
from lib.distill.data import build_datasets
from lib.distill.models import assistant_path, ensure_teacher, load_encoder
from lib.distill.stage import retrain_first_steps
from lib.kd.augment import spacy_tagger
from lib.kd.config import KdParams
from lib.kd.stage import METHODS, run_students
from lib.run import runner
from lib.run.facts import REFERENCE_RUNS, REPRODUCED, run_commits
from lib.run.preflight import all_defaults

TOLERANCE = 1e-6
"""Largest absolute drift of a metric that still counts as the same number: float noise of one machine's kernels,
far below the third decimal any finding prints."""

PREFIXES = {"whole": {}, "one-seed": {"n_seeds": 1, "embedder_seeds": 1}}
"""Named prefixes of a run's command: the parameters each changes (lib.run.reproduce)."""
ONE_STUDENT = "one-student"
"""The prefix of a distillation run (notebook 05 or 06): one student re-trained in this process (`--student`)."""
STEPS = 500
"""Steps of a notebook-05 student the one-student prefix re-trains by default: the first point of a learning curve
probed every 500 steps."""


@dataclass(frozen=True)
class Table:
    """A result table of a run folder: its file, the columns that name a row and the notebook that writes it."""

    file: str
    keys: tuple[str, ...]
    notebook: str


TABLES = (
    Table("train_gat_rows.csv", ("seed", "model", "protocol", "supervision", "negatives"), "03"),
    Table("beyond_rows.csv", ("seed", "model", "protocol", "negatives"), "03b"),
    Table("aauc_size_trend.csv", ("seed", "train_graphs", "protocol"), "04"),
    Table("embedders/lp_rows.csv", ("embedder", "seed", "source", "model", "protocol"), "05b"),
    Table("embedders/probe_rows.csv", ("encoder",), "05b"),
    Table("embedders/validation.csv", ("encoder",), "05b"),
    Table("embedders/mixes.csv", ("mix", "student"), "05b"),
)
"""The result tables compared; a notebook's tables of speed or of figures over all seeds (05b's speed.csv, goals.csv,
paired.csv) are not: a speed is never the same twice, and a one-seed prefix changes a figure over seeds."""
UNCOMPARED = ("seconds", "time")  # a column whose name holds one of these is a timing, never the same twice
EVAL_METRICS = ("polarity_val", "polarity_test", "topic_val", "topic_test", "fid_cosine", "fid_spearman")
"""A notebook-05 student's scores (lib.distill.eval.evaluate), on its learning curve and in its results row."""
KD_ROWS = Table("rows.csv", ("row_id",), "06")
"""Notebook 06's result table, compared by the one-student prefix."""


def is_timing(column: str) -> bool:
    """Whether a result column is a wall time (UNCOMPARED, or seconds named `*_s` as `train_s`)."""
    return any(u in column for u in UNCOMPARED) or column.endswith("_s")


class ReproduceError(WikigatError, ValueError):
    """A published run that cannot be re-run as recorded: one line naming it and the fix."""


def recorded_command(run_dir: Path, prefix: str = "whole") -> tuple[list[str], dict, list[str]]:
    """(params files, -p overrides, parameters left out) of the run in `run_dir` as its params.json records it, with
    the parameters a notebook re-run alone changed (its status.json entry's "params_changed": the runner's --rerun
    leaves params.json as the folder was made) and then those of `prefix` (PREFIXES) changed."""
    if prefix not in PREFIXES:
        raise ReproduceError(f"prefix {prefix!r} is unknown; use one of {', '.join(PREFIXES)}")
    record = run_dir / "params.json"
    if not record.is_file():
        raise ReproduceError(
            f"{shown(run_dir)} has no params.json; name a published run folder (one of "
            f"{', '.join(sorted(p.parent.name for p in REFERENCE_RUNS.glob('*/params.json')))})"
        )
    params = published.run_params(load_json(record)["params"])
    files = [f for f in params.pop("_files", []) or [] if Path(f).is_file()]
    params.pop("run_dir", None)
    status = run_dir / "status.json"
    for entry in (read_json(status).get("notebooks") or {}).values() if status.is_file() else ():
        params |= published.run_params(entry.get("params_changed") or {})
    declared = all_defaults(numbered_notebooks())
    left_out = sorted(k for k in params if k not in declared)
    overrides = {k: v for k, v in params.items() if k in declared} | PREFIXES[prefix]
    return files, overrides, left_out


def recorded_notebooks(run_dir: Path) -> list[str]:
    """The numbers of the notebooks that finished in the run (its status.json), in run order."""
    status = read_json(run_dir / "status.json")
    done = [nb for nb, s in (status.get("notebooks") or {}).items() if s.get("status") == "ok"]
    return [nb.split("_")[0] for nb in sorted(done)]


def read_table(path: Path) -> pd.DataFrame:
    """A result table as the current code names its rows (lib.common.published)."""
    rows = pd.read_csv(path)
    if "negatives" in rows:
        rows["negatives"] = rows["negatives"].map(published.negative_set)
    return rows


def drift(reference: pd.DataFrame, made: pd.DataFrame, table: Table, tolerance: float = TOLERANCE) -> pd.DataFrame:
    """Per metric of `table`: rows of `reference` compared, rows made again (missing ones are not), rows equal to the
    last bit, the largest |made − reference| and whether it is within `tolerance`. Only the seeds `made` holds are
    compared (a prefix of fewer seeds); NaN equals NaN. Columns table, metric, rows, missing, exact, max_drift, ok."""
    keys = [k for k in table.keys if k in reference and k in made]
    reference = reference[reference["seed"].isin(made["seed"].unique())] if "seed" in keys else reference
    metrics = [
        c
        for c in reference.columns
        if c not in keys and c in made and pd.api.types.is_numeric_dtype(reference[c]) and not is_timing(c)
    ]
    pair = reference.astype({k: str for k in keys}).merge(
        made.astype({k: str for k in keys}), on=keys, how="left", suffixes=("", "_made"), indicator=True
    )
    missing = int((pair["_merge"] == "left_only").sum())
    out = []
    for m in metrics:
        a, b = pair[m].to_numpy(float), pair[f"{m}_made"].to_numpy(float)
        both_nan = np.isnan(a) & np.isnan(b)
        diff = np.where(both_nan, 0.0, np.abs(a - b))
        diff = diff[pair["_merge"].to_numpy() == "both"]
        worst = float(np.nanmax(np.where(np.isnan(diff), np.inf, diff))) if diff.size else 0.0
        out.append(
            {
                "table": table.file,
                "metric": m,
                "rows": len(reference),
                "missing": missing,
                "exact": int((diff == 0).sum()),
                "max_drift": worst,
                "ok": bool(missing == 0 and worst <= tolerance),
            }
        )
    return pd.DataFrame(out, columns=["table", "metric", "rows", "missing", "exact", "max_drift", "ok"])


def compare(
    reference_dir: Path, made_dir: Path, tolerance: float = TOLERANCE, notebooks: list[str] | None = None
) -> pd.DataFrame:
    """`drift` of every result table (TABLES) the published run holds, or only of those the re-run `notebooks`
    (numbers, e.g. ["01", "02", "03"]) write."""
    parts = []
    for t in TABLES:
        if (notebooks is None or t.notebook in notebooks) and (reference_dir / t.file).is_file():
            if not (made_dir / t.file).is_file():
                raise ReproduceError(f"the re-run made no {t.file}; its notebook failed: see {shown(made_dir)}")
            parts.append(drift(read_table(reference_dir / t.file), read_table(made_dir / t.file), t, tolerance))
    if not parts:
        raise ReproduceError(
            f"{shown(reference_dir)} holds none of {', '.join(t.file for t in TABLES)}; nothing to compare"
        )
    return pd.concat(parts, ignore_index=True)


def reproduce(
    run: str,
    prefix: str = "whole",
    notebooks: list[str] | None = None,
    outputs: Path | None = None,
    tolerance: float = TOLERANCE,
    reference: Path = REFERENCE_RUNS,
    warm_cache: bool = False,
    log=print,
) -> pd.DataFrame:
    """Re-run the published run `run` (a folder of `reference`) as recorded, or its `prefix`, into `outputs` (a
    temporary folder by default) and return its drift table (`compare`). The re-run starts from an empty cache in
    that folder unless `warm_cache`: vectors an older code stored differ in their last bits, and a trained model
    carries such a difference into its third decimal."""
    run_dir = reference / run
    files, overrides, left_out = recorded_command(run_dir, prefix)
    notebooks = notebooks or recorded_notebooks(run_dir)
    record = load_json(run_dir / "params.json")
    log(
        f"{run}: recorded at {str(record.get('git_commit', 'unknown'))[:12]}, re-run at {git_commit()[:12]} "
        f"(prefix {prefix}, notebooks {' '.join(notebooks)})"
    )
    if left_out:
        log(f"recorded parameters that no notebook declares today, left out: {', '.join(left_out)}")
    with tempfile.TemporaryDirectory(prefix="reproduce_") as tmp:
        scratch = Path(outputs) if outputs else Path(tmp)
        argv = [
            "--outputs",
            str(scratch),
            "--run-name",
            run,
            "--notebooks",
            *notebooks,
            *(["--params", *files] if files else []),
            *(x for k, v in overrides.items() for x in ("-p", f"{k}={json.dumps(v)}")),
        ]
        with cache_folder(None if warm_cache else scratch / "cache"):
            ok = runner.main(argv) == 0
        if not ok:
            raise ReproduceError(
                f"the re-run of {run} failed; its notebooks and status.json are in "
                f"{shown(scratch / run)} (pass --outputs to keep them)"
            )
        return compare(run_dir, scratch / run, tolerance, notebooks)


def distill_file(run_dir: Path, name: str) -> Path | None:
    """A notebook-05 file of a published run: under distill/ (the runner's layout) or in the run folder itself (a run
    made with papermill alone); None where it has none."""
    return next((f for f in (run_dir / "distill" / name, run_dir / name) if f.is_file()), None)


def student_notebook(run_dir: Path) -> str:
    """The distillation notebook whose grid the published run in `run_dir` holds: "05" (params_05.json with
    curves.csv or results.csv) or "06" (rows.csv and params_06.json)."""
    if distill_file(run_dir, "params_05.json") and (
        distill_file(run_dir, "curves.csv") or distill_file(run_dir, "results.csv")
    ):
        return "05"
    if (run_dir / KD_ROWS.file).is_file() and (run_dir / "params_06.json").is_file():
        return "06"
    raise ReproduceError(
        f"{shown(run_dir)} holds no distillation grid (params_05.json, or rows.csv and params_06.json); the "
        f"{ONE_STUDENT} prefix is for the runs of notebooks 05 and 06, use one-seed or whole for the others"
    )


def reproduce_student(
    run_dir: Path,
    student: str,
    steps: int = STEPS,
    scratch: Path | None = None,
    tolerance: float = TOLERANCE,
    log=print,
) -> tuple[pd.DataFrame, str]:
    """Re-train one student of the published distillation run in `run_dir` (ONE_STUDENT) in this process at HEAD, from
    an empty cache in `scratch` (a temporary folder by default), and return (its drift table, the notebook number).
    student: notebook 05, a task-agnostic run of its grid ("3x384 MiniLM random s1", re-trained for `steps`
    steps); notebook 06, "<task> <kind> s<seed>" ("polarity bilstm s0": its distilled row and its control)."""
    notebook = student_notebook(run_dir)
    with tempfile.TemporaryDirectory(prefix="reproduce_") as tmp:
        folder = Path(scratch) if scratch else Path(tmp)
        if notebook == "05":
            return distill_student(run_dir, student, steps, folder, tolerance, log), notebook
        return kd_student(run_dir, student, folder, tolerance, log), notebook


def distill_student(
    run_dir: Path, student: str, steps: int, scratch: Path, tolerance: float, log=print
) -> pd.DataFrame:
    """reproduce_student of a notebook-05 grid: the learning curve of `student`'s first `steps` steps against the
    published curve points up to that step (curves.csv), and, when `steps` is the whole run, its final scores against
    its row of results.csv."""
    cfg = read_params_05(distill_file(run_dir, "params_05.json"))
    references = []
    for name, keep in (
        ("curves.csv", lambda t: t[(t["run"] == student) & (t["step"] <= steps)]),
        ("results.csv", lambda t: t[t["model"] == student].rename(columns={"model": "run"}).assign(step=steps)),
    ):
        if (path := distill_file(run_dir, name)) and (name == "curves.csv" or steps == cfg.distill_steps):
            rows = keep(pd.read_csv(path))
            table = Table(path.relative_to(run_dir).as_posix(), ("run", "step"), "05")
            references += [(table, rows[[c for c in rows if c in ("run", "step", *EVAL_METRICS)]])] if len(rows) else []
    if not references:
        raise ReproduceError(
            f"{shown(run_dir)} has no score of {student!r} up to step {steps}; name a task-agnostic run of its "
            f"results.csv and a step its curves.csv holds, or its whole {cfg.distill_steps} steps"
        )
    log(f"{run_dir.name}: {student}, first {steps} of {cfg.distill_steps} steps, re-trained at {git_commit()[:12]}")
    dev = get_device(cfg.device)
    teacher = load_encoder(ensure_teacher(), "teacher", dev)
    assistant = load_encoder(assistant_path(), "assistant", dev)
    data = build_datasets(
        cfg.distill_seeds[0], cfg.transfer_sentences, cfg.task_train, cfg.task_eval, cfg.fidelity_sentences
    )
    curve = retrain_first_steps(cfg, student, steps, teacher, assistant, data, scratch / "teacher_targets")
    made = curve.assign(run=student)
    return pd.concat([drift(rows, made, table, tolerance) for table, rows in references], ignore_index=True)


def kd_student(run_dir: Path, student: str, scratch: Path, tolerance: float, log=print) -> pd.DataFrame:
    """reproduce_student of a notebook-06 grid: `student`'s distilled row and its control against the published rows;
    the task teacher is fine-tuned again in `scratch`."""
    cfg = KdParams.from_values(load_json(run_dir / "params_06.json")["params"])
    match = re.fullmatch(r"(\w+) (\w+) s(\d+)", student)
    if (
        match is None
        or match[1] not in cfg.kd_tasks
        or match[2] not in cfg.kd_students
        or int(match[3]) not in cfg.kd_seeds
    ):
        raise ReproduceError(
            f"student {student!r} is not in {run_dir.name}'s grid; name one as '<task> <kind> s<seed>' with task in "
            f"{cfg.kd_tasks}, kind in {cfg.kd_students} and seed in {cfg.kd_seeds}"
        )
    task, kind, seed = match[1], match[2], int(match[3])
    wanted = {f"{task}_{kind}_{m}_s{seed}" for m in (METHODS if cfg.kd_controls else ("kd",))}
    rows = pd.read_csv(run_dir / KD_ROWS.file)
    reference = rows[rows["row_id"].isin(wanted)]
    log(f"{run_dir.name}: {', '.join(sorted(wanted))}, re-trained at {git_commit()[:12]}")
    teacher = load_encoder(ensure_teacher(), "teacher", get_device(cfg.device))
    data = build_datasets(cfg.kd_seeds[0], 1, cfg.kd_task_train, cfg.kd_task_eval, 10)  # notebook 06's own call
    made, _ = run_students(
        replace(cfg, kd_tasks=[task], kd_students=[kind]),  # kd_seeds kept: its first seed draws the transfer set
        teacher,
        data,
        scratch / "kd",
        data[task]["test"].text.tolist()[:8],  # probing representations are not compared
        tagger=spacy_tagger(),
        only=wanted,
    )
    return drift(reference, made, KD_ROWS, tolerance)


def check_made(run_dir: Path, made_dir: Path, prefix: str, notebooks: list[str]) -> None:
    """Stop unless `made_dir` is a re-run of `run_dir`'s command under `prefix`: a run folder with params.json whose
    parameters that a prefix changes have the prefix's values, where `notebooks` (numbers) declare them."""
    if not (made_dir / "params.json").is_file():
        raise ReproduceError(f"{shown(made_dir)} is no run folder (no params.json); name the run folder of the re-run")
    made = published.run_params(load_json(made_dir / "params.json")["params"])
    _, wanted, _ = recorded_command(run_dir, prefix)
    declared = all_defaults([nb for nb in numbered_notebooks() if notebook_number(nb) in notebooks])
    shaped = {k for p in PREFIXES.values() for k in p if k in declared}  # those some prefix changes, here read
    differ = sorted(k for k, v in wanted.items() if k in shaped and made.get(k) != v)
    if differ:
        raise ReproduceError(
            f"{shown(made_dir)} was not run with prefix {prefix!r} "
            f"({', '.join(f'{k}={made.get(k)!r}' for k in differ)}); pass the prefix it was run with"
        )


def record(
    run_dir: Path,
    table: pd.DataFrame,
    prefix: str,
    notebooks: list[str],
    tolerance: float,
    rerun_at: tuple[str, ...],
    day: str,
    options: list[str] = (),
) -> Path:
    """Write the check into the published run as REPRODUCED (atomically): the prefix, its options (e.g. ["--student",
    "3x384 MiniLM random s1", "--steps", "500"]) and the notebooks re-run, the commits the re-run (`rerun_at`) and the
    published run were made at, the day the re-run ended, the tolerance and the drift table. A re-run made from
    uncommitted code matches no commit, so it is not recorded."""
    dirty = [c for c in rerun_at if c.endswith("+dirty")]
    if dirty:
        raise ReproduceError(
            f"the re-run of {run_dir.name} was made at {', '.join(dirty)} (uncommitted code); re-run it from a clean "
            "tree to record it"
        )
    return atomic_write_text(
        run_dir / REPRODUCED,
        json.dumps(
            {
                "run": run_dir.name,
                "prefix": prefix,
                **({"options": list(options)} if options else {}),
                "notebooks": list(notebooks),
                "rerun_at": list(rerun_at),
                "recorded_at": list(run_commits(run_dir)),
                "date": day,
                "tolerance": tolerance,
                "table": table.to_dict("records"),
            },
            indent=1,
        )
        + "\n",
    )


def made_on(made_dir: Path) -> str:
    """The day a kept re-run ended: its status.json's last change."""
    return date.fromtimestamp((made_dir / "status.json").stat().st_mtime).isoformat()


@contextlib.contextmanager
def cache_folder(folder: Path | None):
    """Run the block's notebooks with WIKIGAT_CACHE at `folder` (their kernels read it when they start); None leaves
    it as it is."""
    before = os.environ.get("WIKIGAT_CACHE")
    if folder is not None:
        os.environ["WIKIGAT_CACHE"] = str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("WIKIGAT_CACHE", None)
        else:
            os.environ["WIKIGAT_CACHE"] = before


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m lib.run.reproduce", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("run", help="a published run: a folder name under outputs/reference/")
    ap.add_argument("--prefix", default="whole", help=f"one of {', '.join([*PREFIXES, ONE_STUDENT])} (default: whole)")
    ap.add_argument("--notebooks", nargs="*", help="notebook numbers to re-run (default: those the run finished)")
    ap.add_argument("--student", help=f"the student the {ONE_STUDENT} prefix re-trains (a distillation run)")
    ap.add_argument(
        "--steps", type=int, default=STEPS, help=f"steps of a notebook-05 student to re-train (default {STEPS})"
    )
    ap.add_argument("--outputs", help="keep the re-run here (default: a temporary folder)")
    ap.add_argument("--tolerance", type=float, default=TOLERANCE, help=f"largest drift allowed (default {TOLERANCE})")
    ap.add_argument(
        "--warm-cache",
        action="store_true",
        help="use the shared cache (faster; vectors stored by older code may differ in the last bits)",
    )
    ap.add_argument("--made", help="compare this re-run folder (kept with --outputs) instead of running again")
    ap.add_argument("--record", action="store_true", help=f"write the check into the published run ({REPRODUCED})")
    args = ap.parse_args(argv)
    run_dir = REFERENCE_RUNS / args.run
    options: list[str] = []
    try:
        if args.prefix == ONE_STUDENT:
            if not args.student or args.made:
                raise ReproduceError(
                    f"the {ONE_STUDENT} prefix re-trains in this process: pass --student (and no --made)"
                )
            commit = git_commit()
            rerun_at = (commit[:7] + ("+dirty" if commit.endswith("+dirty") else ""),)
            table, notebook = reproduce_student(
                run_dir, args.student, args.steps, Path(args.outputs) if args.outputs else None, args.tolerance
            )
            notebooks, day = [notebook], date.today().isoformat()
            options = ["--student", args.student] + (["--steps", str(args.steps)] if notebook == "05" else [])
        elif args.made:
            made = Path(args.made)
            notebooks = args.notebooks or recorded_notebooks(made)
            check_made(run_dir, made, args.prefix, notebooks)
            table, rerun_at, day = compare(run_dir, made, args.tolerance, notebooks), run_commits(made), made_on(made)
        else:
            made = Path(args.outputs) / args.run if args.outputs else None
            notebooks = args.notebooks or recorded_notebooks(run_dir)
            if args.record and made is None:
                raise ReproduceError("--record needs the re-run kept: pass --outputs")
            table = reproduce(
                args.run,
                args.prefix,
                notebooks,
                made.parent if made else None,
                args.tolerance,
                warm_cache=args.warm_cache,
            )
            rerun_at, day = (run_commits(made), made_on(made)) if made else ((), "")
        print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
        bad = table[~table["ok"]]
        print(
            f"{len(table) - len(bad)} of {len(table)} metrics within {args.tolerance:g}"
            + (f"; beyond it: {', '.join(bad['table'] + ':' + bad['metric'])}" if len(bad) else "")
        )
        if args.record:
            path = record(run_dir, table, args.prefix, notebooks, args.tolerance, rerun_at, day, options)
            print(f"recorded in {shown(path)}")
    except ReproduceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 1 if len(bad) else 0


if __name__ == "__main__":
    sys.exit(main())
