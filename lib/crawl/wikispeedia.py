"""The shipped real-hyperlink snapshot: Wikispeedia (West & Leskovec), 4,604 articles of the 2007 Wikipedia for
Schools and their 119,882 hyperlinks, under `data/wikispeedia/` (data CC BY-SA, see its README.md).

`wikispeedia_snapshot()` checks the three files against their published sha256 before reading them, so a damaged or
edited copy is refused naming the file; `source: wikispeedia` in any profile crawls it (lib.crawl.sources.make_source).
A page's topic is the first level of its first category (`subject.Science.Physics` -> `Science`): 15 topics.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from lib.common.paths import ROOT
from lib.common.titles import TitleError
from lib.crawl.pages import Snapshot, SnapshotError, clean_title

WIKISPEEDIA_DIR = ROOT / "data" / "wikispeedia"
SHA256 = {
    "articles.tsv": "74aabad8fb51c18a13bcee77fbfd0c7ed27fe4ddde1823fc80ff7dd80b796fff",
    "links.tsv": "48e10c78ab6656df552ccd3bc4af9b226d64da79c9d5e0cd3facfc284d2e36aa",
    "categories.tsv": "4659b309ae1bacb348ff254f9d374a074383413ad24e2f5103c487ffeccdf485",
}
SOURCE_ID = "wikispeedia:" + SHA256["links.tsv"][:16]
"""The page-cache key of the source: the links file's checksum, so another copy of the data is another source."""


def verified_rows(folder: Path, name: str, n_cols: int, title_cols: int = 0) -> list[list[str]]:
    """The rows of one shipped TSV after its header line, once its sha256 matches the published one; the first
    `title_cols` columns read as titles (lib.crawl.pages.clean_title), a refused one naming the file and row."""
    path = Path(folder) / name
    if not path.is_file():
        raise SnapshotError(
            f"{path} is missing; restore it with "
            f"`git checkout -- {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}`"
        )
    raw = path.read_bytes()
    if hashlib.sha256(raw).hexdigest() != SHA256[name]:
        raise SnapshotError(
            f"{path} does not match its published sha256 {SHA256[name][:16]}…; the shipped copy was "
            f"changed: restore it with git, or use source='snapshot' for an edited link list"
        )
    rows = [line.split("\t") for line in raw.decode("utf-8").splitlines()[1:] if line and not line.startswith("#")]
    bad = next((i for i, r in enumerate(rows) if len(r) != n_cols), None)
    if bad is not None:
        raise SnapshotError(f"{path}: row {bad + 2} has {len(rows[bad])} columns, expected {n_cols}")
    for i, r in enumerate(rows):
        try:
            r[:title_cols] = map(clean_title, r[:title_cols])
        except TitleError as e:
            raise SnapshotError(f"{path}: row {i + 2}: {e}") from None
    return rows


def wikispeedia_snapshot(folder: str | Path = WIKISPEEDIA_DIR) -> Snapshot:
    """Every article (with no outgoing link where it has none: a real page, not a missing one), its hyperlinks in
    file order and its topic."""
    folder = Path(folder)
    links: dict[str, list[str]] = {a: [] for (a,) in verified_rows(folder, "articles.tsv", 1, title_cols=1)}
    for src, dst in verified_rows(folder, "links.tsv", 2, title_cols=2):
        links[src].append(dst)
    topics: dict[str, str] = {}
    for article, category in verified_rows(folder, "categories.tsv", 2, title_cols=1):
        parts = category.split(".")
        if len(parts) > 1:
            topics.setdefault(article, parts[1].replace("_", " "))
    return Snapshot(links=links, topics=topics)
