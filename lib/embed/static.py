"""Stage 2 with a static title encoder: a model2vec token-vector table distilled from a sentence-transformers model.

- `distil(source_dir, out_dir, pca_dims, seed)`: one forward pass of the source model per vocabulary token, PCA to
  `pca_dims` (None: keep the width) and SIF weights (model2vec), saved as a model2vec folder with `static.json` (what it
  was distilled from and how). Offline: the source is a local folder, nothing is downloaded.
- `is_static_folder(path)`: True for a model2vec folder (config.json with model_type "model2vec").
- `StaticEncoder(path)`: loads such a folder; `encode(titles)` -> [n, dim] float32, the mean of the titles' SIF-weighted
  token vectors, L2-normalised (model2vec's StaticModel.encode, vectorised over a batch).
- `bags(ids)` and `pool(table, rows, offsets, token_weights)`: that pooling, the one the encoder and the trainer
  (lib.embed.static_train) share.

lib.embed.encoder.load_model returns a StaticEncoder for such a folder, so stage 2 (`model_dir`) and every later stage
take it like any sentence-transformers folder.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from lib.common.errors import WikigatError

STATIC_CONFIG = "static.json"  # provenance of a distilled folder; part of the folder's content hash
MAX_TOKENS = 256  # titles are cut to the first 256 tokens, as all-MiniLM-L6-v2's max_seq_length cuts them


class StaticModelError(WikigatError, ValueError):
    """A folder that is not a usable model2vec static model, or an impossible distillation setting."""


def is_static_folder(path: str | os.PathLike) -> bool:
    """True when `path` holds a model2vec model (config.json with "model_type": "model2vec")."""
    cfg = Path(path) / "config.json"
    if not cfg.is_file():
        return False
    try:
        return json.loads(cfg.read_text(encoding="utf-8")).get("model_type") == "model2vec"
    except (ValueError, UnicodeDecodeError):
        return False


def distil(
    source_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    pca_dims: int | None = 256,
    seed: int = 0,
    source_name: str | None = None,
) -> Path:
    """Distil a static model from the sentence-transformers folder `source_dir` into `out_dir` (replaced atomically).

    pca_dims: output width after PCA (None: the source's width, no PCA). seed: seeds torch and numpy before the
    token pass (the pass and the full-SVD PCA are deterministic, so equal arguments give byte-identical folders).
    source_name: recorded in place of the source's absolute path, so the folder's content (and with it its store
    identity) does not depend on where the source is installed; default: the source folder's name.
    Returns out_dir. Table: float32 [vocabulary, pca_dims].
    """
    source_dir, out_dir = Path(source_dir), Path(out_dir)
    if not (source_dir / "config.json").is_file():
        raise StaticModelError(
            f"source_dir={str(source_dir)!r} has no config.json; pass a local sentence-transformers "
            f"folder (e.g. lib.embed.encoder.default_model_dir())"
        )
    if pca_dims is not None and (not isinstance(pca_dims, int) or pca_dims < 1):
        raise StaticModelError(f"pca_dims={pca_dims!r} must be a positive integer or None (no PCA)")
    os.environ["HF_HUB_OFFLINE"] = "1"  # a missing file must fail, not download
    from model2vec import __version__ as m2v_version  # lazy: optional; only the static-embedding student uses it
    from model2vec.distill import distill as m2v_distill  # lazy: optional; only the static-embedding student uses it

    torch.manual_seed(seed)
    np.random.seed(seed)
    model = m2v_distill(str(source_dir), pca_dims=pca_dims, quantize_to="float32", device="cpu")
    name = source_name or source_dir.name
    model.config["tokenizer_name"] = name
    _no_padding(model.tokenizer)
    # PCA hands back a Fortran-ordered table, which safetensors' numpy writer stores as if it were C-ordered: every
    # row would be scrambled on disk
    model.embedding = np.ascontiguousarray(model.embedding)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    model.save_pretrained(tmp)
    (tmp / STATIC_CONFIG).write_text(
        json.dumps(
            {"source": name, "pca_dims": pca_dims, "seed": seed, "dim": int(model.dim), "model2vec": m2v_version},
            indent=1,
        )
        + "\n"
    )
    saved = StaticEncoder(tmp).table
    if not np.array_equal(saved, np.asarray(model.embedding, dtype=np.float32)):
        shutil.rmtree(tmp)
        raise StaticModelError(f"the table written for {str(out_dir)!r} does not read back as distilled; nothing saved")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(tmp, out_dir)
    return out_dir


def _no_padding(tokenizer) -> None:
    """Switch off the padding and truncation a static model's tokenizer inherits from its source's tokenizer.json
    (all-MiniLM-L6-v2's pads every text to 128 tokens): model2vec would average the [PAD] vectors into every title."""
    tokenizer.no_padding()
    tokenizer.no_truncation()


class StaticEncoder:
    """A model2vec folder as a title encoder. dim: output width; max_seq_length: tokens kept per title."""

    kind = "static"

    def __init__(self, path: str | os.PathLike, max_seq_length: int = MAX_TOKENS):
        path = Path(path)
        missing = [f for f in ("config.json", "model.safetensors", "tokenizer.json") if not (path / f).is_file()]
        if not path.is_dir() or missing:
            raise StaticModelError(
                f"{str(path)!r} is not a model2vec folder (missing {', '.join(missing) or 'folder'});"
                f" distil one with lib.embed.static.distil(source_dir, out_dir)"
            )
        os.environ["HF_HUB_OFFLINE"] = "1"
        from model2vec import StaticModel  # lazy: optional; only the static-embedding student uses it

        self.model = StaticModel.from_pretrained(path, force_download=False)
        _no_padding(self.model.tokenizer)
        self.path = path
        self.max_seq_length = max_seq_length
        self.table = np.asarray(self.model.embedding, dtype=np.float32)
        w = self.model.weights
        self.weights = None if w is None else np.asarray(w, dtype=np.float32)
        m = self.model.token_mapping
        self.mapping = None if m is None else np.asarray(m, dtype=np.int64)

    @property
    def dim(self) -> int:
        return int(self.table.shape[1])

    def token_ids(self, titles: list[str]) -> tuple[list[list[int]], int]:
        """model2vec's token ids per title (no special tokens, unknown tokens dropped), cut to max_seq_length;
        returns (ids, number of titles cut)."""
        ids = self.model.tokenize(titles, max_length=None)
        long = [i for i, t in enumerate(ids) if len(t) > self.max_seq_length]
        for i in long:
            ids[i] = ids[i][: self.max_seq_length]
        return ids, len(long)

    def encode(self, titles: list[str], batch_size: int = 4096) -> tuple[np.ndarray, int]:
        """(vectors [n, dim] float32, titles cut): per title the mean of its token vectors (times their SIF weights),
        L2-normalised; a title with no known token is the zero vector. `batch_size` titles are tokenized at once."""
        out = np.empty((len(titles), self.dim), dtype=np.float32)
        n_cut = 0
        for s in range(0, len(titles), batch_size):
            ids, cut = self.token_ids(titles[s : s + batch_size])
            n_cut += cut
            out[s : s + len(ids)] = self._pool(ids)
        return out, n_cut

    def _pool(self, ids: list[list[int]]) -> np.ndarray:
        """[len(ids), dim] float32: `pool` of the titles' tokens, L2-normalised when the model normalises."""
        flat, offsets = bags(ids)
        rows = flat if self.mapping is None else self.mapping[flat]
        w = None if self.weights is None else torch.from_numpy(self.weights[flat])
        with torch.no_grad():
            out = pool(torch.from_numpy(self.table), torch.from_numpy(rows), torch.from_numpy(offsets), w).numpy()
        if self.model.normalize:
            out /= np.linalg.norm(out, axis=1, keepdims=True) + 1e-32
        return out


def bags(ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids per title as one flat array [T] int64 and each title's start in it, offsets [len(ids)] int64."""
    lens = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter((t for seq in ids for t in seq), dtype=np.int64, count=int(lens.sum()))
    return flat, np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)


def pool(
    table: torch.Tensor, rows: torch.Tensor, offsets: torch.Tensor, token_weights: torch.Tensor | None = None
) -> torch.Tensor:
    """The static model's title embedding before normalisation, [n, d]: per title the mean over its tokens of
    token_weight * table[row] (model2vec's pooling); a title without tokens is the zero vector.

    table: [R, d]; rows: [T] int64, the table row of every token, title after title; offsets: [n] int64, where each
    title starts in `rows`; token_weights: [T], every token's SIF weight (None: 1). StaticEncoder.encode and
    lib.embed.static_train pool with this one function, so a trained table encodes as it was trained.
    """
    lens = torch.diff(offsets, append=offsets.new_tensor([len(rows)]))
    w = torch.ones(len(rows), dtype=table.dtype) if token_weights is None else token_weights
    w = w / lens.clamp(min=1).repeat_interleave(lens).to(table.dtype)
    return F.embedding_bag(rows, table, offsets, mode="sum", per_sample_weights=w)
