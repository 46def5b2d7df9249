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
import sys
import tempfile
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

from lib.common import published
from lib.common.errors import WikigatError
from lib.common.params import notebook_number, numbered_notebooks
from lib.common.paths import atomic_write_text, shown
from lib.common.runinfo import git_commit, load_json, read_json
from lib.run import runner
from lib.run.facts import REFERENCE_RUNS, REPRODUCED, run_commits
from lib.run.preflight import all_defaults

TOLERANCE = 1e-6
"""Largest absolute drift of a metric that still counts as the same number: float noise of one machine's kernels,
far below the third decimal any finding prints."""

PREFIXES = {"whole": {}, "one-seed": {"n_seeds": 1, "embedder_seeds": 1}}
"""Named prefixes of a run's command: the parameters each changes (lib.run.reproduce)."""


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
        if c not in keys
        and c in made
        and pd.api.types.is_numeric_dtype(reference[c])
        and not any(u in c for u in UNCOMPARED)
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
    run_dir: Path, made_dir: Path, table: pd.DataFrame, prefix: str, notebooks: list[str], tolerance: float
) -> Path:
    """Write the check into the published run as REPRODUCED (atomically): the prefix and notebooks re-run, the commits
    the re-run (made_dir's params records) and the published run were made at, the day the re-run ended (its
    status.json), the tolerance and the drift table. A re-run made from uncommitted code matches no commit, so it is
    not recorded."""
    rerun_at = run_commits(made_dir)
    dirty = [c for c in rerun_at if c.endswith("+dirty")]
    if dirty:
        raise ReproduceError(
            f"{shown(made_dir)} was made at {', '.join(dirty)} (uncommitted code); re-run it from a clean tree to "
            "record it"
        )
    return atomic_write_text(
        run_dir / REPRODUCED,
        json.dumps(
            {
                "run": run_dir.name,
                "prefix": prefix,
                "notebooks": list(notebooks),
                "rerun_at": list(rerun_at),
                "recorded_at": list(run_commits(run_dir)),
                "date": date.fromtimestamp((made_dir / "status.json").stat().st_mtime).isoformat(),
                "tolerance": tolerance,
                "table": table.to_dict("records"),
            },
            indent=1,
        )
        + "\n",
    )


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
    ap.add_argument("--prefix", default="whole", help=f"one of {', '.join(PREFIXES)} (default: whole)")
    ap.add_argument("--notebooks", nargs="*", help="notebook numbers to re-run (default: those the run finished)")
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
    try:
        if args.made:
            made = Path(args.made)
            notebooks = args.notebooks or recorded_notebooks(made)
            check_made(run_dir, made, args.prefix, notebooks)
            table = compare(run_dir, made, args.tolerance, notebooks)
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
        print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
        bad = table[~table["ok"]]
        print(
            f"{len(table) - len(bad)} of {len(table)} metrics within {args.tolerance:g}"
            + (f"; beyond it: {', '.join(bad['table'] + ':' + bad['metric'])}" if len(bad) else "")
        )
        if args.record:
            print(f"recorded in {shown(record(run_dir, made, table, args.prefix, notebooks, args.tolerance))}")
    except ReproduceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 1 if len(bad) else 0


if __name__ == "__main__":
    sys.exit(main())
