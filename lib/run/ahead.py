"""A second process beside a notebook: the runner's --ahead trains the later seeds of notebooks 03 and 03b while the
notebook goes up from the first, which then reloads what was trained ahead (the same rows, bit for bit:
tests/test_ahead.py). On two cores a long run takes about half the time."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class AheadWorker:
    """The command that trains a notebook's seeds ahead (`python -m <module> RUN_DIR --seeds ...`) and the file of the
    run folder the notebook writes once the worker can start (a fresh one: written by this execution)."""

    module: str
    ready_file: str


AHEAD = {
    "03_train_gat": AheadWorker("lib.linkpred.stage", "params_03_train_gat.json"),
    "03b_beyond_seed": AheadWorker("lib.linkpred.beyond_stage", "beyond_sweep.csv"),
}
"""The notebooks (by file stem) that a second process can work ahead of."""
LOG = "ahead_{stem}.log"
"""The worker's output, in the run folder."""


def ahead_seeds(params: dict) -> list[int]:
    """The seeds a worker trains, from the last down to the second: the notebook takes the first and goes up."""
    first = int(params.get("first_seed", 0))
    return list(range(first + int(params.get("n_seeds", 1)) - 1, first, -1))


@contextlib.contextmanager
def ahead_process(nb: Path, run_dir: Path, params: dict, enabled: bool = True, poll: float = 5.0):
    """While the block executes notebook `nb` into `run_dir` with `params`: where AHEAD names it and it has more than
    one seed, start its worker once the notebook has written the worker's ready_file, with the block's environment
    (threads, PYTHONPATH), its output in run_dir/LOG; on leaving, stop a worker still running (what it finished stays,
    an unfinished model resumes in a later run). Yields the worker's seeds ([] when there is none)."""
    worker = AHEAD.get(nb.stem) if enabled else None
    seeds = ahead_seeds(params) if worker else []
    if not seeds:
        yield []
        return
    started, stop, procs = time.time(), threading.Event(), []

    def start_when_ready():
        ready = run_dir / worker.ready_file
        while not stop.wait(poll):
            if ready.is_file() and ready.stat().st_mtime >= started:
                with open(run_dir / LOG.format(stem=nb.stem), "ab") as log:
                    cmd = [sys.executable, "-m", worker.module, str(run_dir.resolve()), "--seeds", *map(str, seeds)]
                    procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
                return

    waiter = threading.Thread(target=start_when_ready, daemon=True)
    waiter.start()
    try:
        yield seeds
    finally:
        stop.set()
        waiter.join()
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait()
