"""A second process on a running distillation grid: trains the runs notebook 05 has not claimed yet, in the same
checkpoint folder, so a long grid uses two cores (each process with one thread) instead of one.

    python -m lib.distill.worker outputs/distill_long --threads 1

Start it after notebook 05 has begun its grid on that run folder (the worker reads the parameters the notebook
wrote, distill/params_05.json). Each run is trained by whichever process claims it first (lib.distill.stage.run_grid);
the worker skips runs the notebook holds and stops when nothing is left to claim, while the notebook waits for the
worker's runs and then writes the tables and figures as usual. Kill either process at any time: a killed run's claim
is released by the kernel and its step checkpoint is resumed by whichever process claims it next.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # set before transformers loads: a missing model fails, not downloads

from lib.common.device import get_device, set_threads
from lib.common.paths import resolve
from lib.distill.checkpoint import checkpoint_rows
from lib.distill.config import read_params_05
from lib.distill.data import build_datasets
from lib.distill.models import assistant_path, ensure_teacher, load_encoder
from lib.distill.stage import run_grid


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lib.distill.worker", description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", help="run folder whose notebook 05 grid to help, e.g. outputs/distill_long")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads of this process (default 1)")
    args = ap.parse_args(argv)

    out_dir = resolve(args.run_dir) / "distill"
    params = out_dir / "params_05.json"
    if not params.is_file():
        print(
            f"error: {params} does not exist; start notebook 05 on {args.run_dir} first (the worker helps a grid "
            f"that is running and takes its parameters from there)",
            file=sys.stderr,
        )
        return 2

    cfg = read_params_05(params)
    dev = get_device(cfg.device)
    set_threads(args.threads)
    teacher = load_encoder(ensure_teacher(), "teacher", dev)
    assistant = load_encoder(assistant_path(), "assistant", dev)
    data = build_datasets(
        cfg.distill_seeds[0], cfg.transfer_sentences, cfg.task_train, cfg.task_eval, cfg.fidelity_sentences
    )
    before = len(checkpoint_rows(out_dir / "checkpoint"))
    t0 = time.perf_counter()
    run_grid(
        cfg,
        teacher,
        assistant,
        data,
        out_dir / "students" if cfg.save_students else None,
        checkpoint=out_dir / "checkpoint",
        wait=False,
    )
    print(
        f"worker done after {(time.perf_counter() - t0) / 60:.1f} min: the folder has "
        f"{len(checkpoint_rows(out_dir / 'checkpoint')) - before} more finished runs than when it started "
        f"(its own and the notebook's); nothing is left unclaimed"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
