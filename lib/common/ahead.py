"""What the two "train ahead" workers share (notebook 03's `lib.linkpred.stage` and notebook 03b's
`lib.linkpred.beyond_stage`): a second process trains a long notebook's later seeds, from the last down, while the
notebook goes up from the first; where they meet, the worker stops. The notebook then reloads the worker's finished
checkpoints or records, so the numbers are the ones it would have made alone.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

BUSY_SECONDS = 600.0
"""A training unit whose checkpoints changed more recently than this is taken to be another process's (or just
finished by it): the longest gap between two checkpoint writes of one training is far shorter."""


def busy(folder: Path, seconds: float = BUSY_SECONDS) -> bool:
    """Whether a training unit's checkpoint folder holds a `*.pt` written in the last `seconds`: the notebook (or
    another worker) is training it, so a worker going the other way has met it and stops there."""
    files = list(folder.glob("*.pt")) if folder.is_dir() else []
    return bool(files) and time.time() - max(f.stat().st_mtime for f in files) < seconds


def ahead_main(
    argv: list[str] | None,
    *,
    prog: str,
    description: str,
    example: str,
    train_ahead: Callable[[str, list[int]], list[str]],
    trained: str,
) -> int:
    """The command line of a worker: `python -m <prog> RUN_DIR --seeds S [S ...]` calls train_ahead(RUN_DIR, seeds)
    and prints how many units it trained ("<n> <trained> in RUN_DIR")."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    ap.add_argument("run_dir", help=f"the run folder the notebook runs on, e.g. {example}")
    ap.add_argument("--seeds", type=int, nargs="+", required=True, help="seeds to train, in this order")
    args = ap.parse_args(argv)
    done = train_ahead(args.run_dir, args.seeds)
    print(f"{len(done)} {trained} in {args.run_dir}")
    return 0
