"""Stage 1 types: one page of a link source, the `LinkSource` interface, a link snapshot and crawl errors."""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from lib.common.errors import WikigatError
from lib.common.titles import check_title

OK, MISSING, DISAMBIGUATION = "ok", "missing", "disambiguation"


def clean_title(raw: str) -> str:
    """A title as a link list writes it -> the page's title: URL-decoded when it holds `%`, `_` read as a space,
    a UTF-8 byte-order mark (left by some editors at the start of a file) removed, then lib.common.titles.check_title
    (outer blanks stripped, NFC; TitleError for an empty title, a control character or over 255 bytes)."""
    t = raw.strip().lstrip("\ufeff")
    if "%" in t:
        t = urllib.parse.unquote(t)
    return check_title(t.replace("_", " "))


class CrawlError(WikigatError, RuntimeError):
    """A link source failed for good (e.g. host unreachable after the bounded retries)."""


class SnapshotError(WikigatError, ValueError):
    pass


@dataclass(frozen=True)
class Page:
    """What a link source knows about one title.

    title:  canonical title after redirects (one article = one node).
    status: "ok", "missing" or "disambiguation" (the last two are skipped by the BFS, as in the seed).
    links:  canonical titles of main-namespace links, redirects resolved, duplicates removed, in source order.
    """

    title: str
    status: str
    links: tuple[str, ...] = ()


class LinkSource(Protocol):
    source_id: str  # identity of the data behind the source; part of the page-cache key

    def page(self, title: str) -> Page: ...

    def topic(self, title: str) -> str | None: ...


@dataclass
class Snapshot:
    """A whole link table held in memory: what `SnapshotSource` crawls and what the mock MediaWiki server serves.

    links:          title -> linked titles (as written; may point at redirects), in order.
    redirects:      redirect title -> target title.
    disambiguation: titles of disambiguation pages (they exist and may have links).
    topics:         title -> topic label, where known.
    skipped_lines:  lines of the link list it was read from that were not links (lib.crawl.sources.read_snapshot).
    """

    links: dict[str, list[str]]
    redirects: dict[str, str] = field(default_factory=dict)
    disambiguation: set[str] = field(default_factory=set)
    topics: dict[str, str] = field(default_factory=dict)
    skipped_lines: int = 0

    def resolve(self, title: str) -> str:
        """Follow redirects (bounded, so a redirect loop cannot hang the crawl)."""
        seen = 0
        while title in self.redirects and seen < 10:
            title = self.redirects[title]
            seen += 1
        return title

    def exists(self, title: str) -> bool:
        t = self.resolve(title)
        return t in self.links or t in self.disambiguation

    def digest(self) -> str:
        h = hashlib.sha256()
        h.update(
            json.dumps(
                [self.links, sorted(self.redirects.items()), sorted(self.disambiguation)],
                ensure_ascii=False,
                sort_keys=True,
            ).encode()
        )
        return h.hexdigest()[:16]


class LinkTable(Mapping):
    """title -> linked titles (as written, in file order, repeats kept), the `links` of a Snapshot held as arrays: a
    link list of 40 million links takes ~200 MB this way against several GB as Python lists of strings.

    titles:   every title of the list [T] (sources and targets), ids are positions here;
    offsets:  [T + 1] int64, the links of title i are targets[offsets[i]:offsets[i + 1]];
    targets:  [L] int32 title ids;
    has_page: [T] bool, the title has links of its own (a source of the list); only those are keys.
    """

    def __init__(self, titles: list[str], offsets: np.ndarray, targets: np.ndarray, has_page: np.ndarray):
        self.titles, self.offsets, self.targets, self.has_page = titles, offsets, targets, has_page
        self.index = {t: i for i, t in enumerate(titles)}
        self.pages = int(has_page.sum())

    def __getitem__(self, title: str) -> list[str]:
        i = self.index.get(title)
        if i is None or not self.has_page[i]:
            raise KeyError(title)
        return [self.titles[j] for j in self.targets[self.offsets[i] : self.offsets[i + 1]].tolist()]

    def __contains__(self, title) -> bool:
        i = self.index.get(title)
        return i is not None and bool(self.has_page[i])

    def __iter__(self) -> Iterator[str]:
        return (self.titles[i] for i in np.flatnonzero(self.has_page).tolist())

    def __len__(self) -> int:
        return self.pages


@dataclass
class IndexedSnapshot(Snapshot):
    """A Snapshot whose `links` is a LinkTable (a large link list, lib.crawl.sources.read_snapshot) and whose digest,
    equal to Snapshot.digest of the same links, was computed once when the list was parsed."""

    link_digest: str = ""

    def digest(self) -> str:
        return self.link_digest


# --------------------------------------------------------------------------------------------------- Algorithm 1
@dataclass
class CrawlStats:
    pages_expanded: int = 0
    pages_skipped: dict = field(default_factory=lambda: {MISSING: 0, DISAMBIGUATION: 0})


class RootSkipped(Exception):
    """The root itself is missing or a disambiguation page; the campaign records it and goes on."""
