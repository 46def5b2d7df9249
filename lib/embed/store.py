"""Stage 2: a deduplicated, persistent embedding store — a title is embedded once per model, across all
graphs and runs (the seed's 389 graphs of 20,000 nodes share 92% of their titles).

- `EmbeddingStore(path, model_id)`: append-only chunk files, one atomic write per chunk, each chunk checksummed.
- `embed_titles(titles, model, store, batch_size)`: encodes only the titles the store lacks; runs filling one store
  take turns (its fill lock) and each adopts what the other wrote, so a title is encoded once.

Store format (why chunk files and not one growing matrix + an SQLite index): a chunk file is self-describing
(its titles, shape, model identity and a sha256 over everything after the checksum), so the title -> row index is
rebuilt from the chunks on open and there is no second source of truth that a kill could leave out of step with
the vectors. The chunk format and the corruption policy are lib.common.chunks': a kill loses at most the chunk being
encoded, and a corrupt chunk is moved aside on open with a warning (`store.corrupt` lists it), so its titles are
encoded again by the next `embed_titles`::

    <store>/store.json             {"format": 1, "model_id": ...}
    <store>/chunks/c00000000.bin   one chunk: header {count, dim, dtype, model_id, encoding, titles},
                                   payload float32 [count, dim]

A chunk records how its vectors were computed (`encoding`, lib.embed.store.encoding_of: the fast path's fixed batch
shape, or the plain or static path, with the batch size), because a title's last float bits depend on it. A fill
with another encoding first sets the store's other chunks aside (`<chunk>.other-encoding`, a RecoveryWarning names
them), so a store never mixes vectors of two encodings and a run's embeddings do not depend on the cache it found.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import warnings
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from lib.common import chunks
from lib.common.errors import WikigatError
from lib.common.paths import CACHE, RecoveryWarning, atomic_write_bytes, atomic_write_text, locked, move_aside, shown
from lib.common.runinfo import load_json
from lib.embed.encoder import (
    EmbedError,
    check_backend,
    clean_titles,
    encode,
    encode_sorted,
    fast_path_ok,
    is_static,
    model_id_of,
    tokenize,
)

STORE_FORMAT = 1
MAGIC = b"WGEMB01\n"


class StoreError(WikigatError, RuntimeError):
    """The embedding store on disk is unusable as it is (other model, corrupt chunk, missing title)."""


# ------------------------------------------------------------------------------------------------------- store
def default_store_path(model_id: str) -> Path:
    """outputs/cache/embeddings/<model_id>/ — shared by every run folder."""
    return CACHE / "embeddings" / model_id


def _chunk_bytes(titles: list[str], vectors: np.ndarray, model_id: str, encoding: str | None) -> bytes:
    header = {
        "count": len(titles),
        "dim": int(vectors.shape[1]),
        "dtype": "float32",
        "model_id": model_id,
        "encoding": encoding,
        "titles": titles,
    }
    return chunks.pack(MAGIC, header, np.ascontiguousarray(vectors, dtype="<f4").tobytes())


class EmbeddingStore:
    """Persistent title -> float32 vector map for one model.

    Open with `EmbeddingStore(path, model_id)`; a folder written by another model is refused. All chunks are
    verified against their sha256 on open (`verify=False` skips that, e.g. for a quick look). Vectors are read
    through np.memmap, so opening a large store does not hold its vectors in memory.
    """

    def __init__(self, path: str | os.PathLike, model_id: str, verify: bool = True):
        if not model_id or not isinstance(model_id, str):
            raise StoreError(
                f"model_id={model_id!r} is not a model identity; use lib.embed.encoder.model_identity(folder)"
            )
        self.path = Path(path)
        self.model_id = model_id
        self.chunk_dir = self.path / "chunks"
        self.chunk_dir.mkdir(parents=True, exist_ok=True)
        meta_path = self.path / "store.json"
        if meta_path.is_file():
            meta = load_json(meta_path)
            if meta.get("model_id") != model_id:
                raise StoreError(
                    f"embedding store {self.path} was written by model {meta.get('model_id')!r}, not {model_id!r}; "
                    f"use {default_store_path(model_id)} for this model (stores are never mixed)"
                )
        else:
            atomic_write_text(meta_path, json.dumps({"format": STORE_FORMAT, "model_id": model_id}) + "\n")
        self.corrupt: list[Path] = []  # chunks moved aside on open (lib.common.chunks)
        self._read_chunks(verify)

    def _read_chunks(self, verify: bool) -> None:
        """(Re)build the title index from every chunk file of the store."""
        self.dim: int | None = None
        self._index: dict[str, int] = {}
        self._chunks: list[np.memmap] = []
        self._starts: list[int] = []
        self._names: list[str] = []
        self._encodings: list[str | None] = []  # per chunk: its header's encoding (None: written before it was kept)
        self._rows = 0
        for f in sorted(self.chunk_dir.glob("c*.bin")):
            self._load_chunk(f, verify)

    # -- reading
    def _load_chunk(self, f: Path, verify: bool) -> None:
        try:
            header, offset = chunks.read_header(f, MAGIC, verify)
            n, d = int(header["count"]), int(header["dim"])
            if chunks.payload_size(f, offset) != n * d * 4:
                raise chunks.ChunkCorrupt("size does not match its header")
            if self.dim is not None and d != self.dim:
                raise chunks.ChunkCorrupt(f"dim {d}, the store has {self.dim}")
        except chunks.ChunkCorrupt as e:
            self.corrupt.append(move_aside(f, "embedding store chunk", str(e), "its titles will be encoded again"))
            return
        if header.get("model_id") != self.model_id:
            raise StoreError(
                f"embedding store chunk {f} belongs to model {header.get('model_id')!r}, not "
                f"{self.model_id!r}; move it to that model's store"
            )
        if self.dim is None:
            self.dim = d
        mm = np.memmap(f, dtype="<f4", mode="r", offset=offset, shape=(n, d)) if n else np.zeros((0, d), "<f4")
        start = self._rows
        for i, t in enumerate(header["titles"]):
            self._index.setdefault(t, start + i)  # first writer wins if a title was ever stored twice
        self._chunks.append(mm)
        self._starts.append(start)
        self._names.append(f.name)
        self._encodings.append(header.get("encoding"))
        self._rows += n

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, title: str) -> bool:
        return title in self._index

    @property
    def num_chunks(self) -> int:
        return len(self._chunks)

    def missing(self, titles: Iterable[str]) -> list[str]:
        """Distinct titles not in the store, in first-seen order."""
        idx = self._index
        return [t for t in dict.fromkeys(titles) if t not in idx]

    def rows(self, titles: list[str]) -> np.ndarray:
        """Global row numbers [n] int64 of `titles`; a title not in the store is an error."""
        try:
            return np.fromiter((self._index[t] for t in titles), dtype=np.int64, count=len(titles))
        except KeyError as e:
            raise StoreError(
                f"title {e.args[0]!r} is not in embedding store {self.path}; run "
                f"lib.embed.store.embed_titles on it first"
            ) from None

    def get(self, titles: list[str]) -> np.ndarray:
        """Vectors [n, dim] float32 of `titles`, in order."""
        rows = self.rows(titles)
        out = np.empty((len(rows), self.dim or 0), dtype=np.float32)
        if len(rows) == 0:
            return out
        starts = np.asarray(self._starts, dtype=np.int64)
        which = np.searchsorted(starts, rows, side="right") - 1
        for k in np.unique(which):
            sel = which == k
            out[sel] = self._chunks[k][rows[sel] - starts[k]]
        return out

    def titles(self) -> list[str]:
        return list(self._index)

    def refresh(self) -> int:
        """Read the chunks other processes wrote since this store was opened or last refreshed; returns how many."""
        known = set(self._names)
        new = [f for f in sorted(self.chunk_dir.glob("c*.bin")) if f.name not in known]
        for f in new:
            try:
                self._load_chunk(f, verify=True)
            except FileNotFoundError:  # another process moved it aside meanwhile
                continue
        return len(new)

    def set_aside_other_encodings(self, encoding: str) -> list[Path]:
        """Move every chunk whose vectors were computed another way than `encoding` to `<chunk>.other-encoding`
        (RecoveryWarning), then read the store again: its titles count as missing and are encoded again. Returns the
        moved files."""
        other = [n for n, e in zip(self._names, self._encodings) if e != encoding]
        if not other:
            return []
        moved = []
        with locked(self.path / "chunks"):
            for name in other:
                f = self.chunk_dir / name
                if f.is_file():
                    os.replace(f, f.with_name(f"{name}.other-encoding"))
                    moved.append(f.with_name(f"{name}.other-encoding"))
        found = sorted({e or "not recorded (an older store)" for e in self._encodings if e != encoding})
        warnings.warn(
            f"embedding store {shown(self.path)}: {len(moved)} chunk(s) hold vectors encoded as "
            f"{', '.join(found)}, not {encoding}; set aside as *.other-encoding, their titles are encoded "
            f"again (delete those files once no run needs them)",
            RecoveryWarning,
            stacklevel=2,
        )
        self._read_chunks(verify=False)
        return moved

    # -- writing

    def append(self, titles: list[str], vectors: np.ndarray, encoding: str | None = None) -> None:
        """Add one chunk (atomic: after a kill it is either wholly there or absent). vectors: [n, dim] float32;
        encoding: how they were computed (encoding_of)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(titles):
            raise StoreError(f"append needs vectors [n={len(titles)}, dim], got shape {tuple(vectors.shape)}")
        if self.dim is not None and vectors.shape[1] != self.dim:
            raise StoreError(f"append got dim {vectors.shape[1]} but store {self.path} holds dim {self.dim}")
        if not np.isfinite(vectors).all():
            raise StoreError("append got non-finite vectors (NaN/inf); the model output is broken, nothing stored")
        new = [(i, t) for i, t in enumerate(titles) if t not in self._index]
        if not new:
            return
        keep = [i for i, _ in new]
        titles, vectors = [t for _, t in new], vectors[keep]
        with locked(self.path / "chunks"):  # two writers never pick the same chunk name
            existing = [int(p.stem[1:]) for p in self.chunk_dir.glob("c*.bin")]
            name = f"c{(max(existing) + 1) if existing else 0:08d}.bin"
            atomic_write_bytes(self.chunk_dir / name, _chunk_bytes(titles, vectors, self.model_id, encoding))
        self._load_chunk(self.chunk_dir / name, verify=False)


def embed_titles(
    titles: Iterable,
    model,
    store: EmbeddingStore,
    batch_size: int = 32,
    chunk_size: int = 8192,
    backend: str = "fast",
    progress: bool = True,
    wait_for_others: bool = True,
) -> dict:
    """Make sure every title has a vector in `store`; encode only the ones it lacks.

    Titles are tokenized once, sorted by token length and encoded in chunks of `chunk_size`; each chunk is written
    to the store atomically before the next starts, so a killed run resumes where it stopped. A title's vector does
    not depend on which other titles are encoded with it (lib.embed.encoder.encode_sorted), so a store filled in one
    call holds the same bytes as one filled in several.

    Filling takes the store's fill lock (lib.common.paths.locked): a run that finds another one filling the same
    store says so, waits, then reads the chunks written meanwhile and encodes only what is still missing, so two runs
    with the same settings encode each title once. `wait_for_others=False` is for ranks of one job that split the
    missing titles among themselves (lib.run.distributed.embed_shard).

    Returns {"total", "unique", "already_stored", "newly_encoded", "truncated", "seconds", "titles_per_s",
    "model_id", "chunks_written"}. `truncated` counts newly encoded titles longer than the model's max_seq_length
    tokens (cut, as sentence-transformers does).
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise EmbedError(f"batch_size={batch_size!r} must be a positive integer")
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise EmbedError(f"chunk_size={chunk_size!r} must be a positive integer")
    check_backend(backend)
    mid = model_id_of(model)
    if store.model_id != mid:
        raise StoreError(
            f"embedding store {store.path} belongs to model {store.model_id!r} but the model is {mid!r}; "
            f"open default_store_path(model_id) for this model"
        )
    t0 = time.perf_counter()
    encoding = encoding_of(model, backend, batch_size)
    store.set_aside_other_encodings(encoding)
    titles = clean_titles(titles, page_titles=True)
    unique = list(dict.fromkeys(titles))
    todo = store.missing(unique)
    fill = (
        locked(
            store.path / "fill",
            waiting=f"waiting for another run filling the embedding store "
            f"{shown(store.path)}; the titles it encodes are then read from it, "
            f"not encoded again",
        )
        if todo and wait_for_others
        else contextlib.nullcontext()
    )
    with fill:
        if todo and wait_for_others:
            store.refresh()
            todo = store.missing(todo)
        stats = {
            "total": len(titles),
            "unique": len(unique),
            "already_stored": len(unique) - len(todo),
            "newly_encoded": 0,
            "truncated": 0,
            "seconds": 0.0,
            "titles_per_s": None,
            "model_id": mid,
            "chunks_written": 0,
        }
        if todo:
            fill_store(todo, model, store, stats, batch_size, chunk_size, backend, progress, encoding)
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    if stats["newly_encoded"]:
        stats["titles_per_s"] = round(stats["newly_encoded"] / max(stats["seconds"], 1e-9), 1)
    return stats


def encoding_of(model, backend: str, batch_size: int) -> str:
    """How embed_titles computes `model`'s vectors, as a store's chunks record it: "fixed-shape batches of 32 on cpu"
    (the fast path, lib.embed.encoder.encode_sorted), "plain batches of 32 on cpu" (sentence-transformers' own
    encode, whose last bits depend on a batch's other titles) or "static lookup" (a model2vec table: no batches).
    Kernels pick their blocking by shape and device, so a title's last float bits depend on both."""
    if is_static(model):
        return "static lookup"
    fast = backend == "fast" and fast_path_ok(model)
    return f"{'fixed-shape' if fast else 'plain'} batches of {batch_size} on {next(model.parameters()).device.type}"


def fill_store(
    todo: list[str],
    model,
    store: EmbeddingStore,
    stats: dict,
    batch_size: int,
    chunk_size: int,
    backend: str,
    progress: bool,
    encoding: str | None = None,
) -> None:
    """Encode the titles `todo` (none in `store`) chunk by chunk into `store`, counting into embed_titles' `stats`."""
    static = is_static(model)  # a table lookup: no tokenizing ahead, no length order
    if static:
        order, fast = np.arange(len(todo)), False
    else:
        ids, lens, stats["truncated"] = tokenize(model, todo)
        order = np.argsort(lens, kind="stable")
        fast = backend == "fast" and fast_path_ok(model)
    with tqdm(total=len(todo), desc="embed", unit="title", disable=not progress) as bar:
        for c in range(0, len(order), chunk_size):
            part = order[c : c + chunk_size]
            if fast:
                vecs = encode_sorted(model, ids, lens, part, batch_size, bar, fixed_shape=True)
            else:
                vecs, cut = encode(model, [todo[i] for i in part], batch_size, backend="plain")
                stats["truncated"] += cut if static else 0
                bar.update(len(part))
            store.append([todo[i] for i in part], vecs, encoding)
            stats["newly_encoded"] += len(part)
            stats["chunks_written"] += 1


def open_store(model, path: str | os.PathLike | None = None, verify: bool = True) -> EmbeddingStore:
    """The store of `model` (default outputs/cache/embeddings/<model_id>/)."""
    mid = model_id_of(model)
    return EmbeddingStore(path or default_store_path(mid), mid, verify=verify)


def nearest_neighbours(
    store: EmbeddingStore, queries: list[str], k: int = 5, candidates: list[str] | None = None
) -> list[dict]:
    """The k most cosine-similar stored titles of each query (itself excluded): [{query, rank, title, cosine}]."""
    cand = candidates if candidates is not None else store.titles()
    C = store.get(cand)
    C = C / np.maximum(np.linalg.norm(C, axis=1, keepdims=True), 1e-12)
    Q = store.get(queries)
    Q = Q / np.maximum(np.linalg.norm(Q, axis=1, keepdims=True), 1e-12)
    sims = Q @ C.T
    rows = []
    for qi, q in enumerate(queries):
        kk = min(k + 1, len(cand))
        top = np.argpartition(-sims[qi], kk - 1)[:kk]
        top = top[np.lexsort((top, -sims[qi, top]))]
        best = [j for j in top if cand[j] != q][:k]
        rows += [
            {"query": q, "rank": r + 1, "title": cand[j], "cosine": round(float(sims[qi, j]), 4)}
            for r, j in enumerate(best)
        ]
    return rows


def nn_topic_agreement(store: EmbeddingStore, titles: list[str], topic_of: dict[str, str]) -> dict | None:
    """How often a labelled title's nearest labelled neighbour (cosine, among `titles`) has its topic, against the
    chance that two random labelled titles agree: {"agreement", "chance", "titles"}; None when fewer than two titles
    have a topic label (a snapshot or live source without topics), so nothing is computed from an empty set."""
    lab = [t for t in titles if topic_of.get(t) is not None]
    if len(lab) < 2:
        return None
    V = store.get(lab)
    V = V / np.maximum(np.linalg.norm(V, axis=1, keepdims=True), 1e-12)
    S = V @ V.T
    np.fill_diagonal(S, -np.inf)
    y = np.array([topic_of[t] for t in lab])
    _, counts = np.unique(y, return_counts=True)
    p = counts / counts.sum()
    return {"agreement": float(np.mean(y[S.argmax(1)] == y)), "chance": float((p**2).sum()), "titles": len(lab)}
