"""Files of tensors the project writes and reads back with torch (checkpoints, cached tensor sets): an atomic save,
and a weights-only load that moves a damaged file aside."""

from __future__ import annotations

import io
from pathlib import Path

import torch

from lib.common.paths import atomic_write_bytes, move_aside
from lib.common.runinfo import UNREADABLE, unreadable_reason


def save_state(path: str | Path, state: dict) -> Path:
    """torch.save `state` (which carries its "config") to `path` atomically: a kill leaves the previous file whole."""
    buf = io.BytesIO()
    torch.save(state, buf)
    return atomic_write_bytes(path, buf.getvalue())


def read_checkpoint(
    path: str | Path,
    device="cpu",
    what: str = "checkpoint",
    consequence: str = "resuming from the one before or starting over",
) -> dict | None:
    """torch.load(path, weights_only=True) of a file the project wrote (a checkpoint, a cached tensor set); None when
    there is no file, or when it cannot be read (cut short by a kill or a full disk, overwritten): such a file is moved
    aside to `<name>.corrupt` with a RecoveryWarning naming it, `what` it is and the `consequence`, so the caller
    rebuilds or resumes from an earlier state instead of failing on it again. Nothing is ever unpickled as code."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except UNREADABLE as e:
        if isinstance(e, (PermissionError, FileNotFoundError, IsADirectoryError)):
            raise
        move_aside(path, what, unreadable_reason(e), consequence)
        return None
