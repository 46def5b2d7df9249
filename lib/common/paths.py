"""Every path derives from the project root, so notebooks run the same from JupyterLab, papermill and nbval."""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
import warnings
from importlib import metadata
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
OUTPUTS = ROOT / "outputs"
PARAMS = ROOT / "params"
NOTEBOOKS = ROOT / "notebooks"
# Caches are keyed by their content's inputs (model identity, link source, task), so every outputs folder can share one;
# WIKIGAT_CACHE puts them elsewhere (a faster disk, a read-only checkout).
CACHE = Path(os.environ.get("WIKIGAT_CACHE") or OUTPUTS / "cache").expanduser()
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def resolve(path: str | os.PathLike) -> Path:
    """A path relative to the project root (absolute paths are kept)."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else ROOT / p


def shown(path: str | os.PathLike) -> str:
    """`path` for printing: relative to the project root when it is inside it (stable in executed notebooks), else
    absolute (a run folder elsewhere, e.g. `--outputs /scratch/runs`)."""
    p = resolve(path)
    return p.relative_to(ROOT).as_posix() if p.is_relative_to(ROOT) else str(p)


class RecoveryWarning(UserWarning):
    """A damaged file was moved aside and what it held is rebuilt or resumed; the runner prints these."""


def move_aside(path: Path, what: str, reason: str, consequence: str) -> Path:
    """Move an unreadable file (cut short by a kill or a full disk, overwritten) to `<name>.corrupt`, replacing an
    older one, and warn (RecoveryWarning) naming both and what happens next; returns the new path. Every reader of a
    file the project wrote does this instead of failing on the same file at every run."""
    path = Path(path)
    aside = path.with_name(path.name + ".corrupt")
    os.replace(path, aside)
    warnings.warn(f"{what} {path} could not be read ({reason}); moved aside to {aside.name}, {consequence}",
                  RecoveryWarning, stacklevel=3)
    return aside


class WriteError(OSError):
    """A failed write whose message is one sentence naming the file and the fix (os_error_line)."""

    def __str__(self) -> str:
        return self.strerror


def os_error_line(e: OSError, path: str | os.PathLike | None = None) -> str:
    """One sentence for a failed write: what happened, the path (`path` when the error names none) and the fix."""
    where = e.filename or path or "a file"
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return (f"no space left on the device of {where}; free space there (or pass --outputs a folder on another "
                f"disk) and run the same command again: it resumes")
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        why = "is on a read-only file system" if e.errno == errno.EROFS else "cannot be written by this user"
        return f"{where} {why}; pass --outputs a folder you can write, or make it writable"
    return f"{where}: {e.strerror or e}"


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to `path` via a temp file in the same folder + rename, so a kill never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600 files; results should be as readable as any other file
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT) and not e.filename:
            raise WriteError(e.errno, os_error_line(e, path), str(path)) from None  # a write names no file by itself
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


@contextlib.contextmanager
def locked(path: str | os.PathLike, waiting: str = ""):
    """Hold an exclusive lock on `path` + '.lock' (created if absent) for the block: processes writing the same file
    take turns. `waiting`: printed when another process holds the lock, before waiting for it (a long wait should
    not look like a hang)."""
    lock = Path(str(path) + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                print(waiting, flush=True)
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def rows_with(df, key: dict):
    """The rows of the DataFrame `df` whose columns equal every value of `key` (compared as text, as a CSV read back
    gives them); none when `df` lacks a column of `key`."""
    if df.empty or not set(key) <= set(df.columns):
        return df.iloc[:0]
    return df[(df[list(key)].astype(str) == [str(v) for v in key.values()]).all(axis=1)]


def csv_rows(path: str | os.PathLike, columns: list[str] | None = None) -> tuple[pd.DataFrame | None, str]:
    """(the rows of the CSV `path`, "") or (None, why they cannot be read: pandas cannot parse it, or it lacks one of
    `columns`); `path` must exist."""
    try:
        rows = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return None, "it is empty"
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except pd.errors.ParserError as e:
        return None, "not a CSV table: " + str(e).strip().splitlines()[0].split("C error: ")[-1]
    missing = [c for c in columns or () if c not in rows.columns]
    return (None, f"it has no {', '.join(missing)} column") if missing else (rows, "")


def read_rows(path: str | os.PathLike, what: str, consequence: str, columns: list[str] | None = None) -> pd.DataFrame:
    """The rows of a CSV the project wrote and reads back to resume; an empty frame (with `columns`) when there is no
    file, or when pandas cannot parse it or it lacks one of `columns` (cut short, overwritten, edited): such a file is
    moved aside to `<name>.corrupt` with a RecoveryWarning naming it, `what` it is and the `consequence`, so its rows
    are computed again instead of failing on it at every run. Where several processes share the file, call it under
    locked(path)."""
    path = Path(path)
    if not path.is_file():
        return pd.DataFrame(columns=columns)
    rows, reason = csv_rows(path, columns)
    if rows is None:
        move_aside(path, what, reason, consequence)
        return pd.DataFrame(columns=columns)
    return rows


def append_csv_rows(path: str | os.PathLike, rows: list[dict], replace: dict | None = None) -> Path:
    """Add `rows` to the CSV `path` atomically under `locked(path)`, reading it again first, so several processes
    appending to one results file keep each other's rows. replace: drop the rows `rows_with` this key first (an
    incomplete set a killed process left)."""
    path = Path(path)
    with locked(path):
        old = read_rows(path, "rows file", "a new one is started with the rows added now")
        if replace:
            old = old.drop(rows_with(old, replace).index)
        return atomic_write_text(path, pd.concat([old, pd.DataFrame(rows)], ignore_index=True).to_csv(index=False))


def package_file(dist: str, relpath: str) -> Path | None:
    """A data file shipped inside an installed distribution, found without importing its code; None when absent."""

    try:
        p = Path(metadata.distribution(dist).locate_file(relpath))
    except metadata.PackageNotFoundError:
        return None
    return p if p.is_file() else None
