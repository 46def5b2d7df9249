"""Stage 1 campaigns: crawl many roots resumably (one graph file per root plus a manifest), import a
user's own link list, and describe the crawled graphs (sizes, title overlap, topics)."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from lib.common.graphio import Graph, read_graph, sha256_file, write_graph
from lib.common.hashing import config_digest
from lib.common.params import ParamError
from lib.common.paths import atomic_write_text
from lib.common.runinfo import load_json, refuse_other_settings
from lib.crawl.bfs import bfs_crawl, count_components
from lib.crawl.pages import CrawlError, LinkSource, RootSkipped, Snapshot, SnapshotError
from lib.crawl.sources import embedded_snapshot


# --------------------------------------------------------------------------------------------------- campaign
def read_roots(path: str | Path) -> list[str]:
    """One title per line; blank lines and `#` comments ignored."""
    p = Path(path)
    if not p.is_file():
        raise ParamError(f"roots file {path} does not exist; see params/roots_*.txt")
    roots = [ln.strip() for ln in p.read_text(encoding="utf-8-sig").splitlines()]
    return [r for r in roots if r and not r.startswith("#")]


def draw_offline_roots(n: int, seed: int = 0, min_links: int = 5, snapshot: Snapshot | None = None) -> list[str]:
    """n root titles of an offline snapshot (default: the embedded vital articles), seeded and stratified by its topic
    labels.

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
    for k in sorted(exact, key=lambda k: (-(exact[k] - share[k]), k))[: n - sum(share.values())]:
        share[k] += 1
    rng = np.random.default_rng(seed)
    picks = {k: [by_topic[k][i] for i in rng.permutation(len(by_topic[k]))[: share[k]]] for k in sorted(by_topic)}
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
        raise ParamError(
            f"max_nodes={max_nodes!r} is invalid: it must be an integer >= 1 (the seed used 20000)", key="max_nodes"
        )
    if isinstance(roots, str):
        raise ParamError("roots must be a list of titles, not a single string; wrap it in [...]", key="roots")
    cleaned = [r.strip() for r in roots if isinstance(r, str) and r.strip()]
    if not cleaned:
        raise ParamError("the root list is empty; give at least one title (see params/roots_*.txt)", key="roots")
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

    roots = check_campaign(roots if isinstance(roots, str) else list(roots), max_nodes)
    out_dir = Path(out_dir)
    (out_dir / "graphs").mkdir(parents=True, exist_ok=True)
    manifest_path = out_dir / "manifest.json"
    config = {"max_nodes": max_nodes, "source": source.source_id, "algorithm": "bfs-v1"}
    chash = config_digest(config)
    manifest = {"config": config, "config_hash": chash, "roots": {}}
    if manifest_path.is_file():
        old = load_json(manifest_path)
        refuse_other_settings(
            f"the crawl in {out_dir}",
            old.get("config", {}),
            config,
            "use another run folder, or delete its crawl/ folder to crawl afresh",
        )
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
            manifest["roots"][root] = {
                "status": "skipped",
                "reason": str(e),
                "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
            }
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
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        save()
    save()
    if roots and not any(e["status"] == "ok" for e in manifest["roots"].values()):
        skipped = {r: e.get("reason", "") for r, e in manifest["roots"].items()}
        raise CrawlError(
            f"none of the {len(roots)} roots gave a graph (manifest.json lists why): "
            f"{dict(list(skipped.items())[:5])}{' ...' if len(skipped) > 5 else ''}; pick roots that are "
            f"pages of this source (source {source.source_id})"
        )
    return manifest


def import_graphs(folder: str | Path, out_dir: str | Path) -> dict:
    """Graph JSON files of `folder` (the seed's own format, or this project's) as a finished campaign: each file is
    read (lib.common.graphio.read_graph: ids remapped, self-loops and repeated edges dropped), written to
    `out_dir/graphs/<root slug>.json` with a metadata block, and listed in `out_dir/manifest.json` like a crawled root
    (its root = node 0's title), so notebooks 02-06 run on it unchanged. Nothing is crawled. Files in name order; a
    file that cannot be read is an error naming it; two files with the same root are an error naming both."""

    folder, out_dir = Path(folder), Path(out_dir)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise SnapshotError(
            f"graph folder {folder} holds no .json graph files; pass a folder of seed-format graphs "
            f'({{"nodes": [{{"id", "label"}}], "edges": [{{"source", "target"}}]}})'
        )
    (out_dir / "graphs").mkdir(parents=True, exist_ok=True)
    config = {
        "source": f"graphs:{folder.name}",
        "algorithm": "import-v1",
        "files": {f.name: sha256_file(f) for f in files},
    }
    manifest = {"config": config, "config_hash": config_digest(config), "roots": {}}
    origin = {}
    for f in files:
        g = read_graph(f)
        if not g.titles:
            raise SnapshotError(f"graph file {f} has no nodes; remove it from {folder}")
        if g.root in origin:
            raise SnapshotError(
                f"graph files {origin[g.root].name} and {f.name} have the same root {g.root!r}; keep one of them"
            )
        origin[g.root] = f
        n_comp = count_components(g.num_nodes, g.edges)
        g.metadata = {
            **g.metadata,
            "format_version": 1,
            "algorithm": "imported graph file",
            "root": g.root,
            "root_title": g.root,
            "source": config["source"],
            "file": f.name,
            "num_nodes": g.num_nodes,
            "num_edges": g.num_edges,
            "connected": n_comp == 1,
            "num_components": n_comp,
        }
        rel = f"graphs/{root_slug(g.root)}.json"
        manifest["roots"][g.root] = {
            "status": "ok",
            "file": rel,
            "sha256": write_graph(out_dir / rel, g),
            "root_title": g.root,
            "num_nodes": g.num_nodes,
            "num_edges": g.num_edges,
            "connected": n_comp == 1,
            "num_components": n_comp,
            "imported_from": f.name,
        }
    write_manifest(out_dir / "manifest.json", manifest)
    return manifest


def ok_graph_files(crawl_dir: str | Path) -> list[Path]:
    """The graph files of a campaign's successful roots, in manifest order."""
    crawl_dir = Path(crawl_dir)
    m = load_json(crawl_dir / "manifest.json")
    return [crawl_dir / e["file"] for e in m["roots"].values() if e["status"] == "ok"]


# --------------------------------------------------------------------------------------------------- statistics
def graph_stats(graph: Graph) -> dict:
    """Nodes, edges, degree summary, share of degree-1 leaves, connectedness."""

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
        "connected": count_components(graph.num_nodes, graph.edges) == 1,
    }


def overlap_by_size(source: LinkSource, roots: list[str], sizes: list[int], progress: bool = True) -> list[dict]:
    """How much BFS graphs from `roots` overlap as max_nodes grows: per size, the graphs (roots that are pages), their
    mean nodes and edges, the distinct titles over all of them and the shared share (share of a graph's nodes whose
    title is also in another graph, averaged over graphs, as notebook 02 reports). Crawls in memory, writes nothing."""

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
        rows.append(
            {
                "max_nodes": n,
                "graphs": len(graphs),
                "mean_nodes": sum(g.num_nodes for g in graphs) / max(1, len(graphs)),
                "mean_edges": sum(g.num_edges for g in graphs) / max(1, len(graphs)),
                "distinct_titles": len(count),
                "node_slots": sum(g.num_nodes for g in graphs),
                "shared_share": sum(shared) / max(1, len(shared)),
            }
        )
    return rows


def overlap_sentence(overlap, n_roots: int) -> str:
    """overlap_by_size's rows (a DataFrame, sizes ascending) in one sentence, beside the seed's live campaign."""
    low, high = overlap.iloc[0], overlap.iloc[-1]
    return (
        f"{n_roots} offline roots: from {int(low.max_nodes):,} to {int(high.max_nodes):,} nodes per graph the "
        f"distinct titles grow from {int(low.distinct_titles):,} to {int(high.distinct_titles):,} while the shared "
        f"share goes from {low.shared_share:.3f} to {high.shared_share:.3f} (the seed's live campaign: 0.92)."
    )
