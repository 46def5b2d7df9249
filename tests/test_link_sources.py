"""Notebook 05b's link sources are one registry: the built-in ones and a source of your own (a link list, a finished
notebook-01 run folder) named by one parameter value, their titles held out and reported as the built-in ones'; and
the docs' lists of every registry are generated from it."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from lib.common.params import ParamError
from lib.common.registry import Registry
from lib.crawl.campaign import run_campaign
from lib.crawl.pages import Snapshot
from lib.crawl.sources import SnapshotSource
from lib.embedders import data, sources, stage
from lib.embedders.config import EmbeddersParams
from lib.run import registry_lists

TOPICS = dict(val_topics=["Biology and health sciences"], test_topics=["Geography", "Physical sciences"])


@pytest.fixture(scope="module")
def builtin():
    """The partition without a source of your own, as published."""
    return data.partition(**TOPICS, in_domain_fraction=0.05, seed=0)


def vital_link_list(tmp_path, part: data.Partition, n: int = 30):
    """A TSV link list among `n` training articles of `part` (History), each linking to its next six: titles a
    student would train on, were they not held out."""
    arts = part.train_articles
    titles = sorted(t for t in arts.title[arts.topic == "History"] if re.fullmatch(r"[A-Za-z ]+", t))[:n]
    lines = [f"{a}\t{titles[(i + k) % n]}" for i, a in enumerate(titles) for k in range(1, 7)]
    path = tmp_path / "mine.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, titles


def finished_run(tmp_path, n_roots: int = 4):
    """A run folder as notebook 01 leaves it: crawl/ (manifest and graphs), metrics.json's crawl
    summary, status.json."""
    titles = [f"Page {i}" for i in range(40)]
    snap = Snapshot(links={t: [titles[(i + k) % 40] for k in range(1, 5)] for i, t in enumerate(titles)})
    run = tmp_path / "mine_run"
    run_campaign(titles[:n_roots], SnapshotSource(snap), run / "crawl", 12, progress=False)
    (run / "metrics.json").write_text(json.dumps({"crawl": {"graphs": n_roots}}))
    (run / "status.json").write_text(json.dumps({"notebooks": {sources.CRAWL_NOTEBOOK: {"status": "ok"}}}))
    return run


def config(tmp_path, specs: list[str], **kw) -> EmbeddersParams:
    small = {"embedder_graphs": 3, "embedder_graph_nodes": 20, "embedder_test_graphs": 1}
    return EmbeddersParams(run_dir=str(tmp_path / "out"), embedder_sources=specs, **{**small, **kw})


def test_the_link_sources_are_one_registry_of_the_built_in_ones_and_your_own():
    assert isinstance(sources.SOURCES, Registry) and list(sources.SOURCES) == [
        "wikispeedia",
        "vital_heldout",
        "links",
        "run",
    ]
    assert EmbeddersParams().embedder_sources == ["wikispeedia", "vital_heldout"]  # the default, as published
    with pytest.raises(ValueError, match="registered already"):
        sources.SOURCES.add(sources.SOURCES["links"])
    assert all(row["about"] for row in sources.SOURCES.rows())
    spec = sources.parse("links:params/own_links_example/links.tsv")  # relative to the repository root
    assert (spec.label, spec.slug, sources.parse("wikispeedia").slug) == (
        "links:links.tsv",
        "links_links.tsv",
        "wikispeedia",
    )


@pytest.mark.parametrize(
    "make, spec, message",
    [
        (
            None,
            "links:{tmp}/nowhere.tsv",
            "embedder_sources has 'links:{tmp}/nowhere.tsv': no link list at "
            "{tmp}/nowhere.tsv; pass a file of source<TAB>target lines, the snapshot format notebook 01 reads (e.g. "
            "params/own_links_example/links.tsv)",
        ),
        (
            None,
            "run:{tmp}/nowhere",
            "embedder_sources has 'run:{tmp}/nowhere': no run folder at {tmp}/nowhere; pass a "
            "run folder notebook 01 finished (outputs/<run name>)",
        ),
        (
            lambda t: (t / "empty").mkdir(),
            "run:{tmp}/empty",
            "embedder_sources has 'run:{tmp}/empty': {tmp}/empty is "
            "not a finished notebook-01 run (it needs crawl/manifest.json, its graph files and metrics.json's crawl "
            "summary); run notebook 01 into it first (python -m lib.run.runner --notebooks 01 --run-name <name>) "
            "or pass another run folder",
        ),
        (
            lambda t: (finished_run(t) / "metrics.json").write_text("{}"),
            "run:{tmp}/mine_run",
            "is not a finished notebook-01 run",
        ),
        (
            lambda t: (finished_run(t) / "status.json").write_text(
                json.dumps({"notebooks": {sources.CRAWL_NOTEBOOK: {"status": "failed"}}})
            ),
            "run:{tmp}/mine_run",
            "is not a finished notebook-01 run",
        ),
        (
            lambda t: (finished_run(t) / "crawl" / "manifest.json").write_text("{"),
            "run:{tmp}/mine_run",
            "embedder_sources has 'run:{tmp}/mine_run': {tmp}/mine_run/crawl/manifest.json is not valid JSON",
        ),
        (
            None,
            "nowhere",
            "embedder_sources has 'nowhere': kind 'nowhere' is unknown; use one of ['wikispeedia', "
            "'vital_heldout', 'links', 'run'] (links:<path> and run:<path> name your own)",
        ),
        (None, "links", "embedder_sources has 'links' without a path; a link list of your own is `links:<path"),
        (
            None,
            "wikispeedia:x",
            "embedder_sources has 'wikispeedia:x': wikispeedia takes no argument; write wikispeedia",
        ),
    ],
)
def test_a_bad_source_is_refused_before_any_work_in_one_line_naming_it_and_the_fix(tmp_path, make, spec, message):
    if make is not None:
        make(tmp_path)
    with pytest.raises(ParamError) as e:
        config(tmp_path, [spec.format(tmp=tmp_path)])
    assert message.format(tmp=tmp_path) in str(e.value) and "\n" not in str(e.value)
    assert e.value.key == "embedder_sources"


def test_two_sources_of_one_label_or_none_are_refused(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "mine.tsv").write_text("A\tB\n")
    (tmp_path / "mine.tsv").write_text("A\tB\n")
    with pytest.raises(ParamError, match=r"embedder_sources names \['links:mine.tsv'\] more than once"):
        config(tmp_path, [f"links:{tmp_path / 'mine.tsv'}", f"links:{tmp_path / 'a' / 'mine.tsv'}"])
    with pytest.raises(ParamError, match="embedder_sources is empty"):
        config(tmp_path, [])


def test_a_link_list_of_your_own_is_crawled_and_its_titles_held_out_and_reported_as_the_built_in_ones(
    tmp_path, builtin
):
    path, titles = vital_link_list(tmp_path, builtin)
    cfg = config(tmp_path, [f"links:{path}"])
    graphs = stage.crawl_sources(cfg, None, tmp_path / "out")
    files = graphs["links:mine.tsv"]
    assert len(files) == 3 and all(f.parent.parent.name == "links_mine.tsv" for f in files)
    crawled = sources.graph_titles(files)
    assert set(crawled) <= set(titles) and len(crawled) >= 20
    part = data.partition(**TOPICS, in_domain_fraction=0.05, seed=0, own={"links:mine.tsv": crawled})
    assert part.test["links:mine.tsv"] == crawled
    assert not set(crawled) & {*part.train_articles.title, *part.val, *part.in_domain}
    texts = data.transfer_texts(part, ["titles"], 100_000, seed=0)
    assert not {data.normalised(t) for t in crawled} & {data.normalised(t) for t in texts["titles"]}
    counts = data.text_counts(texts, part).set_index("what")
    assert counts.loc["links:mine.tsv", "count"] == len(crawled)
    assert 0 <= counts.loc["links:mine.tsv", "mentioned_inside"] <= 1
    assert set(builtin.test) == {"wikispeedia", "vital_heldout"}  # without a source of your own: as published
    assert part.test["vital_heldout"] == builtin.test["vital_heldout"]


def test_a_link_list_too_small_to_draw_the_roots_from_says_which_setting_to_lower(tmp_path):
    (tmp_path / "small.tsv").write_text("A\tB\nB\tC\n")
    cfg = config(tmp_path, [f"links:{tmp_path / 'small.tsv'}"])
    with pytest.raises(
        ParamError,
        match=r"embedder_sources has 'links:.*small.tsv': it has fewer than "
        r"embedder_graphs=3 titles with 5 links or more to crawl from; lower "
        r"embedder_graphs or pass a larger link list",
    ):
        stage.crawl_sources(cfg, None, tmp_path / "out")


def test_a_finished_run_folder_of_notebook_01_gives_its_graphs_as_they_are(tmp_path):
    run = finished_run(tmp_path)
    cfg = config(tmp_path, [f"run:{run}"])
    files = stage.crawl_sources(cfg, None, tmp_path / "out")["run:mine_run"]
    assert {f.parent.parent for f in files} == {run / "crawl"} and len(files) == 4
    assert not (tmp_path / "out" / "embedders" / "crawl").exists()  # nothing crawled again
    few = config(tmp_path, [f"run:{run}"], embedder_graphs=5, embedder_test_graphs=3)
    with pytest.raises(
        ParamError,
        match=r"its 4 graphs leave fewer than two to train and validate on beside "
        r"embedder_test_graphs=3; lower embedder_test_graphs",
    ):
        stage.crawl_sources(few, None, tmp_path / "out")


def test_rows_of_your_own_source_are_keyed_by_its_graphs_and_the_built_in_ones_as_published(tmp_path, monkeypatch):
    run = finished_run(tmp_path)
    cfg = config(tmp_path, ["wikispeedia", f"run:{run}"])
    files = sources.finished_run_graphs(run)
    calls = []

    def scored(files, pairs, out_root, params_of, rows_file=None, key=None, progress=False):
        calls.append((key, out_root))
        return pd.DataFrame([{**key, "embedder": "e", "seed": 0, "auc": 0.5}])

    monkeypatch.setattr(stage, "graph_link_prediction", scored)
    stage.link_prediction(cfg, {"wikispeedia": files[:2], "run:mine_run": files}, {"e": {"folder": None}}, tmp_path)
    digest = sources.graphs_digest(files)
    assert calls == [
        ({"source": "wikispeedia"}, tmp_path / "embedders" / "lp" / "wikispeedia"),
        ({"source": "run:mine_run", "graphs": digest}, tmp_path / "embedders" / "lp" / "run_mine_run" / digest),
    ]
    files[0].write_text(files[0].read_text() + "\n")  # a run crawled again: its rows are scored again
    assert sources.graphs_digest(files) != digest


# ------------------------------------------------------------------------------------------ generated docs lists
@pytest.mark.parametrize("key", list(registry_lists.REGISTRIES))
def test_every_registry_list_in_the_docs_is_the_one_its_registry_generates(key):
    begin, end = registry_lists.markers(key)
    texts = [p.read_text(encoding="utf-8") for p in registry_lists.pages()]
    blocks = [t[t.index(begin) : t.index(end) + len(end)] for t in texts if begin in t]
    assert blocks, f"no page lists the {registry_lists.REGISTRIES[key].what}s; add the markers {begin} {end}"
    for block in blocks:
        assert block == registry_lists.render(key), "run python -m lib.run.report"
    names = re.findall(r"^- `([^`]+)`", blocks[0], flags=re.M)
    assert names == list(registry_lists.REGISTRIES[key])


def test_a_list_that_differs_from_its_registry_is_rewritten_and_fails_the_check():
    begin, end = registry_lists.markers("negative-sets")
    stale = f"# x\n{begin}\n- `uniform`: uniform\n- `dist2`: distance 2\n{end}\ntail\n"
    fresh = registry_lists.with_lists(stale)
    assert fresh != stale and fresh.endswith("tail\n") and "- `popular`: degree-biased" in fresh
    assert registry_lists.with_lists(fresh) == fresh
    rounded = registry_lists.render("encoder-kinds")
    assert "- `rounded`: a rounded copy is" in rounded  # the kind the hand-written list lacked
