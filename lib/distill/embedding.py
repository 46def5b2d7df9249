"""Stage 5, embedding objective: a small student whose mean-pooled sentence embedding is trained to match a target
sentence encoder's (all-MiniLM-L6-v2, stage 2's node embedder), so it can replace that encoder as stage 3's node
embedder at a fraction of its cost.

- Data: `mixture_plan` (index batches drawing each source of texts at a chosen share; lib.embedders.data draws
  the texts).
- Targets: `target_embeddings` (stage 2's own encoder, cached on disk by the target's identity and the texts).
- Students: `assistant_student` (chosen layers of all-MiniLM-L6-v2, its tokenizer and embeddings, optionally a
  narrower feed-forward block) and `round_weights` (every weight rounded to bf16 or fp16: the noise floor).
- Objective and loop: `embedding_loss` (lib.embed.losses: cosine, MSE, in-batch similarity relations; notebook 05's
  L_EMB is the same function) and `train_embedding_student` (on lib.common.training's loop).

Notebook 05b (lib.embedders) trains such students as node embedders and judges them on unseen titles.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
from transformers import AutoModel, AutoTokenizer

from lib.common.device import DTYPES
from lib.common.paths import atomic_write_bytes, move_aside
from lib.common.runinfo import unreadable_reason
from lib.common.training import TrainingLoop, build_optimizer, optimizer_step
from lib.distill.loss_spec import DistillError
from lib.distill.models import Encoder, assistant_path
from lib.embed.config import EMBEDDING_LOSSES as LOSSES
from lib.embed.encoder import encode, load_model, model_id_of
from lib.embed.losses import embedding_loss


# ------------------------------------------------------------------------------------------------------------ data
def mixture_plan(
    sizes: dict[str, int], weights: dict[str, float], steps: int, batch_size: int, seed: int
) -> list[np.ndarray]:
    """Index batches steps x [batch_size] into the concatenation of the sources (in `sizes`' order).

    Each slot of a batch draws a source with probability weight / sum(weights); within a source, indices follow epochs
    of seeded permutations, so every text of a source is seen once before any is seen twice. Sources of weight 0 are
    never drawn.
    """
    names = list(sizes)
    w = np.array([float(weights.get(n, 0.0)) for n in names])
    if (w < 0).any() or w.sum() <= 0 or any(sizes[n] < 1 for n, x in zip(names, w) if x > 0):
        raise DistillError(
            f"source weights {weights} over sizes {sizes} draw nothing; give a positive weight to a non-empty source"
        )
    rng = np.random.default_rng(seed)
    which = rng.choice(len(names), size=steps * batch_size, p=w / w.sum())
    offsets = np.concatenate([[0], np.cumsum([sizes[n] for n in names])[:-1]])
    flat = np.empty(steps * batch_size, dtype=np.int64)
    for k, n in enumerate(names):
        slots = np.flatnonzero(which == k)
        if not len(slots):
            continue
        reps = -(-len(slots) // sizes[n])
        order = np.concatenate([rng.permutation(sizes[n]) for _ in range(reps)])[: len(slots)]
        flat[slots] = offsets[k] + order
    return [flat[i * batch_size : (i + 1) * batch_size] for i in range(steps)]


# --------------------------------------------------------------------------------------------------------- targets
def target_embeddings(
    texts: list[str],
    model_dir: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
) -> np.ndarray:
    """The target encoder's embeddings [N, D] float32 of `texts`, computed by stage 2's encoder (lib.embed.encoder:
    its pooling and normalisation); model_dir None = all-MiniLM-L6-v2. Cached in `cache_dir` under the model's
    content identity and a digest of the texts."""
    model = load_model(model_dir)
    digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
    path = Path(cache_dir) / f"{model_id_of(model)}-{digest}.npy" if cache_dir else None
    if path is not None and path.is_file():
        try:
            x = np.load(path)
        except (OSError, ValueError, EOFError) as e:  # cut short or overwritten: computed again
            move_aside(path, "target embeddings", unreadable_reason(e), "they are computed again")
            x = None
        if x is not None and x.shape[0] == len(texts):
            return x
    x, _ = encode(model, texts, progress=progress)
    if path is not None:
        buf = io.BytesIO()
        np.save(buf, x)
        atomic_write_bytes(path, buf.getvalue())
    return x


# -------------------------------------------------------------------------------------------------------- students
def assistant_student(
    layers: list[int],
    model_dir: str | os.PathLike | None = None,
    dropout: float | None = None,
    device: str | torch.device = "cpu",
    ffn: int | None = None,
) -> Encoder:
    """all-MiniLM-L6-v2 (or the BERT model in `model_dir`) keeping only the transformer layers `layers` (0-based, in
    that order), with its own tokenizer and embeddings: a len(layers) x 384 student before any training.
    dropout: replace the hidden and attention dropout (None keeps the model's). ffn: keep this many feed-forward
    neurons per layer (`prune_feed_forward`; None keeps all 1,536)."""
    src = Path(model_dir) if model_dir else assistant_path()
    model = AutoModel.from_pretrained(src, use_safetensors=True)
    n = model.config.num_hidden_layers
    if model.config.model_type != "bert" or not layers or any(not 0 <= i < n for i in layers):
        raise DistillError(
            f"layers={layers} cannot be taken from {src.name} ({model.config.model_type}, {n} layers); "
            f"give indices in 0..{n - 1} of a BERT model"
        )
    model.encoder.layer = nn.ModuleList([copy.deepcopy(model.encoder.layer[i]) for i in layers])
    model.config.num_hidden_layers = len(layers)
    if ffn is not None:
        prune_feed_forward(model, ffn)
    if dropout is not None:
        _set_dropout(model, dropout)
    model.to(device).eval()
    tag = "".join(str(i) for i in layers) + (f"_ffn{ffn}" if ffn is not None else "")
    return Encoder(model, AutoTokenizer.from_pretrained(src), "bert", f"assistant_L{tag}")


@torch.no_grad()
def prune_feed_forward(model: nn.Module, width: int) -> nn.Module:
    """Keep, in every layer of a BERT `model`, the `width` feed-forward neurons with the largest product of the norms
    of their input row and output column (a weight-only score: the neuron's largest possible contribution); in place.
    For titles of about 8 wordpieces the feed-forward block is two thirds of a layer's multiply-adds (2 x 384 x 1,536
    against 4 x 384 x 384 for the attention projections), so it is where a layer gets cheaper without narrowing the
    384-d embedding stage 3 reads."""
    inner = model.config.intermediate_size
    if not 1 <= width <= inner:
        raise DistillError(f"ffn={width} must lie in 1..{inner} (the model's feed-forward width)")
    for layer in model.encoder.layer:
        fin, fout = layer.intermediate.dense, layer.output.dense
        keep = (fin.weight.norm(dim=1) * fout.weight.norm(dim=0)).topk(width).indices.sort().values
        new_in = nn.Linear(fin.in_features, width).to(fin.weight.device, fin.weight.dtype)
        new_in.weight.copy_(fin.weight[keep])
        new_in.bias.copy_(fin.bias[keep])
        new_out = nn.Linear(width, fout.out_features).to(fout.weight.device, fout.weight.dtype)
        new_out.weight.copy_(fout.weight[:, keep])
        new_out.bias.copy_(fout.bias)
        layer.intermediate.dense, layer.output.dense = new_in, new_out
    model.config.intermediate_size = width
    return model


ROUNDINGS = tuple(k for k, v in DTYPES.items() if v is not None)


@torch.no_grad()
def round_weights(model: nn.Module, dtype: str) -> nn.Module:
    """Round every floating-point parameter of `model` to `dtype` ("bf16" or "fp16") and back to its own dtype, in
    place. all-MiniLM-L6-v2 rounded this way embeds titles at a cosine of about 0.999 to itself: as a node embedder it
    shows how far seeds alone move stage 3's numbers when the features barely change (the noise floor of a paired
    comparison)."""
    if dtype not in ROUNDINGS:
        raise DistillError(f"dtype={dtype!r} is unknown; use one of {ROUNDINGS}")
    for p in model.parameters():
        if p.is_floating_point():
            p.copy_(p.to(DTYPES[dtype]).to(p.dtype))
    return model


def _set_dropout(model: nn.Module, p: float) -> None:
    model.config.hidden_dropout_prob = model.config.attention_probs_dropout_prob = p
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = p


# ------------------------------------------------------------------------------------------------------- objective
@dataclass
class EmbedDistillConfig:
    """Hyper-parameters of one embedding-distillation run (the student's architecture and init are chosen outside)."""

    steps: int = 2000
    batch_size: int = 64
    max_seq_len: int = 64  # titles are < 20 wordpieces; lead sentences are cut here
    lr: float = 1e-4  # a fine-tuning rate: the assistant's layers start close to the target
    warmup_frac: float = 0.05
    weight_decay: float = 0.01
    loss: str = "cosine"
    w_rel: float = 0.0
    normalise: bool = True  # all-MiniLM-L6-v2 normalises its embeddings
    train_word_embeddings: bool = False  # the assistant's embeddings already are the target's; freezing them saves
    # the AdamW update of 30,522 x 384 rows per step
    seed: int = 0
    fused: bool = True

    def check(self) -> None:
        if self.loss not in LOSSES:
            raise DistillError(f"loss={self.loss!r} is unknown; use one of {LOSSES}")
        if self.steps < 1 or self.batch_size < 2 or self.max_seq_len < 4 or self.w_rel < 0:
            raise DistillError(
                f"steps={self.steps}, batch_size={self.batch_size}, max_seq_len={self.max_seq_len}, "
                f"w_rel={self.w_rel} must be >= 1, >= 2, >= 4, >= 0"
            )


def train_embedding_student(
    student: Encoder,
    texts: list[str],
    targets: np.ndarray,
    plan: list[np.ndarray],
    cfg: EmbedDistillConfig,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 0,
    max_steps: int | None = None,
    progress: bool = True,
) -> dict:
    """Train `student` so its mean-pooled embedding of texts[i] matches targets[i] [N, D_t].

    plan: index batches steps x [B] into `texts` (`mixture_plan`); len(plan) must equal cfg.steps. A projection
    nn.Linear(D_s, D_t) (seeded) is trained beside the student when the widths differ and is returned, not saved with
    the student. checkpoint: a file written atomically every `checkpoint_every` steps and after the last; a call with
    the same settings resumes from it and reproduces the uninterrupted run (the RNG state is in it, for dropout);
    other settings are refused naming the keys. max_steps: stop after that many steps of this call, as a kill would.
    Returns {"losses": DataFrame [step, L_cos, L_mse, L_rel, loss], "proj", "steps" (this call), "seconds" (over every
    call), "complete"}.
    """
    cfg.check()
    if len(plan) != cfg.steps:
        raise DistillError(
            f"the batch plan has {len(plan)} steps, the config {cfg.steps}; build it with steps={cfg.steps}"
        )
    if len(texts) != len(targets):
        raise DistillError(f"{len(texts)} texts but {len(targets)} target rows; give one target row per text")
    dev = student.model.device
    torch.manual_seed(cfg.seed)
    d_t = targets.shape[1]
    proj = nn.Linear(student.hidden, d_t).to(dev) if d_t != student.hidden else None
    word = student.model.embeddings.word_embeddings.weight
    word.requires_grad_(cfg.train_word_embeddings)
    params = [p for p in student.model.parameters() if p.requires_grad]
    params += list(proj.parameters()) if proj is not None else []
    opt, sched = build_optimizer(
        params, cfg.lr, cfg.steps, max(1, round(cfg.warmup_frac * cfg.steps)), cfg.weight_decay, fused=cfg.fused
    )
    plan_digest = hashlib.sha256(np.concatenate(plan).tobytes()).hexdigest()[:16]
    config = {
        "student": student.name,
        "cfg": dataclasses.asdict(cfg),
        "texts": len(texts),
        "plan": plan_digest,
        "target_width": d_t,
    }
    parts = {
        "model": student.model,
        **({"proj": proj} if proj is not None else {}),
        "optimizer": opt,
        "schedule": sched,
    }
    loop = TrainingLoop(parts, config, cfg.steps, checkpoint, checkpoint_every)
    tgt = torch.as_tensor(targets, dtype=torch.float32)

    def step(i: int) -> dict:
        pooled, _ = student.pooled(student.tokenize([texts[j] for j in plan[i]], cfg.max_seq_len))
        terms = embedding_loss(pooled, tgt[plan[i]].to(dev), cfg.loss, cfg.w_rel, proj, cfg.normalise)
        return {"step": i, **optimizer_step(terms, opt, sched, params)}

    try:
        done = loop.run(step, max_steps, progress=progress, desc=f"{student.name} {cfg.loss}")
    finally:
        word.requires_grad_(True)
    return {
        "losses": pd.DataFrame(loop.rows),
        "proj": proj,
        "steps": done,
        "seconds": loop.seconds,
        "complete": loop.complete,
    }
