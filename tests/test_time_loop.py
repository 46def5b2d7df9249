"""scripts/time_loop.py: stopping it ends the command it was timing, and everything that command started."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from lib.common.paths import ROOT


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie that nobody has reaped yet counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def test_stopping_time_loop_ends_the_command_it_times_and_its_children(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    timed_command = ["sh", "-c", f"sleep 120 & echo $! > {pidfile}; wait"]
    code = (
        "import importlib.util, os, sys\n"
        "from pathlib import Path\n"
        f"spec = importlib.util.spec_from_file_location('time_loop', {str(ROOT / 'scripts' / 'time_loop.py')!r})\n"
        "m = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(m)\n"
        "m.exit_on_sigterm()\n"
        f"m.timed({timed_command!r}, Path({str(tmp_path)!r}), dict(os.environ), Path({str(tmp_path / 'log')!r}))\n"
    )
    loop = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    deadline = time.monotonic() + 60
    while not (pidfile.is_file() and pidfile.read_text().strip()):
        assert loop.poll() is None and time.monotonic() < deadline, "the timed command did not start"
        time.sleep(0.1)
    sleeper = int(pidfile.read_text())
    assert alive(sleeper)
    loop.send_signal(signal.SIGTERM)
    assert loop.wait(timeout=30) == 128 + signal.SIGTERM
    deadline = time.monotonic() + 10
    while alive(sleeper) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(sleeper):
        os.kill(sleeper, signal.SIGKILL)
        raise AssertionError("the timed command's child outlived time_loop")
