"""Batch runner: the numbered notebooks, in order, with papermill, for a grid of parameter profiles.

    python -m lib.runner --size demo --device cpu                 # one run: outputs/demo-cpu/
    python -m lib.runner --size seed40 --size seed180 --device cpu -p epochs=1
    python -m lib.runner --params my.yaml --run-name mine         # explicit files (later files win)

Each run folder gets the executed notebooks, params.json (resolved parameters, git commit, package versions) and
status.json. A run already complete with the same parameters is skipped; a failed run is reported at the end, the
rest of the grid still runs, and the exit code is non-zero.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

from lib.params import ParamError, check_known, merge, notebook_parameters, numbered_notebooks, parse_override
from lib.paths import OUTPUTS, PARAMS, ROOT, atomic_write_text
from lib.runinfo import config_digest, write_params_json

KERNEL = "wikigat"


def plan_run(files: list[Path], overrides: dict, notebooks: list[Path]) -> tuple[dict, dict[Path, dict]]:
    """Merge the params files and split them per notebook; unknown keys are errors naming the key and the file."""
    declared = {nb: notebook_parameters(nb) for nb in notebooks}
    known = set().union(*[set(d) for d in declared.values()]) if declared else set()
    for f in files:
        check_known(merge([f]), known, where=str(f))
    check_known(overrides, known, where="-p overrides")
    merged = merge(files, overrides)
    per_nb = {nb: {k: v for k, v in merged.items() if k in d} for nb, d in declared.items()}
    return merged, per_nb


def run_one(run_name: str, files: list[Path], overrides: dict, notebooks: list[Path], force: bool = False,
            log=print, outputs: Path = OUTPUTS) -> bool:
    """Execute every notebook for one run; True when the run is complete."""
    import papermill as pm

    run_dir = outputs / run_name
    merged, per_nb = plan_run(files, overrides, notebooks)
    merged["run_dir"] = str(run_dir.relative_to(ROOT) if run_dir.is_relative_to(ROOT) else run_dir)
    phash = config_digest({"params": merged, "notebooks": [nb.name for nb in notebooks]})
    status_path = run_dir / "status.json"
    status = json.loads(status_path.read_text()) if status_path.is_file() else {}
    if not force and status.get("params_hash") == phash and status.get("complete"):
        log(f"[{run_name}] already complete with the same parameters; skipped (use --force to re-run)")
        return True
    run_dir.mkdir(parents=True, exist_ok=True)
    write_params_json(run_dir, {**merged, "_files": [str(f) for f in files]})
    status = {"params_hash": phash, "complete": False, "notebooks": {}}
    atomic_write_text(status_path, json.dumps(status, indent=1))
    for nb in notebooks:
        params = {**per_nb[nb], "run_dir": merged["run_dir"]}
        out = run_dir / nb.name
        t0 = time.perf_counter()
        log(f"[{run_name}] {nb.name} ...")
        try:
            pm.execute_notebook(str(nb), str(out), parameters=params, kernel_name=KERNEL, cwd=str(nb.parent),
                                progress_bar=False, log_output=False)
        except Exception as e:  # papermill raises PapermillExecutionError with the failing cell
            status["notebooks"][nb.name] = {"status": "failed", "error": str(e).splitlines()[-1][:500] if str(e) else
                                            type(e).__name__, "seconds": round(time.perf_counter() - t0, 1)}
            atomic_write_text(status_path, json.dumps(status, indent=1))
            log(f"[{run_name}] {nb.name} FAILED: see {out}")
            return False
        status["notebooks"][nb.name] = {"status": "ok", "seconds": round(time.perf_counter() - t0, 1)}
        atomic_write_text(status_path, json.dumps(status, indent=1))
        log(f"[{run_name}] {nb.name} ok in {status['notebooks'][nb.name]['seconds']} s")
    status["complete"] = True
    atomic_write_text(status_path, json.dumps(status, indent=1))
    return True


def summarize(run_names: list[str], out_stem: Path | None = None, outputs: Path = OUTPUTS):
    """One table comparing runs on their headline metrics (every scalar in metrics.json, flattened), written as
    Markdown, CSV and HTML next to each other (`outputs/summary.*` by default). Missing runs/metrics stay empty."""
    import pandas as pd

    from lib.runinfo import flatten

    rows = []
    for name in run_names:
        run_dir = outputs / name
        status = json.loads((run_dir / "status.json").read_text()) if (run_dir / "status.json").is_file() else {}
        metrics = json.loads((run_dir / "metrics.json").read_text()) if (run_dir / "metrics.json").is_file() else {}
        row = {"run": name, "complete": bool(status.get("complete"))}
        row.update({k: v for k, v in flatten(metrics).items() if isinstance(v, (int, float, str, bool)) or v is None})
        rows.append(row)
    table = pd.DataFrame(rows).set_index("run")
    out_stem = out_stem or outputs / "summary"
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_stem.with_suffix(".csv"), table.to_csv())
    atomic_write_text(out_stem.with_suffix(".md"), table.T.to_markdown() + "\n")
    atomic_write_text(out_stem.with_suffix(".html"), "<meta charset='utf-8'><title>wikigat runs</title>\n"
                      + table.T.to_html(border=0, float_format=lambda x: f"{x:.4g}"))
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lib.runner", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", action="append", default=[], help="params/<size>.yaml; repeat for a grid")
    ap.add_argument("--device", action="append", default=[], help="params/<device>.yaml; repeat for a grid")
    ap.add_argument("--params", nargs="+", default=[], help="explicit params files (layered in order)")
    ap.add_argument("-p", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--run-name", help="run folder name under outputs/ (single run only)")
    ap.add_argument("--notebooks", nargs="*", help="notebook numbers to run, e.g. 01 02 (default: all)")
    ap.add_argument("--force", action="store_true", help="re-run even if complete with the same parameters")
    ap.add_argument("--summary", help="path stem of the summary table (default outputs/summary)")
    ap.add_argument("--outputs", default=str(OUTPUTS), help="folder that holds the run folders (default outputs/)")
    ap.add_argument("--notebook-dir", default=None, help=argparse.SUPPRESS)  # tests run tiny notebooks
    args = ap.parse_args(argv)

    notebooks = numbered_notebooks(args.notebook_dir) if args.notebook_dir else numbered_notebooks()
    if args.notebooks:
        notebooks = [nb for nb in notebooks if nb.name[:2] in set(args.notebooks)]
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
            plan_run(files, overrides, notebooks)
    except ParamError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    failed = []
    for name, files in runs:
        try:
            ok = run_one(name, files, overrides, notebooks, force=args.force, outputs=Path(args.outputs))
        except Exception:
            traceback.print_exc()
            ok = False
        if not ok:
            failed.append(name)
    stem = Path(args.summary) if args.summary else Path(args.outputs) / "summary"
    table = summarize([name for name, _ in runs], stem, outputs=Path(args.outputs))
    print(f"summary of {len(table)} run(s): {stem}.md/.csv/.html")
    print(f"{len(runs) - len(failed)} of {len(runs)} run(s) complete" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
