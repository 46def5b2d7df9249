"""LiveSource (wikipedia-api) against the local mock MediaWiki server: API semantics, faults, bounded retries, and a
cached, killed-and-resumed campaign. Everything runs on 127.0.0.1; no network needed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from mockwiki import FaultConfig, MockWiki, normalize_title, synthetic_snapshot

from lib.common.params import ParamError
from lib.crawl.bfs import bfs_crawl
from lib.crawl.campaign import run_campaign
from lib.crawl.live import LiveSource
from lib.crawl.pages import CrawlError, Snapshot
from lib.crawl.sources import CachedSource, PageCache, SnapshotSource

CONTACT = "tests@example.org"
FAST = dict(retry_wait=0.01, connect_timeout=1.0, read_timeout=0.3)  # tiny waits: tests stay fast


def live(wiki: MockWiki, **kw) -> LiveSource:
    return LiveSource(CONTACT, api_url=wiki.url, **{**FAST, **kw})


def link_requests(wiki: MockWiki, title: str | None = None) -> list[dict]:
    """Logged (fault-free) page-links requests, optionally for one title."""
    return [
        r["params"]
        for r in wiki.log
        if r["fault"] is None
        and "links" in r["params"].get("prop", "")
        and (title is None or r["params"]["titles"] == title)
    ]


@pytest.fixture(scope="module")
def small() -> Snapshot:
    hub_links = [f"Leaf {i:04d}" for i in range(1234)]
    return Snapshot(
        links={
            "Hub": hub_links + ["Category:Hubs", "File:Hub.png", "Template:Navbox"],
            "Source": [
                "Target",
                "Old name",
                "Older name",
                "target",
                "Red link",
                "Mercury",
                "Source",
                "Category:Things",
                "Talk:Source",
                "Loop to self",
                "Shortcut to category",
            ],
            "Target": ["Source"],
            "Mercury (planet)": ["Source"],
            "Category:Hubs": ["Hub"],
            **{f"Leaf {i:04d}": ["Hub"] for i in range(1234)},
        },
        redirects={
            "Old name": "Older name",
            "Older name": "Target",
            "Loop to self": "Source",
            "Redirect to hub": "Hub",
            "Shortcut to category": "Category:Hubs",
        },
        disambiguation={"Mercury"},
    )


def test_links_are_paged_past_500(small):
    with MockWiki(small) as wiki:
        src = live(wiki)
        page = src.page("Hub")
        reqs = link_requests(wiki, "Hub")
    assert page.status == "ok" and page.title == "Hub"
    assert page.links == tuple(f"Leaf {i:04d}" for i in range(1234))  # all of them, in order, no non-articles
    assert len(reqs) == 3 and all(r["pllimit"] == "500" for r in reqs)  # 1234 links = 500 + 500 + 234
    assert "plcontinue" not in reqs[0] and all("plcontinue" in r for r in reqs[1:])
    assert src.requests == wiki.requests


def test_target_batches_hold_at_most_50_titles(small):
    with MockWiki(small) as wiki:
        live(wiki).page("Hub")
        batches = [r["params"]["titles"].split("|") for r in wiki.log if "prop" not in r["params"]]
    assert max(map(len, batches)) == 50 and sum(map(len, batches)) == 1234


def test_redirects_of_page_and_targets_are_resolved(small):
    with MockWiki(small) as wiki:
        src = live(wiki)
        hub = src.page("Redirect to hub")
        page = src.page("Source")
    assert hub.title == "Hub" and len(hub.links) == 1234
    # "Old name" -> "Older name" -> "Target" (a two-hop chain) and "target" (normalised) are all one node;
    # "Loop to self" redirects back to Source and is dropped as a self-link; non-articles are filtered out, also
    # when an article-namespace link redirects out of it ("Shortcut to category").
    assert page.links == ("Target", "Red link", "Mercury")


def test_missing_disambiguation_and_red_links(small):
    with MockWiki(small) as wiki:
        src = live(wiki)
        assert src.page("No such article").status == "missing"
        assert src.page("Mercury").status == "disambiguation"
        assert src.page("Mercury").links == ()
        assert src.page("Red link").status == "missing"
        assert src.page("bad|title").status == "missing"
        assert src.page("Category:Hubs").status == "missing"  # exists, but is not an article
        assert src.page("Mercury (planet)").links == ("Source",)
    # red links stay in the parent's links (the BFS adds them, then skips them when dequeued)
    assert "Red link" in SnapshotSource(small).page("Source").links


def test_namespace_filter(small):
    with MockWiki(small) as wiki:
        # the server does hold non-article links; plnamespace=0 is what removes them
        everything = wiki.answer(
            {"action": "query", "format": "json", "titles": "Source", "prop": "links", "pllimit": "500"}
        )
        articles = wiki.answer(
            {
                "action": "query",
                "format": "json",
                "titles": "Source",
                "prop": "links",
                "pllimit": "500",
                "plnamespace": "0",
            }
        )
        src = live(wiki)
        src.page("Source")
        reqs = link_requests(wiki)
    ns = lambda a: {link["ns"] for p in a["query"]["pages"].values() for link in p.get("links", [])}
    assert ns(everything) == {0, 1, 14} and ns(articles) == {0}
    assert reqs and all(r["plnamespace"] == "0" for r in reqs)


def test_user_agent_and_maxlag_on_every_request(small):
    with MockWiki(small) as wiki:
        src = live(wiki, maxlag=3)
        src.page("Source")
        src.page("Hub")
        log = list(wiki.log)
    assert len(log) > 5
    assert all(CONTACT in r["user_agent"] and r["user_agent"].startswith("wikigat-crawler/") for r in log)
    assert all(r["params"]["maxlag"] == "3" and r["params"]["format"] == "json" for r in log)


def test_contact_is_required_for_real_wikipedia():
    with pytest.raises(ParamError, match="contact"):
        LiveSource(contact="  ")
    assert LiveSource(contact=CONTACT).source_id == "live:en.wikipedia.org"  # building it sends nothing


def test_title_normalisation():
    assert normalize_title("climate_change") == "Climate change"
    assert normalize_title("category:foo  bar") == "Category:Foo bar"
    assert normalize_title("a[b") is None and normalize_title(" ") is None


# ------------------------------------------------------------------------------------------- faults and budgets
@pytest.fixture(scope="module")
def synth() -> Snapshot:
    return synthetic_snapshot(1500, seed=3, community_size=300)


@pytest.mark.slow
def test_faults_do_not_change_the_graph(synth):
    """60% of requests fail (12% each: 429, 503, stall, malformed JSON, maxlag); the graph is the same."""
    root, n = "Article 0007", 400
    with MockWiki(synth) as wiki:
        clean_src = live(wiki)
        clean = bfs_crawl(clean_src, root, n)
    faults = FaultConfig(
        rate_429=0.12,
        rate_503=0.12,
        rate_stall=0.12,
        rate_malformed=0.12,
        rate_maxlag=0.12,
        retry_after=0,
        stall_seconds=1.0,
    )
    with MockWiki(synth, faults=faults, seed=11, log_size=100_000) as wiki:
        src = live(wiki, read_timeout=0.15, max_retries=8, max_attempts=10)
        faulty = bfs_crawl(src, root, n)
        kinds = [r["fault"] for r in wiki.log]
    assert clean.num_nodes == n and clean.num_edges > n
    assert faulty.titles == clean.titles and faulty.edges == clean.edges
    assert {"429", "503", "stall", "malformed", "maxlag"} <= set(kinds)
    assert kinds.count(None) == clean_src.requests  # every fault was retried; no answer was used twice or lost
    # and the live crawl through the mock equals the in-process crawl of the same snapshot
    reference = bfs_crawl(SnapshotSource(synth), root, n)
    assert reference.titles == clean.titles and reference.edges == clean.edges


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_host_fails_clearly_after_bounded_retries():
    url = f"http://127.0.0.1:{_closed_port()}/w/api.php"
    src = LiveSource(CONTACT, api_url=url, retry_wait=0.01, max_retries=2, max_attempts=3)
    t0 = time.perf_counter()
    with pytest.raises(
        CrawlError,
        match=r"could not reach http://127\.0\.0\.1:\d+/w/api\.php after 9 attempts.*"
        r"check the network.*source='embedded'",
    ):
        src.page("Anything")
    assert time.perf_counter() - t0 < 5
    assert src.requests == 9  # (1 + max_retries) inside wikipedia-api, times max_attempts around it


def test_persistent_maxlag_exhausts_the_budget(small):
    with MockWiki(small, faults=FaultConfig(rate_maxlag=1.0)) as wiki:
        src = live(wiki, max_attempts=4)
        with pytest.raises(CrawlError, match="after 4 attempts: API error maxlag"):
            src.page("Source")
        assert wiki.requests == 4


def test_stalled_server_hits_the_read_timeout(small):
    with MockWiki(small, faults=FaultConfig(rate_stall=1.0, stall_seconds=3.0)) as wiki:
        src = live(wiki, read_timeout=0.1, max_retries=1, max_attempts=2)
        t0 = time.perf_counter()
        with pytest.raises(CrawlError, match="after 4 attempts: WikiHttpTimeoutError"):
            src.page("Source")
        assert time.perf_counter() - t0 < 2.5


# ------------------------------------------------------------------------------------------- cached campaign
CAMPAIGN = textwrap.dedent("""
    import sys
    from lib.crawl.sources import CachedSource, PageCache
    from lib.crawl.campaign import run_campaign
    from lib.crawl.live import LiveSource
    url, cache, out, roots = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split("|")
    src = CachedSource(LiveSource("tests@example.org", api_url=url, retry_wait=0.01, source_id="live:mock"),
                       PageCache(cache))
    run_campaign(roots, src, out, max_nodes=150, progress=False)
""")


def _campaign(url: str, cache: Path, out: Path, roots: list[str]) -> CachedSource:
    src = CachedSource(live_at(url), PageCache(cache))
    run_campaign(roots, src, out, max_nodes=150, progress=False)
    src.cache.close()
    return src


def live_at(url: str) -> LiveSource:
    return LiveSource(CONTACT, api_url=url, retry_wait=0.01, source_id="live:mock")


def test_killed_campaign_resumes_with_identical_files_and_no_refetch(synth, tmp_path):
    roots = ["Article 0010", "Article 0400", "Article 0800", "Article 1200", "No such root"]
    with MockWiki(synth) as wiki:
        ref = _campaign(wiki.url, tmp_path / "ref.sqlite", tmp_path / "ref", roots)
    ref_files = {p.name: p.read_bytes() for p in (tmp_path / "ref" / "graphs").iterdir()}
    assert len(ref_files) == 4 and ref.hits > 0  # overlapping roots reuse cached pages

    cache, out = tmp_path / "run.sqlite", tmp_path / "run"
    with MockWiki(synth, latency=0.03, log_size=100_000) as wiki:
        proc = subprocess.Popen([sys.executable, "-c", CAMPAIGN, wiki.url, str(cache), str(out), "|".join(roots)])
        manifest = out / "manifest.json"
        deadline = time.time() + 60
        while time.time() < deadline and proc.poll() is None:
            if manifest.is_file() and '"ok"' in manifest.read_text(encoding="utf-8"):
                break
            time.sleep(0.02)
        time.sleep(0.3)  # land the kill somewhere inside the next root
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        done_before = json.loads(manifest.read_text(encoding="utf-8"))["roots"]
        assert 1 <= sum(e["status"] == "ok" for e in done_before.values()) < 4, "the kill must land mid-campaign"
        cached_before = PageCache(cache)
        cached_titles = {t for (t,) in cached_before._db.execute("SELECT title FROM pages")}
        cached_before.close()
        wiki.latency = 0.0
        n_before = len(wiki.log)
        resumed = _campaign(wiki.url, cache, out, roots)
        refetched = [r["params"]["titles"] for r in list(wiki.log)[n_before:] if "links" in r["params"].get("prop", "")]
    assert resumed.misses == len(set(refetched)) > 0
    assert not set(refetched) & cached_titles  # nothing already cached was fetched again
    files = {p.name: p.read_bytes() for p in (out / "graphs").iterdir() if p.suffix == ".json"}
    assert files == ref_files  # byte-identical graphs
    final = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["roots"]
    assert final["No such root"]["status"] == "skipped"
    assert len(cached_titles) + resumed.misses == ref.misses  # killed + resumed fetched each page once, like ref
