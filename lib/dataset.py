"""Stage 2: the tensor dataset (seed report §3.3) — one PyG graph per crawled root, features from the embedding store.

Folder layout (`<run_dir>/dataset/`)::

    index.json              {"format", "model_id", "dim", "precision", "graphs": [{graph_id, root, num_nodes,
                             num_edges, file, sha256, source_sha256, source}, ...]}
    graphs/<graph_id>.pt    {"graph_id", "root", "titles", "topics", "x", "edge_index", "num_nodes", "metadata_json"}

Each .pt holds plain tensors, strings and lists only, so `torch.load(weights_only=True)` reads it (no pickled
objects). `num_edges` counts undirected edges E; `edge_index` holds both directions, [2, 2E]. `GraphDataset` reads
one graph per `ds[i]`, so a 389 x 20,000-node dataset never needs all its features in memory.
"""
from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Iterable

import numpy as np
import torch

from lib.embed import EmbeddingStore, embed_titles, open_store
from lib.graphio import read_graph, sha256_bytes, sha256_file
from lib.paths import atomic_write_bytes, atomic_write_text

DATASET_FORMAT = 1
PRECISIONS = {"float32": torch.float32, "float16": torch.float16}


class DatasetError(ValueError):
    pass


def undirected_edge_index(edges: list[tuple[int, int]], num_nodes: int) -> torch.Tensor:
    """edge_index [2, 2E] long: both directions, no self-loops, coalesced (sorted, no duplicates)."""
    from torch_geometric.utils import remove_self_loops, to_undirected

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
    return {"graph_id": path.stem, "root": g.root, "num_nodes": g.num_nodes, "num_edges": int(ei.shape[1] // 2)}, \
        buf.getvalue()


def build_dataset(graph_files: Iterable[str | os.PathLike], store: EmbeddingStore, out_dir: str | os.PathLike,
                  precision: str = "float32", progress: bool = True) -> list[dict]:
    """Write the tensor dataset of `graph_files` to `out_dir`; returns the index entries (one dict per graph).

    Every title must already be in `store` (run `lib.embed.embed_titles` first). graph_id = file stem; two files
    with the same stem are an error. A graph whose source file, model and precision are unchanged since the last
    build is kept as it is, so re-running costs one hash per file. .pt files of graphs no longer listed are removed.
    """
    from tqdm.auto import tqdm

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
    if index_path.is_file():
        prev = json.loads(index_path.read_text(encoding="utf-8"))
        if prev.get("model_id") == store.model_id and prev.get("precision") == precision:
            old = {e["graph_id"]: e for e in prev.get("graphs", [])}
    entries = []
    for f in tqdm(files, desc="dataset", unit="graph", disable=not progress):
        src_sha = sha256_file(f)
        prev = old.get(f.stem)
        rel = f"graphs/{f.stem}.pt"
        if prev and prev.get("source_sha256") == src_sha and (out_dir / rel).is_file() \
                and sha256_file(out_dir / rel) == prev.get("sha256"):
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
    index = {"format": DATASET_FORMAT, "model_id": store.model_id, "dim": store.dim, "precision": precision,
             "graphs": entries}
    atomic_write_text(index_path, json.dumps(index, indent=1, ensure_ascii=False) + "\n")
    return entries


def import_seed_graphs(json_files: Iterable[str | os.PathLike], out_dir: str | os.PathLike, model,
                       store: EmbeddingStore | None = None, batch_size: int = 256, precision: str = "float32",
                       progress: bool = True) -> tuple[list[dict], dict]:
    """The seed's own graph files ({"nodes": [{id, label}], "edges": [{source, target}]}) as a tensor dataset.

    Embeds their titles into `store` (default: the model's store in outputs/cache) and builds the dataset in
    `out_dir`. Returns (index entries, embedding stats).
    """
    files = [Path(f) for f in json_files]
    store = open_store(model) if store is None else store
    titles = [t for f in files for t in read_graph(f).titles]
    stats = embed_titles(titles, model, store, batch_size=batch_size, progress=progress)
    return build_dataset(files, store, out_dir, precision=precision, progress=progress), stats


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
            raise DatasetError(f"{self.path} has no index.json; build it with lib.dataset.build_dataset "
                               f"(notebook 02) first")
        meta = json.loads(index_path.read_text(encoding="utf-8"))
        if meta.get("format") != DATASET_FORMAT:
            raise DatasetError(f"{index_path} has format {meta.get('format')!r}, expected {DATASET_FORMAT}; rebuild it")
        self.meta = {k: v for k, v in meta.items() if k != "graphs"}
        self.index: list[dict] = meta["graphs"]
        self.ids: list[str] = [e["graph_id"] for e in self.index]
        self._pos = {g: i for i, g in enumerate(self.ids)}
        self.model_id: str = meta.get("model_id")
        self.num_features: int | None = meta.get("dim")

    def __len__(self) -> int:
        return len(self.index)

    def _load(self, i: int) -> dict:
        f = self.path / self.index[i]["file"]
        try:
            return torch.load(f, weights_only=True, mmap=True)
        except FileNotFoundError:
            raise DatasetError(f"dataset file {f} is missing; rebuild the dataset (notebook 02)") from None

    def __getitem__(self, i: int | str):
        from torch_geometric.data import Data

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
        return Data(x=r["x"].float(), edge_index=r["edge_index"], num_nodes=int(r["num_nodes"]),
                    titles=r["titles"], root=r["root"], topics=r["topics"], graph_id=r["graph_id"],
                    metadata=json.loads(r["metadata_json"]))

    def titles_of(self, i: int) -> list[str]:
        """Node titles of graph i without materialising its features (mmap load)."""
        return self._load(i)["titles"]

    def split(self, test_fraction: float = 0.1, seed: int = 0, hold_out_roots: bool = False
              ) -> tuple[list[int], list[int]]:
        """Seeded graph-level split: (train positions, test positions), each sorted; default 90/10 as the seed.

        round(n * test_fraction) graphs, at least 1, go to test. With `hold_out_roots=True` a training graph that
        contains a test graph's root title among its nodes is dropped from training (so no test root is ever seen
        in training); `self.last_split` records how many were dropped.
        """
        n = len(self)
        if not isinstance(test_fraction, (int, float)) or not 0 < test_fraction < 1:
            raise DatasetError(f"test_fraction={test_fraction!r} must be strictly between 0 and 1 (seed: 0.1)")
        if n < 2:
            raise DatasetError(f"a train/test split needs at least 2 graphs; dataset {self.path} has {n}")
        n_test = min(n - 1, max(1, int(round(n * test_fraction))))
        perm = np.random.default_rng(seed).permutation(n)
        test = sorted(int(i) for i in perm[:n_test])
        train = sorted(int(i) for i in perm[n_test:])
        dropped: list[int] = []
        if hold_out_roots:
            roots = {self.index[i]["root"] for i in test}
            keep = []
            for i in train:
                (dropped if roots.intersection(self.titles_of(i)) else keep).append(i)
            train = keep
            if not train:
                raise DatasetError("hold_out_roots=True left no training graph (every graph contains a test root); "
                                   "use hold_out_roots=False or more graphs")
        self.last_split = {"train": len(train), "test": len(test), "dropped_for_root_overlap": len(dropped),
                           "seed": seed, "test_fraction": test_fraction, "hold_out_roots": hold_out_roots}
        return train, test


def dataset_summary(ds: GraphDataset) -> list[dict]:
    """Per-graph rows (graph_id, root, num_nodes, num_edges, file) from the index — no graph is loaded."""
    return [{k: e[k] for k in ("graph_id", "root", "num_nodes", "num_edges", "file")} for e in ds.index]
