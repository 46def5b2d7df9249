"""Stage 2: the tensor dataset (seed report §3.3) — one PyG graph per crawled root, features from the embedding store.

Folder layout (`<run_dir>/dataset/`)::

    index.json              {"format", "model_id", "dim", "precision", "graphs": [{graph_id, root, num_nodes,
                             num_edges, file, sha256, source_sha256, source}, ...]}
    graphs/<graph_id>.pt    {"graph_id", "root", "titles", "topics", "x", "edge_index", "num_nodes", "metadata_json"}

Each .pt holds plain tensors, strings and lists only, so `torch.load(weights_only=True)` reads it (no pickled
objects). `num_edges` counts undirected edges E; `edge_index` holds both directions, [2, 2E]. `GraphDataset` reads
one graph per `ds[i]`; `ds.graphs()` gives every graph, and where their float32 features would take more than
LAZY_FEATURES_BYTES it gives FileFeatureGraphs, whose x is read from the graph's file when used, so a 389 x
20,000-node dataset (12 GB of float32 features) never holds all its features in memory.
"""

from __future__ import annotations

import io
import json
import os
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import remove_self_loops, to_undirected
from tqdm.auto import tqdm

from lib.common.errors import WikigatError
from lib.common.graphio import read_graph, sha256_bytes, sha256_file
from lib.common.paths import atomic_write_bytes, atomic_write_text, move_aside
from lib.common.runinfo import UNREADABLE, load_json, read_record, unreadable_reason
from lib.embed.store import EmbeddingStore, embed_titles, open_store

DATASET_FORMAT = 1
PRECISIONS = {"float32": torch.float32, "float16": torch.float16}
LAZY_FEATURES_BYTES = 2 << 30  # ds.graphs() reads features on use above this many bytes of float32 features
FEATURE_CACHE_GRAPHS = 4  # features of the graphs used last, kept by GraphDataset (a step reads x a few times)


class DatasetError(WikigatError, ValueError):
    pass


def undirected_edge_index(edges: list[tuple[int, int]], num_nodes: int) -> torch.Tensor:
    """edge_index [2, 2E] long: both directions, no self-loops, coalesced (sorted, no duplicates)."""
    if not edges:
        return torch.zeros((2, 0), dtype=torch.long)
    ei = torch.as_tensor(np.asarray(edges, dtype=np.int64).T)
    ei, _ = remove_self_loops(ei)
    return to_undirected(ei, num_nodes=num_nodes)


def _graph_record(path: Path, store: EmbeddingStore, precision: str) -> tuple[dict, bytes]:
    g = read_graph(path)
    x = torch.from_numpy(store.get(g.titles)).to(PRECISIONS[precision])
    ei = undirected_edge_index(g.edges, g.num_nodes)
    rec = {
        "graph_id": path.stem,
        "root": g.root,
        "titles": list(g.titles),
        "topics": list(g.topics) if g.topics is not None else [None] * g.num_nodes,
        "x": x,
        "edge_index": ei,
        "num_nodes": g.num_nodes,
        "metadata_json": json.dumps(g.metadata, ensure_ascii=False, sort_keys=True, default=str),
    }
    buf = io.BytesIO()
    torch.save(rec, buf)
    return {
        "graph_id": path.stem,
        "root": g.root,
        "num_nodes": g.num_nodes,
        "num_edges": int(ei.shape[1] // 2),
    }, buf.getvalue()


def build_dataset(
    graph_files: Iterable[str | os.PathLike],
    store: EmbeddingStore,
    out_dir: str | os.PathLike,
    precision: str = "float32",
    progress: bool = True,
) -> list[dict]:
    """Write the tensor dataset of `graph_files` to `out_dir`; returns the index entries (one dict per graph).

    Every title must already be in `store` (run `lib.embed.store.embed_titles` first). graph_id = file stem; two files
    with the same stem are an error. A graph whose source file, model and precision are unchanged since the last
    build is kept as it is, so re-running costs one hash per file. .pt files of graphs the list does not hold are
    removed.
    """

    if precision not in PRECISIONS:
        raise DatasetError(f"precision={precision!r} is not supported; use 'float32' or 'float16'")
    files = [Path(f) for f in graph_files]
    if not files:
        raise DatasetError("build_dataset got no graph files; run notebook 01 (crawl) first or pass graph JSON files")
    stems = [f.stem for f in files]
    dup = sorted({s for s in stems if stems.count(s) > 1})
    if dup:
        raise DatasetError(f"graph file name {dup[0]!r} appears twice; graph ids come from file names, rename one")
    out_dir = Path(out_dir)
    gdir = out_dir / "graphs"
    gdir.mkdir(parents=True, exist_ok=True)
    old = {}
    index_path = out_dir / "index.json"
    prev = read_record(index_path, "dataset index", "every graph of the dataset is built again") or {}
    if prev.get("model_id") == store.model_id and prev.get("precision") == precision:
        old = {e["graph_id"]: e for e in prev.get("graphs", [])}
    entries = []
    for f in tqdm(files, desc="dataset", unit="graph", disable=not progress):
        src_sha = sha256_file(f)
        prev = old.get(f.stem)
        rel = f"graphs/{f.stem}.pt"
        if (
            prev
            and prev.get("source_sha256") == src_sha
            and (out_dir / rel).is_file()
            and sha256_file(out_dir / rel) == prev.get("sha256")
        ):
            entries.append(prev)
            continue
        entry, data = _graph_record(f, store, precision)
        atomic_write_bytes(out_dir / rel, data)
        entry.update(file=rel, sha256=sha256_bytes(data), source_sha256=src_sha, source=str(f))
        entries.append(entry)
    keep = {e["file"] for e in entries}
    for p in gdir.glob("*.pt"):
        if f"graphs/{p.name}" not in keep:
            p.unlink()
    index = {
        "format": DATASET_FORMAT,
        "model_id": store.model_id,
        "dim": store.dim,
        "precision": precision,
        "graphs": entries,
    }
    atomic_write_text(index_path, json.dumps(index, indent=1, ensure_ascii=False) + "\n")
    return entries


def import_seed_graphs(
    json_files: Iterable[str | os.PathLike],
    out_dir: str | os.PathLike,
    model,
    store: EmbeddingStore | None = None,
    batch_size: int = 32,
    precision: str = "float32",
    progress: bool = True,
) -> tuple[list[dict], dict]:
    """The seed's own graph files ({"nodes": [{id, label}], "edges": [{source, target}]}) as a tensor dataset.

    Embeds their titles into `store` (default: the model's store in outputs/cache) and builds the dataset in
    `out_dir`. Returns (index entries, embedding stats).
    """
    files = [Path(f) for f in json_files]
    store = open_store(model) if store is None else store
    titles = [t for f in files for t in read_graph(f).titles]
    stats = embed_titles(titles, model, store, batch_size=batch_size, progress=progress)
    return build_dataset(files, store, out_dir, precision=precision, progress=progress), stats


class StoredFeatures:
    """x [N, F] float32 of dataset graph `i` read from its file at each call (through the dataset's small cache),
    or its rows `rows` [N'] only: what a FileFeatureGraph holds instead of the tensor."""

    def __init__(self, ds: GraphDataset, i: int, rows: torch.Tensor | None = None):
        self.ds, self.i, self.rows = ds, i, rows

    def __call__(self) -> torch.Tensor:
        x = self.ds.features(self.i)
        return x if self.rows is None else x[self.rows]

    def subset(self, rows: torch.Tensor) -> StoredFeatures:
        return StoredFeatures(self.ds, self.i, rows if self.rows is None else self.rows[rows])


class FileFeatureGraph(Data):
    """A dataset graph whose x [N, F] float32 is read from its file when used (StoredFeatures), not held: a list of
    thousands of graphs holds their edges and titles only. Everything else is a plain torch_geometric Data; x gives
    the same values as GraphDataset[i].x."""

    def __init__(self, features: StoredFeatures | None = None, **kwargs):
        super().__init__(**kwargs)
        self.__dict__["features"] = features  # beside Data's store, which would take it for a graph attribute

    @property
    def x(self) -> torch.Tensor | None:
        features = self.__dict__.get("features")
        return features() if features is not None else None


def with_graph_features(data: Data, rows: torch.Tensor | None = None, **attrs) -> Data:
    """A new Data with `attrs` and data's features (its rows `rows` [N'] only, when given): shared with a
    FileFeatureGraph lazily, copied by indexing (or shared when rows is None) otherwise."""
    features = data.__dict__.get("features") if isinstance(data, FileFeatureGraph) else None
    if features is not None:
        return FileFeatureGraph(features if rows is None else features.subset(rows), **attrs)
    return Data(x=data.x if rows is None else data.x[rows], **attrs)


class GraphDataset(torch.utils.data.Dataset):
    """A tensor dataset folder written by `build_dataset`; graphs are read from disk one at a time.

    ds[i] (or ds["<graph_id>"]) -> torch_geometric.data.Data with
      x: [N, F] float32 (float16 storage is cast on load), edge_index: [2, 2E] long (undirected, coalesced),
      num_nodes: N, titles: list[str] (titles[0] = root), root: str, topics: list[str | None], graph_id: str,
      metadata: dict (the crawl's metadata block).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        index_path = self.path / "index.json"
        if not index_path.is_file():
            raise DatasetError(
                f"{self.path} has no index.json; build it with lib.embed.dataset.build_dataset (notebook 02) first"
            )
        meta = load_json(index_path)
        if meta.get("format") != DATASET_FORMAT:
            raise DatasetError(f"{index_path} has format {meta.get('format')!r}, expected {DATASET_FORMAT}; rebuild it")
        self.meta = {k: v for k, v in meta.items() if k != "graphs"}
        self.index: list[dict] = meta["graphs"]
        self.ids: list[str] = [e["graph_id"] for e in self.index]
        self._pos = {g: i for i, g in enumerate(self.ids)}
        self.model_id: str = meta.get("model_id")
        self.num_features: int | None = meta.get("dim")
        self._features: OrderedDict[int, torch.Tensor] = OrderedDict()

    def __len__(self) -> int:
        return len(self.index)

    def crawl_graph(self, graph_id: str, crawl_dir: str | os.PathLike):
        """The crawl's graph file (lib.common.graphio.Graph) that graph `graph_id` was built from: the file recorded at
        build time if it is still there, else crawl_dir/graphs/<graph_id>.json (a moved run folder). Raises
        DatasetError when its titles are not the dataset's (the crawl changed since: rebuild the dataset)."""
        src = Path(self.index[self._pos[graph_id]].get("source", ""))
        graph = read_graph(src if src.is_file() else Path(crawl_dir) / "graphs" / f"{graph_id}.json")
        if list(graph.titles) != list(self[graph_id].titles):
            raise DatasetError(
                f"dataset graph {graph_id!r} does not match its crawl file; rebuild the dataset (notebook 02)"
            )
        return graph

    def _load(self, i: int) -> dict:
        f = self.path / self.index[i]["file"]
        try:
            return torch.load(f, weights_only=True, mmap=True)
        except FileNotFoundError:
            raise DatasetError(f"dataset file {f} is missing; rebuild the dataset (notebook 02)") from None
        except UNREADABLE as e:
            if isinstance(e, PermissionError):
                raise
            move_aside(f, "dataset file", unreadable_reason(e), "notebook 02 builds it again")
            raise DatasetError(
                f"dataset file {f} could not be read (moved aside); run notebook 02 on its run folder "
                f"again (runner: --force --notebooks 02 and the notebooks after it), which rebuilds "
                f"only that file"
            ) from None

    def __getitem__(self, i: int | str):
        if isinstance(i, str):
            if i not in self._pos:
                raise KeyError(f"graph_id {i!r} is not in dataset {self.path}")
            i = self._pos[i]
        if isinstance(i, (np.integer, torch.Tensor)):
            i = int(i)
        if not -len(self) <= i < len(self):
            raise IndexError(f"graph {i} out of range for dataset of {len(self)} graphs")
        i %= len(self)
        r = self._load(i)
        return Data(x=r["x"].float(), edge_index=r["edge_index"], **_graph_attributes(r))

    def features(self, i: int) -> torch.Tensor:
        """x [N, F] float32 of graph i, from a cache of the FEATURE_CACHE_GRAPHS graphs read last."""
        x = self._features.pop(i, None)
        if x is None:
            x = self._load(i)["x"].float()
        self._features[i] = x
        while len(self._features) > FEATURE_CACHE_GRAPHS:
            self._features.popitem(last=False)
        return x

    def graphs(self, lazy: bool | None = None) -> list[Data]:
        """Every graph, in index order. lazy=None: FileFeatureGraphs (x read from the file when used) where the
        graphs' float32 features would take more than LAZY_FEATURES_BYTES, else graphs as ds[i] gives them; the x
        values are the same either way."""
        if lazy is None:
            lazy = sum(e["num_nodes"] for e in self.index) * (self.num_features or 0) * 4 > LAZY_FEATURES_BYTES
        if not lazy:
            return [self[i] for i in range(len(self))]
        out = []
        for i in range(len(self)):
            r = self._load(i)
            # edge_index in its own memory, not a view of the file's mapping, which then closes
            out.append(
                FileFeatureGraph(StoredFeatures(self, i), edge_index=r["edge_index"].clone(), **_graph_attributes(r))
            )
        return out

    def titles_of(self, i: int) -> list[str]:
        """Node titles of graph i without materialising its features (mmap load)."""
        return self._load(i)["titles"]

    def split(
        self, n_train: int = 0, n_test: int = 1, val_fraction: float = 0.1, seed: int = 0, hold_out_roots: bool = False
    ) -> dict:
        """This dataset's graph split for one seed, by `split_graphs` (the one split every notebook uses):
        {"train", "val", "test": [graph_id], "dropped_for_root_overlap": n}. With `hold_out_roots=True` a training
        or validation graph that contains a test graph's root title among its nodes is dropped, so no test root is
        ever seen in training."""
        train, val, test = split_graphs(self.ids, n_train, n_test, val_fraction, seed)
        dropped = 0
        if hold_out_roots:
            roots = {self.index[self._pos[g]]["root"] for g in test}
            keep = {g: not roots.intersection(self.titles_of(self._pos[g])) for g in train + val}
            dropped = sum(not k for k in keep.values())
            train, val = [g for g in train if keep[g]], [g for g in val if keep[g]]
            if not train:
                raise DatasetError(
                    "hold_out_roots=True left no training graph (every graph contains a test root); "
                    "use hold_out_roots=False or more graphs"
                )
        return {"train": train, "val": val, "test": test, "dropped_for_root_overlap": dropped}


def _graph_attributes(record: dict) -> dict:
    """A dataset file's record as Data attributes, features and edges aside."""
    return {
        "num_nodes": int(record["num_nodes"]),
        "titles": record["titles"],
        "root": record["root"],
        "topics": record["topics"],
        "graph_id": record["graph_id"],
        "metadata": json.loads(record["metadata_json"]),
    }


def split_graphs(graph_ids: list, n_train: int, n_test: int, val_fraction: float, seed: int) -> tuple[list, list, list]:
    """Seeded (train, val, test) graph ids: n_test for test, n_train (0 = all the rest) for training, of which a
    `val_fraction` share (at least 1 graph when > 0) becomes validation (epoch selection only)."""
    ids = list(graph_ids)
    if not isinstance(n_test, int) or n_test < 1 or n_test >= len(ids):
        raise DatasetError(f"n_test_graphs={n_test} must be between 1 and {len(ids) - 1} for {len(ids)} graphs")
    rest = len(ids) - n_test
    n_train = n_train or rest
    if n_train > rest:
        raise DatasetError(
            f"n_train_graphs={n_train} + n_test_graphs={n_test} exceed the {len(ids)} graphs; "
            f"lower them or crawl more roots"
        )
    if not 0 <= val_fraction < 1:
        raise DatasetError(f"val_fraction={val_fraction} must be in [0, 1)")
    perm = torch.randperm(len(ids), generator=torch.Generator().manual_seed(seed)).tolist()
    test = [ids[i] for i in perm[:n_test]]
    train = [ids[i] for i in perm[n_test : n_test + n_train]]
    n_val = max(1, round(val_fraction * len(train))) if val_fraction > 0 else 0
    if n_val >= len(train):
        raise DatasetError(
            f"val_fraction={val_fraction} leaves no training graph out of {len(train)} (the crawl gave "
            f"{len(ids)} usable graphs, {n_test} of them for test): give notebook 01 more roots that "
            f"exist in the source (its table lists the skipped ones), lower n_test_graphs, or set "
            f"val_fraction=0"
        )
    return train[n_val:], train[:n_val], test


SPLIT_KEYS = ("n_train_graphs", "n_test_graphs", "val_fraction", "hold_out_roots")


def write_split(
    ds: GraphDataset,
    seeds: list[int],
    n_train_graphs: int,
    n_test_graphs: int,
    val_fraction: float,
    hold_out_roots: bool = False,
) -> dict:
    """Split the dataset for every seed and write `<dataset>/split.json` (atomic); returns what was written."""
    params = dict(
        n_train_graphs=n_train_graphs,
        n_test_graphs=n_test_graphs,
        val_fraction=val_fraction,
        hold_out_roots=hold_out_roots,
    )
    split = {
        "params": params,
        "seeds": {str(s): ds.split(n_train_graphs, n_test_graphs, val_fraction, s, hold_out_roots) for s in seeds},
    }
    atomic_write_text(ds.path / "split.json", json.dumps(split, indent=1, ensure_ascii=False) + "\n")
    return split


def load_split(ds: GraphDataset, seeds: list[int], **params) -> dict[int, dict]:
    """{seed: {"train", "val", "test"}} from `<dataset>/split.json`, checked against the caller's split parameters
    (a mismatch or a missing seed is an error that names it: re-run notebook 02 with the same values)."""
    path = ds.path / "split.json"
    if not path.is_file():
        raise DatasetError(f"{path} is missing; run notebook 02 (embed) on this run_dir first")
    split = load_json(path)
    for k, v in params.items():
        if split["params"].get(k) != v:
            raise DatasetError(
                f"{path} was written with {k}={split['params'].get(k)!r} but this notebook has "
                f"{k}={v!r}; use the same value in notebooks 02 and 03 (one params file) and re-run 02"
            )
    missing = [s for s in seeds if str(s) not in split["seeds"]]
    if missing:
        raise DatasetError(
            f"{path} has no split for seed(s) {missing} (it has {sorted(split['seeds'])}); use the "
            f"same seed / n_seeds in notebooks 02 and 03 and re-run 02"
        )
    return {s: {k: split["seeds"][str(s)][k] for k in ("train", "val", "test")} for s in seeds}


def dataset_summary(ds: GraphDataset) -> list[dict]:
    """Per-graph rows (graph_id, root, num_nodes, num_edges, file) from the index — no graph is loaded."""
    return [{k: e[k] for k in ("graph_id", "root", "num_nodes", "num_edges", "file")} for e in ds.index]
