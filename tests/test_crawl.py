"""Stage 1: Algorithm 1 semantics, sources, cache, campaign resume, bad input."""

import json
import shutil

import pytest

from lib.common.graphio import Graph, read_graph
from lib.common.params import ParamError
from lib.crawl.bfs import bfs_crawl
from lib.crawl.campaign import graph_stats, read_roots, run_campaign
from lib.crawl.pages import Page, RootSkipped, Snapshot, SnapshotError
from lib.crawl.sources import (
    CachedSource,
    PageCache,
    SkippedLinesWarning,
    SnapshotSource,
    read_snapshot,
    title_mention_links,
)


def src(links, redirects=None, disamb=None, topics=None):
    return SnapshotSource(
        Snapshot(links=links, redirects=redirects or {}, disambiguation=set(disamb or ()), topics=topics or {})
    )


def named_edges(g):
    return {frozenset((g.titles[u], g.titles[v])) for u, v in g.edges}


def test_bfs_adds_edges_to_visited_nodes_and_orders_nodes_breadth_first():
    s = src({"R": ["A", "B"], "A": ["B", "C", "R"], "B": ["A", "D"], "C": [], "D": ["C"]})
    g = bfs_crawl(s, "R", 100)
    assert g.titles == ["R", "A", "B", "C", "D"]
    assert named_edges(g) == {
        frozenset(p) for p in [("R", "A"), ("R", "B"), ("A", "B"), ("A", "C"), ("B", "D"), ("D", "C")]
    }
    assert g.metadata["connected"] and g.metadata["num_nodes"] == 5 and g.metadata["num_edges"] == 6


def test_max_nodes_cut_in_the_middle_of_a_page_stops_even_edges_to_visited_nodes():
    # R -> A, B, C ; max_nodes=3 so the loop breaks before C, and A's links (incl. to visited B) are never added.
    s = src({"R": ["A", "B", "C"], "A": ["B"], "B": [], "C": []})
    g = bfs_crawl(s, "R", 3)
    assert g.titles == ["R", "A", "B"]
    assert named_edges(g) == {frozenset(("R", "A")), frozenset(("R", "B"))}
    # with one more node allowed C gets in, and the while loop stops at once (graph full) before expanding A
    g4 = bfs_crawl(s, "R", 4)
    assert g4.titles == ["R", "A", "B", "C"] and frozenset(("A", "B")) not in named_edges(g4)


def test_max_nodes_one_is_just_the_root():
    g = bfs_crawl(src({"R": ["A"]}), "R", 1)
    assert g.titles == ["R"] and g.edges == []


def test_no_self_loops_or_duplicate_edges():
    s = src({"R": ["R", "A", "A"], "A": ["R", "R"]})
    g = bfs_crawl(s, "R", 10)
    assert g.edges == [(0, 1)]


def test_redirects_make_one_article_one_node():
    s = src(
        {"R": ["USA", "United States", "X"], "United States": ["R"], "X": ["US"]},
        redirects={"USA": "United States", "US": "USA", "Root": "R"},
    )
    g = bfs_crawl(s, "Root", 10)
    assert g.titles == ["R", "United States", "X"]
    assert g.metadata["root"] == "Root" and g.metadata["root_title"] == "R"
    assert named_edges(g) == {
        frozenset(("R", "United States")),
        frozenset(("R", "X")),
        frozenset(("X", "United States")),
    }


def test_missing_and_disambiguation_pages_stay_as_nodes_but_are_not_expanded():
    s = src({"R": ["Mercury", "Red link", "B"], "Mercury": ["Planet"], "B": []}, disamb={"Mercury"})
    g = bfs_crawl(s, "R", 10)
    assert g.titles == ["R", "Mercury", "Red link", "B"]  # "Planet" never reached: Mercury was skipped
    assert g.metadata["pages_skipped"] == {"missing": 1, "disambiguation": 1}


def test_missing_or_disambiguation_root_is_skipped():
    with pytest.raises(RootSkipped, match="missing"):
        bfs_crawl(src({"R": []}), "Nope", 10)
    with pytest.raises(RootSkipped, match="disambiguation"):
        bfs_crawl(src({"M": ["A"]}, disamb={"M"}), "M", 10)


def test_bfs_graph_is_connected_and_stats_report_a_disconnected_graph():
    g = bfs_crawl(src({"R": ["A"], "A": ["B"], "B": []}), "R", 10)
    assert graph_stats(g)["connected"]
    disconnected = Graph(titles=["a", "b", "c", "d"], edges=[(0, 1), (2, 3)])
    st = graph_stats(disconnected)
    assert st["connected"] is False and st["leaf_share"] == 1.0


def test_topics_are_kept():
    g = bfs_crawl(src({"R": ["A"], "A": []}, topics={"R": "Arts"}), "R", 10)
    assert g.topics == ["Arts", None]


def test_title_mention_links_whole_tokens_longest_match_first_letter_case():
    extracts = {
        "Water": "Water covers Earth. Waterloo is not water-proof.",
        "Earth": "Earth has water and climate change.",
        "Climate": "Climate is weather.",
        "Climate change": "Climate change warms the Earth.",
        "Weather": "x",
    }
    links = title_mention_links(extracts)
    assert links["Water"] == ["Earth"]  # "Waterloo" is not "Water"; self-links dropped
    assert links["Earth"] == ["Climate change", "Water"]  # longest match: not also "Climate"; "water" matches Water
    assert links["Climate"] == ["Weather"]


def test_read_snapshot_tsv_plain_urlencoded_redirect_disambiguation(tmp_path):
    p = tmp_path / "links.tsv"
    p.write_text(
        "# comment\nSustainable_development\tClimate%20change\n\nR\tA\nUS\tUnited States\tredirect\n"
        "Mercury\tPlanet\tdisambiguation\n",
        encoding="utf-8",
    )
    snap = read_snapshot(p)
    assert snap.links["Sustainable development"] == ["Climate change"]
    assert snap.redirects == {"US": "United States"} and snap.disambiguation == {"Mercury"}


@pytest.mark.parametrize(
    "body,msg",
    [
        ("A\tB\tweird\n", "line 1: unknown kind"),
        ("\tB\n", "line 1: source: the title is empty"),
    ],
)
def test_malformed_snapshot_line_names_file_and_line(tmp_path, body, msg):
    """A file left without a link by its malformed lines is refused naming the first (one among good lines is
    skipped with a warning: tests/test_intake.py)."""
    p = tmp_path / "bad.tsv"
    p.write_text(body, encoding="utf-8")
    with pytest.raises(SnapshotError, match=msg) as e:
        read_snapshot(p, progress=False)
    assert "bad.tsv holds no links" in str(e.value)


def test_a_line_with_one_column_among_links_is_skipped_naming_it(tmp_path):
    p = tmp_path / "bad.tsv"
    p.write_text("A\tB\nonly-one-column\n", encoding="utf-8")
    with pytest.warns(SkippedLinesWarning, match="bad.tsv: skipped 1 of 2 lines that are not links .line 2: expected"):
        assert read_snapshot(p, progress=False).links == {"A": ["B"]}


def test_snapshot_non_utf8_and_missing_file(tmp_path):
    p = tmp_path / "latin.tsv"
    p.write_bytes(b"A\tB\nCaf\xe9\tB\n")
    with pytest.raises(SnapshotError, match="latin.tsv:2: not valid UTF-8"):
        read_snapshot(p)
    with pytest.raises(SnapshotError, match="does not exist"):
        read_snapshot(tmp_path / "nope.tsv")


def test_snapshot_from_graph_json_links_both_ways(tmp_path):
    p = tmp_path / "seed.json"
    p.write_text(
        json.dumps(
            {
                "nodes": [{"id": 5, "label": "R"}, {"id": 7, "label": "A"}, {"id": 9, "label": "B"}],
                "edges": [{"source": 5, "target": 7}, {"source": 9, "target": 7}],
            }
        )
    )
    g = bfs_crawl(SnapshotSource(read_snapshot(p)), "B", 10)
    assert g.titles == ["B", "A", "R"]


class CountingSource:
    """Counts real fetches; optionally dies after `die_after` fetches (a kill in the middle of a campaign)."""

    def __init__(self, inner, die_after=None):
        self.inner, self.die_after, self.calls = inner, die_after, []
        self.source_id = inner.source_id

    def page(self, title):
        if self.die_after is not None and len(self.calls) >= self.die_after:
            raise KeyboardInterrupt("simulated kill")
        self.calls.append(title)
        return self.inner.page(title)

    def topic(self, title):
        return self.inner.topic(title)


def chain_snapshot(n=60):
    # two overlapping neighbourhoods so roots share pages
    links = {f"P{i}": [f"P{(i * 7 + k) % n}" for k in (1, 2, 3)] for i in range(n)}
    return Snapshot(links=links)


def test_campaign_kill_and_resume_gives_identical_files_and_no_repeat_fetch(tmp_path):
    roots = ["P0", "P5", "Missing root", "P11"]
    ref = CountingSource(SnapshotSource(chain_snapshot()))
    run_campaign(roots, CachedSource(ref, PageCache(tmp_path / "ref.sqlite")), tmp_path / "ref", 25, progress=False)

    assert len(ref.calls) > 10
    dying = CountingSource(SnapshotSource(chain_snapshot()), die_after=len(ref.calls) // 2)
    cache = PageCache(tmp_path / "c.sqlite")
    with pytest.raises(KeyboardInterrupt):
        run_campaign(roots, CachedSource(dying, cache), tmp_path / "run", 25, progress=False)
    fetched_before = list(dying.calls)
    again = CountingSource(SnapshotSource(chain_snapshot()))
    m = run_campaign(roots, CachedSource(again, cache), tmp_path / "run", 25, progress=False)

    assert not set(fetched_before) & set(again.calls), "a page cached before the kill was fetched again"
    assert len(fetched_before) + len(again.calls) == len(ref.calls)
    for name in (tmp_path / "ref" / "graphs").iterdir():
        assert (tmp_path / "run" / "graphs" / name.name).read_bytes() == name.read_bytes()
    assert m["roots"]["Missing root"]["status"] == "skipped" and "missing" in m["roots"]["Missing root"]["reason"]
    assert [e["status"] for e in m["roots"].values()] == ["ok", "ok", "skipped", "ok"]
    # a third run touches nothing
    idle = CountingSource(SnapshotSource(chain_snapshot()))
    run_campaign(roots, CachedSource(idle, cache), tmp_path / "run", 25, progress=False)
    assert idle.calls == []


def test_campaign_shared_cache_fetches_each_page_once(tmp_path):
    inner = CountingSource(SnapshotSource(chain_snapshot()))
    run_campaign(
        ["P0", "P1", "P2"], CachedSource(inner, PageCache(tmp_path / "c.sqlite")), tmp_path / "o", 40, progress=False
    )
    assert len(inner.calls) == len(set(inner.calls))


def test_campaign_manifest_records_files_and_hashes(tmp_path):
    m = run_campaign(["P0"], SnapshotSource(chain_snapshot()), tmp_path, 20, progress=False)
    e = m["roots"]["P0"]
    g = read_graph(tmp_path / e["file"])
    assert g.num_nodes == e["num_nodes"] == 20 and g.num_edges == e["num_edges"] and e["connected"]
    assert g.metadata["max_nodes"] == 20 and "sha256" in e


def test_a_crawl_is_not_resumed_under_other_settings(tmp_path):
    inner = CountingSource(SnapshotSource(chain_snapshot()))
    run_campaign(["P0"], inner, tmp_path / "crawl", 10, progress=False)
    n = len(inner.calls)
    with pytest.raises(ValueError, match=r"crawl in .* was made with other settings \(max_nodes\); use another run"):
        run_campaign(["P0"], inner, tmp_path / "crawl", 12, progress=False)
    assert len(inner.calls) == n  # refused before any page was fetched
    shutil.rmtree(tmp_path / "crawl")  # the documented fix
    m = run_campaign(["P0"], inner, tmp_path / "crawl", 12, progress=False)
    assert len(inner.calls) > n and m["roots"]["P0"]["num_nodes"] == 12


@pytest.mark.parametrize(
    "roots,max_nodes,msg",
    [
        ([], 10, "root list is empty"),
        (["  "], 10, "root list is empty"),
        (["R"], 0, "max_nodes=0"),
        (["R"], 2.5, "max_nodes=2.5"),
        ("R", 10, "not a single string"),
    ],
)
def test_bad_campaign_input_fails_before_any_work(tmp_path, roots, max_nodes, msg):
    inner = CountingSource(SnapshotSource(chain_snapshot()))
    with pytest.raises(ParamError, match=msg):
        run_campaign(roots, inner, tmp_path / "o", max_nodes, progress=False)
    assert inner.calls == [] and not (tmp_path / "o").exists()


def test_page_cache_round_trip(tmp_path):
    c = PageCache(tmp_path / "c.sqlite")
    c.put("s", "T", Page("T2", "ok", ("a", "b")))
    c.close()
    assert PageCache(tmp_path / "c.sqlite").get("s", "T") == Page("T2", "ok", ("a", "b"))


def test_read_roots(tmp_path):
    p = tmp_path / "r.txt"
    p.write_text("# header\nSustainability\n\n Water \n", encoding="utf-8")
    assert read_roots(p) == ["Sustainability", "Water"]
    with pytest.raises(ParamError, match="does not exist"):
        read_roots(tmp_path / "none.txt")


def test_embedded_source_is_real_vital_articles():
    from lib.crawl.sources import EmbeddedSource

    s = EmbeddedSource(cache_dir=None)
    assert len(s.snapshot.links) == 10033
    assert len(set(s.snapshot.topics.values())) == 12
    p = s.page("Sustainability")
    assert p.status == "ok" and "Sustainable development" in p.links
    g = bfs_crawl(s, "Sustainability", 300)
    assert g.num_nodes == 300 and g.metadata["connected"] and all(t is not None for t in g.topics)


def test_offline_roots_are_all_pages_of_the_embedded_source():
    from lib.common.paths import PARAMS
    from lib.crawl.sources import EmbeddedSource

    s = EmbeddedSource(cache_dir=None)
    roots = read_roots(PARAMS / "roots_offline.txt")
    assert len(roots) >= 50
    assert [r for r in roots if s.page(r).status != "ok"] == []
    seed = read_roots(PARAMS / "roots_seed.txt")
    assert len(seed) == len(set(seed)) >= 300 and set(roots) <= set(seed)


def test_pyvis_html_is_self_contained(tmp_path):
    import re

    from lib.viz.graph import graph_to_html

    g = bfs_crawl(src({"R": ["A", "B"], "A": [], "B": []}, topics={"R": "Arts"}), "R", 10)
    html = graph_to_html(g, tmp_path / "g.html", extra_edges=[(1, 2)]).read_text(encoding="utf-8")
    assert not re.search(r"<(script|link)\b[^>]*(src|href)=\"https?://", html)
    assert "vis.Network" in html and "new vis.DataSet" in html  # the library itself is inlined
    assert '"dashes": true' in html


def test_atomic_writes_leave_no_temp_file_and_normal_permissions(tmp_path):
    import os

    from lib.common.paths import atomic_write_text

    umask = os.umask(0o022)
    os.umask(umask)
    p = atomic_write_text(tmp_path / "sub" / "f.json", "{}")
    assert p.read_text() == "{}" and [x.name for x in p.parent.iterdir()] == ["f.json"]
    assert (p.stat().st_mode & 0o777) == (0o666 & ~umask)


def test_offline_roots_file_is_a_fresh_stratified_draw():
    import importlib.util
    from collections import Counter

    from lib.common.paths import PARAMS, ROOT
    from lib.crawl.campaign import draw_offline_roots, read_roots
    from lib.crawl.sources import embedded_snapshot

    spec = importlib.util.spec_from_file_location("draw_roots", ROOT / "scripts" / "draw_offline_roots.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (PARAMS / "roots_offline_400.txt").read_text(encoding="utf-8") == mod.render(400, 0, 5)
    snap = embedded_snapshot()
    roots = read_roots(PARAMS / "roots_offline_400.txt")
    assert len(roots) == len(set(roots)) == 400
    assert all(len(snap.links[r]) >= 5 for r in roots)
    eligible = Counter(snap.topics[t] for t in snap.links if len(snap.links[t]) >= 5 and snap.topics.get(t))
    got = Counter(snap.topics[r] for r in roots)
    total = sum(eligible.values())
    assert set(got) == set(eligible) and all(abs(got[k] - 400 * eligible[k] / total) < 1 for k in eligible)
    assert draw_offline_roots(40, 0, 5, snap) != draw_offline_roots(40, 1, 5, snap)
    with pytest.raises(ValueError, match="eligible titles"):
        draw_offline_roots(10**6, 0, 5, snap)


def test_a_campaign_whose_roots_are_all_missing_is_an_error_naming_them(tmp_path):
    from lib.crawl.campaign import run_campaign
    from lib.crawl.pages import CrawlError

    src = SnapshotSource(Snapshot(links={"A": ["B"], "B": ["A"]}))
    with pytest.raises(CrawlError, match="none of the 2 roots gave a graph.*'Nope'"):
        run_campaign(["Nope", "Nada"], src, tmp_path / "c", 10, progress=False)
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert {e["status"] for e in manifest["roots"].values()} == {"skipped"}  # listed, with the reason, before the error
    m = run_campaign(["Nope", "A"], src, tmp_path / "d", 10, progress=False)  # one left: skipped and counted, no error
    assert [e["status"] for e in m["roots"].values()] == ["skipped", "ok"]


def test_import_graphs_turns_seed_format_files_into_a_campaign(tmp_path):
    from lib.common.graphio import read_graph
    from lib.crawl.campaign import import_graphs, ok_graph_files

    folder = tmp_path / "g"
    folder.mkdir()
    (folder / "b.json").write_text(
        json.dumps(
            {
                "nodes": [{"id": 7, "label": "Root B"}, {"id": 9, "label": "X"}],
                "edges": [{"source": 7, "target": 9}, {"source": 9, "target": 7}],
            }
        )
    )
    (folder / "a.json").write_text(
        json.dumps(
            {
                "nodes": [{"id": 0, "label": "Root A"}, {"id": 1, "label": "X"}, {"id": 2, "label": "Y"}],
                "edges": [{"source": 0, "target": 1}],
            }
        )
    )
    m = import_graphs(folder, tmp_path / "crawl")
    assert list(m["roots"]) == ["Root A", "Root B"]
    assert m["roots"]["Root A"]["connected"] is False and m["roots"]["Root B"]["num_edges"] == 1
    g = read_graph(ok_graph_files(tmp_path / "crawl")[1])
    assert g.titles == ["Root B", "X"] and g.edges == [(0, 1)] and g.metadata["file"] == "b.json"
    (folder / "c.json").write_text(json.dumps({"nodes": [{"id": 0, "label": "Root A"}], "edges": []}))
    with pytest.raises(SnapshotError, match="a.json and c.json have the same root 'Root A'"):
        import_graphs(folder, tmp_path / "crawl2")
    with pytest.raises(SnapshotError, match="holds no .json graph files"):
        import_graphs(tmp_path / "empty", tmp_path / "crawl3")


def test_a_topics_file_labels_a_snapshot_and_bad_lines_are_named(tmp_path):
    from lib.crawl.bfs import bfs_crawl
    from lib.crawl.sources import make_source

    links = tmp_path / "links.tsv"
    links.write_text("Root_page\tOther%20page\nOther_page\tRoot_page\n")
    topics = tmp_path / "topics.tsv"
    topics.write_text("# title<TAB>topic\nRoot%20page\tScience\n")
    plain = make_source("snapshot", snapshot_path=str(links))
    src = make_source("snapshot", snapshot_path=str(links), topics_file=str(topics))
    assert bfs_crawl(src, "Root page", 5).topics == ["Science", None]
    assert bfs_crawl(plain, "Root page", 5).topics is None
    assert src.source_id != plain.source_id  # a campaign made without the topics is not reused
    topics.write_text("Root page Science\n")
    with pytest.raises(SnapshotError, match=r"topics.tsv:1: expected 'title<TAB>topic'"):
        make_source("snapshot", snapshot_path=str(links), topics_file=str(topics))
    with pytest.raises(ParamError, match="topics_file is read with source='snapshot' only"):
        make_source("embedded", topics_file=str(topics))


def test_a_snapshot_without_a_link_row_is_named_with_the_fix(tmp_path):
    from lib.crawl.sources import read_snapshot

    f = tmp_path / "links.tsv"
    f.write_text("# only a comment\n\n")
    with pytest.raises(SnapshotError, match=r"links.tsv holds no links; write one source<TAB>target line per link"):
        read_snapshot(f)
    with pytest.raises(SnapshotError, match="does not exist; pass a TSV link list or a graph JSON file"):
        read_snapshot(tmp_path / "nope.tsv")


def test_the_crawl_config_builds_the_named_source_behind_the_page_cache(tmp_path):
    import pandas as pd

    from lib.crawl.campaign import overlap_sentence
    from lib.crawl.config import CrawlParams
    from lib.crawl.sources import EmbeddedSource

    cfg = CrawlParams(source="embedded")
    assert isinstance(cfg.link_source(), EmbeddedSource)
    cached = cfg.link_source(cache=tmp_path / "pages.sqlite")
    assert isinstance(cached, CachedSource) and cached.source_id == EmbeddedSource().source_id
    with pytest.raises(ParamError, match="snapshot_path"):
        CrawlParams(source="snapshot")
    rows = pd.DataFrame({"max_nodes": [200, 2000], "distinct_titles": [1500, 9000], "shared_share": [0.5, 0.81234]})
    assert overlap_sentence(rows, 40) == (
        "40 offline roots: from 200 to 2,000 nodes per graph the distinct titles grow "
        "from 1,500 to 9,000 while the shared share goes from 0.500 to 0.812 (the "
        "seed's live campaign: 0.92)."
    )
