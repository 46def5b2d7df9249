"""Benchmark of stage 1 against the local mock MediaWiki server: what the shared page cache saves.

1. A campaign of 20 overlapping roots x 2,000 nodes, crawled live through LiveSource -> mock server:
   (a) without the page cache: every root is an independent crawl (a fresh LiveSource each, as the seed did);
   (b) with the shared page cache: one `run_campaign` over a `CachedSource(LiveSource, PageCache)`.
   HTTP requests and wall time for both, and their ratio (a is the reference). Both must give the same graphs.
   Done on the embedded vital-articles snapshot (real titles, title-mention links) when it is installed, and on a
   synthetic Wikipedia-like snapshot (tests.mockwiki.synthetic_snapshot).
2. Peak memory of one 20,000-node crawl of the synthetic snapshot (40,000 articles): tracemalloc peak of the
   Python heap, and the growth of the process's max RSS.

The server runs in a child process, so the figures are the client's alone. The mock answers in ~1 ms; Wikipedia
takes ~100-300 ms per request, so the table also projects wall time at 0.15 s per request (requests dominate).

    .venv/bin/python benchmarks/bench_crawl.py            # ~1-2 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from lib.common.graphio import read_graph
from lib.crawl.bfs import bfs_crawl
from lib.crawl.campaign import run_campaign
from lib.crawl.live import LiveSource
from lib.crawl.pages import Snapshot
from lib.crawl.sources import CachedSource, PageCache, embedded_snapshot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the mock MediaWiki server lives with the tests
from mockwiki import MockWiki, synthetic_snapshot  # noqa: E402

RTT = 0.15  # seconds per request to assume when projecting to the real Wikipedia


def _serve(snapshot: Snapshot, conn, stop) -> None:
    with MockWiki(snapshot) as wiki:
        conn.send(wiki.url)
        stop.wait()


class Server:
    """MockWiki in a forked child process (the snapshot is inherited, not pickled through a pipe)."""

    def __init__(self, snapshot: Snapshot):
        ctx = mp.get_context("fork")
        parent, child = ctx.Pipe()
        self._stop = ctx.Event()
        self._proc = ctx.Process(target=_serve, args=(snapshot, child, self._stop), daemon=True)
        self._proc.start()
        self.url = parent.recv()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._proc.join(timeout=10)


def source(url: str) -> LiveSource:
    return LiveSource("benchmark@example.org", api_url=url, retry_wait=0.01, source_id="live:bench-mock")


def campaign(name: str, snapshot: Snapshot, roots: list[str], max_nodes: int, workdir: Path) -> dict:
    with Server(snapshot) as server:
        t0 = time.perf_counter()
        requests, graphs = 0, []
        for root in roots:
            src = source(server.url)
            graphs.append(bfs_crawl(src, root, max_nodes))
            requests += src.requests
            src.close()
        t_plain = time.perf_counter() - t0

        live = source(server.url)
        cached = CachedSource(live, PageCache(workdir / f"{name}.sqlite"))
        put_seconds = [0.0]
        put = cached.cache.put

        def timed_put(*a):  # how much of the cached wall time is SQLite writes (one commit per page)
            t = time.perf_counter()
            put(*a)
            put_seconds[0] += time.perf_counter() - t

        cached.cache.put = timed_put
        t0 = time.perf_counter()
        manifest = run_campaign(roots, cached, workdir / name, max_nodes, progress=False)
        t_cached = time.perf_counter() - t0
        cached.cache.close()
    files = [read_graph(workdir / name / e["file"]) for e in manifest["roots"].values()]
    same = all(a.titles == b.titles and a.edges == b.edges for a, b in zip(graphs, files)) and len(files) == len(graphs)
    counts: dict[str, int] = {}
    for g in graphs:
        for t in g.titles:
            counts[t] = counts.get(t, 0) + 1
    shared = sum(sum(counts[t] > 1 for t in g.titles) for g in graphs) / sum(g.num_nodes for g in graphs)
    return {
        "name": name,
        "roots": len(roots),
        "nodes": sum(g.num_nodes for g in graphs),
        "shared": shared,
        "req_plain": requests,
        "req_cached": live.requests,
        "t_plain": t_plain,
        "t_cached": t_cached,
        "pages_fetched": cached.misses,
        "pages_reused": cached.hits,
        "same": same,
        "put_seconds": put_seconds[0],
    }


def peak_memory(snapshot: Snapshot, root: str, max_nodes: int) -> dict:
    with Server(snapshot) as server:
        src = source(server.url)
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        tracemalloc.start()
        t0 = time.perf_counter()
        g = bfs_crawl(src, root, max_nodes)
        seconds = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "nodes": g.num_nodes,
        "edges": g.num_edges,
        "requests": src.requests,
        "seconds": seconds,
        "tracemalloc_peak_mib": peak / 2**20,
        "maxrss_growth_mib": (rss1 - rss0) / 1024,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--roots", type=int, default=20)
    ap.add_argument("--max-nodes", type=int, default=2000)
    ap.add_argument("--big-nodes", type=int, default=20000)
    ap.add_argument("--articles", type=int, default=40000, help="size of the synthetic snapshot")
    ap.add_argument("--skip-embedded", action="store_true")
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    print(f"building a synthetic snapshot of {args.articles:,} articles ...", flush=True)
    synth = synthetic_snapshot(args.articles, seed=0)
    # Overlapping roots as in the seed's campaign (related topics): articles of the first two communities.
    synth_roots = [f"Article {i:0{len(str(args.articles))}d}" for i in range(0, 1000, 1000 // args.roots)][: args.roots]

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_embedded:
            try:
                emb = embedded_snapshot()
            except Exception as e:  # the data package is optional for the benchmark
                print(f"embedded snapshot unavailable ({e}); skipping it", file=sys.stderr)
            else:
                from lib.crawl.campaign import read_roots

                emb_roots = [r for r in read_roots("params/roots_offline.txt") if r in emb.links][: args.roots]
                print(
                    f"campaign on the embedded snapshot: {len(emb_roots)} roots x {args.max_nodes} nodes ...",
                    flush=True,
                )
                rows.append(campaign("embedded", emb, emb_roots, args.max_nodes, Path(tmp)))
        print(f"campaign on the synthetic snapshot: {len(synth_roots)} roots x {args.max_nodes} nodes ...", flush=True)
        rows.append(campaign("synthetic", synth, synth_roots, args.max_nodes, Path(tmp)))
    print(f"one {args.big_nodes:,}-node crawl for peak memory ...", flush=True)
    mem = peak_memory(synth, synth_roots[0], args.big_nodes)

    print()
    print(
        f"campaign of {args.roots} roots x {args.max_nodes:,} nodes through the mock MediaWiki server "
        f"(reference = no page cache)"
    )
    head = (
        f"{'snapshot':<10} {'shared':>7} {'requests':>9} {'cached':>7} {'ratio':>6} {'wall s':>7} {'cached':>7} "
        f"{'ratio':>6} {'@0.15s/req':>11} {'cached':>8} {'same graphs':>11}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['name']:<10} {r['shared']:>7.1%} {r['req_plain']:>9,} {r['req_cached']:>7,} "
            f"{r['req_cached'] / r['req_plain']:>6.3f} {r['t_plain']:>7.1f} {r['t_cached']:>7.1f} "
            f"{r['t_cached'] / r['t_plain']:>6.3f} {r['req_plain'] * RTT / 60:>9.1f}m "
            f"{r['req_cached'] * RTT / 60:>7.1f}m "
            f"{str(r['same']):>11}"
        )
        print(
            f"{'':<10} pages fetched {r['pages_fetched']:,}, reused from cache {r['pages_reused']:,}; "
            f"{r['put_seconds']:.1f} s of the cached wall time in PageCache.put (SQLite commits)"
        )
    print()
    print(
        f"one crawl of {mem['nodes']:,} nodes / {mem['edges']:,} edges ({mem['requests']:,} requests, "
        f"{mem['seconds']:.1f} s under tracemalloc): peak Python heap {mem['tracemalloc_peak_mib']:.1f} MiB, "
        f"max-RSS growth {mem['maxrss_growth_mib']:.1f} MiB"
    )
    print(f"total benchmark time {time.perf_counter() - t_start:.0f} s")
    return 0 if all(r["same"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
