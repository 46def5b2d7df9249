"""Notebook 05's parameters (MiniLM attention distillation), one typed declaration; see lib.common.config. Its link
prediction trains notebook 03's GatModel with the GatModel and training settings it inherits (GatTrainingParams)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from lib.common import published
from lib.common.compute import PRECISIONS
from lib.common.config import DeviceStageParams, param
from lib.common.params import require
from lib.common.runinfo import load_json
from lib.distill.loss_spec import ATTENTION_DEFINITIONS, DistillError, LossSpec
from lib.embed.config import EMBEDDING_LOSSES
from lib.linkpred.config import GatTrainingParams
from lib.linkpred.names import PROTOCOLS

TASKS = ("polarity", "topic")
CONTROL = "ce"
"""The task-specific control: the task loss on hard labels only, beside every distilled combination."""
STUDENT_INITS = ("random", "assistant")
TA_SOURCES = ("pretrained", "distilled")
EMBEDDING_TARGETS = ("minilm", "teacher")
"""What L_EMB matches: all-MiniLM-L6-v2's sentence embedding (stage 2's node embedder, the assistant) or the
teacher's (all-mpnet-base-v2, through a projection 384 -> 768 learned with the student)."""
TEACHER_HIDDEN, TEACHER_HEADS, TEACHER_LAYERS = 768, 12, 12  # all-mpnet-base-v2


@dataclass(frozen=True)
class DistillParams(GatTrainingParams, DeviceStageParams):
    NOTEBOOK: ClassVar[str] = "05_attention_distillation.ipynb"
    GAT_OVERRIDES: ClassVar[dict[str, str]] = {  # lib.distill.lp.lp_params sets them
        "first_seed": "each seed of distill_seeds in turn, one GatModel per (student, seed)",
        "n_seeds": "1: one GatModel per (student, seed)",
        "protocols": "lp_protocols: the link-prediction study's own",
        "train_supervision": "['mp'], the seed's supervision only: the students are compared, not supervisions",
        "negatives_per_positive": "0: only the uniform rows are kept, so the per-positive sets are not drawn",
        "n_test_graphs": "the run's split (notebook 02's split.json); 2 where the run has none",
        "val_fraction": "the run's split (notebook 02's split.json); 0.1 where the run has none",
    }

    precision: str = param(
        "fp32",
        "teacher forward for distillation targets: fp32, bf16, fp16 or auto (bf16 where the CPU/GPU has it natively)",
        choices=PRECISIONS,
    )
    distill_seeds: list[int] = param(
        [0], "distillation/evaluation seeds; the paper averages 4 runs, full profile uses 3"
    )
    students: list[int] = param([6, 3], "student layer counts (Table 3 architectures M x 384)", ge=1, le=TEACHER_LAYERS)
    student_hidden: int = param(384, "d'_h of every student", ge=1)
    student_heads: int = param(12, "attention heads of the students (paper: 12)", ge=1)
    relation_heads: int = param(12, "heads of attention distributions and value relations (supplement §3: 12)", ge=1)
    teacher_attention: str = param(
        "eager",
        "eager: the teacher's own attention (mpnet incl. position bias); qk: softmax(qk) for any relation_heads",
        choices=ATTENTION_DEFINITIONS,
    )
    student_inits: list[str] = param(
        ["random"],
        "random as in the paper and/or assistant (copy all-MiniLM-L6-v2 layers); one grid per entry",
        choices=STUDENT_INITS,
    )
    ablation_students: list[int] = param(
        [3], "students that also get -Value-Rel, Value-MSE, +Layer-to-Layer (demo: smallest only)"
    )
    ablation_inits: list[str] = param([], "inits that get the ablations; empty: every init of student_inits")
    ablation_seeds: list[int] = param([], "seeds that get the ablations; empty: every seed of distill_seeds")
    ta_students: list[int] = param([3], "students also distilled from the teacher assistant (Table 3 'w/ TA')")
    ta_source: str = param(
        "pretrained", "pretrained: all-MiniLM-L6-v2; distilled: our 6x384 MiniLM student", choices=TA_SOURCES
    )
    embedding_methods: list[str] = param(
        ["at+vr+emb"],
        "task-agnostic runs with the embedding term L_EMB, on every "
        "student, seed and init beside MiniLM and the control: "
        "combinations of at, vr and emb holding emb ([] skips)",
    )
    embedding_target: str = param(
        "minilm",
        "what L_EMB matches: minilm (all-MiniLM-L6-v2, stage 2's node embedder) "
        "or teacher (all-mpnet-base-v2, through a learned 384 -> 768 projection)",
        choices=EMBEDDING_TARGETS,
    )
    embedding_loss: str = param(
        "cosine",
        "L_EMB between unit vectors: cosine (mean 1 - cos), mse (per dimension) or both",
        choices=EMBEDDING_LOSSES,
    )
    w_emb: float = param(1.0, "weight of L_EMB in a combination", ge=0)
    transfer_sentences: int = param(400, "vital-article sentences + titles + RT plot lines used for distillation", ge=1)
    distill_steps: int = param(12, "distillation steps per run (paper: 400,000; demo only shows the mechanics)", ge=1)
    distill_batch_size: int = param(8, "sentences per step (paper: 256 for small students)", ge=1)
    distill_max_seq_len: int = param(32, "tokens per text, longer texts truncated (paper: 512)", ge=1)
    distill_lr: float = param(
        1e-3, "peak learning rate (paper 3e-4; raised so a demo of a few steps moves the losses)", gt=0
    )
    distill_warmup_frac: float = param(0.04, "linear warm-up fraction, then linear decay (paper: 1%)", ge=0, le=1)
    distill_weight_decay: float = param(0.01, "AdamW weight decay (paper: 0.01)", ge=0)
    eval_every: int = param(
        0, "task-agnostic runs: probe and fidelity every this many steps for learning curves (0: at the end only)", ge=0
    )
    reuse_runs: str = param(
        "",
        "a published run folder (e.g. outputs/reference/distill_long) whose finished "
        "task-agnostic runs this grid takes instead of training them again; every setting "
        "that shapes a run must equal this one's ('': train every run)",
    )
    checkpoint_every: int = param(
        0, "task-agnostic runs: step checkpoint every this many steps, a killed run resumes there (0: off)", ge=0
    )
    cache_teacher_targets: bool = param(
        True, "teacher targets on disk, computed once for every run and re-run (False: per seed in memory)"
    )
    tasks: list[str] = param(
        ["polarity"],
        "task-specific stage: teacher fine-tuned per task, students trained with L_OUT ([] skips; demo: polarity, as "
        "notebook 06)",
        choices=TASKS,
    )
    task_students: list[int] = param([3], "students that get the task-specific stage (demo: smallest only)")
    task_losses: list[str] = param(
        ["ce", "at", "vr", "out", "at+vr", "at+out", "vr+out", "at+vr+out"], "combinations; ce is the control"
    )
    task_steps: int = param(4, "task-specific steps per run (demo: the mechanics of every combination)", ge=1)
    task_lr: float = param(1e-3, "peak learning rate of the task-specific stage", gt=0)
    w_at: float = param(1.0, "weight of L_AT in a combination", ge=0)
    w_vr: float = param(1.0, "weight of L_VR in a combination", ge=0)
    w_out: float = param(1.0, "weight of L_OUT (and of CE in the control)", ge=0)
    out_temperature: float = param(2.0, "temperature T of L_OUT's soft targets (Hinton et al.)", gt=0)
    out_soft_share: float = param(0.5, "share of soft targets in L_OUT, the rest is hard-label CE", ge=0, le=1)
    teacher_ft_steps: int = param(4, "fine-tuning steps of the task teacher (demo: mechanics only)", ge=0)
    teacher_ft_layers: int = param(
        1, "top teacher layers fine-tuned with the head, lower layers frozen (CPU budget)", ge=0, le=TEACHER_LAYERS
    )
    teacher_ft_lr: float = param(5e-5, "peak learning rate of the teacher fine-tuning", gt=0)
    task_train: int = param(100, "training texts per evaluation task (linear head)", ge=24)
    task_eval: int = param(50, "validation and test texts per evaluation task", ge=12)
    fidelity_sentences: int = param(50, "held-out sentences for embedding fidelity (val and test each)", ge=1)
    speed_sentences: int = param(16, "sentences timed per model for the speed table", ge=1)
    save_students: bool = param(
        True, "save MiniLM students (and the controls of lp_students) as sentence-transformers folders"
    )
    lp_students: list[int] = param(
        [3], "MiniLM students used as node embedder for link prediction (demo: smallest; [] skips)"
    )
    lp_protocols: list[str] = param(
        ["leak_free"],
        "evaluation protocols of link prediction (lib.linkpred.protocols; leak_free: no test link seen)",
        choices=PROTOCOLS,
    )

    def check(self) -> None:
        students = set(self.students)
        require(len(self.distill_seeds) >= 1, "distill_seeds", self.distill_seeds, "give at least one seed")
        require(
            set(self.ablation_students) <= students,
            "ablation_students",
            self.ablation_students,
            "ablations run on students that are in `students`",
        )
        require(
            set(self.ablation_inits) <= set(self.student_inits),
            "ablation_inits",
            self.ablation_inits,
            "list inits of `student_inits` ([] = every init)",
        )
        require(
            set(self.ablation_seeds) <= set(self.distill_seeds),
            "ablation_seeds",
            self.ablation_seeds,
            "list seeds of `distill_seeds` ([] = every seed)",
        )
        require(set(self.ta_students) <= students, "ta_students", self.ta_students, "must be a subset of `students`")
        require(
            self.ta_source == "pretrained" or 6 in students,
            "ta_source",
            self.ta_source,
            "'distilled' uses the 6-layer MiniLM student as assistant; add 6 to `students`",
        )
        require(
            all(m < 6 for m in self.ta_students) or self.ta_source == "pretrained",
            "ta_students",
            self.ta_students,
            "a distilled 6-layer assistant can only teach students with fewer than 6 layers",
        )
        require(len(self.student_inits) >= 1, "student_inits", self.student_inits, "list 'random' and/or 'assistant'")
        require(
            self.student_hidden % self.relation_heads == 0 and TEACHER_HIDDEN % self.relation_heads == 0,
            "relation_heads",
            self.relation_heads,
            "must divide both the teacher (768) and the student hidden size",
        )
        require(
            self.teacher_attention == "qk" or self.relation_heads == TEACHER_HEADS,
            "relation_heads",
            self.relation_heads,
            "teacher_attention='eager' is the teacher's own 12-head attention; use 12 or teacher_attention='qk'",
        )
        require(
            self.student_hidden % self.student_heads == 0,
            "student_heads",
            self.student_heads,
            "must divide student_hidden",
        )
        require(
            self.transfer_sentences >= self.distill_batch_size,
            "transfer_sentences",
            self.transfer_sentences,
            "need at least one batch of transfer sentences",
        )
        require(
            set(self.lp_students) <= students and (self.save_students or not self.lp_students),
            "lp_students",
            self.lp_students,
            "link prediction uses saved MiniLM students: list members of `students` and keep save_students=True",
        )
        require(
            not self.lp_students or len(self.lp_protocols) >= 1,
            "lp_protocols",
            self.lp_protocols,
            f"list protocols of {PROTOCOLS} (the clean one: 'leak_free')",
        )
        require(
            set(self.task_students) <= students,
            "task_students",
            self.task_students,
            "the task-specific stage runs on students that are in `students`",
        )
        require(
            not self.tasks or CONTROL in self.task_losses,
            "task_losses",
            self.task_losses,
            f"include the control {CONTROL!r} (task loss only) so every distilled student has its undistilled control",
        )
        for combo in self.task_losses:
            try:
                self.loss_spec(combo)
            except DistillError as e:
                require(False, "task_losses", self.task_losses, str(e))
        for combo in self.embedding_methods:
            try:
                spec = self.embedding_spec(combo)
            except DistillError as e:
                require(False, "embedding_methods", self.embedding_methods, str(e))
            require(
                spec.emb > 0 and not (spec.vmse or spec.out),
                "embedding_methods",
                self.embedding_methods,
                f"{combo!r}: join 'emb' with 'at' and/or 'vr' (or give 'emb' alone), e.g. 'at+vr+emb'; MiniLM "
                "itself already runs on every student",
            )
        require(
            len(set(self.embedding_methods)) == len(self.embedding_methods),
            "embedding_methods",
            self.embedding_methods,
            "list each combination once",
        )

    def loss_spec(self, combo: str) -> LossSpec:
        """The task-specific loss combination `combo` ('at+vr+out', 'ce', ...) with this run's weights."""
        return LossSpec.parse(combo, self.w_at, self.w_vr, self.w_out, 1.0, self.out_temperature, self.out_soft_share)

    def embedding_spec(self, combo: str) -> LossSpec:
        """The task-agnostic combination `combo` ('at+vr+emb', 'emb') with this run's weights and L_EMB's kind."""
        return LossSpec.parse(
            combo,
            self.w_at,
            self.w_vr,
            self.w_out,
            1.0,
            self.out_temperature,
            self.out_soft_share,
            self.w_emb,
            self.embedding_loss,
        )


def read_params_05(path: str | Path) -> DistillParams:
    """The config a run folder's params_05.json records (written by notebook 05; read through
    lib.common.published.distill_params): keys that are no field ignored, defaults for the fields it does not hold."""
    return DistillParams.from_values(published.distill_params(load_json(path)["params"]))
