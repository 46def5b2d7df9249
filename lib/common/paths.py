"""Every path derives from the project root, so notebooks run the same from JupyterLab, papermill and nbval."""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import io
import os
import tempfile
import warnings
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from lib.common.errors import WikigatError

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


def aside_path(path: str | os.PathLike) -> Path:
    """Where move_aside puts `path`: `<name>.corrupt`, or the first free `<name>.corrupt.<n>` when an older one is
    there, so a second damage does not erase the evidence of the first."""
    path = Path(path)
    aside, n = path.with_name(path.name + ".corrupt"), 0
    while aside.exists() or aside.is_symlink():
        n += 1
        aside = path.with_name(f"{path.name}.corrupt.{n}")
    return aside


def move_aside(path: Path, what: str, reason: str, consequence: str, copy: bool = False) -> Path:
    """Move an unreadable file (cut short by a kill or a full disk, overwritten) to `<name>.corrupt` (`.corrupt.1`,
    `.corrupt.2`, ... when older ones are there; aside_path) and warn (RecoveryWarning) naming both and what happens
    next; returns the new path. copy: copy it there instead, for a file the caller then mends in place (one other
    processes hold open). Every reader of a file the project wrote does this instead of failing on the same file at
    every run."""
    path = Path(path)
    aside = aside_path(path)
    if copy:
        atomic_write_bytes(aside, path.read_bytes())
    else:
        os.replace(path, aside)
    warnings.warn(
        f"{what} {path} could not be read ({reason}); {'copied' if copy else 'moved'} aside to {aside.name}, "
        f"{consequence}",
        RecoveryWarning,
        stacklevel=3,
    )
    return aside


class WriteError(WikigatError, OSError):
    """A failed write whose message is one sentence naming the file and the fix (os_error_line)."""

    def __str__(self) -> str:
        return self.strerror


def os_error_line(e: OSError, path: str | os.PathLike | None = None) -> str:
    """One sentence for a failed write: what happened, the path (`path` when the error names none) and the fix: for
    a path in the cache folder, WIKIGAT_CACHE; for any other, --outputs."""
    where = e.filename or path or "a file"
    in_cache = (
        isinstance(where, (str, bytes, os.PathLike))
        and where != "a file"
        and Path(os.fsdecode(where)).absolute().is_relative_to(CACHE.absolute())
    )
    knob = "set WIKIGAT_CACHE to" if in_cache else "pass --outputs"  # the cache moves with WIKIGAT_CACHE only
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"no space left on the device of {where}; free space there (or {knob} a folder on another disk) and "
            f"run the same command again: it resumes"
        )
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        why = "is on a read-only file system" if e.errno == errno.EROFS else "cannot be written by this user"
        return f"{where} {why}; {knob} a folder you can write, or make it writable"
    return f"{where}: {e.strerror or e}"


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to `path` via a temp file in the same folder + rename, so a kill never leaves half a file. A failed
    write is a WriteError naming `path` (never the temp file, which the user has never seen) and the fix."""
    with atomic_writer(path) as f:
        f.write(data)
    return Path(path)


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike):
    """A binary file to write `path` in pieces (a file too large to hold in memory), with atomic_write_bytes'
    guarantees: written to a temp file in the same folder, renamed to `path` when the block ends without an error,
    removed otherwise."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600 files; results should be as readable as any other
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError) and not isinstance(e, WriteError) and _names_temp_file(e, path):
            raise WriteError(e.errno, os_error_line(OSError(e.errno, e.strerror or str(e)), path), str(path)) from None
        raise


def _names_temp_file(e: OSError, path: Path) -> bool:
    """Whether `e` names no file (a write, an fsync) or one of atomic_write_bytes' temp files for `path` (mkstemp
    names the candidate it could not create, rename the temp file)."""
    name = Path(e.filename).name if e.filename else ""
    return not name or (name.startswith(f".{path.name}.") and name.endswith(".tmp"))


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


class CsvRead(NamedTuple):
    """What whole_rows found in a CSV file."""

    rows: pd.DataFrame | None  # its whole rows; None when it cannot be read as a table at all
    why: str  # why not ("" when it can)
    cut: list[str]  # the rows that are not whole, each as "line N with column=value, ..." (its first values)
    whole: bytes  # the header and the whole rows as the file holds them (what read_rows writes back)


def whole_rows(path: str | os.PathLike, columns: list[str] | None = None) -> CsvRead:
    """The whole rows of the CSV `path` (which must exist). A row is whole when it has as many fields as the header
    and ends with a line break: a kill or a full disk cuts the last line of a file short, and pandas would pad such a
    row with empty values and take it for a finished one. Parsed with the csv module (quoted line breaks allowed)
    because pandas keeps no trace of which rows it padded. `why` says why there is no table: empty, not UTF-8, a
    header line without its end, a field pandas cannot parse, or a missing one of `columns`."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return CsvRead(None, "not UTF-8 text", [], b"")
    if not text.strip():
        return CsvRead(None, "it is empty", [], b"")
    lines = io.StringIO(text, newline="").readlines()
    reader, records, start = csv.reader(lines), [], 0
    limit = csv.field_size_limit(max(csv.field_size_limit(), len(text)))  # as long a field as pandas reads
    try:
        for fields in reader:
            if fields:  # pandas skips blank lines too
                records.append((start + 1, fields, "".join(lines[start : reader.line_num])))
            start = reader.line_num
    except csv.Error as e:
        return CsvRead(None, f"not a CSV table: {e} (line {reader.line_num})", [], b"")
    finally:
        csv.field_size_limit(limit)
    ended = text.endswith(("\n", "\r"))
    if len(records) == 1 and not ended:
        return CsvRead(None, "its header line is cut short", [], b"")
    (_, header, head), body = records[0], records[1:]
    torn = {
        n for i, (n, fields, _) in enumerate(body) if len(fields) != len(header) or (i == len(body) - 1 and not ended)
    }
    cut = [
        f"line {n}"
        + "".join(
            f"{', ' if i else ' with '}{k}={' '.join(v.split())[:40]}"
            for i, (k, v) in enumerate((k, v) for k, v in zip(header[:3], fields) if v)
        )
        for n, fields, _ in body
        if n in torn
    ]
    whole = (head + "".join(t for n, _, t in body if n not in torn)).encode()
    try:
        rows = pd.read_csv(io.BytesIO(whole))
    except pd.errors.EmptyDataError:
        return CsvRead(None, "it is empty", cut, b"")
    except pd.errors.ParserError as e:
        return CsvRead(None, "not a CSV table: " + str(e).strip().splitlines()[0].split("C error: ")[-1], cut, b"")
    missing = [c for c in columns or () if c not in rows.columns]
    if missing:
        return CsvRead(None, f"it has no {', '.join(missing)} column", cut, b"")
    return CsvRead(rows, "", cut, whole)


def csv_rows(path: str | os.PathLike, columns: list[str] | None = None) -> tuple[pd.DataFrame | None, str]:
    """(the rows of the CSV `path`, "") or (None, why they cannot be read: whole_rows' reasons, or a row that is not
    whole); `path` must exist. For a table that must be read whole (a published one); read_rows keeps the whole rows
    of a file it resumes from."""
    found = whole_rows(path, columns)
    return (None, found.why or cut_rows_reason(found.cut)) if found.rows is None or found.cut else (found.rows, "")


def cut_rows_reason(cut: list[str]) -> str:
    """The rows whole_rows found not whole, for a message: how many and the first three with their line and values."""
    more = f"; and {len(cut) - 3} more" if len(cut) > 3 else ""
    return (
        f"{len(cut)} row{'s are' if len(cut) > 1 else ' is'} not whole, cut short or overwritten: "
        f"{'; '.join(cut[:3])}{more}"
    )


def read_rows(
    path: str | os.PathLike,
    what: str,
    consequence: str,
    columns: list[str] | None = None,
    lost: str | None = None,
    write_back: bool = True,
) -> pd.DataFrame:
    """The whole rows of a CSV the project wrote and reads back to resume (whole_rows); an empty frame (with
    `columns`) when there is no file. A file that cannot be read as a table, or lacks one of `columns`, is moved
    aside to `<name>.corrupt` with a RecoveryWarning naming it, `what` it is and the `consequence`; one with rows
    that are not whole (a kill or a full disk cut its last line, an edit) is moved aside too, its whole rows written
    back, and the warning names the dropped rows and what comes of them (`lost`, default `consequence`): the caller
    computes them again instead of taking a half row for a finished one. write_back=False, for a table the caller
    cannot complete (another notebook's): its whole rows stay in the moved file and the frame is empty, so that no
    later run takes the rest for the whole table. Where several processes share the file, call it under
    locked(path)."""
    path = Path(path)
    if not path.is_file():
        return pd.DataFrame(columns=columns)
    found = whole_rows(path, columns)
    if found.rows is None:
        move_aside(path, what, found.why, consequence)
        return pd.DataFrame(columns=columns)
    if not found.cut:
        return found.rows
    n, dropped = len(found.rows), "the cut one" if len(found.cut) == 1 else f"the {len(found.cut)} cut ones"
    whole = f"its {n} whole row{'s' if n != 1 else ''}"
    if not write_back:
        move_aside(
            path,
            what,
            cut_rows_reason(found.cut),
            f"{whole} with it (without {dropped} they would pass for the whole table): {lost or consequence}",
        )
        return pd.DataFrame(columns=columns)
    move_aside(
        path,
        what,
        cut_rows_reason(found.cut),
        f"{whole} {'are' if n != 1 else 'is'} written back and {dropped} dropped: {lost or consequence}",
    )
    atomic_write_bytes(path, found.whole)
    return found.rows


def append_csv_rows(
    path: str | os.PathLike,
    rows: list[dict],
    replace: dict | None = None,
    what: str = "rows file",
    lost: str = "the rows added now follow the whole ones",
) -> Path:
    """Add `rows` to the CSV `path` atomically under `locked(path)`, reading it again first (read_rows: a damaged
    file, `what` it is, is moved aside, and rows that are not whole are dropped, with `lost` as what comes of them), so
    several processes appending to one results file keep each other's rows. replace: drop the rows `rows_with` this
    key first (an incomplete set a killed process left)."""
    path = Path(path)
    with locked(path):
        old = read_rows(path, what, "a new one is started with the rows added now", lost=lost)
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
