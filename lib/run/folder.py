"""One run folder: the notebook execution that fills it (papermill, with the kernel's peak memory and threads) and
the rules that keep it whole (one writer at a time, one parameter set)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
import warnings
from pathlib import Path

import nbformat
import psutil

from lib.common import published
from lib.common.compute import THREAD_VARS, default_threads
from lib.common.errors import WikigatError
from lib.common.paths import ROOT, RecoveryWarning, atomic_write_text, os_error_line
from lib.common.runinfo import read_json, read_record, refuse_other_settings
from lib.run.ahead import ahead_process

PEAK_RSS_MEASURES = (
    "largest VmHWM (the peak resident set size Linux keeps per process) among the runner's child "
    "processes, i.e. the Jupyter kernel and what it starts, read from /proc every 0.25 s; growth in "
    "the last 0.25 s before the kernel exits can be missed; null where /proc is unavailable"
)
KERNEL = "wikigat"
# The kernel's own log stays off the console: its start-up warning ("running over TCP without encryption", the only
# transport of a local kernel) and, on Ctrl-C, the traceback of a reply sent after the runner closed its sockets. What a
# notebook prints or warns is in its executed copy, whose RecoveryWarnings the runner prints.
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=CRITICAL"]
# Parameters that say how a run executes, not what it computes: a run complete with other values is not re-run.
EXECUTION_KEYS = ("threads",)


class KernelPeak:
    """Peak resident memory of the notebook kernel, sampled in a background thread while papermill runs.

    Measures the largest VmHWM ("peak resident set size" kept by the Linux kernel for each process) among this
    process's descendants, i.e. the Jupyter kernel and anything it starts, read from /proc every `interval` s. VmHWM is
    a high-water mark, so short spikes between two reads are not missed; only growth in the last `interval` s before
    the kernel exits can be. `peak_mb` is None where /proc is unavailable (not Linux)."""

    def __init__(self, interval: float = 0.25):
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
def kernel_environment(threads: int):
    """The environment of the kernels started inside: OMP_NUM_THREADS / MKL_NUM_THREADS (0:
    lib.common.device.default_threads()), so the OpenMP pool of a kernel has the size its notebook's set_threads() asks
    for from the first import of torch on; and PYTHONPATH led by this checkout, so a kernel imports the `lib` the runner
    runs (an environment installed from another clone or worktree would otherwise give it that one's code, commit and
    outputs folder). Yields the threads."""

    n = threads or default_threads()
    saved = {v: os.environ.get(v) for v in (*THREAD_VARS, "PYTHONPATH")}
    os.environ.update({v: str(n) for v in THREAD_VARS})
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [saved["PYTHONPATH"]])])
    try:
        yield n
    finally:
        for v, old in saved.items():
            if old is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = old


def recoveries(executed: Path) -> list[str]:
    """The RecoveryWarnings (a damaged file moved aside, then rebuilt or resumed) in the stderr outputs of an executed
    notebook, one message each, in cell order."""
    try:
        nb = nbformat.read(executed, as_version=4)
    except (OSError, ValueError):
        return []
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream" and o.get("name") == "stderr":
                out += [
                    line.split("RecoveryWarning: ", 1)[1].strip()
                    for line in o.get("text", "").splitlines()
                    if "RecoveryWarning: " in line
                ]
    return out


EXECUTING = ".executing"
"""The folder of a run folder that holds one Heartbeat file per notebook executing now."""
HEARTBEAT_SECONDS = 30.0
"""How often a Heartbeat file is rewritten: a killed execution's recorded seconds fall short by at most this."""


class Heartbeat:
    """While a notebook executes, `<run>/.executing/<notebook>.json` says when it started, at which commit, and its
    seconds so far, rewritten every `interval` s and removed when the execution ends. A runner killed outright (a
    session's end, SIGKILL) leaves it behind, and the next runner on the folder records that execution as killed
    (killed_executions), with its seconds up to the last rewrite: status.json's list of executions then holds every
    execution of a notebook resumed over several, not only the last."""

    def __init__(self, run_dir: Path, notebook: str, commit: str, interval: float = HEARTBEAT_SECONDS):
        self.path = run_dir / EXECUTING / f"{Path(notebook).stem}.json"
        self.record = {"notebook": notebook, "commit": commit, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        self.interval, self._t0 = interval, time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def seconds(self) -> float:
        return round(time.perf_counter() - self._t0, 1)

    def _write(self) -> None:
        with contextlib.suppress(OSError):  # a full disk: the execution goes on, its record is the runner's to write
            atomic_write_text(self.path, json.dumps({**self.record, "seconds": self.seconds()}))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._write()

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._write()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # the folder goes with its last file; another execution's keeps it
            self.path.parent.rmdir()


def killed_executions(run_dir: Path) -> list[dict]:
    """The executions a killed runner left Heartbeat files of in `run_dir` (under the run's lock, so none is running):
    {notebook, commit, started, seconds (up to its last rewrite), status "killed"} each, oldest first; the files are
    removed. An unreadable file is removed and not counted."""
    found = []
    for path in sorted((run_dir / EXECUTING).glob("*.json")):
        with contextlib.suppress(ValueError, OSError):
            record = json.loads(path.read_text())
            if isinstance(record, dict) and {"notebook", "seconds"} <= record.keys():
                found.append({**record, "status": "killed"})
        path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        (run_dir / EXECUTING).rmdir()
    return sorted(found, key=lambda r: str(r.get("started", "")))


def partial_path(out: Path) -> Path:
    """Where papermill writes the executed copy of `out` while it runs (it saves after cells, not atomically)."""
    return out.with_name(f".{out.stem}.partial{out.suffix}")


def publish_executed(partial: Path, out: Path) -> bool:
    """Move the executed copy papermill wrote at `partial` to `out` atomically, recording `out` as its papermill
    output path; True when there was a readable one. A copy cut short by a failed write (a full disk) is deleted, and
    so is an `out` left by an earlier execution, which no status entry describes any more: `out` is never half a
    notebook."""
    try:
        executed = nbformat.read(partial, as_version=4)
    except (OSError, ValueError):  # absent, or cut short: nbformat raises a ValueError subclass for bad JSON
        executed = None
    try:
        if executed is None:
            out.unlink(missing_ok=True)
            return False
        executed.metadata.get("papermill", {})["output_path"] = str(out)
        atomic_write_text(out, nbformat.writes(executed))
        return True
    finally:
        partial.unlink(missing_ok=True)


def execute(nb: Path, out: Path, params: dict, ahead: bool = False) -> dict:
    """Run one notebook with papermill into `out` (written whole or not at all: papermill writes to partial_path(out),
    then publish_executed moves it); its status entry: status, wall seconds, kernel peak RSS, the CPU threads its
    kernel used, the seeds a second process trained ahead of it (`ahead`, lib.run.ahead, when asked and the notebook
    has one), the recoveries its readers made (`recovered`, when any) and, for a failure, the exception's details
    (failure_details)."""
    import papermill as pm  # lazy: slow to load; only a notebook run uses it

    t0 = time.perf_counter()
    error = None
    partial = partial_path(out)
    partial.unlink(missing_ok=True)  # a copy a killed runner left is not this execution's
    with (
        KernelPeak() as peak,
        kernel_environment(params.get("threads", 0)) as threads,
        ahead_process(nb, out.parent, params, ahead) as ahead_seeds,
    ):
        try:
            pm.execute_notebook(
                str(nb),
                str(partial),
                parameters=params,
                kernel_name=KERNEL,
                cwd=str(nb.parent),
                progress_bar=False,
                log_output=False,
                extra_arguments=KERNEL_ARGUMENTS,
            )
        except Exception as e:  # papermill raises PapermillExecutionError with the failing cell
            error = failure_details(e)
            if isinstance(e, OSError):  # writing the executed copy: a full disk names no file, the partial is no name
                named = e.filename and e.filename != str(partial)
                error["error_message"] = os_error_line(e if named else OSError(e.errno, e.strerror), out)
        finally:
            try:
                publish_executed(partial, out)
            except OSError as e:  # no room for the executed copy either: the failure says so, naming the file
                error = error or {"error_name": type(e).__name__}
                error["error_message"] = os_error_line(e, out)
    recovered = recoveries(out)
    return {
        "status": "failed" if error else "ok",
        "seconds": round(time.perf_counter() - t0, 1),
        "peak_rss_mb": peak.peak_mb,
        "threads": threads,
        **({"ahead": ahead_seeds} if ahead_seeds else {}),
        **({"recovered": recovered} if recovered else {}),
        **(error or {}),
    }


EXECUTIONS_MEASURE = (
    "every execution of a notebook in this folder, in order: its commit, start, status (ok, failed, interrupted, or "
    f"killed: the runner died, its seconds are those up to the last {HEARTBEAT_SECONDS:.0f} s heartbeat), wall seconds "
    "and kernel peak RSS"
)


def record_killed(run_name: str, run_dir: Path, executions: list, log=print) -> list:
    """`executions` with those a killed runner left in `run_dir` (lib.run.folder.killed_executions) appended, each
    said in one line."""
    killed = killed_executions(run_dir)
    for k in killed:
        log(
            f"[{run_name}] {k['notebook']} was stopped without a record after about {k['seconds']} s "
            f"(started {k.get('started', '?')}, commit {str(k.get('commit', ''))[:7]}); recorded as killed"
        )
    return [*executions, *killed]


def execute_recorded(nb: Path, out: Path, params: dict, ahead: bool, status: dict, run_dir: Path, commit: str) -> dict:
    """execute() under a Heartbeat, the execution appended to status["executions"]; an interrupted one (Ctrl-C) is
    recorded in status.json before KeyboardInterrupt goes on."""
    with Heartbeat(run_dir, nb.name, commit) as beat:
        try:
            entry = execute(nb, out, params, ahead)
        except KeyboardInterrupt:
            entry = {"status": "failed", "error_name": "KeyboardInterrupt", "seconds": beat.seconds()}
    interrupted = entry.get("error_name") == "KeyboardInterrupt"
    status.setdefault("executions", []).append(
        {
            **beat.record,
            "status": "interrupted" if interrupted else entry["status"],
            "seconds": entry["seconds"],
            "peak_rss_mb": entry.get("peak_rss_mb"),
        }
    )
    if interrupted:
        atomic_write_text(run_dir / "status.json", json.dumps(status, indent=1))
        raise KeyboardInterrupt
    return entry


class RunFolderError(WikigatError, RuntimeError):
    """A run folder that this run may not write: another process holds it, or it was made with other parameters."""


class RunFolderBusy(RunFolderError):
    """Another runner holds the run folder's lock."""


def read_run_record(path: Path, move: bool = False) -> tuple[dict, str | None]:
    """(the run record at `path` (status.json, params.json), what was done to it): {} when absent. A damaged record
    counts as absent, so its notebooks run again and resume from their checkpoints; with move=True (under the run's
    lock) it goes through lib.common.runinfo.read_record, which moves it aside to `<name>.corrupt`, and the second
    item is that warning's line, for the runner to print."""
    if not move:
        try:
            record = read_json(path)
        except ValueError:
            return {}, None
        return (record if isinstance(record, dict) else {}), None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RecoveryWarning)
        record = read_record(path, "run record", "its notebooks run again and resume from their checkpoints")
    return record or {}, next((str(w.message) for w in caught if w.category is RecoveryWarning), None)


def comparable_params(params: dict, defaults: dict | None = None) -> dict:
    """What a run computes from: its parameters with the notebooks' `defaults` beneath (so a profile that stops
    restating a default still names the same run; older names as lib.common.published.run_params reads them), without
    run_dir, the files list and execution-only keys."""
    out = {**(defaults or {}), **published.run_params(params)}
    return {k: v for k, v in out.items() if k not in ("run_dir", "_files", *EXECUTION_KEYS)}


@contextlib.contextmanager
def run_folder_lock(outputs: Path, run_name: str):
    """Hold the write lock of run folder `run_name` (an flock on `<outputs>/.locks/<run_name>.lock`, which names its
    holder's pid). The lock lives beside the folder, not in it, so a refused run leaves the folder byte-identical;
    the kernel releases an flock when its process dies, so a lock left by a killed run is simply taken over."""
    path = outputs / ".locks" / f"{run_name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            raise RunFolderBusy(
                f"{outputs / run_name} is being written by {holder}; wait for it to finish (the same "
                f"command then skips or resumes), or stop that process and re-run"
            ) from None
        f.seek(0)
        f.truncate()
        try:
            f.write(f"pid {os.getpid()} (python -m lib.run.runner, since {time.strftime('%Y-%m-%d %H:%M:%S')})\n")
            f.flush()
        except OSError as e:  # a full disk: a write names no file by itself
            raise OSError(e.errno, e.strerror, str(path)) from None
        try:
            yield
        finally:
            f.seek(0)
            f.truncate()


def holds_no_results(run_dir: Path) -> bool:
    """True when the runner's status.json in `run_dir` records no notebook that finished ok (every one failed or was
    stopped): nothing in the folder was computed to the end with its parameters. A folder without a readable
    status.json may hold results, so it does not count."""
    status = read_run_record(run_dir / "status.json")[0]
    entries = status.get("notebooks")
    return (
        "params_hash" in status
        and isinstance(entries, dict)
        and not any(isinstance(e, dict) and e.get("status") == "ok" for e in entries.values())
    )


def refuse_other_params(run_dir: Path, merged: dict, defaults: dict | None = None) -> None:
    """A run folder belongs to one parameter set: a folder whose params.json holds other values (the notebooks'
    `defaults` filling what a file leaves out) is refused, naming them, before anything is written (--force starts it
    over with the new values). A folder in which no notebook finished (holds_no_results: say the first one failed on
    a bad input value) is not: it starts over with the new values, as with --force."""
    made = read_run_record(run_dir / "params.json")[0].get("params")
    if made is None or holds_no_results(run_dir):
        return
    try:
        refuse_other_settings(
            str(run_dir),
            comparable_params(made, defaults),
            comparable_params(merged, defaults),
            "use another --run-name, or add --force to start this folder over with the new values",
        )
    except ValueError as e:
        raise RunFolderError(str(e)) from None
