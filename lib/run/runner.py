"""Batch runner: the numbered notebooks, in order, with papermill, for a grid of parameter profiles.

    python -m lib.run.runner --size demo --device cpu                 # one run: outputs/demo-cpu/
    python -m lib.run.runner --size demo --size tiny --device cpu -p gat_epochs=1   # a grid of two runs
    python -m lib.run.runner --params params/tiny.yaml params/cpu.yaml --run-name mine   # explicit files, later win
    python -m lib.run.runner --size demo --device cpu --notebooks 01 02   # only notebooks 01 and 02
    python -m lib.run.runner --size seed40 --device cpu --dry-run     # validate and print the plan, run nothing
    python -m lib.run.runner --params params/seed40.yaml params/beyond.yaml params/cpu.yaml --run-name seed40 \\
        --rerun --notebooks 03b  # re-run 03b into the complete run seed40, nothing else

Before anything is created or changed, every value of every notebook of every planned run is checked (its declared
type, then its stage's bounds, choices and device, the input files it names; lib.run.preflight), and so is that each
selected notebook finds what it reads from the run folder; `--dry-run` runs the same checks: an error names the key,
the value, the params file or `-p` it came from and what is accepted, or the notebooks to run first (exit 2). A run
folder belongs to one parameter set and one writer: a folder made with other parameters is refused naming them
(`--force` starts it over; a folder in which no notebook finished takes the new values), and a folder another runner
is writing is refused naming its pid (the lock, under `<outputs>/.locks/`, is taken over when its holder died; such a
refusal exits 75 and writes nothing, not even the summary). So a refused run leaves the folder byte-identical. The
outputs, run, lock and cache folders must be writable before anything starts; a full disk or a folder made unwritable
meanwhile is one line naming the path and the fix.

Each run folder gets the executed notebooks (each written whole, or not at all), params.json (resolved parameters, git
commit, package versions) and status.json (per notebook: status, wall seconds, peak RSS of the kernel process, and for a
failure the exception's name, message and cell; and every execution in order, one stopped by Ctrl-C or whose runner was
killed outright included, the latter from the heartbeat file it left under .executing/). A profile's keys are checked
against every numbered notebook, whichever notebooks run. A run whose selected notebooks all finished with the same
parameters is skipped; an interrupted one resumes at its first unfinished notebook (Ctrl-C says so in one line); a
damaged file that a notebook moved aside and rebuilt is printed as "<notebook> recovered: ..." and listed in its status
entry (a damaged status.json or params.json is moved aside and its notebooks run again, resuming from their
checkpoints); a failed run is reported at the end, the rest of the grid still runs, and the exit code is non-zero.
`--force` re-executes the selected notebooks and keeps the other notebooks' entries. `--rerun` re-executes only the
selected notebooks into a complete run folder, allowing their own parameters to differ (e.g. after a notebook gained a
section), keeping the other notebooks' entries and files; each re-run entry records the git commit it ran at, and the
folder's checkpoints are reused as usual. The summary (`<outputs>/summary.{md,csv,html}`) lists every run folder of the
outputs folder.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import traceback
from pathlib import Path

from lib.common import published
from lib.common.hashing import config_digest
from lib.common.params import (
    ParamError,
    check_known,
    merge,
    notebook_number,
    notebook_parameters,
    numbered_notebooks,
    parse_override,
)
from lib.common.paths import CACHE, OUTPUTS, PARAMS, atomic_write_text, os_error_line, shown
from lib.common.runinfo import git_commit, load_json, refuse_other_settings, write_params_json
from lib.run.folder import (
    EXECUTION_KEYS,
    EXECUTIONS_MEASURE,
    PEAK_RSS_MEASURES,
    RunFolderBusy,
    RunFolderError,
    comparable_params,
    describe_failure,
    execute_recorded,
    killed_executions,
    read_run_record,
    record_killed,
    refuse_other_params,
    run_folder_lock,
)
from lib.run.preflight import all_defaults, check_run, check_upstream, check_writable
from lib.run.summary import summarize_outputs

BUSY = 75  # exit code of a run refused because another runner writes its folder (sysexits' EX_TEMPFAIL): try later
INTERRUPTED = 130


def plan_run(
    files: list[Path], overrides: dict, notebooks: list[Path], all_notebooks: list[Path] | None = None
) -> tuple[dict, dict[Path, dict]]:
    """Merge the params files and split them per notebook in `notebooks`.

    Keys are checked against the parameters of `all_notebooks` (default: `notebooks`), so a profile written for the
    whole pipeline stays valid when only some notebooks run; a key no notebook declares is an error naming the key
    and the file."""
    declared = {nb: notebook_parameters(nb) for nb in dict.fromkeys([*(all_notebooks or []), *notebooks])}
    known = set().union(*[set(d) for d in declared.values()]) if declared else set()
    for f in files:
        check_known(merge([f]), known, where=str(f))
    check_known(overrides, known, where="-p overrides")
    merged = merge(files, overrides)
    per_nb = {nb: {k: v for k, v in merged.items() if k in declared[nb]} for nb in notebooks}
    return merged, per_nb


def _run_dir_param(run_dir: Path) -> str:
    return shown(run_dir)


def _params_hash(merged: dict) -> str:
    return config_digest({"params": {k: v for k, v in merged.items() if k not in EXECUTION_KEYS}})


def run_one(
    run_name: str,
    files: list[Path],
    overrides: dict,
    notebooks: list[Path],
    force: bool = False,
    log=print,
    outputs: Path = OUTPUTS,
    all_notebooks: list[Path] | None = None,
    ahead: bool = False,
) -> bool:
    """Execute every notebook for one run; True when the run is complete (`ahead`: notebooks 03 and 03b get a second
    process, lib.run.ahead).

    Nothing in the folder changes until the run holds its lock and its parameters are those the folder was made with
    (or --force). A folder whose selected notebooks all finished ok with these parameters is skipped; otherwise the
    leading ones that did are kept and the rest run. With --force the selected notebooks all run again and the other
    notebooks' entries stay; the folder is complete when every notebook it holds finished ok."""
    run_dir = outputs / run_name
    merged, per_nb = plan_run(files, overrides, notebooks, all_notebooks)
    merged["run_dir"] = _run_dir_param(run_dir)
    defaults = all_defaults(all_notebooks or notebooks)
    with run_folder_lock(outputs, run_name):  # the lock lives beside the folder: a refusal below touches nothing
        if not force:  # under the lock: another run may have finished meanwhile
            refuse_other_params(run_dir, merged, defaults)
        made_record, moved = read_run_record(run_dir / "params.json", move=True)
        made = made_record.get("params")
        same = made is not None and comparable_params(made, defaults) == comparable_params(merged, defaults)
        if made is not None and not same and not force:  # refuse_other_params let it in: nothing finished there
            log(f"[{run_name}] no notebook finished with the folder's earlier parameters; it starts over with these")
        status, moved_status = read_run_record(run_dir / "status.json", move=True) if same else ({}, None)
        for line in filter(None, (moved, moved_status)):
            log(f"[{run_name}] recovered: {line}")
        entries = dict(status.get("notebooks") or {})

        def finished(nb: Path) -> bool:
            e = entries.get(nb.name)
            return bool(e and e.get("status") == "ok" and (run_dir / nb.name).is_file())

        if not force and all(finished(nb) for nb in notebooks):
            log(f"[{run_name}] already complete with the same parameters; skipped (use --force to re-run)")
            return True
        kept = set()
        if not force:  # a later notebook runs again once an earlier one does, as its inputs may have changed
            for nb in notebooks:
                if not finished(nb):
                    break
                kept.add(nb.name)
        run_dir.mkdir(parents=True, exist_ok=True)
        if not same:
            write_params_json(run_dir, {**merged, "_files": [str(f) for f in files]})
        if same:  # the executions of this parameter set, a killed runner's included
            executions = record_killed(run_name, run_dir, list(status.get("executions") or []), log)
        else:
            killed_executions(run_dir)  # left by a run of other parameters: not this run's
            executions = []
        status = {
            "params_hash": _params_hash(merged),
            "complete": False,
            "notebooks": entries,
            "peak_rss_mb_measures": PEAK_RSS_MEASURES,
            "executions": executions,
            "executions_measure": EXECUTIONS_MEASURE,
        }
        commit = git_commit()
        atomic_write_text(run_dir / "status.json", json.dumps(status, indent=1))
        for nb in notebooks:
            if nb.name in kept:
                log(
                    f"[{run_name}] {nb.name} finished ok earlier with the same parameters; kept (use --force to re-run)"
                )
                continue
            out = run_dir / nb.name
            log(f"[{run_name}] {nb.name} ...")
            entry = execute_recorded(
                nb, out, {**per_nb[nb], "run_dir": merged["run_dir"]}, ahead, status, run_dir, commit
            )
            for line in entry.get("recovered", []):
                log(f"[{run_name}] {nb.name} recovered: {line}")
            status["notebooks"][nb.name] = entry
            atomic_write_text(run_dir / "status.json", json.dumps(status, indent=1))
            if entry["status"] == "failed":
                executed = f"\n    executed notebook: {out}" if out.is_file() else ""
                log(f"[{run_name}] {nb.name} FAILED after {entry['seconds']} s: {describe_failure(entry)}{executed}")
                return False
            mem = f", kernel peak RSS {entry['peak_rss_mb']:.0f} MB" if entry["peak_rss_mb"] is not None else ""
            log(f"[{run_name}] {nb.name} ok in {entry['seconds']} s{mem}")
        status["complete"] = all(e.get("status") == "ok" for e in status["notebooks"].values())
        atomic_write_text(run_dir / "status.json", json.dumps(status, indent=1))
        return True


def plan_rerun(
    run_name: str,
    files: list[Path],
    overrides: dict,
    notebooks: list[Path],
    outputs: Path = OUTPUTS,
    all_notebooks: list[Path] | None = None,
) -> tuple[dict, dict, dict]:
    """The checks of a re-run (rerun_notebooks), nothing executed: (the folder's status record, each re-run notebook's
    parameters, each re-run notebook's parameters that differ from those the folder was made with (params.json)).
    The parameters of the notebooks not re-run must equal the folder's, so their results still belong to the run; the
    re-run notebooks' own parameters may differ (a profile that gained a variant). A folder that is incomplete, lacks
    a notebook, or whose other notebooks would see other parameters is refused with the fix named (ValueError)."""
    run_dir = outputs / run_name
    status = read_run_record(run_dir / "status.json")[0]
    made = list(status.get("notebooks") or {})
    if not status.get("complete") or not (run_dir / "params.json").is_file():
        raise ValueError(f"--rerun needs a complete run folder; {run_dir} is not (run it without --rerun first)")
    missing = [nb.name for nb in notebooks if nb.name not in made]
    if missing:
        raise ValueError(f"--rerun: {run_dir} never ran {missing}; re-run only notebooks it ran: {made}")
    merged, per_nb = plan_run(files, overrides, notebooks, all_notebooks)
    merged["run_dir"] = _run_dir_param(run_dir)
    old = published.run_params(load_json(run_dir / "params.json")["params"])
    nb_dir = (all_notebooks or notebooks)[0].parent
    others = [nb_dir / n for n in made if n not in {nb.name for nb in notebooks}]
    default = all_defaults([nb for nb in others if nb.is_file()])
    for k in ("run_dir", *EXECUTION_KEYS):
        default.pop(k, None)
    refuse_other_settings(
        f"--rerun: {run_dir}",
        published.params_with_defaults(old, default),
        {k: merged.get(k, v) for k, v in default.items()},
        "notebooks that are not re-run use them; pass the same params files, or run it whole with --force",
    )
    changed = {nb: {k: v for k, v in per_nb[nb].items() if k != "run_dir" and v != old.get(k)} for nb in notebooks}
    return status, {nb: {**per_nb[nb], "run_dir": merged["run_dir"]} for nb in notebooks}, changed


def rerun_notebooks(
    run_name: str,
    files: list[Path],
    overrides: dict,
    notebooks: list[Path],
    log=print,
    outputs: Path = OUTPUTS,
    all_notebooks: list[Path] | None = None,
    ahead: bool = False,
) -> bool:
    """Re-execute `notebooks` into the complete run folder `run_name` after plan_rerun's checks; the other notebooks'
    status entries and files stay, and the run stays complete when every re-run succeeds. Each re-run entry lists the
    parameters that differ from the folder's ("params_changed") with the git commit it ran at."""
    run_dir = outputs / run_name
    status, per_nb, changed = plan_rerun(run_name, files, overrides, notebooks, outputs, all_notebooks)
    commit = git_commit()
    status["executions"] = record_killed(run_name, run_dir, list(status.get("executions") or []), log)
    status["executions_measure"] = EXECUTIONS_MEASURE
    for nb in notebooks:
        log(f"[{run_name}] re-running {nb.name} ...")
        entry = {
            **execute_recorded(nb, run_dir / nb.name, per_nb[nb], ahead, status, run_dir, commit),
            "rerun": f"re-run alone at commit {commit}",
            "params_changed": changed[nb],
        }
        for line in entry.get("recovered", []):
            log(f"[{run_name}] {nb.name} recovered: {line}")
        status["notebooks"][nb.name] = entry
        status["complete"] = entry["status"] == "ok"
        atomic_write_text(run_dir / "status.json", json.dumps(status, indent=1))
        if entry["status"] == "failed":
            log(f"[{run_name}] {nb.name} FAILED after {entry['seconds']} s: {describe_failure(entry)}")
            return False
        log(f"[{run_name}] {nb.name} re-run ok in {entry['seconds']} s")
    return True


def describe_plan(
    run_name: str,
    files: list[Path],
    overrides: dict,
    notebooks: list[Path],
    outputs: Path = OUTPUTS,
    all_notebooks: list[Path] | None = None,
    force: bool = False,
) -> str:
    """What run_one would do, in a few lines (for --dry-run): folder, files, notebooks, parameters, skip or run.
    A folder that run_one would refuse raises the same RunFolderError."""
    run_dir = outputs / run_name
    merged, per_nb = plan_run(files, overrides, notebooks, all_notebooks)
    merged["run_dir"] = _run_dir_param(run_dir)
    if not force:
        refuse_other_params(run_dir, merged, all_defaults(all_notebooks or notebooks))
    entries = read_run_record(run_dir / "status.json")[0].get("notebooks") or {}
    skip = (
        not force
        and (run_dir / "params.json").is_file()
        and all(
            (entries.get(nb.name) or {}).get("status") == "ok" and (run_dir / nb.name).is_file() for nb in notebooks
        )
    )
    lines = [
        f"[{run_name}] {'skip (already complete with the same parameters)' if skip else 'run'} -> {run_dir}",
        f"    params files: {', '.join(str(f) for f in files)}" + (f"; overrides: {overrides}" if overrides else ""),
    ]
    for nb in notebooks:
        lines.append(f"    {nb.name}: {json.dumps(per_nb[nb], default=str, sort_keys=True)}")
    return "\n".join(lines)


def plan_grid(args: argparse.Namespace) -> tuple[list[Path], list[Path], dict, list[tuple[str, list[Path]]]]:
    """(every numbered notebook, the selected ones, the -p overrides, the runs as (name, params files)) of the
    command line, with every value of every run (all notebooks', whichever are selected: a run folder records them
    all), each run's folder and the folders the run writes checked (ParamError / RunFolderError)."""
    all_notebooks = numbered_notebooks(args.notebook_dir) if args.notebook_dir else numbered_notebooks()
    notebooks = all_notebooks
    if args.notebooks:
        unknown = sorted(set(args.notebooks) - {notebook_number(nb) for nb in all_notebooks})
        if unknown:
            raise ParamError(
                f"--notebooks {' '.join(unknown)}: no such notebook; use numbers of "
                f"{', '.join(nb.name for nb in all_notebooks)}"
            )
        notebooks = [nb for nb in all_notebooks if notebook_number(nb) in set(args.notebooks)]
    if not notebooks:
        raise ParamError("no numbered notebooks to run in notebooks/")
    overrides = dict(parse_override(o) for o in args.overrides)
    runs: list[tuple[str, list[Path]]] = []
    if args.params:
        if len(args.device) > 1:
            raise ParamError(
                "--params takes at most one --device (it is layered after the params files); "
                "run the devices one at a time"
            )
        runs.append(
            (Path(args.params[0]).stem, [Path(p) for p in args.params] + [PARAMS / f"{d}.yaml" for d in args.device])
        )
    for size in args.size or ([] if args.params else ["demo"]):
        for device in args.device or ["cpu"]:
            runs.append((f"{size}-{device}", [PARAMS / f"{size}.yaml", PARAMS / f"{device}.yaml"]))
    if args.run_name:
        if len(runs) != 1:
            raise ParamError(
                f"--run-name names one run folder, but {len(runs)} runs are planned "
                f"({', '.join(n for n, _ in runs)}); drop --run-name or plan one run"
            )
        runs = [(args.run_name, runs[0][1])]
    for name, files in runs:  # validate every value of the whole grid, and its folders, before any work
        merged, _ = plan_run(files, overrides, notebooks, all_notebooks)
        check_run(merged, files, overrides, all_notebooks)
        if not args.force and not args.rerun:
            refuse_other_params(Path(args.outputs) / name, merged, all_defaults(all_notebooks))
        if not args.rerun:  # --rerun takes a complete folder only (rerun_notebooks), which holds every input
            check_upstream(Path(args.outputs) / name, notebooks)
    for name, _ in runs:
        check_writable(Path(args.outputs) / name, "run folder")
    check_writable(Path(args.outputs) / ".locks", "lock folder")
    check_writable(CACHE, "cache folder", "set WIKIGAT_CACHE to a folder you can write")
    return all_notebooks, notebooks, overrides, runs


def dry_run_plan(args, runs: list, overrides: dict, notebooks: list[Path], all_notebooks: list[Path]) -> str:
    """What --dry-run prints: each run's plan (describe_plan), or for --rerun the re-run's own checks (plan_rerun: its
    notebooks' parameters may differ from the folder's) and the parameters that change; raises as the run would."""
    outputs = Path(args.outputs)
    if args.rerun:
        name, files = runs[0]
        changed = sorted(
            {k for c in plan_rerun(name, files, overrides, notebooks, outputs, all_notebooks)[2].values() for k in c}
        )
        lines = [
            f"--rerun: only {', '.join(nb.name for nb in notebooks)} would be re-executed into the complete run "
            f"folder {outputs / name}; parameters that change: {', '.join(changed) or 'none'}"
        ]
    else:
        lines = [describe_plan(n, f, overrides, notebooks, outputs, all_notebooks, args.force) for n, f in runs]
    return "\n".join([*lines, f"dry run: {len(runs)} run(s) valid; nothing executed"])


def not_a_dead_kernel_line(record: logging.LogRecord) -> bool:
    """False for nbclient's "Kernel died while waiting for execute reply." (a logging filter)."""
    return not record.getMessage().startswith("Kernel died")


def parser() -> argparse.ArgumentParser:
    """The runner's command line."""
    ap = argparse.ArgumentParser(
        prog="python -m lib.run.runner", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--size", action="append", default=[], help="params/<size>.yaml; repeat for a grid")
    ap.add_argument("--device", action="append", default=[], help="params/<device>.yaml; repeat for a grid")
    ap.add_argument("--params", nargs="+", default=[], help="explicit params files (layered in order)")
    ap.add_argument(
        "-p",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one parameter (value read as YAML: 1, 0.5, true, [a, b]); repeat for more",
    )
    ap.add_argument("--run-name", help="run folder name under outputs/ (single run only)")
    ap.add_argument("--notebooks", nargs="*", help="notebook numbers to run, e.g. 01 02 (default: all)")
    ap.add_argument("--force", action="store_true", help="re-run even if complete with the same parameters")
    ap.add_argument(
        "--rerun",
        action="store_true",
        help="re-execute only --notebooks into a run folder complete with the same parameters, keeping the rest",
    )
    ap.add_argument(
        "--summary", help="path stem of the summary of every run folder of --outputs (default outputs/summary)"
    )
    ap.add_argument("--outputs", default=str(OUTPUTS), help="folder that holds the run folders (default outputs/)")
    ap.add_argument("--dry-run", action="store_true", help="validate every run and print the plan; run nothing")
    ap.add_argument(
        "--ahead",
        action="store_true",
        help="a second process trains the later seeds of notebooks 03 and 03b while the notebook goes up from the "
        "first (the same numbers; about half the time on two cores)",
    )
    ap.add_argument("--notebook-dir", default=None, help=argparse.SUPPRESS)  # tests run tiny notebooks
    return ap


def main(argv: list[str] | None = None) -> int:
    # nbclient logs a dead kernel (also the one a Ctrl-C stops) on the "traitlets" logger, or on the "papermill" one
    # papermill hands it; the notebook's status entry records the failure, so the console keeps to the runner's lines
    logging.getLogger("traitlets").setLevel(logging.CRITICAL)
    logging.getLogger("papermill").addFilter(not_a_dead_kernel_line)
    args = parser().parse_args(argv)

    try:
        all_notebooks, notebooks, overrides, runs = plan_grid(args)
    except (ParamError, RunFolderError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.rerun and (len(runs) != 1 or not args.notebooks):
        print(
            "error: --rerun takes one run (--params ... --run-name NAME) and the --notebooks to re-run", file=sys.stderr
        )
        return 2
    try:
        if args.rerun and not args.dry_run:
            with run_folder_lock(Path(args.outputs), runs[0][0]):
                ok = rerun_notebooks(
                    runs[0][0],
                    runs[0][1],
                    overrides,
                    notebooks,
                    outputs=Path(args.outputs),
                    all_notebooks=all_notebooks,
                    ahead=args.ahead,
                )
            return 0 if ok else 1
        if args.dry_run:
            print(dry_run_plan(args, runs, overrides, notebooks, all_notebooks))
            return 0
        failed, busy = [], []
        for name, files in runs:
            try:
                ok = run_one(
                    name,
                    files,
                    overrides,
                    notebooks,
                    force=args.force,
                    outputs=Path(args.outputs),
                    all_notebooks=all_notebooks,
                    ahead=args.ahead,
                )
            except RunFolderBusy as e:  # another runner's run: nothing of it is touched, not even the summary
                print(f"error: {e}", file=sys.stderr)
                busy.append(name)
                continue
            except RunFolderError as e:
                print(f"error: {e}", file=sys.stderr)
                ok = False
            except KeyboardInterrupt:
                raise
            except OSError as e:  # a full disk, a folder made read-only meanwhile: the path and the fix
                print(f"error: [{name}] {os_error_line(e)}", file=sys.stderr)
                ok = False
            except Exception:
                traceback.print_exc()
                ok = False
            if not ok:
                failed.append(name)
    except RunFolderBusy as e:
        print(f"error: {e}", file=sys.stderr)
        return BUSY
    except (RunFolderError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {os_error_line(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # the stopped cell's task, reported when collected
        print("interrupted: finished notebooks and checkpoints are kept; the same command resumes", file=sys.stderr)
        return INTERRUPTED
    done = [name for name, _ in runs if name not in busy]
    summary_failed = False
    if done:
        stem = Path(args.summary) if args.summary else Path(args.outputs) / "summary"
        try:
            table = summarize_outputs(stem, Path(args.outputs), also=done)
            print(f"summary of {len(table)} run(s): {stem}.md/.csv/.html")
        except OSError as e:  # a full disk: the runs' own files are written; the same command writes the summary
            print(f"error: summary not written: {os_error_line(e)}", file=sys.stderr)
            summary_failed = True
    print(
        f"{len(done) - len(failed)} of {len(runs)} run(s) complete"
        + (f"; failed: {', '.join(failed)}" if failed else "")
        + (f"; being written by another runner: {', '.join(busy)}" if busy else "")
    )
    return 1 if failed or summary_failed else BUSY if busy else 0


if __name__ == "__main__":
    sys.exit(main())
