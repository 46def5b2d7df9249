"""Notebook 01's parameters (the crawl), one typed declaration; see lib.common.config."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from lib.common.config import RUN_DIR_WHY, THREADS_WHY, StageParams, param
from lib.common.params import ParamError
from lib.common.paths import resolve
from lib.crawl.sources import SOURCES, CachedSource, PageCache, make_source

DEMO_ROOTS = [
    "Climate change",
    "Global warming",
    "Biodiversity",
    "Ecology",
    "Energy",
    "Biofuel",
    "Agriculture",
    "Water",
    "Poverty",
    "Pollution",
    "Education",
    "Health",
]


@dataclass(frozen=True)
class CrawlParams(StageParams):
    NOTEBOOK: ClassVar[str] = "01_crawl.ipynb"

    run_dir: str = param("outputs/demo", RUN_DIR_WHY)
    threads: int = param(0, THREADS_WHY, ge=0, record=False)
    source: str = param(
        "wikispeedia",
        "wikispeedia (shipped real hyperlinks), embedded (vital articles, title-mention "
        "links), snapshot (local link list), live (Wikipedia API) or graphs (import "
        "graph files)",
        choices=SOURCES,
    )
    roots: list[str] = param(DEMO_ROOTS, "demo roots, all Wikispeedia articles")
    roots_file: str = param("", "a params/roots_*.txt file (one title per line); overrides roots when set")
    max_nodes: int = param(
        1000,
        "nodes per graph (the seed: 20000; its Figure 1 draws 2000, params/demo_full.yaml); 1000 keeps the demo fast",
        ge=1,
    )
    snapshot_path: str = param(
        "", "snapshot: TSV link list (source TAB target) or a graph JSON file; graphs: a folder of graph JSON files"
    )
    topics_file: str = param(
        "", "snapshot: optional TSV of title TAB topic lines (topic labels; without them topic steps are skipped)"
    )
    contact: str = param(
        "", "live source: e-mail or URL put in the User-Agent (Wikimedia policy; required)", record=False
    )
    api_url: str = param("", "live source: MediaWiki api.php URL; empty means en.wikipedia.org")
    max_retries: int = param(
        4,
        "live source: retries per HTTP request for 429, 5xx and timeouts (a bounded outer loop "
        "adds maxlag and bad JSON)",
        ge=0,
    )
    retry_wait: float = param(1.0, "live source: base of the exponential back-off in seconds (Retry-After wins)", ge=0)
    timeout: float = param(20.0, "live source: seconds before a stalled request is abandoned and retried", gt=0)
    maxlag: int = param(5, "live source: the API refuses us while replication lag exceeds this (seconds)", ge=0)
    use_cache: bool = param(True, "reuse fetched pages across roots and runs (SQLite page cache in outputs/cache)")
    picture_root: str = param(
        "Climate change", "root drawn with pyvis (the seed's Figure 1 drew 2,000 nodes from Sustainability)"
    )
    overlap_roots_file: str = param(
        "params/roots_wikispeedia_400.txt", "roots for the overlap-versus-graph-size table (offline sources)"
    )
    overlap_n_roots: int = param(
        40, "first roots of that file measured (the list is stratified, so any prefix is too)", ge=1
    )
    overlap_max_nodes: list[int] = param([200, 500, 1000, 2000], "graph sizes measured", ge=1)

    def link_source(self, cache: str | Path | None = None):
        """The link source these parameters name (make_source; file paths resolved against the repository), behind
        the SQLite page cache at `cache` when given."""
        src = make_source(
            self.source,
            snapshot_path=str(resolve(self.snapshot_path)) if self.snapshot_path else "",
            contact=self.contact,
            api_url=self.api_url,
            max_retries=self.max_retries,
            retry_wait=self.retry_wait,
            timeout=self.timeout,
            maxlag=self.maxlag,
            topics_file=str(resolve(self.topics_file)) if self.topics_file else "",
        )
        return CachedSource(src, PageCache(Path(cache))) if cache else src

    def check(self) -> None:
        if self.source != "graphs" and not self.roots_file and not any(r.strip() for r in self.roots):
            raise ParamError(
                "the root list is empty; give at least one title (see params/roots_*.txt) or a roots_file", key="roots"
            )
        if self.source in ("snapshot", "graphs") and not self.snapshot_path:
            raise ParamError(
                f"source={self.source!r} needs snapshot_path (a link list, graph file or folder)", key="snapshot_path"
            )
        if self.topics_file and self.source != "snapshot":
            raise ParamError(
                f"topics_file is read with source='snapshot' only (source={self.source!r}); leave it empty",
                key="topics_file",
            )
