"""Stage 5 teacher targets: one definition of the teacher's attention, an in-memory cache and a disk cache.

Teacher attention (`teacher_attention`, a named parameter of notebook 05):
- "eager" (default): the attention probabilities the teacher itself uses, from HF's eager implementation. For MPNet
  they include the relative-position bias, so the student imitates the distribution the teacher really attends with,
  which is what MiniLM eq. 6 transfers. Needs relation_heads == the teacher's head count (12).
- "qk": softmax(q_r k_r^T / sqrt(d_r)) recomputed from the hooked queries and keys for any number R of relation heads.
  It omits MPNet's position bias, so it is not the teacher's attention; it is the choice when R differs from the
  teacher's heads (MiniLMv2-style relations). For BERT teachers (no bias) both definitions agree.
The definition is a parameter, checked against R: neither is picked silently.

Disk cache (`TeacherTargetStore`): per sentence and per teacher layer, the unpadded float16 targets — attention
[H, T, T] + values [T, D] ("eager") or queries, keys and values [T, D] each ("qk") — keyed by the sentence's sha1, in
append-only chunk files under outputs/cache/teacher_targets/<teacher id, max_seq_len, definition, layer>/. So one
teacher pass per sentence serves every student, ablation, seed and re-run. The format follows lib/embed/encoder.py's
EmbeddingStore: a chunk appears only through rename(2) (a kill loses at most the chunk being computed) and carries a
sha256 over everything after it; a corrupt chunk is set aside as *.corrupt on open and its sentences are recomputed.

Compute precision (`precision`, lib.common.device): the teacher's forward pass for targets may run under bf16/fp16
autocast; such targets get their own folder (`<teacher id>@bf16-L<layer>-...`), never mixed with float32 ones, and
`target_divergence` reports how far they are from the float32 targets (KL of the attention rows).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from lib.common import chunks
from lib.common.device import Precision, resolve_precision
from lib.common.hashing import config_digest, text_key
from lib.common.paths import CACHE, atomic_write_bytes, atomic_write_text, move_aside
from lib.common.runinfo import load_json, refuse_other_settings
from lib.distill.loss_spec import ATTENTION_DEFINITIONS, DistillError
from lib.distill.losses import kl_rows, qk_attention
from lib.distill.models import Encoder
from lib.embed.encoder import precision_identity

STORE_FORMAT = 1
MAGIC = b"WGTGT01\n"


def check_attention_definition(definition: str, relation_heads: int, teacher_heads: int) -> None:
    """DistillError naming `teacher_attention` unless the definition is known and possible for these head counts."""
    if definition not in ATTENTION_DEFINITIONS:
        raise DistillError(f"teacher_attention={definition!r} is unknown; use one of {ATTENTION_DEFINITIONS}")
    if definition == "eager" and relation_heads != teacher_heads:
        raise DistillError(
            f"teacher_attention='eager' is the teacher's own {teacher_heads}-head attention, but "
            f"relation_heads={relation_heads}; set relation_heads={teacher_heads} or teacher_attention='qk'"
        )


def _precision(teacher: Encoder, precision: str | Precision) -> Precision:
    return precision if isinstance(precision, Precision) else resolve_precision(precision, teacher.model.device)


def _run_teacher(teacher: Encoder, batch: dict, attentions: bool, precision: Precision):
    """teacher.run under `precision`'s autocast; attentions and q/k/v come back float32."""
    with precision.autocast(teacher.model.device):
        _, atts, qkv = teacher.run(batch, attentions=attentions)
    return (None if atts is None else [a.float() for a in atts]), {k: v.float() for k, v in qkv.items()}


@torch.no_grad()
def teacher_targets(
    teacher: Encoder,
    batch: dict,
    layers: list[int],
    heads: int,
    definition: str = "eager",
    precision: str | Precision = "fp32",
) -> dict:
    """Teacher attention [B, R, T, T] (see the module docstring for `definition`) and values [B, T, D] of `layers`,
    float32, from a forward pass at `precision` (lib.common.device; the q·k softmax of "qk" is taken in float32)."""
    check_attention_definition(definition, heads, teacher.heads)
    atts, qkv = _run_teacher(teacher, batch, definition == "eager", _precision(teacher, precision))
    mask = batch["attention_mask"].to(teacher.model.device)
    out = {}
    for i in layers:
        p = atts[i] if definition == "eager" else qk_attention(qkv[(i, "q")], qkv[(i, "k")], mask, heads)
        out[i] = {"att": p.detach(), "v": qkv[(i, "v")].detach()}
    return out


@torch.no_grad()
def target_divergence(
    teacher: Encoder,
    texts: list[str],
    layers: list[int],
    heads: int,
    max_seq_len: int,
    definition: str = "eager",
    precision: str | Precision = "bf16",
    batch_size: int = 16,
) -> dict:
    """How far low-precision teacher targets are from float32 ones on `texts`, and what they cost.

    Returns {"precision", "reason", "kl_att": mean over layers of eq. 6's KL(P_fp32 || P_low) per relation head and
    token, "kl_att_max": the largest of those per layer, "value_rel_err": ||V_low - V_fp32|| / ||V_fp32||,
    "seconds_fp32", "seconds_low"}; kl_att ≈ 0 (rounding) when `precision` resolves to float32.
    """
    prec, fp32 = _precision(teacher, precision), resolve_precision("fp32", teacher.model.device)
    kls, num, den, secs = {l: [] for l in layers}, 0.0, 0.0, {"fp32": 0.0, "low": 0.0}
    for b in range(0, len(texts), batch_size):
        batch = teacher.tokenize(texts[b : b + batch_size], max_seq_len)
        mask = batch["attention_mask"].to(teacher.model.device)
        t0 = time.perf_counter()
        ref = teacher_targets(teacher, batch, layers, heads, definition, fp32)
        t1 = time.perf_counter()
        low = teacher_targets(teacher, batch, layers, heads, definition, prec)
        secs["fp32"] += t1 - t0
        secs["low"] += time.perf_counter() - t1
        for l in layers:
            q = low[l]["att"].masked_fill(~mask[:, None, None, :].bool(), 0.0)
            q = q / q.sum(-1, keepdim=True).clamp(min=1e-30)  # rows of a bf16 softmax sum to 1 only within rounding
            kls[l].append(float(kl_rows(ref[l]["att"], q.clamp(min=1e-30).log(), mask)))
            num += float((low[l]["v"] - ref[l]["v"]).pow(2).sum())
            den += float(ref[l]["v"].pow(2).sum())
    per_layer = [float(np.mean(v)) for v in kls.values()]
    return {
        "precision": prec.name,
        "reason": prec.reason,
        "kl_att": float(np.mean(per_layer)),
        "kl_att_max": float(np.max(per_layer)),
        "value_rel_err": (num / den) ** 0.5 if den else 0.0,
        "seconds_fp32": secs["fp32"],
        "seconds_low": secs["low"],
    }


class TeacherCache:
    """In-memory teacher targets per (batch texts, R), shared by the students of one seed.

    Keeps at most `max_bytes` of targets (first come, first kept); batches beyond that are recomputed when asked.
    `teacher_sentences` counts the sentences passed through the teacher.
    """

    def __init__(
        self,
        teacher: Encoder,
        corpus: list[str] | None,
        max_seq_len: int,
        max_bytes: float = 2 * 2**30,
        definition: str = "eager",
        precision: str = "fp32",
    ):
        self.teacher, self.corpus, self.max_seq_len, self.definition = teacher, corpus, max_seq_len, definition
        self.precision = _precision(teacher, precision)
        self.store: dict = {}
        self.max_bytes, self.nbytes = max_bytes, 0
        self.teacher_sentences = 0

    def get(self, idx: np.ndarray, layers: list[int], heads: int) -> tuple[dict, dict]:
        """Targets of the corpus rows `idx` (see `targets`)."""
        return self.targets([self.corpus[i] for i in idx], layers, heads)

    def targets(self, texts: list[str], layers: list[int], heads: int) -> tuple[dict, dict]:
        """(teacher tokens {input_ids, attention_mask: [B, T]}, {layer: {"att": [B, R, T, T], "v": [B, T, D]}})."""
        key = (tuple(texts), heads)
        batch = self.teacher.tokenize(texts, self.max_seq_len)
        have = self.store.get(key, {})
        missing = [l for l in layers if l not in have]
        if missing:
            new = teacher_targets(self.teacher, batch, missing, heads, self.definition, self.precision)
            self.teacher_sentences += len(texts)
            have.update(new)
            size = sum(t.numel() * t.element_size() for tg in new.values() for t in tg.values())
            if self.nbytes + size <= self.max_bytes:
                self.store[key] = have
                self.nbytes += size
        return batch, {l: have[l] for l in layers}


class _LayerStore:
    """Chunk files of one (teacher, max_seq_len, definition, layer): text sha1 -> {name: float16 array view}."""

    def __init__(self, path: Path, meta: dict):
        self.path, self.meta = path, meta
        self.chunk_dir = path / "chunks"
        self.chunk_dir.mkdir(parents=True, exist_ok=True)
        meta_path = path / "store.json"
        if meta_path.is_file():
            refuse_other_settings(f"teacher-target store {path}", load_json(meta_path), meta, "delete the folder")
        else:
            atomic_write_text(meta_path, json.dumps(meta, sort_keys=True) + "\n")
        self.index: dict[str, dict] = {}
        self.corrupt: list[Path] = []
        for f in sorted(self.chunk_dir.glob("c*.bin")):
            self._load(f)

    def _load(self, f: Path) -> None:
        try:
            header, offset = chunks.read_header(f, MAGIC)
            if chunks.payload_size(f, offset) != 2 * header["size"]:
                raise chunks.ChunkCorrupt("size does not match its header")
        except chunks.ChunkCorrupt as e:
            self.corrupt.append(move_aside(f, "teacher-target chunk", str(e), "its sentences will be recomputed"))
            return
        data = np.frombuffer(f.read_bytes(), dtype="<f2", offset=offset)
        for key, rec in zip(header["keys"], header["records"]):
            if key not in self.index:  # first writer wins if a sentence was ever stored twice
                self.index[key] = {name: data[o : o + int(np.prod(s))].reshape(s) for name, (o, s) in rec.items()}

    def append(self, keys: list[str], records: list[dict[str, np.ndarray]]) -> None:
        arrays, recs, o = [], [], 0
        for rec in records:
            r = {}
            for name, a in rec.items():
                r[name] = (o, list(a.shape))
                o += a.size
                arrays.append(a)
            recs.append(r)
        f = self.chunk_dir / f"c{time.time_ns():020d}-{os.getpid()}.bin"
        payload = b"".join(np.ascontiguousarray(a, dtype="<f2").tobytes() for a in arrays)
        atomic_write_bytes(f, chunks.pack(MAGIC, {"keys": keys, "records": recs, "size": o}, payload))
        self._load(f)


class TeacherTargetStore:
    """Disk cache of teacher targets; same `targets(texts, layers, heads)` interface as TeacherCache.

    teacher_id: a stable identity of the teacher's weights and tokenizer (e.g. lib.embed.encoder.model_identity of its
    folder). precision: the teacher's compute precision (lib.common.device); targets other than float32 live in their
    own folders. `teacher_sentences` counts sentences passed through the teacher by this object (0 on a warm re-run).
    """

    def __init__(
        self,
        teacher: Encoder,
        teacher_id: str,
        max_seq_len: int,
        definition: str = "eager",
        root: str | os.PathLike = CACHE / "teacher_targets",
        batch_size: int = 32,
        chunk_size: int = 512,
        progress: bool = False,
        precision: str = "fp32",
    ):
        if definition not in ATTENTION_DEFINITIONS:
            raise DistillError(f"teacher_attention={definition!r} is unknown; use one of {ATTENTION_DEFINITIONS}")

        self.precision = _precision(teacher, precision)
        teacher_id = precision_identity(teacher_id, self.precision.name)
        self.teacher, self.teacher_id, self.max_seq_len, self.definition = teacher, teacher_id, max_seq_len, definition
        self.root, self.batch_size, self.chunk_size, self.progress = Path(root), batch_size, chunk_size, progress
        self.layers: dict[int, _LayerStore] = {}
        self.teacher_sentences = 0

    def _store(self, layer: int) -> _LayerStore:
        if layer not in self.layers:
            meta = {
                "format": STORE_FORMAT,
                "teacher": self.teacher_id,
                "max_seq_len": self.max_seq_len,
                "definition": self.definition,
                "layer": layer,
                "dtype": "float16",
            }
            digest = config_digest(meta)
            self.layers[layer] = _LayerStore(self.root / f"{self.teacher_id}-L{layer}-{digest}", meta)
        return self.layers[layer]

    @property
    def corrupt(self) -> list[Path]:
        return [p for s in self.layers.values() for p in s.corrupt]

    def ensure(self, texts: list[str], layers: list[int]) -> int:
        """Compute what the store lacks for `texts` x `layers` (one teacher pass per missing sentence);
        returns that count."""

        stores = {l: self._store(l) for l in layers}
        todo = [t for t in dict.fromkeys(texts) if any(text_key(t) not in s.index for s in stores.values())]
        if not todo:
            return 0
        lens = [len(self.teacher.tokenizer(t, truncation=True, max_length=self.max_seq_len)["input_ids"]) for t in todo]
        order = np.argsort(lens, kind="stable")  # batches of similar length waste little on padding
        pending: dict[int, tuple[list, list]] = {l: ([], []) for l in layers}
        bar = tqdm(total=len(todo), desc="teacher targets", disable=not self.progress, leave=False)
        for b in range(0, len(todo), self.batch_size):
            chunk = [todo[i] for i in order[b : b + self.batch_size]]
            batch = self.teacher.tokenize(chunk, self.max_seq_len)
            with torch.no_grad():
                atts, qkv = _run_teacher(self.teacher, batch, self.definition == "eager", self.precision)
            self.teacher_sentences += len(chunk)
            n = batch["attention_mask"].sum(-1).tolist()
            for l in layers:
                keys, recs = pending[l]
                for j, t in enumerate(chunk):
                    L = n[j]
                    if self.definition == "eager":
                        rec = {"att": atts[l][j, :, :L, :L], "v": qkv[(l, "v")][j, :L]}
                    else:
                        rec = {r: qkv[(l, r)][j, :L] for r in "qkv"}
                    keys.append(text_key(t))
                    recs.append({k: v.detach().to(torch.float16).cpu().numpy() for k, v in rec.items()})
                if len(keys) >= self.chunk_size or b + self.batch_size >= len(todo):
                    stores[l].append(keys, recs)
                    pending[l] = ([], [])
            bar.update(len(chunk))
        bar.close()
        return len(todo)

    def targets(self, texts: list[str], layers: list[int], heads: int) -> tuple[dict, dict]:
        """(teacher tokens {input_ids, attention_mask: [B, T]},
        {layer: {"att": [B, R, T, T], "v": [B, T, D]}}) float32."""
        check_attention_definition(self.definition, heads, self.teacher.heads)
        self.ensure(texts, layers)
        batch = self.teacher.tokenize(texts, self.max_seq_len)
        mask = batch["attention_mask"]
        B, T = mask.shape
        n = mask.sum(-1).tolist()
        out = {}
        for l in layers:
            recs = [self._store(l).index[text_key(t)] for t in texts]
            if any(r["v"].shape[0] != k for r, k in zip(recs, n)):
                raise DistillError(
                    f"teacher-target store {self._store(l).path} holds other token counts than the "
                    "teacher's tokenizer gives now; delete that folder so it is recomputed"
                )
            D = recs[0]["v"].shape[1]
            v = torch.zeros(B, T, D)
            for j, r in enumerate(recs):
                v[j, : n[j]] = torch.from_numpy(r["v"].astype(np.float32))
            if self.definition == "eager":
                att = torch.zeros(B, recs[0]["att"].shape[0], T, T)
                for j, r in enumerate(recs):
                    att[j, :, : n[j], : n[j]] = torch.from_numpy(r["att"].astype(np.float32))
            else:
                q, k = torch.zeros(B, T, D), torch.zeros(B, T, D)
                for j, r in enumerate(recs):
                    q[j, : n[j]] = torch.from_numpy(r["q"].astype(np.float32))
                    k[j, : n[j]] = torch.from_numpy(r["k"].astype(np.float32))
                att = qk_attention(q, k, mask, heads)
            out[l] = {"att": att, "v": v}
        return batch, out
