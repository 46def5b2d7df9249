"""Bring your own links: link data other than the embedded default through the runner, notebooks 01 (or an import)
to 04 and 03b, on tiny graphs. Each source has no topic labels, so every topic-dependent step must say so and go on.

(a) a snapshot TSV with URL-encoded titles, through 01-03b; (b) the local mock MediaWiki server as the live source,
through 01-02: it crawls the same links as (a), and after notebook 01 every source is the same crawl folder; (c) the
seed's own JSON graph files, imported instead of crawled, through 01-04 (notebook 04 finds the picture's graph among
imported files, and has no topics either).
"""

import json
import urllib.parse

import pytest
from mockwiki import MockWiki, synthetic_snapshot

from lib.run.runner import main

pytestmark = pytest.mark.slow  # up to about a minute per source: up to four notebooks through the runner

N_ROOTS = 8
TINY = [
    "-p",
    "max_nodes=60",
    "-p",
    "n_seeds=1",
    "-p",
    "n_test_graphs=2",
    "-p",
    "gat_epochs=1",
    "-p",
    "baseline_epochs=1",
    "-p",
    "beyond_variants=[dot, ncn_feat]",
    "-p",
    "beyond_epochs=1",
    "-p",
    "sweep_dropout=[0.5]",
    "-p",
    "size_grid=[2, 4]",
    "-p",
    "size_epochs=1",
    "-p",
    "threads=1",
]


def snapshot_without_topics():
    snap = synthetic_snapshot(400, seed=3, community_size=100, median_links=12)
    snap.topics.clear()
    return snap


def roots_of(snap) -> list[str]:
    return [t for t in sorted(snap.links) if t.startswith("Article")][:: 400 // N_ROOTS][:N_ROOTS]


def run_and_check(tmp_path, name: str, params: dict, notebooks=("01", "02", "03", "03b")):
    prof = tmp_path / f"{name}.yaml"
    prof.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in params.items()))
    out = tmp_path / "runs"
    code = main(
        [
            "--params",
            str(prof),
            *TINY,
            "--outputs",
            str(out),
            "--run-name",
            name,
            "--notebooks",
            *notebooks,
            "--summary",
            str(tmp_path / "summary"),
        ]
    )
    run = out / name
    status = json.loads((run / "status.json").read_text())
    assert code == 0, status["notebooks"]
    assert status["complete"] and [v["status"] for v in status["notebooks"].values()] == ["ok"] * len(notebooks)
    metrics = json.loads((run / "metrics.json").read_text())
    text = "".join(json.dumps(json.loads((run / nb).read_text())["cells"]) for nb in status["notebooks"])
    assert "has no topic labels" in text
    if "03" not in notebooks:
        return metrics
    rows = metrics["train_gat"]["mean"]
    for p in ("seed", "within_graph", "leak_free", "pair_split", "new_nodes"):
        aucs = [r["auc"] for r in rows if r["protocol"] == p and r["model"] == "gat_model"]
        assert aucs and all(0.0 <= a <= 1.0 for a in aucs), (p, aucs)
    audit = {a["protocol"]: a for a in metrics["train_gat"]["audit"]}
    assert audit["leak_free"]["test_pos_seen"] == 0 and audit["new_nodes"]["test_pos_seen"] == 0
    assert metrics["train_gat"]["topic_labelled_share"] == 0.0
    if "04" in notebooks:
        assert metrics["aauc_analysis"]["per_topic"] is None  # no topic labels: null, not an empty or zero table
    if "03b" in notebooks:
        assert all(0.0 <= r["auc"] <= 1.0 for r in metrics["beyond"]["mean"] if r.get("auc") is not None)
    return metrics


def test_snapshot_tsv_with_url_encoded_titles_and_no_topics(tmp_path):
    snap = snapshot_without_topics()
    enc = lambda t: urllib.parse.quote(t.replace(" ", "_"))
    lines = [f"{enc(s)}\t{enc(t)}" for s, ts in snap.links.items() for t in ts if s not in snap.disambiguation]
    lines += [f"{enc(a)}\t{enc(t)}\tredirect" for a, t in snap.redirects.items()]
    lines += [f"{enc(s)}\t{enc(t)}\tdisambiguation" for s in snap.disambiguation for t in snap.links[s]]
    tsv = tmp_path / "links.tsv"
    tsv.write_text("\n".join(lines) + "\n")
    assert "%20" not in tsv.read_text() and "_" in tsv.read_text()
    roots = tmp_path / "roots.txt"
    roots.write_text("\n".join(roots_of(snap)) + "\n")
    m = run_and_check(
        tmp_path,
        "tsv",
        {"source": "snapshot", "snapshot_path": str(tsv), "roots_file": str(roots), "picture_root": roots_of(snap)[0]},
    )
    assert m["crawl"]["graphs"] == N_ROOTS and m["embed"]["nn_topic_agreement"] is None


def test_live_source_through_the_local_mock_mediawiki(tmp_path):
    snap = snapshot_without_topics()
    roots = tmp_path / "roots.txt"
    roots.write_text("\n".join(roots_of(snap)) + "\n")
    with MockWiki(snap) as wiki:
        m = run_and_check(
            tmp_path,
            "live",
            {
                "source": "live",
                "api_url": wiki.url,
                "contact": "tests@example.org",
                "roots_file": str(roots),
                "picture_root": roots_of(snap)[0],
                "retry_wait": 0.01,
            },
            notebooks=("01", "02"),
        )
        assert wiki.requests > 0
    assert m["crawl"]["graphs"] == N_ROOTS and m["embed"]["nn_topic_agreement"] is None


def test_seed_format_json_graphs_imported_instead_of_crawled(tmp_path):
    """The seed's own files: {"nodes": [{"id", "label"}], "edges": [{"source", "target"}]}, nothing else."""
    from lib.crawl.bfs import bfs_crawl
    from lib.crawl.sources import SnapshotSource

    snap = snapshot_without_topics()
    folder = tmp_path / "seed_graphs"
    folder.mkdir()
    for i, root in enumerate(roots_of(snap)):
        g = bfs_crawl(SnapshotSource(snap), root, 60)
        ids = [1000 + 7 * k for k in range(g.num_nodes)]  # the seed's ids are not 0..N-1
        (folder / f"graph_{i}.json").write_text(
            json.dumps(
                {
                    "nodes": [{"id": ids[k], "label": t} for k, t in enumerate(g.titles)],
                    "edges": [{"source": ids[u], "target": ids[v]} for u, v in g.edges],
                }
            )
        )
    m = run_and_check(
        tmp_path,
        "json",
        {"source": "graphs", "snapshot_path": str(folder), "picture_root": roots_of(snap)[0]},
        notebooks=("01", "02", "03", "04"),
    )
    assert m["crawl"]["graphs"] == N_ROOTS
