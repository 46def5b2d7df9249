"""Stage 6 soft-logit knowledge distillation (Sučík's thesis ch. 4, after Tang et al. 2019): the losses, a BiLSTM and a
small-BERT student on the teacher's wordpiece tokenizer, and a seeded, resumable training loop.

Students read the teacher's wordpiece ids, so their embedding tables can start from the teacher's input embeddings
(no word2vec download is possible here). A label of NO_LABEL (-1) marks an augmented sentence: only the soft term,
against the teacher's logits, sees it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F

from lib.common.training import TrainingLoop, build_optimizer, optimizer_step
from lib.distill.models import Encoder, StudentShape, make_student
from lib.distill.train import batch_plan
from lib.kd.config import KdError

NO_LABEL = -1
SOFT_LOSSES = ("mse", "kl", "none")  # none: hard-label CE only (the undistilled control)


# ----------------------------------------------------------------------------------------------------------- losses
def mse_logits(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Mean squared error between logits, averaged over all B x C entries (torch's MSELoss, as in Tang & Lin's code).

    student, teacher: [B, C] -> scalar.
    """
    return F.mse_loss(student, teacher)


def kl_logits(student: torch.Tensor, teacher: torch.Tensor, temperature: float = 3.0) -> torch.Tensor:
    """T² · KL(softmax(teacher / T) || softmax(student / T)), mean over the batch (Hinton et al. 2015).

    student, teacher: [B, C] -> scalar. The T² keeps gradient sizes comparable across temperatures.
    """
    if temperature <= 0:
        raise KdError(f"temperature={temperature} must be > 0")
    t = temperature
    return (
        F.kl_div(F.log_softmax(student / t, -1), F.log_softmax(teacher / t, -1), reduction="batchmean", log_target=True)
        * t
        * t
    )


def ce_labelled(student: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy on the rows that have a label: student [B, C], labels [B] (NO_LABEL rows skipped) -> scalar.

    0 (with a gradient path) when no row has a label, e.g. a batch of augmented sentences only.
    """
    if not (labels != NO_LABEL).any():
        return student.sum() * 0.0
    return F.cross_entropy(student, labels, ignore_index=NO_LABEL)


def kd_loss(
    student: torch.Tensor,
    teacher: torch.Tensor,
    labels: torch.Tensor | None = None,
    soft: str = "mse",
    temperature: float = 3.0,
    ce_weight: float = 0.0,
) -> dict[str, torch.Tensor]:
    """Soft-logit distillation plus weighted hard-label CE: {"L_soft" (unless soft="none"), "L_CE" (when ce_weight > 0),
    "loss"}.

    student, teacher: logits [B, C]; labels: [B] int with NO_LABEL for unlabelled rows; soft: "mse" (the thesis's
    LSTM_S, temperature unused) or "kl" (its BERT_S, at `temperature`) or "none" (the control: no teacher, hard labels
    only); loss = L_soft + ce_weight · L_CE.
    """
    if soft not in SOFT_LOSSES:
        raise KdError(f"soft={soft!r} is unknown; use one of {SOFT_LOSSES}")
    if ce_weight < 0:
        raise KdError(f"ce_weight={ce_weight} must be >= 0")
    if student.shape != teacher.shape:
        raise KdError(
            f"student logits {tuple(student.shape)} and teacher logits {tuple(teacher.shape)} differ; "
            "give the student as many classes as the teacher's head"
        )
    if soft == "none":
        if ce_weight <= 0 or labels is None:
            raise KdError("soft='none' trains on hard labels only; give labels and ce_weight > 0")
        out = {"loss": student.sum() * 0.0}
    else:
        out = {"L_soft": mse_logits(student, teacher) if soft == "mse" else kl_logits(student, teacher, temperature)}
        out["loss"] = out["L_soft"]
    if ce_weight > 0:
        if labels is None:
            raise KdError(f"ce_weight={ce_weight} needs labels; pass labels or set ce_weight=0")
        out["L_CE"] = ce_labelled(student, labels)
        out["loss"] = out["loss"] + ce_weight * out["L_CE"]
    return out


# --------------------------------------------------------------------------------------------------------- students
def teacher_wordpiece_embeddings(teacher: Encoder) -> torch.Tensor:
    """A detached copy of the teacher's wordpiece input embeddings: [V, D] (V = len(teacher.tokenizer))."""
    return teacher.model.embeddings.word_embeddings.weight.detach().clone()


class WordpieceEmbedding(nn.Module):
    """A table initialised from the teacher's wordpiece embeddings [V, E], then a trainable Linear(E, dim) if dim != E.

    ids [B, T] -> [B, T, dim]. freeze: keep the table fixed (the static channel of the multichannel mode).
    """

    def __init__(self, weight: torch.Tensor, dim: int | None = None, freeze: bool = False):
        super().__init__()
        self.table = nn.Embedding.from_pretrained(weight.detach().clone().float(), freeze=freeze)
        e = weight.shape[1]
        self.proj = nn.Linear(e, dim) if dim is not None and dim != e else nn.Identity()
        self.dim = e if dim is None else dim

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.proj(self.table(ids))


class Student(nn.Module):
    """What both students share: the teacher's tokenizer, batched logits and sentence representations as numpy."""

    tokenizer: object
    n_classes: int

    def tokenize(self, texts: list[str], max_seq_len: int) -> dict:
        return self.tokenizer(list(texts), padding=True, truncation=True, max_length=max_seq_len, return_tensors="pt")

    def _batched(self, fn, texts: list[str], max_seq_len: int, batch_size: int) -> np.ndarray:
        was = self.training
        self.eval()
        dev = next(self.parameters()).device
        out = []
        with torch.no_grad():
            for i in range(0, len(texts), batch_size):
                b = self.tokenize(texts[i : i + batch_size], max_seq_len)
                out.append(fn(b["input_ids"].to(dev), b["attention_mask"].to(dev)).float().cpu().numpy())
        self.train(was)
        return np.concatenate(out) if out else np.zeros((0, 0), np.float32)

    def predict_logits(self, texts: list[str], max_seq_len: int = 128, batch_size: int = 64) -> np.ndarray:
        """Logits [N, C]."""
        return self._batched(self.forward, texts, max_seq_len, batch_size)

    def sentence_representations(self, texts: list[str], max_seq_len: int = 128, batch_size: int = 64) -> np.ndarray:
        """Frozen sentence representations for probing: [N, D] (see `represent`)."""
        return self._batched(self.represent, texts, max_seq_len, batch_size)

    def param_counts(self) -> dict:
        """Embedding (wordpiece tables and their projections) and other parameters, frozen ones included."""
        emb = sum(p.numel() for n, p in self.named_parameters() if n.startswith("channels.") or "word_embeddings" in n)
        total = sum(p.numel() for p in self.parameters())
        return {"params_embedding": emb, "params_other": total - emb, "params_total": total}


class BiLSTMStudent(Student):
    """The thesis's LSTM_S (Tang et al. 2019): wordpiece embeddings -> BiLSTM -> [last forward state; first backward
    state] [B, 2H] -> Linear(2H, fc) + ReLU -> Linear(fc, C).

    embeddings: the teacher's wordpiece table [V, E]; embed_dim: width after the trainable projection (300, the
    thesis's word2vec width; None keeps E); multichannel: two channels side by side, one frozen and one trained (the
    thesis's best mode; with the defaults the non-embedding part has its 2.41M parameters).
    """

    def __init__(
        self,
        embeddings: torch.Tensor,
        tokenizer,
        n_classes: int,
        embed_dim: int | None = 300,
        hidden: int = 300,
        fc: int = 400,
        layers: int = 1,
        multichannel: bool = True,
        dropout: float = 0.0,
        seed: int = 0,
    ):
        super().__init__()
        if embeddings.shape[0] < len(tokenizer):
            raise KdError(
                f"the embedding table has {embeddings.shape[0]} rows for a tokenizer of {len(tokenizer)} "
                "wordpieces; pass the teacher's own input embeddings"
            )
        torch.manual_seed(seed)
        self.tokenizer, self.n_classes, self.name = tokenizer, n_classes, f"bilstm_{hidden}"
        self.channels = nn.ModuleList([WordpieceEmbedding(embeddings, embed_dim, freeze=False)])
        if multichannel:
            self.channels.append(WordpieceEmbedding(embeddings, embed_dim, freeze=True))
        width = sum(c.dim for c in self.channels)
        self.lstm = nn.LSTM(
            width,
            hidden,
            num_layers=layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout if layers > 1 else 0.0,
        )
        self.drop = nn.Dropout(dropout)
        self.fc = nn.Linear(2 * hidden, fc)
        self.out = nn.Linear(fc, n_classes)

    def represent(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """input_ids, attention_mask [B, T] -> [B, 2H]: the top layer's final forward and backward states."""
        x = torch.cat([c(input_ids) for c in self.channels], -1)  # [B, T, width]
        lengths = attention_mask.sum(1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(self.drop(x), lengths, batch_first=True, enforce_sorted=False)
        _, (h, _) = self.lstm(packed)  # h: [layers * 2, B, H]
        return torch.cat([h[-2], h[-1]], -1)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """input_ids, attention_mask [B, T] -> logits [B, C]."""
        return self.out(self.drop(F.relu(self.fc(self.represent(input_ids, attention_mask)))))


class BertStudent(Student):
    """A BERT encoder (lib.distill.models.make_student) + Linear(hidden, C) on the mean-pooled last layer (as stage 5
    pools). teacher_embeddings: start the wordpiece table from the teacher's [V, E], projected to `hidden` by a
    trainable Linear (the thesis's wordpiece mode); None: random init."""

    def __init__(
        self,
        tokenizer,
        n_classes: int,
        layers: int = 5,
        hidden: int = 204,
        heads: int = 3,
        intermediate: int = 750,
        teacher_embeddings: torch.Tensor | None = None,
        dropout: float = 0.1,
        max_positions: int = 512,
        seed: int = 0,
    ):
        super().__init__()
        shape = StudentShape(layers, hidden, heads, intermediate, max_positions, dropout)
        enc = make_student(tokenizer, shape, seed=seed)
        if teacher_embeddings is not None:
            enc.model.embeddings.word_embeddings = WordpieceEmbedding(teacher_embeddings, hidden)
        self.encoder, self.model, self.tokenizer, self.n_classes = enc, enc.model, tokenizer, n_classes
        self.name = f"bert_{layers}x{hidden}"
        self.head = nn.Linear(hidden, n_classes)

    def represent(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """input_ids, attention_mask [B, T] -> mean of the last hidden states over non-pad tokens [B, hidden]."""
        return self.encoder.pooled({"input_ids": input_ids, "attention_mask": attention_mask})[0]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """input_ids, attention_mask [B, T] -> logits [B, C]."""
        return self.head(self.represent(input_ids, attention_mask))


# --------------------------------------------------------------------------------------------------------- training
@dataclass(frozen=True)
class KDConfig:
    """One student run. Defaults are the thesis's tuned LSTM_S (§4-5): MSE on logits, Adam at 5e-4, B = 32, no
    warm-up, linear decay, 30 epochs; BERT_DEFAULTS holds its BERT_S values."""

    soft: str = "mse"
    temperature: float = 3.0  # thesis: T = 3 for the KL loss (Tsai et al. 2019; Tang & Lin's default)
    ce_weight: float = 0.0  # thesis: distillation loss only
    epochs: float = 30
    batch_size: int = 32
    lr: float = 5e-4
    warmup_frac: float = 0.0
    decay: bool = True
    max_seq_len: int = 128  # thesis: 128-token sentences
    seed: int = 0

    def steps(self, n: int) -> int:
        return max(1, math.ceil(self.epochs * n / self.batch_size))

    def check(self) -> None:
        if self.soft not in SOFT_LOSSES:
            raise KdError(f"soft={self.soft!r} is unknown; use one of {SOFT_LOSSES}")
        if self.epochs <= 0 or self.batch_size < 1 or self.lr <= 0 or not 0 <= self.warmup_frac < 1:
            raise KdError(
                f"epochs={self.epochs}, batch_size={self.batch_size}, lr={self.lr}, "
                f"warmup_frac={self.warmup_frac} must be > 0, >= 1, > 0 and in [0, 1)"
            )


# thesis §5: BERT_S with wordpiece embeddings: KL at T = 3, B = 128, warm-up over 15 of 60 epochs, then linear decay
BERT_DEFAULTS = KDConfig(soft="kl", epochs=60, batch_size=128, warmup_frac=0.25)


def train_student(
    student: Student,
    texts: list[str],
    teacher_logits: np.ndarray,
    labels: np.ndarray | None = None,
    cfg: KDConfig = KDConfig(),
    progress: bool = True,
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 0,
    max_steps: int | None = None,
) -> dict:
    """Distil the teacher's logits into `student` on the transfer set (Adam, linear or constant schedule after the
    warm-up, on lib.common.training's loop).

    texts [N]; teacher_logits [N, C]; labels [N] int, NO_LABEL for augmented sentences (None: all unlabelled).
    Batches come from a seeded plan and dropout is reseeded from (seed, step). checkpoint: a file written atomically
    every `checkpoint_every` steps and after the last; a call with the same settings resumes from it and gives the
    weights of one uninterrupted run; other settings are refused naming the keys. max_steps: stop after that many
    steps of this call, as a kill would. Returns {"losses": DataFrame [step, L_soft, L_ce, loss, lr], "steps" (this
    call), "seconds" (over every call), "complete"}.
    """
    cfg.check()
    n = len(texts)
    tl = np.asarray(teacher_logits, dtype=np.float32)
    y = np.full(n, NO_LABEL, np.int64) if labels is None else np.asarray(labels, dtype=np.int64)
    if n == 0 or tl.shape != (n, student.n_classes) or y.shape != (n,):
        raise KdError(
            f"transfer set disagrees: {n} texts, teacher logits {tl.shape}, labels {y.shape}, student "
            f"with {student.n_classes} classes; give one row of {student.n_classes} logits and one label "
            "(or NO_LABEL) per text"
        )
    steps = cfg.steps(n)
    plan = batch_plan(n, steps, cfg.batch_size, cfg.seed)
    # fused: one kernel over all parameters; with the 23M-entry wordpiece table it makes a CPU step ~10x faster
    opt, sched = build_optimizer(
        [p for p in student.parameters() if p.requires_grad],
        cfg.lr,
        steps,
        round(cfg.warmup_frac * steps),
        schedule="linear" if cfg.decay else "constant",
    )
    loop = TrainingLoop(
        {"model": student, "optimizer": opt, "schedule": sched},
        {"student": student.name, "cfg": asdict(cfg), "texts": n},
        steps,
        checkpoint,
        checkpoint_every,
        step_seed=lambda step: cfg.seed * 1_000_003 + step,
    )
    dev = next(student.parameters()).device

    def step(i: int) -> dict:
        idx = plan[i]
        b = student.tokenize([texts[j] for j in idx], cfg.max_seq_len)
        terms = kd_loss(
            student(b["input_ids"].to(dev), b["attention_mask"].to(dev)),
            torch.as_tensor(tl[idx], device=dev),
            torch.as_tensor(y[idx], device=dev),
            cfg.soft,
            cfg.temperature,
            cfg.ce_weight,
        )
        return {"step": i, **optimizer_step(terms, opt, sched), "lr": sched.get_last_lr()[0]}

    done = loop.run(step, max_steps, progress=progress, desc=f"{student.name} {cfg.soft}")
    return {"losses": pd.DataFrame(loop.rows), "steps": done, "seconds": loop.seconds, "complete": loop.complete}
