"""Time the README's two commands as a new user meets them: a fresh clone, `make setup`, `make demo`, `make test`.

    python scripts/time_loop.py                       # idle machine: setup, demo, test
    python scripts/time_loop.py --shared --only demo  # demo beside a second CPU-bound process, OMP_NUM_THREADS=1

Writes outputs/reference/loop/timings.json (one entry per condition: wall seconds of each command, the notebooks'
seconds from the demo's status.json, the test counts from pytest's summary line, the commit, date and machine), from
which `python -m lib.run.report` writes the README's timing sentence. Nothing here is typed by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from lib.common.device import cpuinfo
from lib.run.report import collected_tests, test_count_current

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "outputs" / "reference" / "loop" / "timings.json"


def timed(cmd: list[str], cwd: Path, env: dict, log: Path) -> tuple[float, int, str]:
    """(wall seconds, exit status, output) of `cmd`, its output also written to `log`.

    `cmd` runs in a process group of its own, which is ended when this process is stopped (Ctrl-C, or SIGTERM: see
    main) before `cmd` ends: otherwise `make test`'s pytest workers and kernels would run on, unseen, and slow down
    whatever is timed next on the machine."""
    t0 = time.perf_counter()
    with log.open("w") as f:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait()
    return round(time.perf_counter() - t0, 1), rc, log.read_text(errors="replace")


def exit_on_sigterm() -> None:
    """SIGTERM (kill, pkill) raises SystemExit like Ctrl-C raises KeyboardInterrupt, so that `timed` ends its group."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def pytest_counts(text: str) -> dict:
    """{"passed": n, "skipped": m, ...} from pytest's last summary line."""
    line = [l for l in text.splitlines() if re.search(r"\d+ passed", l)][-1]
    return {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", line)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", choices=["demo", "test"], default=["demo", "test"])
    ap.add_argument("--shared", action="store_true", help="a second CPU-bound process runs beside; OMP_NUM_THREADS=1")
    ap.add_argument("--work", help="folder for the clone (default: a new temporary folder)")
    a = ap.parse_args()
    exit_on_sigterm()
    work = Path(a.work or tempfile.mkdtemp(prefix="wikigat-loop-"))
    clone = work / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout.strip()
    env = {**os.environ}
    env.pop("OMP_NUM_THREADS", None)
    # An empty extension cache, as on a new machine: the demo's first GatModel step builds the fused step's C++ kernels
    # (lib.linkpred.kernels), and its time includes that.
    env["TORCH_EXTENSIONS_DIR"] = str(work / "torch_extensions")
    hog = None
    if a.shared:
        env["OMP_NUM_THREADS"] = "1"
    rec = {
        "commit": commit,
        "date": date.today().isoformat(),
        "cores": len(os.sched_getaffinity(0)),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, Python {platform.python_version()}",
        # Named because the same commands took 10.4 min on one 2-core x86_64 machine and half that on another.
        "cpu": f"{cpuinfo('model name') or 'an unnamed CPU'}, model {cpuinfo('model') or '?'}",
        "condition": "a second CPU-bound process beside it, OMP_NUM_THREADS=1" if a.shared else "idle",
        "installer": env.get("INSTALLER", "uv"),  # the Makefile's default
    }
    rec["setup_seconds"], rc, _ = timed(["make", "setup"], clone, env, work / "setup.log")
    if rc:
        print(f"make setup failed; see {work / 'setup.log'}", file=sys.stderr)
        return 1
    # The suite checks that the README names how many tests it has, within 10%. Where the committed count is off by
    # more, the clone gets the count it will run, in its timing record and README, before running it (its runs then
    # record a dirty tree); otherwise the clone stays as committed. The repository gets the measured record below.
    rec["tests_collected"] = collected_tests(clone / ".venv" / "bin" / "python", clone, env)
    key = "shared" if a.shared else "idle"
    clone_out = clone / OUT.relative_to(ROOT)
    committed = json.loads(clone_out.read_text()) if clone_out.is_file() else {}
    if not test_count_current(committed.get("idle", {}).get("tests_collected"), rec["tests_collected"]):
        seeded = json.loads(OUT.read_text()) if OUT.is_file() else {}
        seeded[key] = {**seeded.get(key, {}), **rec}
        if "idle" not in seeded or "cores" not in seeded["idle"]:
            seeded["idle"] = {**rec, **seeded.get("idle", {})}
        clone_out.parent.mkdir(parents=True, exist_ok=True)
        clone_out.write_text(json.dumps(seeded, indent=1) + "\n")
        subprocess.run(
            [str(clone / ".venv" / "bin" / "python"), "-m", "lib.run.report"],
            cwd=clone,
            check=True,
            env=env,
            capture_output=True,
        )
    if a.shared:
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        if "demo" in a.only:
            rec["demo_seconds"], rc, _ = timed(["make", "demo"], clone, env, work / "demo.log")
            status = json.loads((clone / "outputs" / "demo-cpu" / "status.json").read_text())
            rec["demo_ok"] = rc == 0 and status.get("complete", False)
            rec["notebooks"] = {
                k: {"seconds": v["seconds"], "peak_rss_mb": v["peak_rss_mb"]} for k, v in status["notebooks"].items()
            }
        if "test" in a.only:
            rec["test_seconds"], rc, text = timed(["make", "test"], clone, env, work / "test.log")
            rec["test_ok"] = rc == 0
            rec["tests"] = pytest_counts(text)
    finally:
        if hog:
            hog.kill()
    out = json.loads(OUT.read_text()) if OUT.is_file() else {}
    out[key] = {**out.get(key, {}), **rec}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(rec, indent=1))
    print(f"wrote {OUT.relative_to(ROOT)}; logs in {work}")
    return 0 if rec.get("demo_ok", True) and rec.get("test_ok", True) else 1


if __name__ == "__main__":
    sys.exit(main())
