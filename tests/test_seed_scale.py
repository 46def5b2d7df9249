"""The seed's scale on one machine: the synthetic snapshot (lib.crawl.synthetic) at a small size, the snapshot reader's
cache of a parsed link list, the seed-scale profile, and notebook 03's logging defaults by graph size."""

from dataclasses import replace

import numpy as np
import pytest
import torch
import yaml

from lib.common.paths import ROOT, RecoveryWarning
from lib.crawl import sources
from lib.crawl.config import CrawlParams
from lib.crawl.linklist import CACHED_FROM_BYTES, link_list_cache
from lib.crawl.pages import IndexedSnapshot, Snapshot
from lib.crawl.sources import SkippedLinesWarning, SnapshotSource, read_snapshot
from lib.crawl.synthetic import SyntheticSpec, make_synthetic_snapshot, reciprocity, synthetic_links
from lib.linkpred.config import GatParams, TrainConfig
from lib.linkpred.data import synthetic_graph
from lib.linkpred.model import ModelConfig
from lib.linkpred.train import log_aauc_rate, train_model
from lib.run.runner import main as runner_main

SMALL_SPEC = SyntheticSpec(articles=2000, links=80_000, seed=0, community_size=200)


@pytest.fixture(scope="module")
def small_links():
    return synthetic_links(SMALL_SPEC)


@pytest.fixture(scope="module")
def small_snapshot(tmp_path_factory):
    folder = tmp_path_factory.mktemp("synthetic")
    return folder, make_synthetic_snapshot(folder, SMALL_SPEC, roots=20, progress=False)


def test_the_synthetic_links_have_heavy_tailed_degrees_and_the_asked_reciprocity(small_links):
    src, dst = small_links
    n = SMALL_SPEC.articles
    assert len(src) == SMALL_SPEC.links
    keys = src.astype(np.int64) * n + dst
    assert np.all(np.diff(keys) > 0) and not np.any(src == dst)  # sorted, no repeat, no self-link
    assert reciprocity(src, dst, n) == pytest.approx(0.2, abs=0.01)
    for deg in (np.bincount(src, minlength=n), np.bincount(dst, minlength=n)):
        top = np.sort(deg)[::-1]
        assert top[0] > 10 * np.median(deg)  # a power law's hubs, not a Poisson bump around the mean
        assert top[: n // 100].sum() > 0.08 * len(src)  # the top 1% of articles hold far more than 1% of the links
    more = synthetic_links(replace(SMALL_SPEC, reciprocity=0.4))
    assert reciprocity(*more, n) == pytest.approx(0.4, abs=0.01)


def test_the_reverse_links_do_not_make_hubs_link_to_everything():
    """A hub (most in-links) keeps an out-degree within max_out: reversing its in-links uniformly would give it tens
    of thousands of links at 1,000,000 articles, and a 20,000-node BFS ball would be a star around it."""
    spec = replace(SMALL_SPEC, max_out=100)
    src, dst = synthetic_links(spec)
    hub = np.argmax(np.bincount(dst, minlength=spec.articles))
    assert np.bincount(src, minlength=spec.articles)[hub] <= spec.max_out


def test_the_same_seed_writes_the_same_files_and_another_seed_others(small_snapshot, tmp_path):
    folder, made = small_snapshot
    again = make_synthetic_snapshot(tmp_path / "again", SMALL_SPEC, roots=20, progress=False)
    other = make_synthetic_snapshot(tmp_path / "other", replace(SMALL_SPEC, seed=1), roots=20, progress=False)
    for name in ("links.tsv", "roots.txt"):
        assert (folder / name).read_bytes() == (tmp_path / "again" / name).read_bytes()
        assert (folder / name).read_bytes() != (tmp_path / "other" / name).read_bytes()
    assert made["links"] == again["links"] == other["links"] == SMALL_SPEC.links
    assert not list((tmp_path / "again").glob(".*.tmp"))  # written through a temp file, renamed when whole


def test_the_synthetic_file_is_a_snapshot_the_crawl_reads(small_snapshot, tmp_path):
    folder, made = small_snapshot
    snap = read_snapshot(folder / "links.tsv", progress=False, cache_dir=None)
    assert isinstance(snap, IndexedSnapshot)
    assert sum(len(v) for v in snap.links.values()) == SMALL_SPEC.links
    assert "Article 0000" in snap.links and "Article_0000" not in snap.links
    # the digest is Snapshot.digest of the same links, so page caches and crawl manifests keep their source id
    plain = Snapshot(links=dict(snap.links), redirects=snap.redirects, disambiguation=snap.disambiguation)
    assert snap.digest() == plain.digest()
    roots = [r for r in (folder / "roots.txt").read_text().splitlines() if not r.startswith("#")]
    assert len(roots) == len(set(roots)) == 20 and all(len(snap.links[r]) >= 5 for r in roots)
    page = SnapshotSource(snap).page(roots[0])
    assert page.status == "ok" and page.links == tuple(dict.fromkeys(snap.links[roots[0]]))


def with_odd_lines(folder, tmp_path):
    """The synthetic list plus a redirect, a disambiguation page and a line that is not a link."""
    path = tmp_path / "links.tsv"
    path.write_bytes(
        (folder / "links.tsv").read_bytes() + b"Alias_of_0001\tArticle_0001\tredirect\n"
        b"Term_1\tArticle_0002\tdisambiguation\nno tab here\nArticle_0003\tAlias_of_0001\n"
    )
    return path


def test_a_large_link_list_is_cached_and_read_back_the_same(small_snapshot, tmp_path, monkeypatch):
    path = with_odd_lines(small_snapshot[0], tmp_path)
    assert path.stat().st_size >= CACHED_FROM_BYTES
    with pytest.warns(SkippedLinesWarning, match="skipped 1 of"):
        first = read_snapshot(path, progress=False, cache_dir=tmp_path / "cache")
    assert link_list_cache(path, tmp_path / "cache").is_file()

    def parse(*_):
        raise AssertionError("parsed again although the cache holds the list")

    monkeypatch.setattr(sources, "read_link_list", parse)
    with pytest.warns(SkippedLinesWarning, match="line 80005: expected"):  # the warning comes back with the cache
        second = read_snapshot(path, progress=False, cache_dir=tmp_path / "cache")
    assert dict(second.links) == dict(first.links)
    assert second.redirects == first.redirects == {"Alias of 0001": "Article 0001"}
    assert second.disambiguation == first.disambiguation == {"Term 1"}
    assert second.digest() == first.digest() and second.skipped_lines == 1
    assert second.links["Article 0003"][-1] == "Alias of 0001"  # the file's last line, in file order
    page = SnapshotSource(second).page("Article 0003")
    assert "Article 0001" in page.links and "Alias of 0001" not in page.links  # the redirect resolved


def test_a_changed_link_list_is_parsed_again(small_snapshot, tmp_path):
    path = with_odd_lines(small_snapshot[0], tmp_path)
    with pytest.warns(SkippedLinesWarning):
        read_snapshot(path, progress=False, cache_dir=tmp_path / "cache")
    with open(path, "a") as f:
        f.write("Article_0004\tBrand new article\n")
    with pytest.warns(SkippedLinesWarning):
        snap = read_snapshot(path, progress=False, cache_dir=tmp_path / "cache")
    assert snap.links["Article 0004"][-1] == "Brand new article"


@pytest.mark.parametrize("damage", [b"not a zip file", b"cut"], ids=["overwritten", "cut_short"])
def test_a_damaged_cache_is_moved_aside_and_rebuilt(small_snapshot, tmp_path, damage):
    path = small_snapshot[0] / "links.tsv"
    first = read_snapshot(path, progress=False, cache_dir=tmp_path)
    cache = link_list_cache(path, tmp_path)
    whole = cache.read_bytes()
    cache.write_bytes(damage if damage != b"cut" else whole[: len(whole) // 2])
    with pytest.warns(RecoveryWarning, match="snapshot cache .* could not be read .* the link list is parsed again"):
        again = read_snapshot(path, progress=False, cache_dir=tmp_path)
    assert (tmp_path / (cache.name + ".corrupt")).is_file()
    assert again.digest() == first.digest() and dict(again.links) == dict(first.links)
    assert cache.read_bytes() == whole  # rebuilt


def test_a_small_link_list_is_not_cached(tmp_path):
    path = tmp_path / "links.tsv"
    path.write_text("A\tB\nB\tA\n")
    assert read_snapshot(path, progress=False, cache_dir=tmp_path / "cache").links == {"A": ["B"], "B": ["A"]}
    assert not (tmp_path / "cache").exists()


def test_the_seed_scale_profile_runs_the_seeds_campaign_through_notebooks_01_to_04(small_snapshot):
    profile = yaml.safe_load((ROOT / "params" / "seed_scale.yaml").read_text())
    assert profile["max_nodes"] == 20000 and profile["protocols"] == ["seed"] and profile["n_seeds"] == 1
    assert profile.get("gat_epochs", GatParams().gat_epochs) == 2
    crawl = CrawlParams.from_values(profile)
    assert (crawl.source, crawl.snapshot_path, crawl.roots_file) == (
        "snapshot",
        "data/seed_scale/links.tsv",
        "data/seed_scale/roots.txt",
    )
    # the runner accepts every key of it (a misspelt one would be refused), here on the small synthetic files
    folder = small_snapshot[0]
    assert (
        runner_main(
            [
                "--params",
                "params/seed_scale.yaml",
                "-p",
                f"snapshot_path={folder / 'links.tsv'}",
                "-p",
                f"roots_file={folder / 'roots.txt'}",
                "--dry-run",
                "--notebooks",
                "01",
                "02",
                "03",
                "04",
            ]
        )
        == 0
    )


GRAPHS = [synthetic_graph(120, 400, in_channels=32, seed=i, graph_id=f"g{i}") for i in range(5)]
TINY = ModelConfig(in_channels=32, gat_hidden=16, gat_out=8, gat_levels=2, gat_heads=2, gat_dropout=0.1)


def test_the_default_logging_is_every_step_on_small_graphs_and_thinned_at_the_seeds_scale():
    default = TrainConfig(r_cos=0.1)
    assert GatParams().train_config(0).log_every == default.log_every == 0
    assert default.log_interval(1000) == default.log_interval(5000) == 1  # the demo's and published runs' curves
    assert default.log_interval(20_000) == 10
    assert log_aauc_rate(default, 2000) == 0.1 and round(log_aauc_rate(default, 20_000) * 20_000) == 1000
    seed = replace(default, log_every=1)  # the seed's every-step logging is one value away
    assert seed.log_interval(20_000) == 1 and log_aauc_rate(seed, 20_000) == 0.1
    assert replace(default, log_aauc_nodes=500).log_interval(20_000) == 10
    with pytest.raises(ValueError, match=r"log_every=-1 is invalid: use 0 \(by graph size\)"):
        TrainConfig(log_every=-1)


def test_the_logging_setting_changes_no_weight_of_the_trained_model():
    cfg = TrainConfig(epochs=2, seed=5, r_cos=0.5, t_cos=0.3)
    every, r_every = train_model("gat_model", TINY, GRAPHS[:4], GRAPHS[4:], replace(cfg, log_every=1), progress=False)
    thin, r_thin = train_model(
        "gat_model", TINY, GRAPHS[:4], GRAPHS[4:], replace(cfg, log_every=10, log_aauc_nodes=5), progress=False
    )
    assert sum("aauc" in h for h in r_every.history) == 8 and sum("aauc" in h for h in r_thin.history) == 2
    for (k, a), b in zip(every.state_dict().items(), thin.state_dict().values()):
        assert torch.equal(a, b), k
    assert r_thin.val == r_every.val
