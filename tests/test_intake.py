"""Where titles enter: one title check (lib.common.titles) for graph files, link lists, Wikispeedia, live answers
and the embedder; the link list's progress bar; two runs filling one embedding store; a stored vector that does not
depend on the titles encoded with it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
import unicodedata

import pytest
from mockwiki import MockWiki

from lib.common import chunks
from lib.common.graphio import GraphFormatError, read_graph
from lib.common.paths import ROOT
from lib.common.titles import TitleError, check_title
from lib.crawl.campaign import import_graphs
from lib.crawl.live import LiveSource
from lib.crawl.pages import CrawlError, Snapshot, SnapshotError
from lib.crawl.sources import SkippedLinesWarning, read_snapshot, read_topics
from lib.embed.encoder import EmbedError, clean_titles, load_model
from lib.embed.store import MAGIC, EmbeddingStore, embed_titles

BAD_TITLES = {
    "tab": "Climate\tchange",
    "newline": "Climate\nchange",
    "empty": "",
    "whitespace": "   ",
    "10,000 characters": "x" * 10_000,
    "control character": "Climate\x01change",
}


def write_graph_file(path, labels: list[str]):
    nodes = [{"id": 10 + i, "label": t} for i, t in enumerate(labels)]
    edges = [{"source": 10, "target": 10 + i} for i in range(1, len(labels))]
    path.write_text(json.dumps({"nodes": nodes, "edges": edges}), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------ the title check
def test_the_title_check_normalises_what_names_the_same_page_and_refuses_the_rest():
    decomposed = unicodedata.normalize("NFD", "Café")
    assert check_title(f"  {decomposed} ") == "Café"  # whitespace stripped, NFC: Wikipedia's own title
    assert check_title("é" * 127) == "é" * 127  # 254 bytes of UTF-8: within the limit
    for bad, why in [
        ("", "empty"),
        ("a\tb", "a tab (U+0009)"),
        ("a\nb", "a newline (U+000A)"),
        ("a\u2028b", "a line separator"),
        ("a\x7fb", "a control character (U+007F)"),
        ("é" * 128, "256 bytes of UTF-8, more than Wikipedia's 255"),
    ]:
        with pytest.raises(TitleError, match=re.escape(why)):
            check_title(bad)


@pytest.mark.parametrize("case", sorted(BAD_TITLES))
def test_a_graph_file_with_a_bad_title_is_refused_in_one_line_naming_file_and_node(tmp_path, case):
    f = write_graph_file(tmp_path / "mine.json", ["Sustainability", BAD_TITLES[case], "Energy"])
    with pytest.raises(GraphFormatError) as e:
        read_graph(f)
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 300, msg
    assert msg.startswith(f"graph file {f}: node #1 (id 11): "), msg
    assert any(fix in msg for fix in ("remove it", "shorten it", "give it the article's title")), msg
    with pytest.raises(GraphFormatError, match="node #1 "):  # the same for a folder of graph files to import
        import_graphs(tmp_path, tmp_path / "crawl")
    with pytest.raises(GraphFormatError, match="node #1 "):  # and for a graph file given as a link snapshot
        read_snapshot(f)


def test_graph_labels_are_read_stripped_and_in_nfc(tmp_path):
    f = write_graph_file(tmp_path / "g.json", [" Sustainability ", unicodedata.normalize("NFD", "Café")])
    assert read_graph(f).titles == ["Sustainability", "Café"]


def test_the_embedder_refuses_a_title_with_a_control_character_naming_its_index():
    with pytest.raises(EmbedError, match=r"title #1: title 'a\\tb' holds a tab"):
        clean_titles(["ok", "a\tb"], page_titles=True)


def test_a_topics_file_with_a_bad_title_is_refused_naming_the_line(tmp_path):
    f = tmp_path / "topics.tsv"
    f.write_text("A\tScience\nB%0AC\tHistory\n", encoding="utf-8")
    with pytest.raises(SnapshotError, match=r"topics.tsv:2: title 'B\\nC' holds a newline"):
        read_topics(f)


def test_a_live_answer_with_a_title_no_page_can_have_is_a_crawl_error():
    snap = Snapshot(links={"A": ["B\x01C", "D"], "D": []})
    with MockWiki(snap) as wiki:
        src = LiveSource("tests@example.org", api_url=wiki.url, retry_wait=0.01, read_timeout=2.0)
        assert src.page("A\tB").status == "missing"  # asked for: not worth a request
        with pytest.raises(CrawlError, match=r"answered a link of page 'A' that is not a title: title 'B\\x01C'"):
            src.page("A")


# ------------------------------------------------------------------------------------------------ link lists
def test_a_link_list_skips_its_bad_lines_with_a_count_and_keeps_the_good_ones(tmp_path):
    f = tmp_path / "links.tsv"
    f.write_text(
        "# a dump\nA\tB\nA\tClimate\tchange\n\tB\nB\tC\nC\tD%0AE\nC\t" + "x" * 300 + "\nC\tA\nonly-one-column\n",
        encoding="utf-8",
    )
    with pytest.warns(SkippedLinesWarning) as w:
        snap = read_snapshot(f, progress=False)
    assert snap.links == {"A": ["B"], "B": ["C"], "C": ["A"]} and snap.skipped_lines == 5
    (msg,) = [str(x.message) for x in w if x.category is SkippedLinesWarning]
    assert "\n" not in msg, msg
    assert msg.startswith(f"{f}: skipped 5 of 8 lines that are not links (line 3: unknown kind 'change'"), msg
    assert "line 4: source: the title is empty" in msg and "line 6: target: title 'D\\nE' holds a newline" in msg
    assert msg.endswith(" | ...); correct them to keep their links"), msg  # three shown, then "..."


def test_a_link_list_of_bad_lines_only_is_refused_naming_the_first(tmp_path):
    f = tmp_path / "links.tsv"
    f.write_text("\tB\n", encoding="utf-8")
    with pytest.raises(
        SnapshotError,
        match=r"links.tsv holds no links; write one source<TAB>target line per link "
        r"\(line 1: source: the title is empty",
    ):
        read_snapshot(f, progress=False)


def test_reading_a_link_list_shows_a_progress_bar_of_bytes(tmp_path, capsys):
    f = tmp_path / "links.tsv"
    f.write_text("".join(f"Page {i}\tPage {i + 1}\n" for i in range(150_000)), encoding="utf-8")  # over 1 MiB
    snap = read_snapshot(f, progress=True)
    err = capsys.readouterr().err
    assert len(snap.links) == 150_000
    assert "read links.tsv: 100%" in err and f"{f.stat().st_size / 1e6:.2f}M/" in err, err[-300:]
    read_snapshot(f, progress=False)
    assert "read links.tsv" not in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ the store
FILLER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    import numpy as np
    from lib.embed.store import EmbeddingStore, embed_titles

    class SlowEncoder:  # a stand-in static model: encoding takes a second, so the two runs overlap
        wikigat_kind, wikigat_model_id = "static", "slow-fake-model"

        def encode(self, titles):
            time.sleep(1.0)
            return np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in titles], dtype=np.float32), 0

    store_dir, go, ready, titles = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), json.loads(sys.argv[4])
    store = EmbeddingStore(store_dir, SlowEncoder.wikigat_model_id)
    ready.touch()
    while not go.exists():
        time.sleep(0.01)
    stats = embed_titles(titles, SlowEncoder(), store, progress=False)
    print(json.dumps(stats), flush=True)
""")


@pytest.mark.slow
def test_two_runs_filling_one_store_encode_each_title_once(tmp_path):
    titles = [f"Title {i}" for i in range(40)]
    script, go = tmp_path / "fill.py", tmp_path / "go"
    script.write_text(FILLER, encoding="utf-8")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    ready = [tmp_path / f"ready{i}" for i in range(2)]
    runs = [
        subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / "store"), str(go), str(r), json.dumps(titles)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        for r in ready
    ]
    deadline = time.monotonic() + 120
    while not all(r.exists() for r in ready) and time.monotonic() < deadline:
        time.sleep(0.05)  # both have imported and opened the store: they start filling within milliseconds
    go.touch()
    outs = [r.communicate(timeout=120) for r in runs]
    assert all(r.returncode == 0 for r in runs), [o[1][-2000:] for o in outs]
    stats = [json.loads(o[0].strip().splitlines()[-1]) for o in outs]
    assert sorted(s["newly_encoded"] for s in stats) == [0, 40], stats  # the second adopted the first's chunks
    assert sum("waiting for another run filling the embedding store" in o[0] for o in outs) == 1, outs
    stored = [
        t
        for f in sorted((tmp_path / "store" / "chunks").glob("c*.bin"))
        for t in chunks.read_header(f, MAGIC)[0]["titles"]
    ]
    assert sorted(stored) == sorted(titles)  # each title written once


@pytest.fixture(scope="module")
def model():
    return load_model()


def test_a_stored_vector_does_not_depend_on_the_titles_encoded_with_it(model, tmp_path):
    tok = model.tokenizer
    words = ["Energy", "Water", "Jazz", "Paris", "Solar", "Wind", "Coal", "Iron", "Gold", "Salt", "Rice", "Tea"]
    titles = [f"{a} {b}" for a in words for b in words if a != b][:45]
    assert len({len(tok(t)["input_ids"]) for t in titles}) <= 3  # a few token lengths: batches of many titles
    first, later = titles[:43], titles[43:]
    cold = EmbeddingStore(tmp_path / "cold", model.wikigat_model_id)
    embed_titles(titles, model, cold, progress=False)  # one call: every title batched with many others
    warm = EmbeddingStore(tmp_path / "warm", model.wikigat_model_id)
    embed_titles(first, model, warm, progress=False)
    stats = embed_titles(titles, model, warm, progress=False)  # only the last two: a batch of two
    assert stats["newly_encoded"] == len(later) == 2
    assert cold.get(titles).tobytes() == warm.get(titles).tobytes()
