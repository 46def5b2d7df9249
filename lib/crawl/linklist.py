"""Reading a TSV link list (lib.crawl.sources.read_snapshot): into arrays (an IndexedSnapshot of a LinkTable),
a block of lines at a time, and the cache of the parsed list that makes a second read of a 1 GB list take seconds."""

from __future__ import annotations

import hashlib
import json
import zipfile
from array import array
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from lib.common.paths import atomic_writer, move_aside
from lib.common.titles import TitleError
from lib.crawl.pages import IndexedSnapshot, LinkTable, SnapshotError, clean_title

SHOWN_SKIPPED = 3
"""Skipped lines of a link list shown (with their line numbers) in its SkippedLinesWarning."""


def link_of(line: str, title) -> tuple[str, str, str]:
    """(source, target, kind) of one link-list line, with `title` the title reader; SnapshotError or TitleError
    when the line is not a link."""
    cols = line.split("\t")
    if len(cols) not in (2, 3):
        raise SnapshotError(f"expected 'source<TAB>target[<TAB>kind]', got {len(cols)} column(s): {line[:80]!r}")
    kind = cols[2].strip() if len(cols) == 3 else "link"
    if kind not in ("link", "redirect", "disambiguation"):
        raise SnapshotError(f"unknown kind {kind!r}; use link, redirect or disambiguation")
    ends = []
    for end, raw in (("source", cols[0]), ("target", cols[1])):
        try:
            ends.append(title(raw))
        except TitleError as e:
            raise TitleError(f"{end}: {e}") from None
    return ends[0], ends[1], kind


READ_BLOCK_BYTES = 1 << 22
"""A link list is read and decoded in blocks of lines of about this size."""


def utf8(raw: bytes, first: bool) -> bool:
    """Whether one line of a link list is valid UTF-8 (the first may start with a byte-order mark)."""
    try:
        raw.decode("utf-8-sig" if first else "utf-8")
        return True
    except UnicodeDecodeError:
        return False


def odd_lines(block: bytes) -> np.ndarray:
    """Indices of the lines of `block` (lines of a link list, the last one with or without its newline) that are not
    plainly `source<TAB>target`: no tab or more than one, a CR, or a first byte that may start a comment, a blank or
    indented line (`#`, ASCII blanks and controls, any non-ASCII byte). Found on the bytes with numpy, since a
    regular expression or a Python loop over 40 million lines costs more than reading them."""
    b = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(b == 10)
    if not len(ends) or ends[-1] != len(b) - 1:
        ends = np.append(ends, len(b))
    starts = np.concatenate([[0], ends[:-1] + 1])
    first = b[np.minimum(starts, len(b) - 1)]
    odd = (first == ord("#")) | (first <= 32) | (first >= 128) | (starts == ends)
    tabs = np.bincount(np.searchsorted(ends, np.flatnonzero(b == 9)), minlength=len(ends))
    odd |= tabs != 1
    odd[np.searchsorted(ends, np.flatnonzero(b == 13))] = True
    return np.flatnonzero(odd)


class LinkListReader:
    """Reads a TSV link list into ids: titles become ids as they are met and links two int arrays, so memory grows by
    8 bytes a link plus one entry per distinct title (read_link_list)."""

    def __init__(self):
        self.titles: list[str] = []
        self.ids: dict[str, int] = {}
        self.seen: dict[str, int] = {}  # written -> id: a dump repeats its titles
        self.sources, self.targets = array("i"), array("i")
        self.redirects: dict[int, int] = {}
        self.disambiguation: set[int] = set()
        self.skipped: list[str] = []
        self.lines = self.skipped_lines = 0

    def title(self, raw: str) -> int:
        """The id of a title as written (clean_title: TitleError when refused)."""
        i = self.seen.get(raw)
        if i is None:
            t = clean_title(raw)
            i = self.ids.get(t)
            if i is None:
                i = self.ids[t] = len(self.titles)
                self.titles.append(t)
            self.seen[raw] = i
        return i

    def add_lines(self, rows: list[str], lineno: int) -> None:
        """Read `rows` (the lines after line `lineno`) one by one: comments, blank lines, kinds, skipped lines."""
        for lineno, line in enumerate(rows, lineno + 1):
            line = line.rstrip("\r")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            self.lines += 1
            try:
                src, dst, kind = link_of(line, self.title)
            except (SnapshotError, TitleError) as e:
                self.skipped_lines += 1
                if len(self.skipped) < SHOWN_SKIPPED:
                    self.skipped.append(f"line {lineno}: {e}")
                continue
            if kind == "redirect":
                self.redirects[src] = dst
            else:
                self.sources.append(src)
                self.targets.append(dst)
                if kind == "disambiguation":
                    self.disambiguation.add(src)

    def add_plain(self, body: str, rows: int) -> bool:
        """Read `rows` lines of `body` that are all `source<TAB>target` (no comment, blank or third column) at
        once; False (nothing read) when a title is refused, so that add_lines reports its line."""
        # source, target, source, target, ...: each distinct title of the block looked up once (pandas' hash table)
        codes, written = pd.factorize(np.array(body.replace("\n", "\t").split("\t"), dtype=object))
        try:
            got = [self.title(raw) for raw in written]
        except TitleError:
            return False
        pairs = np.array(got, dtype=np.int32)[codes].reshape(rows, 2)
        self.sources.frombytes(pairs[:, 0].tobytes())
        self.targets.frombytes(pairs[:, 1].tobytes())
        self.lines += rows
        return True

    def add_block(self, block: list[bytes], lineno: int) -> None:
        """Read the lines of `block` (raw lines, decoded here), the lines after line `lineno`: runs of plain lines
        at once, the odd lines between them one by one (or all one by one when most are odd)."""
        try:
            text = b"".join(block).decode("utf-8-sig" if lineno == 0 else "utf-8")  # a BOM is not a title
        except UnicodeDecodeError:
            bad = next(k for k, raw in enumerate(block) if not utf8(raw, lineno + k == 0))
            raise SnapshotError(f"line {lineno + bad + 1}: not valid UTF-8; re-encode the file as UTF-8") from None
        body = text[:-1] if text.endswith("\n") else text
        rows, odd = body.split("\n"), odd_lines(b"".join(block))
        if len(odd) * 10 > len(rows):
            self.add_lines(rows, lineno)
            return
        at = 0
        for k in [*odd.tolist(), len(rows)]:
            if at < k and not self.add_plain("\n".join(rows[at:k]), k - at):
                self.add_lines(rows[at:k], lineno + at)
            self.add_lines(rows[k : k + 1], lineno + k)
            at = k + 1

    def table(self) -> LinkTable:
        """The links read, grouped by source (a stable sort, skipped when the file is grouped already, as dumps
        are); the reader's own arrays are released."""
        src_ids = np.frombuffer(self.sources, dtype=np.int32)
        dst_ids = np.frombuffer(self.targets, dtype=np.int32)
        if np.any(src_ids[1:] < src_ids[:-1]):
            dst_ids = dst_ids[np.argsort(src_ids, kind="stable")]
        counts = np.bincount(src_ids, minlength=len(self.titles))
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        table = LinkTable(self.titles, offsets, np.ascontiguousarray(dst_ids, dtype=np.int32), counts > 0)
        del src_ids, dst_ids
        self.sources, self.targets, self.seen, self.ids = array("i"), array("i"), {}, {}
        return table


def read_link_list(path: Path, progress: bool) -> tuple[IndexedSnapshot, int, list[str]]:
    """(the snapshot of the TSV link list `path`, its lines with text, "line N: why" of each skipped line), read a
    block of lines at a time (per line, Python costs five times as much) by a LinkListReader."""
    reader, lineno = LinkListReader(), 0
    with (
        open(path, "rb") as f,
        tqdm(
            total=path.stat().st_size, unit="B", unit_scale=True, desc=f"read {path.name}", disable=not progress
        ) as bar,
    ):
        while block := f.readlines(READ_BLOCK_BYTES):
            bar.update(sum(map(len, block)))
            try:
                reader.add_block(block, lineno)
            except SnapshotError as e:
                raise SnapshotError(f"{path}:{str(e).removeprefix('line ')}") from None
            lineno += len(block)
    table, titles = reader.table(), reader.titles
    snap = indexed_snapshot(
        table,
        {titles[a]: titles[b] for a, b in reader.redirects.items()},
        {titles[i] for i in reader.disambiguation},
        reader.skipped_lines,
        progress,
    )
    return snap, reader.lines, reader.skipped


def indexed_snapshot(
    table: LinkTable,
    redirects: dict[str, str],
    disambiguation: set[str],
    skipped_lines: int,
    progress: bool = False,
    digest: str = "",
) -> IndexedSnapshot:
    """The IndexedSnapshot of a parsed link list; its digest (Snapshot.digest of the same links, so page caches and
    crawl manifests keep their source id whichever way the list was read) is computed here unless given: streamed
    title by title, as json.dumps of the whole table would hold it twice in memory."""
    if not digest:
        h = hashlib.sha256(b"[{")
        for k, t in enumerate(
            tqdm(
                sorted(table),
                desc="hash links",
                unit="page",
                unit_scale=True,
                leave=False,
                disable=not progress or len(table) < 100_000,
            )
        ):
            h.update(
                f"{', ' if k else ''}{json.dumps(t, ensure_ascii=False)}: "
                f"{json.dumps(table[t], ensure_ascii=False)}".encode()
            )
        h.update(
            ("}, " + json.dumps([sorted(redirects.items()), sorted(disambiguation)], ensure_ascii=False)[1:]).encode()
        )
        digest = h.hexdigest()[:16]
    return IndexedSnapshot(
        links=table, redirects=redirects, disambiguation=disambiguation, skipped_lines=skipped_lines, link_digest=digest
    )


CACHED_FROM_BYTES = 1 << 20
"""Link lists of at least this size are parsed once and cached (read_snapshot); smaller ones parse in under a second."""
LINK_CACHE_FORMAT = 1
KEY_SAMPLE_BYTES = 1 << 20


def link_list_key(path: Path) -> str:
    """What identifies a link list's content for its cache: size, modification time and the sha256 of three
    KEY_SAMPLE_BYTES samples (start, middle, end), so a second read costs no pass over a 1 GB file."""
    st = path.stat()
    h = hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}".encode())
    with open(path, "rb") as f:
        for at in sorted({0, max(0, st.st_size // 2 - KEY_SAMPLE_BYTES // 2), max(0, st.st_size - KEY_SAMPLE_BYTES)}):
            f.seek(at)
            h.update(f.read(KEY_SAMPLE_BYTES))
    return h.hexdigest()[:32]


def link_list_cache(path: Path, cache_dir: str | Path) -> Path:
    """The cache file of the link list `path` in `cache_dir`: one per list (its name and a hash of its full path),
    replaced when the list changes."""
    where = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]
    return Path(cache_dir) / f"snapshot-{path.name}-{where}.npz"


def write_link_cache(cache: Path, key: str, snap: IndexedSnapshot, lines: int, skipped: list[str]) -> None:
    """Write the parsed link list (read_link_list's result) as numpy arrays in one .npz file, atomically."""
    table = snap.links
    index = table.index
    meta = {
        "format": LINK_CACHE_FORMAT,
        "key": key,
        "digest": snap.digest(),
        "lines": lines,
        "skipped": skipped,
        "skipped_lines": snap.skipped_lines,
    }
    with atomic_writer(cache) as f:
        np.savez(
            f,
            meta=np.array(json.dumps(meta)),
            titles=np.frombuffer("\n".join(table.titles).encode(), dtype=np.uint8),
            offsets=table.offsets,
            targets=table.targets,
            has_page=table.has_page,
            redirects=np.array([[index[a], index[b]] for a, b in snap.redirects.items()], dtype=np.int32).reshape(
                -1, 2
            ),
            disambiguation=np.array([index[t] for t in snap.disambiguation], dtype=np.int32),
        )


def read_link_cache(cache: Path, key: str) -> tuple[IndexedSnapshot, int, list[str]] | None:
    """read_link_list's result from its cache; None when the cache is of another version of the list (or another
    format) — or is damaged: then it is moved aside (RecoveryWarning) and the list is parsed again."""
    try:
        with np.load(cache, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            if meta.get("format") != LINK_CACHE_FORMAT or meta.get("key") != key:
                return None
            titles = bytes(z["titles"]).decode().split("\n")
            offsets, targets, has_page = z["offsets"], z["targets"], z["has_page"]
            redirects, disambiguation = z["redirects"], z["disambiguation"]
        n = len(titles)
        if not (
            len(offsets) == n + 1
            and len(has_page) == n
            and offsets[0] == 0
            and offsets[-1] == len(targets)
            and np.all(offsets[1:] >= offsets[:-1])
            and (not len(targets) or 0 <= targets.min() <= targets.max() < n)
            and redirects.ndim == 2
            and np.all((redirects >= 0) & (redirects < n))
            and np.all((disambiguation >= 0) & (disambiguation < n))
        ):
            raise ValueError("its arrays do not fit together")
        table = LinkTable(titles, offsets, targets, has_page)
        snap = indexed_snapshot(
            table,
            {titles[a]: titles[b] for a, b in redirects.tolist()},
            {titles[i] for i in disambiguation.tolist()},
            int(meta["skipped_lines"]),
            digest=meta["digest"],
        )
        return snap, int(meta["lines"]), list(meta["skipped"])
    except (OSError, EOFError, ValueError, KeyError, IndexError, TypeError, zipfile.BadZipFile) as e:
        move_aside(cache, "snapshot cache", f"{type(e).__name__}: {e}", "the link list is parsed again")
        return None
