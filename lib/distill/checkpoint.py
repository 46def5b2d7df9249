"""Where a distillation grid keeps its finished runs, so a killed grid resumes and two processes can share it
(lib.distill.stage.run_grid, lib.distill.worker): rows.jsonl, loss and curve CSVs, step checkpoints, per-run claims."""

from __future__ import annotations

import contextlib
import fcntl
import json
import re
from pathlib import Path

import pandas as pd

from lib.common import published
from lib.common.hashing import config_digest
from lib.common.params import ParamError
from lib.common.paths import atomic_write_text, csv_rows, move_aside, read_rows, resolve
from lib.common.runinfo import jsonable, load_json, refuse_other_settings
from lib.distill.config import DistillParams, read_params_05
from lib.linkpred.config import GatTrainingParams

NOT_IN_ROWS = (
    "run_dir",
    "save_students",
    "speed_sentences",
    "lp_students",
    "lp_protocols",
    "checkpoint_every",
    *GatTrainingParams.names(),
)
"""Parameters of notebook 05 that change no finished row of the grid (where it runs, what is saved or evaluated after
the grid, among it the link prediction's GatModel, how often a run keeps its step checkpoint)."""
GRID_SHAPE = (
    "students",
    "student_inits",
    "ablation_students",
    "ablation_inits",
    "ablation_seeds",
    "ta_students",
    "tasks",
    "task_students",
    "task_losses",
    "reuse_runs",
    "embedding_methods",
    "embedding_target",
    "embedding_loss",
    "w_emb",
)
"""Parameters that only choose which runs a grid holds; `distill_seeds` too, but for its first seed, which draws the
data every run of the grid shares (lib.distill.data.build_datasets)."""
ADOPTED_STAGES = ("reference", "task-agnostic")


def published_runs(cfg: DistillParams, published: str) -> Path:
    """The distill/ folder of the published run folder `published` (relative to the project root or absolute), whose
    finished runs `cfg`'s grid may take: it must hold notebook 05's params_05.json and results.csv, made with every
    setting a run depends on (run_settings) equal to `cfg`'s. Otherwise one ParamError naming reuse_runs, the missing
    files, a table pandas cannot read or the differing settings, and the fix. The runner calls it before it creates
    the run folder (lib.run.preflight), the grid again when it takes the runs."""
    src, fix = resolve(published) / "distill", "or set reuse_runs=''"
    missing = [str(p) for p in (src / "params_05.json", src / "results.csv") if not p.is_file()]
    if missing:
        raise ParamError(
            f"reuse_runs={published!r}: {', '.join(missing)} not found; name a run folder that notebook "
            f"05 finished (e.g. outputs/reference/distill_long) {fix}",
            key="reuse_runs",
        )
    for table in (src / "results.csv", src / "curves.csv"):
        if table.is_file() and (why := csv_rows(table)[1]):
            raise ParamError(
                f"reuse_runs={published!r}: {table} is not a readable CSV table ({why}); restore it "
                f"(git checkout -- <it> for a committed run) {fix}",
                key="reuse_runs",
            )
    try:
        theirs = run_settings(read_params_05(src / "params_05.json"))
        refuse_other_settings(
            f"reuse_runs={published!r}: its runs",
            theirs,
            run_settings(cfg),
            f"reuse a run made with this grid's settings {fix}",
        )
    except ValueError as e:
        raise ParamError(str(e), key="reuse_runs") from None
    return src


def run_settings(cfg: DistillParams) -> dict:
    """The settings a finished task-agnostic run of `cfg`'s grid depends on: those of its rows, less the grid's
    shape, with the data seed (the first of `distill_seeds`) in place of the seed list."""
    record = jsonable(cfg.record())
    keep = {k: v for k, v in record.items() if k not in (*NOT_IN_ROWS, *GRID_SHAPE, "distill_seeds")}
    return {**keep, "data_seed": cfg.distill_seeds[0]}


class GridCheckpoint:
    """Finished rows and loss histories of a grid in `folder` (rows.jsonl + losses/<run>.csv + the settings they were
    made with, settings.json); a killed grid re-run with the same settings skips what is there, and one re-run with
    other settings is refused (lib.common.runinfo.refuse_other_settings) instead of mixing two grids. The code is not
    in the settings (a resumed run must not redo hours after a cosmetic edit): delete the folder after changing what
    a run computes. folder=None keeps nothing. The settings.json and rows.jsonl are read through
    lib.common.published (grid_settings, rows_match_digest)."""

    def __init__(self, folder: Path | None, cfg: DistillParams):

        self.folder, self.rows, self.cfg = (Path(folder) if folder else None), {}, cfg
        record = jsonable(cfg.record())
        self.digest = config_digest(record)
        settings = {k: v for k, v in record.items() if k not in NOT_IN_ROWS}
        if self.folder is None:
            return
        fix = f"use the parameters it was made with, another run_dir, or delete {self.folder} to start the grid over"
        rows, saved = _read_rows(self.folder / "rows.jsonl"), self.folder / "settings.json"
        if saved.is_file():
            old, completed = published.grid_settings(load_json(saved), settings)
            refuse_other_settings(f"the finished runs in {self.folder}", old, settings, fix)
            if completed:
                atomic_write_text(saved, json.dumps(settings, indent=1) + "\n")
        elif not published.rows_match_digest(rows, self.digest):
            raise ValueError(
                f"the finished runs in {self.folder} were made with other settings (which ones was not "
                f"recorded then); {fix}"
            )
        else:
            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_write_text(saved, json.dumps(settings, indent=1) + "\n")
        self.rows = _by_model(rows)

    def adopt(self, published: str) -> list[str]:
        """Take the finished reference and task-agnostic runs of the published run folder `published` (checked by
        published_runs) that this folder does not hold yet, so that a grid which extends a published one (more
        ablation seeds, say) trains only its new runs; returns their names. The adopted rows carry `reused_from` (the
        folder as given); their loss histories are not published, so the loss figure lacks them."""
        src = published_runs(self.cfg, published)
        results = pd.read_csv(src / "results.csv")
        text = results.select_dtypes(exclude="number").columns
        results[text] = results[text].fillna("")  # empty inits of the reference rows, not missing values
        curves = pd.read_csv(src / "curves.csv") if (src / "curves.csv").is_file() else pd.DataFrame(columns=["run"])
        with self.claim("_adopt", wait=True):  # two processes starting on one folder adopt once
            self.refresh()
            taken = []
            for row in results[results.stage.isin(ADOPTED_STAGES)].to_dict("records"):
                name = row["model"]
                if name in self.rows:
                    continue
                curve = curves[curves.run == name].drop(columns="run").reset_index(drop=True)
                row = {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
                self.rows[name] = self.put(
                    {**row, "seed": int(row["seed"]), "reused_from": str(published)},
                    {},
                    {name: curve} if len(curve) else {},
                )
                taken.append(name)
        return taken

    def refresh(self) -> None:
        """Read rows.jsonl again: another process on the same folder may have finished runs since."""
        if self.folder is not None:
            self.rows = _by_model(_read_rows(self.folder / "rows.jsonl"))

    def claim(self, name: str, wait: bool = False):
        """This process's hold on the run `name` (a context manager), or None when another live process holds it and
        not `wait`. Two processes on one folder (notebook 05 and `python -m lib.distill.worker`) so never train the
        same run. The hold is an flock on locks/<run>.lock: the kernel drops it when its process dies, so a killed
        process leaves no stale claim (a lock file with a pid would). folder=None: always granted."""

        if self.folder is None:
            return contextlib.nullcontext()
        path = self.folder / "locks" / f"{_file_name(name)}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path, "a")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            fh.close()
            return None
        return fh  # closing the file (leaving the with block) releases the lock

    def _csv(self, name: str, kind: str = "losses") -> Path:
        return self.folder / kind / f"{_file_name(name)}.csv"

    def steps_file(self, name: str) -> Path | None:
        """Where the run `name` keeps its step checkpoint while it trains (None: no checkpoint folder)."""
        return None if self.folder is None else self.folder / "steps" / f"{_file_name(name)}.pt"

    def get(self, name: str, hist: dict, curves: dict | None = None) -> dict | None:
        r = self.rows.get(name)
        if r is not None and self.folder is not None:
            for kind, into in (("losses", hist), ("curves", curves)):
                kept = (
                    pd.DataFrame()
                    if into is None
                    else read_rows(self._csv(name, kind), f"{kind} of the run {name}", "the figures leave them out")
                )
                if len(kept):
                    into[name] = kept
        return r

    def put(self, row: dict, hist: dict, curves: dict | None = None) -> dict:

        if self.folder is not None:
            for kind, have in (("losses", hist), ("curves", curves or {})):
                if row["model"] in have:
                    atomic_write_text(self._csv(row["model"], kind), have[row["model"]].to_csv(index=False))
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(self.folder / "rows.jsonl", "a") as f:  # one line per finished run; a torn last line is re-run
                fcntl.flock(f, fcntl.LOCK_EX)  # two processes on one grid: their lines never interleave
                f.write(json.dumps(row, default=float) + "\n")
            steps = self.steps_file(row["model"])
            if steps.is_file():  # the finished row replaces the run's step checkpoint (hundreds of MB)
                steps.unlink()
        return row


def _file_name(run: str) -> str:
    """A run's name as a file name in the folder (its lock, loss and curve CSVs, step checkpoint)."""
    return run.replace("/", "_")


def _by_model(rows: list[dict]) -> dict[str, dict]:
    """Finished rows by run name, without the digest that only the file needs."""
    return {r["model"]: {k: v for k, v in r.items() if k != published.ROW_DIGEST} for r in rows}


def _read_rows(path: Path) -> list[dict]:
    """The rows of rows.jsonl; a last line torn by a kill (no newline yet) is cut off the file (a copy of it kept
    aside, RecoveryWarning), so that run is done again and the next row starts on a line of its own. A file with other
    lines that hold no row (overwritten, edited) is moved aside and written again with the rows it holds, so only the
    runs of the lost lines are done again. Read under the file's lock, so a line another process is writing at that
    moment is not taken for a torn one."""

    if not path.is_file():
        return []
    with open(path, "r+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        data = f.read()
        if data and not data.endswith(b"\n"):
            whole = data[: data.rfind(b"\n") + 1]
            run = re.search(rb'"model": "([^"]*)"', data[len(whole) :])
            run = f"the run {run.group(1).decode(errors='replace')}" if run else "the run of that line"
            move_aside(
                path,
                "finished-run rows",
                f"its line {len(whole.splitlines()) + 1} is cut short",
                f"it is cut off the file and {run} is trained again",
                copy=True,
            )
            data = whole
            f.truncate(len(data))
        lines = [line for line in data.splitlines() if line.strip()]
        rows = [row for row in map(_row, lines) if row is not None]
        if len(rows) < len(lines):
            move_aside(
                path,
                "finished-run rows",
                f"{len(lines) - len(rows)} of its {len(lines)} lines hold no row",
                "the runs of those lines are trained again",
            )
            atomic_write_text(path, "".join(json.dumps(row, default=float) + "\n" for row in rows))
    return rows


def _row(line: bytes) -> dict | None:
    """One line of rows.jsonl as its row; None when it holds none."""
    try:
        row = json.loads(line)
    except ValueError:  # not JSON, or not UTF-8
        return None
    return row if isinstance(row, dict) and "model" in row else None


def checkpoint_rows(folder: str | Path) -> pd.DataFrame:
    """The finished rows of a (possibly unfinished) grid's checkpoint folder, for a look before the grid ends."""
    rows = _read_rows(Path(folder) / "rows.jsonl")
    return pd.DataFrame([{k: v for k, v in r.items() if k not in (published.ROW_DIGEST, "_logits")} for r in rows])
