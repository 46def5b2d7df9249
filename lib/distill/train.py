"""Stage 5 training: one loop for the task-agnostic stage (L_AT, L_VR, value MSE on a transfer corpus) and the
task-specific stage (any combination with L_OUT on labelled task texts), and the fine-tuning of the task teacher.

`train_student(source, student, corpus, cfg, task=None, hooks=RunHooks(...))` is the one loop: `source` gives teacher
targets (a TeacherCache in memory or a TeacherTargetStore on disk); `task` adds labels and the fine-tuned teacher's
logits, and a linear head on the student's mean-pooled output, for L_OUT. A run whose combination has no attention term
(the control 'ce', or 'out') never asks the teacher for attention, so it costs no teacher pass. It runs on
lib.common.training's loop (checkpoints every `hooks.checkpoint_every` steps, resume, the learning curve kept with the
checkpoint), evaluates the student every `hooks.eval_every` steps for a learning curve, and runs data-parallel when
lib.run.distributed hands it its ranks. `distill(...)` is its per-step loss table, for the callers that want only that.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn as nn

from lib.common.training import TrainingLoop, build_optimizer, optimizer_step
from lib.distill.cache import TeacherCache, check_attention_definition
from lib.distill.loss_spec import ATTENTION_DEFINITIONS, VARIANT_SPECS, VARIANTS, DistillError, LossSpec
from lib.distill.losses import (
    StepTargets,
    StudentOutputs,
    combined_loss,
    uniform_layer_map,
)
from lib.distill.models import Encoder, check_tokenizers_aligned


@dataclass
class DistillConfig:
    """Hyper-parameters of one run (paper defaults where a CPU allows; see supplement §3).

    variant: the MiniLM ablation (layer mapping and default terms); losses: a combination such as 'at+vr+out' that
    replaces the variant's terms ('' keeps them), weighted by w_*; temperature and alpha shape L_OUT.
    """

    variant: str = "minilm"
    steps: int = 40
    batch_size: int = 16
    max_seq_len: int = 32
    lr: float = 3e-4  # supplement: 3e-4 peak for students other than 6x768
    warmup_frac: float = 0.01  # supplement: 4,000 of 400,000 steps
    weight_decay: float = 0.01
    relation_heads: int = 12  # supplement: 12 heads of attention distributions and value relation
    seed: int = 0
    losses: str = ""
    w_at: float = 1.0
    w_vr: float = 1.0
    w_out: float = 1.0
    temperature: float = 1.0
    alpha: float = 0.5
    w_emb: float = 1.0
    emb_loss: str = "cosine"
    teacher_attention: str = "eager"
    fused: bool = True  # fused AdamW: one kernel per parameter group; py-spy put 20% of a CPU step in AdamW.step

    def spec(self) -> LossSpec:
        if not self.losses:
            return VARIANT_SPECS[self.variant]
        return LossSpec.parse(
            self.losses, self.w_at, self.w_vr, self.w_out, 1.0, self.temperature, self.alpha, self.w_emb, self.emb_loss
        )

    def check(self, teacher: Encoder, student: Encoder) -> None:
        if self.variant not in VARIANTS:
            raise DistillError(f"variant={self.variant!r} is unknown; use one of {VARIANTS}")
        if self.steps < 1 or self.batch_size < 1 or self.max_seq_len < 4:
            raise DistillError(
                f"steps={self.steps}, batch_size={self.batch_size}, max_seq_len={self.max_seq_len} "
                "must be >= 1, >= 1, >= 4"
            )
        for who, d in (("teacher", teacher.hidden), ("student", student.hidden)) if self.spec().needs_attention else ():
            if d % self.relation_heads:
                raise DistillError(
                    f"relation_heads={self.relation_heads} does not divide the {who} hidden size {d}; "
                    "pick a common divisor (e.g. 12 for 768 and 384)"
                )
        if self.teacher_attention not in ATTENTION_DEFINITIONS:
            raise DistillError(
                f"teacher_attention={self.teacher_attention!r} is unknown; use one of {ATTENTION_DEFINITIONS}"
            )
        if self.spec().needs_attention:
            check_attention_definition(self.teacher_attention, self.relation_heads, teacher.heads)


@dataclass
class TaskTargets:
    """Labelled task texts for L_OUT: texts [N], labels [N] int, teacher_logits [N, C] float
    (None: hard labels only)."""

    texts: list
    labels: np.ndarray
    n_classes: int
    teacher_logits: np.ndarray | None = None

    def __post_init__(self):
        self.labels = np.asarray(self.labels, dtype=np.int64)
        if len(self.texts) != len(self.labels) or (
            self.teacher_logits is not None and self.teacher_logits.shape != (len(self.texts), self.n_classes)
        ):
            raise DistillError(
                f"task targets disagree: {len(self.texts)} texts, {len(self.labels)} labels, teacher "
                f"logits {None if self.teacher_logits is None else self.teacher_logits.shape}; "
                f"give one label and one row of {self.n_classes} logits per text"
            )


def batch_plan(n: int, steps: int, batch_size: int, seed: int) -> list[np.ndarray]:
    """Index batches of a seeded sampler over epochs of a permutation: steps x [batch_size]."""
    rng = np.random.default_rng(seed)
    order: list[int] = []
    while len(order) < steps * batch_size:
        order += rng.permutation(n).tolist()
    return [np.array(order[i * batch_size : (i + 1) * batch_size]) for i in range(steps)]


class StudentStep(nn.Module):
    """The student, its value projection, task head and embedding projection (None when unused) and the loss of one
    step as one module, so DistributedDataParallel wraps everything that gets gradients."""

    def __init__(
        self,
        student: Encoder,
        proj: nn.Module | None,
        head: nn.Module | None,
        pairs: list[tuple[int, int]],
        heads: int,
        spec: LossSpec,
        emb_proj: nn.Module | None = None,
    ):
        super().__init__()
        self.enc, self.pairs, self.heads, self.spec = student, pairs, heads, spec
        self.model, self.proj, self.head = student.model, proj, head
        if emb_proj is not None:  # registered only when used, so the state of runs without L_EMB keeps its keys
            self.emb_proj = emb_proj

    def forward(self, sbatch: dict, targets: dict, teacher_logits, labels, emb_targets=None) -> dict:
        """sbatch: student tokens {input_ids, attention_mask: [B, T]}; targets: teacher layer -> {"att" [B, R, T, T],
        "v" [B, T, D]}; teacher_logits [B, C] or None; labels [B] or None; emb_targets [B, D_e] or None ->
        combined_loss's terms."""
        pooled = logits = None
        if self.head is not None or self.spec.needs_embedding:
            pooled, qkv = self.enc.pooled(sbatch)
            logits = self.head(pooled) if self.head is not None else None
        else:
            _, _, qkv = self.enc.run(sbatch)
        mask = sbatch["attention_mask"].to(self.enc.model.device)
        return combined_loss(
            StudentOutputs(qkv, mask, pooled, logits),
            StepTargets(targets, teacher_logits, labels, emb_targets),
            self.pairs,
            self.heads,
            self.spec,
            self.proj,
            getattr(self, "emb_proj", None),
        )


def step_inputs(
    source,
    student: Encoder,
    corpus: list[str],
    idx: np.ndarray,
    cfg: DistillConfig,
    spec: LossSpec,
    layers: list[int],
    task: TaskTargets | None,
    embedding: np.ndarray | None = None,
) -> tuple:
    """StudentStep's inputs for the corpus rows `idx` [B]: (student tokens, teacher targets on the student's device,
    teacher logits [B, C] or None, labels [B] or None, embedding targets [B, D_e] or None)."""
    dev = student.model.device
    texts = [corpus[i] for i in idx]
    sbatch = student.tokenize(texts, cfg.max_seq_len)
    targets = {}
    if spec.needs_attention:
        batch, targets = source.targets(texts, layers, cfg.relation_heads)
        if not torch.equal(sbatch["attention_mask"], batch["attention_mask"]):
            raise DistillError(
                f"{student.name} and {source.teacher.name} produce different token counts for a batch; "
                "give the student the teacher's tokenizer"
            )
        targets = {l: {k: v.to(dev) for k, v in tg.items()} for l, tg in targets.items()}
    tl = None if not spec.needs_teacher_logits else torch.as_tensor(task.teacher_logits[idx], device=dev).float()
    labels = None if task is None else torch.as_tensor(task.labels[idx], device=dev)
    emb = None if not spec.needs_embedding else torch.as_tensor(embedding[idx], device=dev).float()
    return sbatch, targets, tl, labels, emb


def prepare_run(
    teacher,
    student: Encoder,
    corpus: list[str],
    cfg: DistillConfig,
    task: TaskTargets | None,
    embedding: np.ndarray | None = None,
) -> dict:
    """Checks and set-up shared by `distill` and its data-parallel twin (lib.run.distributed): {"source" (teacher
    targets), "spec", "layers" (teacher layers used), "step" (StudentStep, value projection, head and embedding
    projection seeded by cfg.seed), "params" (everything the optimiser updates)}. embedding: the target encoder's
    embeddings [N, D_e] of `corpus`, needed by L_EMB."""
    source = (
        teacher
        if hasattr(teacher, "targets")
        else TeacherCache(teacher, corpus, cfg.max_seq_len, definition=cfg.teacher_attention)
    )
    t = source.teacher
    if not corpus:
        raise DistillError("the transfer corpus is empty; give distill() at least one sentence")
    cfg.check(t, student)
    spec = cfg.spec()
    if spec.needs_attention and getattr(source, "definition", cfg.teacher_attention) != cfg.teacher_attention:
        raise DistillError(
            f"the teacher-target source uses teacher_attention={source.definition!r}, the run asks for "
            f"{cfg.teacher_attention!r}; build the source with the run's definition"
        )
    if spec.needs_task:
        if task is None or list(task.texts) != list(corpus):
            raise DistillError(
                f"loss combination {spec.label()} has L_OUT; pass task=TaskTargets for the same texts as the corpus"
            )
        if spec.needs_teacher_logits and task.teacher_logits is None:
            raise DistillError(
                f"{spec.label()} needs teacher logits (alpha > 0); fine-tune a task teacher first or "
                "use the 'ce' combination"
            )
    if spec.needs_embedding and (embedding is None or len(embedding) != len(corpus)):
        raise DistillError(
            f"loss combination {spec.label()} has L_EMB; pass embedding= the target encoder's embeddings "
            f"of the {len(corpus)} corpus texts, one row each"
        )
    if spec.needs_attention and student.tokenizer is not t.tokenizer:
        check_tokenizers_aligned(t.tokenizer, student.tokenizer, corpus, cfg.max_seq_len, (t.name, student.name))
    L, M = t.num_layers, student.num_layers
    pairs = uniform_layer_map(L, M) if cfg.variant == "layer_to_layer" else [(L - 1, M - 1)]
    torch.manual_seed(cfg.seed)
    dev = student.model.device
    proj = nn.Linear(student.hidden, t.hidden).to(dev) if spec.vmse > 0 else None
    head = nn.Linear(student.hidden, task.n_classes).to(dev) if spec.needs_task else None
    # drawn after proj and head, so a run without L_EMB draws the same initial weights whether or not L_EMB exists
    emb_proj = (
        nn.Linear(student.hidden, embedding.shape[1]).to(dev)
        if spec.needs_embedding and embedding.shape[1] != student.hidden
        else None
    )
    params = list(student.model.parameters())
    params += [p for m in (proj, head, emb_proj) if m is not None for p in m.parameters()]
    return {
        "source": source,
        "spec": spec,
        "layers": sorted({p[0] for p in pairs}),
        "params": params,
        "step": StudentStep(student, proj, head, pairs, cfg.relation_heads, spec, emb_proj),
    }


@dataclass(frozen=True)
class RunHooks:
    """What `train_student` does beside training, each off by default. checkpoint: a file written atomically by rank 0
    every `checkpoint_every` steps and after the last one; a call with the same settings resumes from it and
    reproduces the uninterrupted run (the RNG state is in it, for dropout), other settings are refused naming the keys.
    evaluate(student) -> {metric: float}, run in eval mode after 0, eval_every, 2·eval_every, ... steps and after the
    last (rank 0). max_steps: stop after that many steps of this call, as a kill would."""

    checkpoint: str | Path | None = None
    checkpoint_every: int = 0
    evaluate: Callable[[Encoder], dict] | None = None
    eval_every: int = 0
    max_steps: int | None = None


class OneProcess:
    """The ranks of a single-process run (lib.run.distributed hands `train_student` its own for data parallelism)."""

    rank, world = 0, 1

    def barrier(self) -> None:
        pass

    def mean(self, values: dict[str, float]) -> dict[str, float]:
        return values

    def wrap(self, module: nn.Module) -> nn.Module:
        return module


def train_student(
    teacher,
    student: Encoder,
    corpus: list[str],
    cfg: DistillConfig,
    task: TaskTargets | None = None,
    progress: bool = True,
    ranks=None,
    hooks: RunHooks = RunHooks(),
    embedding: np.ndarray | None = None,
) -> dict:
    """Train `student` on `corpus` with the loss combination `cfg.spec()`.

    teacher: an Encoder, a TeacherCache or a TeacherTargetStore (anything with `.teacher` and `.targets`).
    task: labels (and teacher logits) aligned with `corpus`, needed by L_OUT; the trained head is left in
    `student.head` (Linear(D', C)). embedding: a target encoder's embeddings [N, D_e] aligned with `corpus`, needed
    by L_EMB (a Linear(D', D_e) is trained beside the student where the widths differ). Students tokenize with their own
    tokenizer; `check_tokenizers_aligned` must hold. ranks: lib.run.distributed's ranks (rank r takes its share of each
    step's batch, DDP averages the gradients); default one process. hooks: checkpoints, evaluations and a stop after
    some steps (RunHooks). Returns {"losses": DataFrame [step, L_*, loss], "curve": DataFrame [step, metrics...],
    "steps" (this call), "seconds" (training wall time over every call, evaluation excluded), "complete",
    "global_batch", "world"}.
    """

    ranks = ranks or OneProcess()
    if cfg.batch_size % ranks.world:
        raise DistillError(
            f"a global batch of {cfg.batch_size} cannot be split evenly over {ranks.world} ranks; use a "
            "multiple of the number of processes"
        )
    per = cfg.batch_size // ranks.world
    r = prepare_run(teacher, student, corpus, cfg, task, embedding)
    source, spec, layers, step_mod, params = r["source"], r["spec"], r["layers"], r["step"], r["params"]
    plan = batch_plan(len(corpus), cfg.steps, cfg.batch_size, cfg.seed)
    if spec.needs_attention and hasattr(source, "ensure"):  # one sorted teacher pass over every text the run will use
        if ranks.rank == 0:
            source.ensure([corpus[i] for i in np.unique(np.concatenate(plan))], layers)
        ranks.barrier()
    run = ranks.wrap(step_mod)
    opt, sched = build_optimizer(
        params, cfg.lr, cfg.steps, max(1, round(cfg.warmup_frac * cfg.steps)), cfg.weight_decay, fused=cfg.fused
    )
    evaluate, eval_every = hooks.evaluate, hooks.eval_every
    config = {"student": student.name, "cfg": dataclasses.asdict(cfg), "corpus": len(corpus), "eval_every": eval_every}
    if spec.needs_embedding:
        config["embedding"] = hashlib.sha256(np.ascontiguousarray(embedding, dtype=np.float32).tobytes()).hexdigest()[
            :16
        ]
    loop = TrainingLoop(
        {"model": step_mod, "optimizer": opt, "schedule": sched},
        config,
        cfg.steps,
        hooks.checkpoint,
        hooks.checkpoint_every,
        extra={"curve": []},
        writer=ranks.rank == 0,
    )

    def score(loop: TrainingLoop) -> None:
        curve = loop.extra["curve"]
        if evaluate is not None and ranks.rank == 0 and not any(c["step"] == loop.step for c in curve):
            student.model.eval()
            curve.append({"step": loop.step, **evaluate(student)})
            student.model.train()
        ranks.barrier()

    def step(i: int) -> dict:
        idx = plan[i][ranks.rank * per : (ranks.rank + 1) * per]
        terms = run(*step_inputs(source, student, corpus, idx, cfg, spec, layers, task, embedding))
        return {"step": i, **ranks.mean(optimizer_step(terms, opt, sched, params))}

    if eval_every and loop.step == 0:
        score(loop)
    done = loop.run(
        step,
        hooks.max_steps,
        period=eval_every,
        end_of_period=score,
        progress=progress,
        desc=f"{student.name} {spec.label()}",
    )
    if step_mod.head is not None:
        student.head = step_mod.head.eval()
    return {
        "losses": pd.DataFrame(loop.rows),
        "curve": pd.DataFrame(loop.extra["curve"]),
        "steps": done,
        "seconds": loop.seconds,
        "complete": loop.complete,
        "global_batch": cfg.batch_size,
        "world": ranks.world,
    }


def distill(
    teacher,
    student: Encoder,
    corpus: list[str],
    cfg: DistillConfig,
    progress: bool = True,
    task: TaskTargets | None = None,
) -> pd.DataFrame:
    """`train_student` in one process without checkpoints or evaluations: its per-step loss terms [step, L_*, loss]."""
    return train_student(teacher, student, corpus, cfg, task, progress)["losses"]


@torch.no_grad()
def predict_logits(enc: Encoder, texts: list[str], max_seq_len: int, batch_size: int = 64) -> np.ndarray:
    """Logits [N, C] of `enc.head` on mean-pooled embeddings."""
    if enc.head is None:
        raise DistillError(f"{enc.name} has no classification head; train it with a task (L_OUT or 'ce') first")
    enc.model.eval()
    out = [
        enc.head(enc.pooled(enc.tokenize(texts[i : i + batch_size], max_seq_len))[0]).float().cpu().numpy()
        for i in range(0, len(texts), batch_size)
    ]
    return np.concatenate(out) if out else np.zeros((0, enc.head.out_features), np.float32)


@dataclass
class FinetuneConfig:
    """Fine-tuning of the task teacher: the top `layers` transformer layers and a linear head (lower layers frozen)."""

    steps: int = 100
    batch_size: int = 16
    max_seq_len: int = 32
    lr: float = 5e-5
    layers: int = 2
    warmup_frac: float = 0.1
    weight_decay: float = 0.01
    seed: int = 0


def finetune_teacher(teacher: Encoder, task: TaskTargets, cfg: FinetuneConfig, progress: bool = True) -> Encoder:
    """A copy of `teacher` with its top `cfg.layers` layers fine-tuned and a head trained by CE on `task` (labels only).

    The shared teacher is left untouched (its attention targets stay valid for every cache). Freezing the lower
    layers keeps the backward pass small enough for a CPU; the forward pass still runs the whole model.
    """
    n = teacher.num_layers
    if not 0 <= cfg.layers <= n:
        raise DistillError(f"teacher_ft_layers={cfg.layers} must lie in 0..{n} (the teacher's layer count)")
    torch.manual_seed(cfg.seed)
    model = copy.deepcopy(teacher.model)
    for p in model.parameters():
        p.requires_grad_(False)
    for layer in model.encoder.layer[n - cfg.layers :]:
        for p in layer.parameters():
            p.requires_grad_(True)
    ft = Encoder(model, teacher.tokenizer, teacher.kind, f"{teacher.name} fine-tuned", None)
    dev = model.device
    ft.head = nn.Linear(ft.hidden, task.n_classes).to(dev)
    params = [p for p in model.parameters() if p.requires_grad] + list(ft.head.parameters())
    # unfused AdamW: the saved task teachers (lib.kd.stage reloads them) were trained so, and fused rounds differently
    opt, sched = build_optimizer(
        params, cfg.lr, cfg.steps, max(1, round(cfg.warmup_frac * cfg.steps)), cfg.weight_decay, fused=False
    )
    plan = batch_plan(len(task.texts), cfg.steps, cfg.batch_size, cfg.seed)

    def step(i: int) -> None:
        batch = ft.tokenize([task.texts[j] for j in plan[i]], cfg.max_seq_len)
        labels = torch.as_tensor(task.labels[plan[i]], device=dev)
        optimizer_step({"loss": nn.functional.cross_entropy(ft.head(ft.pooled(batch)[0]), labels)}, opt, sched, params)

    TrainingLoop({"model": model, "head": ft.head}, {}, cfg.steps).run(
        step, progress=progress, desc="fine-tune teacher"
    )
    return ft
