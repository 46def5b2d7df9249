"""Stage 2 tensor dataset: shapes, lazy loading, weights-only files, split determinism, seed-format import."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch_geometric.utils import contains_self_loops, is_undirected

from lib.common.graphio import Graph, write_graph
from lib.embed import dataset
from lib.embed.dataset import DatasetError, GraphDataset, build_dataset, load_split, split_graphs, write_split
from lib.embed.encoder import load_model
from lib.embed.store import EmbeddingStore, StoreError, open_store

DIM = 16


def _graph(k: int, n: int = 30) -> Graph:
    """A small connected graph: root k, a ring of shared titles plus a few of its own."""
    titles = [f"Root {k}"] + [f"Shared {i}" for i in range(n - 5)] + [f"Own {k}.{j}" for j in range(4)]
    edges = [(0, i) for i in range(1, 6)] + [(i, i + 1) for i in range(1, n - 1)] + [(2, 5)]
    topics = [("Topic A" if i % 2 else "Topic B") if i < n - 2 else None for i in range(n)]
    return Graph(titles, edges, topics, {"root": titles[0], "k": k})


def _store_for(graphs: list[Graph], path) -> EmbeddingStore:
    st = EmbeddingStore(path, "test-model")
    titles = sorted({t for g in graphs for t in g.titles})
    rng = np.random.default_rng(0)
    st.append(titles, rng.standard_normal((len(titles), DIM)).astype(np.float32))
    return st


def built_dataset(root, n: int):
    """n small graphs written under root/graphs, their store and the dataset root/ds built from them: (graphs,
    files, store, what build_dataset returned)."""
    graphs = [_graph(k) for k in range(n)]
    files = [root / "graphs" / f"g{k:02d}.json" for k in range(n)]
    for f, g in zip(files, graphs):
        write_graph(f, g)
    st = _store_for(graphs, root / "store")
    return graphs, files, st, build_dataset(files, st, root / "ds", progress=False)


@pytest.fixture
def built(tmp_path):
    graphs, files, st, _ = built_dataset(tmp_path, 20)
    return tmp_path, graphs, files, st


def test_shapes_and_contents(built):
    tmp_path, graphs, files, st = built
    ds = GraphDataset(tmp_path / "ds")
    assert len(ds) == 20 and ds.num_features == DIM and ds.model_id == "test-model"
    d = ds[3]
    g = graphs[3]
    assert d.x.shape == (30, DIM) and d.x.dtype == torch.float32
    np.testing.assert_array_equal(d.x.numpy(), st.get(g.titles))
    assert d.edge_index.dtype == torch.long and d.edge_index.shape == (2, 2 * len(g.edges))
    assert is_undirected(d.edge_index) and not contains_self_loops(d.edge_index)
    assert d.num_nodes == 30 and d.titles == g.titles and d.root == "Root 3" and d.graph_id == "g03"
    assert d.topics == g.topics and d.metadata == {"root": "Root 3", "k": 3}
    e = ds.index[3]
    assert (e["graph_id"], e["root"], e["num_nodes"], e["num_edges"], e["file"]) == (
        "g03",
        "Root 3",
        30,
        len(g.edges),
        "graphs/g03.pt",
    )
    assert ds["g03"].root == "Root 3"
    raw = torch.load(tmp_path / "ds" / e["file"], weights_only=True)  # plain tensors/lists only
    assert set(raw) >= {"x", "edge_index", "titles", "topics", "root", "graph_id", "num_nodes"}


def test_float16_storage_is_cast_to_float32(built):
    tmp_path, graphs, files, st = built
    build_dataset(files, st, tmp_path / "ds16", precision="float16", progress=False)
    d = GraphDataset(tmp_path / "ds16")[0]
    assert d.x.dtype == torch.float32
    raw = torch.load(tmp_path / "ds16" / "graphs" / "g00.pt", weights_only=True)
    assert raw["x"].dtype == torch.float16
    np.testing.assert_allclose(d.x.numpy(), st.get(graphs[0].titles), rtol=2e-3, atol=2e-3)
    assert (tmp_path / "ds16" / "graphs" / "g00.pt").stat().st_size < (
        tmp_path / "ds" / "graphs" / "g00.pt"
    ).stat().st_size


def test_dataset_holds_no_features_in_memory(built):
    tmp_path, *_ = built
    ds = GraphDataset(tmp_path / "ds")
    assert not any(isinstance(v, torch.Tensor) for v in vars(ds).values())
    a, b = ds[0], ds[0]
    assert a.x.data_ptr() != b.x.data_ptr()  # read from disk on each access, not cached


def test_split_is_deterministic_and_is_the_one_every_stage_uses(built):
    tmp_path, *_ = built
    ds = GraphDataset(tmp_path / "ds")
    sp = ds.split(n_train=0, n_test=2, val_fraction=0.1, seed=0)
    assert sp == ds.split(n_train=0, n_test=2, val_fraction=0.1, seed=0)
    tr, va, te = sp["train"], sp["val"], sp["test"]
    assert (len(tr), len(va), len(te)) == (16, 2, 2) and sorted(tr + va + te) == sorted(ds.ids)
    assert (tr, va, te) == split_graphs(ds.ids, 0, 2, 0.1, seed=0)  # the stage-3 function, the same split
    assert any(ds.split(0, 2, 0.1, seed=s)["test"] != te for s in range(1, 6))
    written = write_split(ds, [0, 1], n_train_graphs=0, n_test_graphs=2, val_fraction=0.1)
    loaded = load_split(GraphDataset(tmp_path / "ds"), [0, 1], n_train_graphs=0, n_test_graphs=2, val_fraction=0.1)
    assert (
        loaded[0]
        == {k: written["seeds"]["0"][k] for k in ("train", "val", "test")}
        == {"train": tr, "val": va, "test": te}
    )
    with pytest.raises(DatasetError, match="n_test_graphs=2 but this notebook has n_test_graphs=3"):
        load_split(ds, [0], n_test_graphs=3)
    with pytest.raises(DatasetError, match=r"no split for seed\(s\) \[7\]"):
        load_split(ds, [7], n_test_graphs=2)
    with pytest.raises(DatasetError, match="n_test_graphs"):
        ds.split(n_test=25)


def test_hold_out_roots_keeps_test_roots_out_of_training(tmp_path):
    graphs = [_graph(k) for k in range(10)]
    graphs[4].titles[7] = "Root 0"  # graph 4 contains root 0
    files = [tmp_path / f"g{k}.json" for k in range(10)]
    for f, g in zip(files, graphs):
        write_graph(f, g)
    build_dataset(files, _store_for(graphs, tmp_path / "s"), tmp_path / "ds", progress=False)
    ds = GraphDataset(tmp_path / "ds")
    seed = next(s for s in range(100) if "g0" in ds.split(0, 2, 0.0, seed=s)["test"])
    everything = ds.split(0, 2, 0.0, seed=seed)
    held = ds.split(0, 2, 0.0, seed=seed, hold_out_roots=True)
    assert held["test"] == everything["test"] and "g4" in everything["train"] and "g4" not in held["train"]
    assert held["dropped_for_root_overlap"] >= 1
    test_roots = {ds[g].root for g in held["test"]}
    assert all(not test_roots & set(ds[g].titles) for g in held["train"])


def test_rebuild_keeps_unchanged_graphs_and_redoes_changed(built):
    tmp_path, graphs, files, st = built
    pt = tmp_path / "ds" / "graphs"
    before = {p.name: p.stat().st_mtime_ns for p in pt.glob("*.pt")}
    g = graphs[5]
    g.edges.append((1, 29))
    write_graph(files[5], g)
    entries = build_dataset(files[:-1], st, tmp_path / "ds", progress=False)  # last graph dropped
    after = {p.name: p.stat().st_mtime_ns for p in pt.glob("*.pt")}
    assert "g19.pt" not in after and len(entries) == 19
    assert after["g05.pt"] != before["g05.pt"]
    assert all(after[n] == before[n] for n in after if n != "g05.pt")
    assert GraphDataset(tmp_path / "ds")["g05"].edge_index.shape[1] == 2 * len(g.edges)


def test_missing_title_and_bad_arguments(tmp_path):
    g = _graph(0)
    write_graph(tmp_path / "a.json", g)
    st = EmbeddingStore(tmp_path / "s", "test-model")
    st.append(g.titles[:-1], np.zeros((29, DIM), np.float32))
    with pytest.raises(StoreError, match="'Own 0.3' is not in embedding store"):
        build_dataset([tmp_path / "a.json"], st, tmp_path / "ds", progress=False)
    with pytest.raises(DatasetError, match="precision"):
        build_dataset([tmp_path / "a.json"], st, tmp_path / "ds", precision="int8", progress=False)
    with pytest.raises(DatasetError, match="no graph files"):
        build_dataset([], st, tmp_path / "ds", progress=False)
    (tmp_path / "b").mkdir()
    write_graph(tmp_path / "b" / "a.json", g)
    with pytest.raises(DatasetError, match="appears twice"):
        build_dataset([tmp_path / "a.json", tmp_path / "b" / "a.json"], st, tmp_path / "ds", progress=False)
    with pytest.raises(DatasetError, match="no index.json"):
        GraphDataset(tmp_path / "nothing")


def test_import_seed_format_graphs(tmp_path):
    """The seed's own JSON (arbitrary ids, self-loops, both directions) becomes the same dataset, real model."""
    seed_obj = {
        "nodes": [
            {"id": 10, "label": "Sustainability"},
            {"id": 20, "label": "Renewable energy"},
            {"id": 30, "label": "Climate change"},
            {"id": 40, "label": "Solar power"},
        ],
        "edges": [
            {"source": 10, "target": 20},
            {"source": 20, "target": 10},
            {"source": 10, "target": 30},
            {"source": 20, "target": 40},
            {"source": 40, "target": 40},
        ],
    }
    f1 = tmp_path / "seed_graph_1.json"
    f1.write_text(json.dumps(seed_obj), encoding="utf-8")
    f2 = tmp_path / "seed_graph_2.json"
    f2.write_text(json.dumps({"nodes": seed_obj["nodes"][1:], "edges": [{"source": 20, "target": 30}]}))
    model = load_model()
    st = open_store(model, tmp_path / "store")
    entries, stats = dataset.import_seed_graphs([f1, f2], tmp_path / "ds", model, store=st, progress=False)
    assert (stats["total"], stats["unique"], stats["newly_encoded"]) == (7, 4, 4)
    assert len(EmbeddingStore(tmp_path / "store", model.wikigat_model_id)) == 4  # the store we passed
    assert [(e["graph_id"], e["root"], e["num_nodes"], e["num_edges"]) for e in entries] == [
        ("seed_graph_1", "Sustainability", 4, 3),
        ("seed_graph_2", "Renewable energy", 3, 1),
    ]
    d = GraphDataset(tmp_path / "ds")[0]
    assert d.topics == [None] * 4 and d.edge_index.shape == (2, 6)
    ref = model.encode(d.titles, convert_to_numpy=True)
    assert ((d.x.numpy() * ref).sum(1) >= 0.999).all()


def test_crawl_graph_is_the_file_a_graph_was_built_from_and_refuses_a_changed_crawl(built, tmp_path):
    tmp_path, graphs, files, st = built
    ds = GraphDataset(tmp_path / "ds")
    assert ds.crawl_graph("g03", tmp_path / "elsewhere").titles == graphs[3].titles  # the recorded source file
    moved = tmp_path / "moved"
    (moved / "graphs").mkdir(parents=True)
    files[3].rename(moved / "graphs" / "g03.json")  # a moved run folder: found under crawl_dir/graphs/
    assert ds.crawl_graph("g03", moved).edges == graphs[3].edges
    write_graph(moved / "graphs" / "g03.json", graphs[4])  # the crawl changed since the dataset was built
    with pytest.raises(ValueError, match="g03.*rebuild the dataset"):
        ds.crawl_graph("g03", moved)


def test_graphs_read_features_on_use_where_they_would_not_fit(built, monkeypatch):
    """ds.graphs(): plain graphs while the features fit, FileFeatureGraphs (x read from the file on use, through a
    cache of a few graphs) above LAZY_FEATURES_BYTES, with the same x; graphs derived from a lazy one stay lazy."""
    from lib.linkpred.sampling import with_edges, without_nodes

    tmp_path, *_ = built
    ds = GraphDataset(tmp_path / "ds")
    eager = ds.graphs()
    assert not any(isinstance(g, dataset.FileFeatureGraph) for g in eager)
    monkeypatch.setattr(dataset, "LAZY_FEATURES_BYTES", 0)
    lazy = ds.graphs()
    assert all(isinstance(g, dataset.FileFeatureGraph) and "x" not in g._store for g in lazy)
    for a, b in zip(eager, lazy):
        assert torch.equal(a.x, b.x) and torch.equal(a.edge_index, b.edge_index)
        assert (a.titles, a.topics, a.graph_id, a.root, a.num_nodes) == (
            b.titles,
            b.topics,
            b.graph_id,
            b.root,
            b.num_nodes,
        )
    assert len(ds._features) == dataset.FEATURE_CACHE_GRAPHS  # the graphs read last, no more
    drop = np.zeros(eager[2].num_nodes, dtype=bool)
    drop[[1, 4, 7]] = True
    for derive in (lambda g: with_edges(g, g.edge_index[:, :6]), lambda g: without_nodes(g, drop)):
        d_eager, d_lazy = derive(eager[2]), derive(lazy[2])
        assert isinstance(d_lazy, dataset.FileFeatureGraph) and not isinstance(d_eager, dataset.FileFeatureGraph)
        assert torch.equal(d_eager.x, d_lazy.x) and torch.equal(d_eager.edge_index, d_lazy.edge_index)
    assert ds.graphs(lazy=False)[0].x.data_ptr() != ds.graphs(lazy=False)[0].x.data_ptr()


def test_an_experiment_on_lazy_graphs_gives_the_same_rows(built, monkeypatch):
    """Stage 3 scores and trains the same on FileFeatureGraphs as on graphs that hold their features."""
    from lib.linkpred.config import GatParams
    from lib.linkpred.stage import run_experiment

    tmp_path, *_ = built
    ds = GraphDataset(tmp_path / "ds")
    roles = dict(zip(("train", "val", "test"), split_graphs(ds.ids, 0, 4, 0.25, seed=0)))
    params = GatParams(
        gat_epochs=1,
        baseline_epochs=1,
        r_cos=0.5,
        t_cos=0.3,
        gat_hidden=8,
        gat_out=8,
        gat_levels=1,
        protocols=["seed", "leak_free"],
        train_supervision=["mp"],
    )
    out = {}
    for lazy in (False, True):
        graphs = {g.graph_id: g for g in ds.graphs(lazy=lazy)}
        torch.manual_seed(0)
        out[lazy] = run_experiment(
            graphs,
            roles,
            params,
            0,
            DIM,
            tmp_path / f"run{lazy}",
            progress=False,
            scorers=("gat_model", "cosine", "common_neighbours"),
        )["rows"]
    assert len(out[True]) == len(out[False]) > 0
    for a, b in zip(out[False], out[True]):
        assert a == b
