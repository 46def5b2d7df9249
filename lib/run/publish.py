"""Publishing a run: copy a run folder's small result files to outputs/reference/<run>/ (`python -m lib.run.report
--publish RUN`), or, for a run whose numbers are cost evidence only, its parameters, status and cost record
(`--publish-cost RUN`, lib.run.cost)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from lib.common.paths import OUTPUTS, atomic_write_text
from lib.common.runinfo import load_json, read_json
from lib.run.cost import COST_FILE, cost_record
from lib.run.facts import REFERENCE_RUNS

MAX_BYTES = 2_000_000
# a stage's own result tables and parameters (notebook 05 writes distill/, 06 kd/), never their checkpoint folders
KEEP = (
    "*.ipynb",
    "metrics.json",
    "params.json",
    "status.json",
    "params_*.json",
    "*.csv",
    "figures/*.png",
    "html/*.html",
    "distill/*.csv",
    "distill/params_*.json",
    "kd/*.csv",
    "kd/params_*.json",
    "embedders/*.csv",
    "embedders/*.json",
)
# a cost-only run: parameters and status, no metrics, tables, figures or executed notebooks (their outputs are the
# results it does not publish, and a megabyte each)
COST_KEEP = ("params.json", "status.json", "params_*.json")


def publish(run: str, outputs: Path = OUTPUTS, ref: Path = REFERENCE_RUNS, cost_only: bool = False) -> list[Path]:
    """Copy a run folder's small result files (executed notebooks without their progress-bar widget state, metrics,
    parameters, status, tables, PNG figures, pictures; each under 2 MB) to outputs/reference/<run>/; never checkpoints,
    datasets, caches or crawled graphs.

    Where the run's status.json lists its notebooks (lib.run.runner), only those executed notebooks are copied, and only
    the figures and pictures whose name starts with one of their numbers ("03b_…") or with none: a run folder another
    profile also wrote into (e.g. notebook 05's node-embedder run in seed40) keeps that run's files out.

    cost_only: the parameters and status only, and the run's cost record (lib.run.cost, cost.json) in place of its
    metrics and notebooks: a run whose numbers are cost evidence, never findings."""

    src = outputs / run
    if not (src / "metrics.json").is_file():
        raise FileNotFoundError(f"{src} has no metrics.json; run it first (python -m lib.run.runner ...)")
    cost = cost_record(src) if cost_only else None  # before anything is removed: an incomplete run is refused
    dst = ref / run
    notes = (dst / "README.md").read_text() if (dst / "README.md").is_file() else None  # how the run was made
    if dst.exists():
        shutil.rmtree(dst)
    status = read_json(src / "status.json")
    listed = set(status.get("notebooks", {}))
    numbers = {n.split("_", 1)[0] for n in listed}

    def owned(f: Path) -> bool:
        if not listed:
            return True
        if f.suffix == ".ipynb":
            return f.name in listed
        m = re.match(r"(\d+[a-z]?)_", f.name)
        return m is None or m.group(1) in numbers

    copied = []
    if notes is not None:
        dst.mkdir(parents=True)
        (dst / "README.md").write_text(notes)
    for pattern in COST_KEEP if cost_only else KEEP:
        for f in sorted(src.glob(pattern)):
            if not (f.is_file() and owned(f)):
                continue
            out = dst / f.relative_to(src)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, out)
            if f.suffix == ".ipynb":
                _relative_papermill_paths(out)
            elif f.name.startswith("params") and f.suffix == ".json":
                _relative_run_dir(out)
            if out.stat().st_size > MAX_BYTES:
                out.unlink()
                continue
            copied.append(out)
    if cost is not None:
        dst.mkdir(parents=True, exist_ok=True)
        atomic_write_text(dst / COST_FILE, json.dumps(cost, indent=1) + "\n")
        copied.append(dst / COST_FILE)
    return copied


def _relative_papermill_paths(nb_path: Path) -> None:
    """Papermill records the absolute paths of the machine that ran a notebook; a published copy keeps them from the
    project folder on (`notebooks/…`, `outputs/…`), which is all a reader's clone can use. The saved state of its
    progress-bar widgets goes too: it only redraws bars, and a long run's bars outweigh its results."""

    nb = load_json(nb_path)
    nb.get("metadata", {}).pop("widgets", None)
    pm = nb.get("metadata", {}).get("papermill", {})
    for key in ("input_path", "output_path"):
        if isinstance(pm.get(key), str):
            pm[key] = _from_project(pm[key])
    text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    run_dir = (pm.get("parameters") or {}).get("run_dir")
    if isinstance(run_dir, str) and run_dir != (new := _from_project(run_dir)):  # a run folder outside the clone
        text = text.replace(json.dumps(run_dir)[1:-1], json.dumps(new)[1:-1])  # its parameters, code and printouts
    atomic_write_text(nb_path, text)


def _from_project(path: str) -> str:
    """A path from the project folder on (`notebooks/…`, `outputs/…`, `params/…`), as a reader's clone has it."""
    return re.sub(r"^.*?(?=(?:notebooks|outputs|params)/)", "", path)


def _relative_run_dir(params_path: Path) -> None:
    """A params record's run_dir and params files (`_files`) from the project folder on: a run made with --outputs
    elsewhere, or with a size profile (which the runner names by its absolute path), records paths of the machine
    that ran it."""
    try:
        record = json.loads(params_path.read_text(encoding="utf-8"))
    except ValueError:  # not a runner's record (a stage's own file of that name): copied as it is
        return
    params = record.get("params") if isinstance(record, dict) else None
    if not isinstance(params, dict):
        return
    relative = dict(params)
    if isinstance(params.get("run_dir"), str):
        relative["run_dir"] = _from_project(params["run_dir"])
    if isinstance(params.get("_files"), list):
        relative["_files"] = [_from_project(f) if isinstance(f, str) else f for f in params["_files"]]
    if relative != params:
        record["params"] = relative
        atomic_write_text(params_path, json.dumps(record, indent=2, sort_keys=True) + "\n")  # as runinfo writes it
