"""The shipped real-hyperlink snapshot (data/wikispeedia/): checksums verified on read, its shape, its root list, and
a slice of it through the runner (notebooks 01-03b)."""

import hashlib
import json
import shutil

import pytest

from lib.common.paths import PARAMS, ROOT
from lib.crawl.campaign import read_roots
from lib.crawl.pages import OK, SnapshotError
from lib.crawl.sources import make_source
from lib.crawl.wikispeedia import SHA256, WIKISPEEDIA_DIR, wikispeedia_snapshot
from lib.run.runner import main


def test_the_shipped_files_match_their_published_checksums_and_the_readme_lists_them():
    readme = (WIKISPEEDIA_DIR / "README.md").read_text(encoding="utf-8")
    for name, digest in SHA256.items():
        assert hashlib.sha256((WIKISPEEDIA_DIR / name).read_bytes()).hexdigest() == digest
        assert f"| {name} | {digest} |" in readme
    assert "CC BY-SA" in readme and "West" in readme and (WIKISPEEDIA_DIR / "README.txt").is_file()


def test_a_changed_or_missing_file_is_refused_naming_it(tmp_path):
    copy = tmp_path / "ws"
    shutil.copytree(WIKISPEEDIA_DIR, copy)
    with open(copy / "links.tsv", "ab") as f:
        f.write(b"Zebra\tPhysics\n")
    with pytest.raises(SnapshotError, match=r"links\.tsv does not match its published sha256"):
        wikispeedia_snapshot(copy)
    (copy / "links.tsv").unlink()
    with pytest.raises(SnapshotError, match=r"links\.tsv is missing"):
        wikispeedia_snapshot(copy)


def test_the_snapshot_holds_every_article_link_and_topic():
    snap = wikispeedia_snapshot()
    assert len(snap.links) == 4604 and sum(map(len, snap.links.values())) == 119882
    assert sum(not v for v in snap.links.values()) == 17  # pages with no outgoing link are pages, not missing ones
    assert len(set(snap.topics.values())) == 15 and len(snap.topics) == 4598
    assert "Áedán mac Gabráin" in snap.links and "Bede" in snap.links["Áedán mac Gabráin"]  # URL-decoded, _ -> space
    src = make_source("wikispeedia")
    page = src.page("Áedán mac Gabráin")
    assert page.status == OK and "Bede" in page.links and src.topic("Áedán mac Gabráin") == "History"


def test_the_root_list_is_a_fresh_stratified_draw_of_linked_articles():
    import importlib.util

    spec = importlib.util.spec_from_file_location("draw_roots", ROOT / "scripts" / "draw_offline_roots.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    path = PARAMS / "roots_wikispeedia_400.txt"
    assert path.read_text(encoding="utf-8") == mod.render(400, 0, 5, "wikispeedia")
    snap = wikispeedia_snapshot()
    roots = read_roots(path)
    assert len(set(roots)) == 400 and all(len(snap.links[r]) >= 5 and snap.topics.get(r) for r in roots)


@pytest.mark.slow  # about a minute: four notebooks through the runner
def test_a_slice_of_the_snapshot_through_the_runner(tmp_path):
    roots = read_roots(PARAMS / "roots_wikispeedia_400.txt")[:8]
    (tmp_path / "roots.txt").write_text("\n".join(roots) + "\n", encoding="utf-8")
    args = [
        "--params",
        str(PARAMS / "wikispeedia.yaml"),
        "--outputs",
        str(tmp_path / "runs"),
        "--run-name",
        "ws",
        "--notebooks",
        "01",
        "02",
        "03",
        "03b",
        "--summary",
        str(tmp_path / "summary"),
        "-p",
        f"roots_file={tmp_path / 'roots.txt'}",
        "-p",
        f"picture_root={roots[0]}",
        "-p",
        "max_nodes=60",
        "-p",
        "overlap_n_roots=8",
        "-p",
        "overlap_max_nodes=[30, 60]",
        "-p",
        "n_seeds=1",
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
        "threads=1",
    ]
    assert main(args) == 0
    run = tmp_path / "runs" / "ws"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["crawl"]["graphs"] == 8 and len(metrics["crawl"]["overlap_by_size"]) == 2
    assert metrics["train_gat"]["topic_labelled_share"] > 0.9  # the snapshot's topics reach the dataset
    assert all(0.0 <= r["auc"] <= 1.0 for r in metrics["train_gat"]["mean"] if r.get("auc") is not None)
    assert all(0.0 <= r["auc"] <= 1.0 for r in metrics["beyond"]["mean"] if r.get("auc") is not None)
    params01 = json.loads((run / "params_01_crawl.json").read_text())["params"]
    assert params01["source"] == "wikispeedia"
