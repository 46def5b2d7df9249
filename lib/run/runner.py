"""Batch runner: the numbered notebooks, in order, with papermill, for a grid of parameter profiles.

    python -m lib.run.runner --size demo --device cpu                 # one run: outputs/demo-cpu/
    python -m lib.run.runner --size demo --size tiny --device cpu -p gat_epochs=1   # a grid of two runs
    python -m lib.run.runner --params params/tiny.yaml params/cpu.yaml --run-name mine   # explicit files, later win
    python -m lib.run.runner --size demo --device cpu --notebooks 01 02   # only notebooks 01 and 02
    python -m lib.run.runner --size seed40 --device cpu --dry-run     # validate and print the plan, run nothing
    python -m lib.run.runner --params params/seed40.yaml params/beyond.yaml params/cpu.yaml --run-name seed40 --rerun --notebooks 03b
                                                                  # re-run 03b into the complete run seed40, nothing else

Each run folder gets the executed notebooks, params.json (resolved parameters, git commit, package versions) and
status.json (per notebook: status, wall seconds, peak RSS of the kernel process, and for a failure the exception's
name, message and cell). A profile's keys are checked against every numbered notebook, whichever notebooks run. A
run already complete with the same parameters is skipped; a failed run is reported at the end, the rest of the grid
still runs, and the exit code is non-zero. `--rerun` re-executes only the selected notebooks into a run folder that is
complete with the same parameters (e.g. after a notebook gained a section), keeping the other notebooks' entries and
files; each re-run entry records the git commit it ran at, and the folder's checkpoints are reused as usual.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import sys
import time
import traceback
from pathlib import Path

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
from lib.common.paths import OUTPUTS, PARAMS, atomic_write_text, shown
from lib.common.runinfo import read_json, write_params_json

KERNEL = "wikigat"
PEAK_RSS_MEASURES = ("largest VmHWM (the peak resident set size Linux keeps per process) among the runner's child "
                     "processes, i.e. the Jupyter kernel and what it starts, read from /proc every 0.25 s; growth in "
                     "the last 0.25 s before the kernel exits can be missed; null where /proc is unavailable")


def plan_run(files: list[Path], overrides: dict, notebooks: list[Path], all_notebooks: list[Path] | None = None
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


# Parameters that say how a run executes, not what it computes: a run complete with other values is not re-run.
EXECUTION_KEYS = ("threads",)


def _params_hash(merged: dict, notebooks: list[Path]) -> str:
    return config_digest({"params": {k: v for k, v in merged.items() if k not in EXECUTION_KEYS},
                          "notebooks": [nb.name for nb in notebooks]})


class KernelPeak:
    """Peak resident memory of the notebook kernel, sampled in a background thread while papermill runs.

    Measures the largest VmHWM ("peak resident set size" kept by the Linux kernel for each process) among this
    process's descendants, i.e. the Jupyter kernel and anything it starts, read from /proc every `interval` s. VmHWM is
    a high-water mark, so short spikes between two reads are not missed; only growth in the last `interval` s before
    the kernel exits can be. `peak_mb` is None where /proc is unavailable (not Linux)."""

    def __init__(self, interval: float = 0.25):
        import threading

        self.interval, self.peak_kb = interval, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def _hwm_kb(pid: int) -> int | None:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        except (OSError, ValueError, IndexError):
            return None
        return None

    def sample(self) -> None:
        import psutil

        for child in psutil.Process().children(recursive=True):
            kb = self._hwm_kb(child.pid)
            if kb is not None and (self.peak_kb is None or kb > self.peak_kb):
                self.peak_kb = kb

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @property
    def peak_mb(self) -> float | None:
        return None if self.peak_kb is None else round(self.peak_kb / 1024, 1)


def failure_details(e: BaseException) -> dict:
    """The exception's name, message and failing cell, from papermill's PapermillExecutionError or any exception."""
    name = getattr(e, "ename", None) or type(e).__name__
    message = getattr(e, "evalue", None)
    if message is None:
        message = str(e).strip().splitlines()[-1] if str(e).strip() else ""
    out = {"error_name": str(name), "error_message": str(message)[:2000]}
    if getattr(e, "cell_index", None) is not None:
        out["cell_index"] = e.cell_index  # index in the executed notebook, which holds papermill's injected cell
        out["exec_count"] = getattr(e, "exec_count", None)
        out["cell_source"] = str(getattr(e, "source", ""))[:2000]
    return out


def describe_failure(d: dict) -> str:
    where = f" in cell {d['cell_index']} (In [{d.get('exec_count')}])" if "cell_index" in d else ""
    text = f"{d['error_name']}: {d['error_message']}{where}"
    src = d.get("cell_source", "").strip().splitlines()
    if src:
        text += "\n    cell: " + "\n          ".join(src[:6]) + ("\n          ..." if len(src) > 6 else "")
    return text


@contextlib.contextmanager
def kernel_threads(threads: int):
    """OMP_NUM_THREADS / MKL_NUM_THREADS for the kernels started inside (0: lib.common.device.default_threads()), so the
    OpenMP pool of a kernel has the size its notebook's set_threads() asks for from the first import of torch on."""
    from lib.common.device import THREAD_VARS, default_threads

    n = threads or default_threads()
    saved = {v: os.environ.get(v) for v in THREAD_VARS}
    os.environ.update({v: str(n) for v in THREAD_VARS})
    try:
        yield n
    finally:
        for v, old in saved.items():
            if old is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = old


def execute(nb: Path, out: Path, params: dict) -> dict:
    """Run one notebook with papermill into `out`; its status entry: status, wall seconds, kernel peak RSS, the CPU
    threads its kernel used and, for a failure, the exception's details (failure_details)."""
    import papermill as pm

    t0 = time.perf_counter()
    error = None
    with KernelPeak() as peak, kernel_threads(params.get("threads", 0)) as threads:
        try:
            pm.execute_notebook(str(nb), str(out), parameters=params, kernel_name=KERNEL, cwd=str(nb.parent),
                                progress_bar=False, log_output=False)
        except Exception as e:  # papermill raises PapermillExecutionError with the failing cell
            error = failure_details(e)
    return {"status": "failed" if error else "ok", "seconds": round(time.perf_counter() - t0, 1),
            "peak_rss_mb": peak.peak_mb, "threads": threads, **(error or {})}


def run_one(run_name: str, files: list[Path], overrides: dict, notebooks: list[Path], force: bool = False,
            log=print, outputs: Path = OUTPUTS, all_notebooks: list[Path] | None = None) -> bool:
    """Execute every notebook for one run; True when the run is complete."""
    run_dir = outputs / run_name
    merged, per_nb = plan_run(files, overrides, notebooks, all_notebooks)
    merged["run_dir"] = _run_dir_param(run_dir)
    phash = _params_hash(merged, notebooks)
    status_path = run_dir / "status.json"
    status = read_json(run_dir / "status.json")
    if not force and status.get("params_hash") == phash and status.get("complete"):
        log(f"[{run_name}] already complete with the same parameters; skipped (use --force to re-run)")
        return True
    # An interrupted run with the same parameters resumes at its first unfinished notebook: the leading notebooks
    # that finished ok are kept (a later one is run again once an earlier one is, as its inputs may have changed).
    kept = {}
    if not force and status.get("params_hash") == phash:
        for nb in notebooks:
            entry = (status.get("notebooks") or {}).get(nb.name)
            if not (entry and entry.get("status") == "ok" and (run_dir / nb.name).is_file()):
                break
            kept[nb.name] = entry
    run_dir.mkdir(parents=True, exist_ok=True)
    if not kept:
        write_params_json(run_dir, {**merged, "_files": [str(f) for f in files]})
    status = {"params_hash": phash, "complete": False, "notebooks": dict(kept),
              "peak_rss_mb_measures": PEAK_RSS_MEASURES}
    atomic_write_text(status_path, json.dumps(status, indent=1))
    for nb in notebooks:
        if nb.name in kept:
            log(f"[{run_name}] {nb.name} finished ok earlier with the same parameters; kept (use --force to re-run)")
            continue
        out = run_dir / nb.name
        log(f"[{run_name}] {nb.name} ...")
        entry = execute(nb, out, {**per_nb[nb], "run_dir": merged["run_dir"]})
        status["notebooks"][nb.name] = entry
        atomic_write_text(status_path, json.dumps(status, indent=1))
        if entry["status"] == "failed":
            log(f"[{run_name}] {nb.name} FAILED after {entry['seconds']} s: {describe_failure(entry)}\n"
                f"    executed notebook: {out}")
            return False
        mem = f", kernel peak RSS {entry['peak_rss_mb']:.0f} MB" if entry["peak_rss_mb"] is not None else ""
        log(f"[{run_name}] {nb.name} ok in {entry['seconds']} s{mem}")
    status["complete"] = True
    atomic_write_text(status_path, json.dumps(status, indent=1))
    return True


def rerun_notebooks(run_name: str, files: list[Path], overrides: dict, notebooks: list[Path], log=print,
                    outputs: Path = OUTPUTS, all_notebooks: list[Path] | None = None) -> bool:
    """Re-execute `notebooks` into the complete run folder `run_name`; the other notebooks' status entries and files
    stay, and the run stays complete when every re-run succeeds. The parameters of the notebooks not re-run must equal
    those the folder was made with (params.json), so their results still belong to the run; the re-run notebooks' own
    parameters may differ (a profile that gained a variant), and each re-run entry lists those that did
    ("params_changed") with the git commit it ran at. A folder that is incomplete, lacks a notebook, or whose other
    notebooks would see other parameters is refused with the fix named (ValueError)."""
    from lib.common.runinfo import git_commit, refuse_other_settings

    run_dir = outputs / run_name
    status = read_json(run_dir / "status.json")
    made = list(status.get("notebooks") or {})
    if not status.get("complete") or not (run_dir / "params.json").is_file():
        raise ValueError(f"--rerun needs a complete run folder; {run_dir} is not (run it without --rerun first)")
    missing = [nb.name for nb in notebooks if nb.name not in made]
    if missing:
        raise ValueError(f"--rerun: {run_dir} never ran {missing}; re-run only notebooks it ran: {made}")
    merged, per_nb = plan_run(files, overrides, notebooks, all_notebooks)
    merged["run_dir"] = _run_dir_param(run_dir)
    old = json.loads((run_dir / "params.json").read_text())["params"]
    nb_dir = (all_notebooks or notebooks)[0].parent
    others = [nb_dir / n for n in made if n not in {nb.name for nb in notebooks}]
    declared = {}
    for nb in others:
        if nb.is_file():
            declared.update(notebook_parameters(nb))
    for k in ("run_dir", *EXECUTION_KEYS):
        declared.pop(k, None)

    def default(k):  # a parameter added after the folder was made counts as unchanged at its notebook default
        try:
            return ast.literal_eval(declared[k]["default"])
        except (ValueError, SyntaxError):
            return declared[k]["default"]

    refuse_other_settings(f"--rerun: {run_dir}", {k: old.get(k, default(k)) for k in declared},
                          {k: merged.get(k, default(k)) for k in declared},
                          "notebooks that are not re-run use them; pass the same params files, or run it whole with "
                          "--force")
    commit = git_commit()
    for nb in notebooks:
        log(f"[{run_name}] re-running {nb.name} ...")
        entry = {**execute(nb, run_dir / nb.name, {**per_nb[nb], "run_dir": merged["run_dir"]}),
                 "rerun": f"re-run alone at commit {commit}",
                 "params_changed": {k: v for k, v in per_nb[nb].items() if v != old.get(k)}}
        status["notebooks"][nb.name] = entry
        status["complete"] = entry["status"] == "ok"
        atomic_write_text(run_dir / "status.json", json.dumps(status, indent=1))
        if entry["status"] == "failed":
            log(f"[{run_name}] {nb.name} FAILED after {entry['seconds']} s: {describe_failure(entry)}")
            return False
        log(f"[{run_name}] {nb.name} re-run ok in {entry['seconds']} s")
    return True


def describe_plan(run_name: str, files: list[Path], overrides: dict, notebooks: list[Path], outputs: Path = OUTPUTS,
                  all_notebooks: list[Path] | None = None, force: bool = False) -> str:
    """What run_one would do, in a few lines (for --dry-run): folder, files, notebooks, parameters, skip or run."""
    run_dir = outputs / run_name
    merged, per_nb = plan_run(files, overrides, notebooks, all_notebooks)
    merged["run_dir"] = _run_dir_param(run_dir)
    status = read_json(run_dir / "status.json")
    skip = not force and status.get("params_hash") == _params_hash(merged, notebooks) and status.get("complete")
    lines = [f"[{run_name}] {'skip (already complete with the same parameters)' if skip else 'run'} -> {run_dir}",
             f"    params files: {', '.join(str(f) for f in files)}" + (f"; overrides: {overrides}" if overrides else "")]
    for nb in notebooks:
        lines.append(f"    {nb.name}: {json.dumps(per_nb[nb], default=str, sort_keys=True)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lib.run.runner", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", action="append", default=[], help="params/<size>.yaml; repeat for a grid")
    ap.add_argument("--device", action="append", default=[], help="params/<device>.yaml; repeat for a grid")
    ap.add_argument("--params", nargs="+", default=[], help="explicit params files (layered in order)")
    ap.add_argument("-p", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="set one parameter (value read as YAML: 1, 0.5, true, [a, b]); repeat for more")
    ap.add_argument("--run-name", help="run folder name under outputs/ (single run only)")
    ap.add_argument("--notebooks", nargs="*", help="notebook numbers to run, e.g. 01 02 (default: all)")
    ap.add_argument("--force", action="store_true", help="re-run even if complete with the same parameters")
    ap.add_argument("--rerun", action="store_true",
                    help="re-execute only --notebooks into a run folder complete with the same parameters, keeping the rest")
    ap.add_argument("--summary", help="path stem of the summary table (default outputs/summary)")
    ap.add_argument("--outputs", default=str(OUTPUTS), help="folder that holds the run folders (default outputs/)")
    ap.add_argument("--dry-run", action="store_true", help="validate every run and print the plan; run nothing")
    ap.add_argument("--notebook-dir", default=None, help=argparse.SUPPRESS)  # tests run tiny notebooks
    args = ap.parse_args(argv)

    all_notebooks = numbered_notebooks(args.notebook_dir) if args.notebook_dir else numbered_notebooks()
    notebooks = all_notebooks
    if args.notebooks:
        unknown = sorted(set(args.notebooks) - {notebook_number(nb) for nb in all_notebooks})
        if unknown:
            print(f"error: --notebooks {' '.join(unknown)}: no such notebook; use numbers of "
                  f"{', '.join(nb.name for nb in all_notebooks)}", file=sys.stderr)
            return 2
        notebooks = [nb for nb in all_notebooks if notebook_number(nb) in set(args.notebooks)]
    if not notebooks:
        print("error: no numbered notebooks to run in notebooks/", file=sys.stderr)
        return 2
    try:
        overrides = dict(parse_override(o) for o in args.overrides)
        runs: list[tuple[str, list[Path]]] = []
        if args.params:
            runs.append((args.run_name or Path(args.params[0]).stem, [Path(p) for p in args.params]))
        for size in args.size or ([] if args.params else ["demo"]):
            for device in args.device or ["cpu"]:
                name = args.run_name if args.run_name and len(args.size or [1]) * len(args.device or [1]) == 1 \
                    else f"{size}-{device}"
                runs.append((name, [PARAMS / f"{size}.yaml", PARAMS / f"{device}.yaml"]))
        for name, files in runs:  # validate the whole grid before any work
            plan_run(files, overrides, notebooks, all_notebooks)
    except ParamError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.rerun and (len(runs) != 1 or not args.notebooks):
        print("error: --rerun takes one run (--params ... --run-name NAME) and the --notebooks to re-run",
              file=sys.stderr)
        return 2
    if args.rerun and not args.dry_run:
        try:
            ok = rerun_notebooks(runs[0][0], runs[0][1], overrides, notebooks, outputs=Path(args.outputs),
                                 all_notebooks=all_notebooks)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0 if ok else 1
    if args.dry_run:
        for name, files in runs:
            print(describe_plan(name, files, overrides, notebooks, Path(args.outputs), all_notebooks, args.force))
        if args.rerun:
            print(f"--rerun: only {', '.join(nb.name for nb in notebooks)} would be re-executed into the complete run "
                  f"folder {Path(args.outputs) / runs[0][0]}")
        print(f"dry run: {len(runs)} run(s) valid; nothing executed")
        return 0

    failed = []
    for name, files in runs:
        try:
            ok = run_one(name, files, overrides, notebooks, force=args.force, outputs=Path(args.outputs),
                         all_notebooks=all_notebooks)
        except Exception:
            traceback.print_exc()
            ok = False
        if not ok:
            failed.append(name)
    stem = Path(args.summary) if args.summary else Path(args.outputs) / "summary"
    from lib.run.summary import summarize

    table = summarize([name for name, _ in runs], stem, outputs=Path(args.outputs))
    print(f"summary of {len(table)} run(s): {stem}.md/.csv/.html")
    print(f"{len(runs) - len(failed)} of {len(runs)} run(s) complete" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
