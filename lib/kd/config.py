"""Notebook 06's parameters (soft-logit distillation into small students, and probing), one typed declaration; see
lib.common.config."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lib.common.config import DeviceStageParams, param
from lib.common.errors import WikigatError
from lib.common.params import require
from lib.distill.config import TASKS, TEACHER_LAYERS

STUDENT_KINDS = ("bilstm", "bert")
STUDENT_SOFT_LOSSES = ("mse", "kl")  # mse: the thesis's LSTM_S; kl: its BERT_S, at kd_soft_temperature


class KdError(WikigatError, ValueError):
    """Bad input to stage 6 (students, task teachers, augmentation, probing tasks); the message names the input and
    the fix."""


@dataclass(frozen=True)
class KdParams(DeviceStageParams):
    NOTEBOOK: ClassVar[str] = "06_kd_probing.ipynb"

    kd_seeds: list[int] = param([0], "student seeds (init, batches, dropout); the results profile uses 3")
    kd_tasks: list[str] = param(
        ["polarity"], "tasks with a fine-tuned teacher and students: polarity and/or topic", choices=TASKS
    )
    kd_task_train: int = param(100, "labelled training texts per task (the start of the transfer set)", ge=10)
    kd_task_eval: int = param(50, "validation and test texts per task", ge=10)
    kd_max_seq_len: int = param(32, "wordpieces per text for teacher and students (thesis: 128)", ge=1)
    kd_teacher_ft_steps: int = param(10, "fine-tuning steps of the task teacher (demo: mechanics only)", ge=0)
    kd_teacher_ft_layers: int = param(
        1, "top teacher layers fine-tuned with the head, lower layers frozen (CPU budget)", ge=0, le=TEACHER_LAYERS
    )
    kd_teacher_ft_lr: float = param(1e-4, "peak learning rate of the teacher fine-tuning", gt=0)
    kd_teacher_ft_batch_size: int = param(16, "texts per fine-tuning step", ge=1)
    augment_n_iter: int = param(4, "augmented variants drawn per training text (Tang et al.: 20)", ge=1)
    augment_max: int = param(100, "augmented sentences kept per task (0: no augmentation)", ge=0)
    augment_p_mask: float = param(0.1, "probability of masking a word (Tang et al.: 0.1)", ge=0, le=1)
    augment_p_pos: float = param(0.1, "probability of a same-POS word swap (Tang et al.: 0.1)", ge=0, le=1)
    augment_p_ng: float = param(0.25, "probability of keeping only an n-gram (Tang et al.: 0.25)", ge=0, le=1)
    kd_students: list[str] = param(
        list(STUDENT_KINDS), "student kinds: the thesis's LSTM_S and BERT_S", choices=STUDENT_KINDS
    )
    kd_controls: bool = param(True, "also train every student with hard-label CE only (the undistilled control)")
    kd_epochs: float = param(
        1.0, "passes over the transfer set (thesis: 30 for LSTM_S, 60 for BERT_S; demo: mechanics only)", gt=0
    )
    kd_batch_size: int = param(32, "texts per step (thesis: 32 for LSTM_S)", ge=1)
    kd_lr: float = param(5e-4, "Adam learning rate, linear decay (thesis: 5e-4)", gt=0)
    kd_ce_weight: float = param(0.0, "weight of hard-label CE beside the soft loss (thesis: 0)", ge=0)
    bilstm_soft: str = param("mse", "soft loss of the BiLSTM: mse (thesis) or kl", choices=STUDENT_SOFT_LOSSES)
    bert_soft: str = param("kl", "soft loss of the small BERT: kl (thesis) or mse", choices=STUDENT_SOFT_LOSSES)
    kd_soft_temperature: float = param(3.0, "temperature of the KL soft loss (thesis: 3)", gt=0)
    bilstm_hidden: int = param(300, "BiLSTM units per direction (thesis: 300)", ge=1)
    bilstm_fc: int = param(400, "units of the layer before the output (thesis: 400)", ge=1)
    bilstm_embed_dim: int = param(300, "width each wordpiece channel is projected to (thesis: 300-d word2vec)", ge=1)
    bilstm_multichannel: bool = param(True, "a frozen and a trained embedding channel (thesis's best mode)")
    bert_layers: int = param(5, "small-BERT layers (thesis BERT_S: 5)", ge=1)
    bert_hidden: int = param(204, "small-BERT width (thesis: 204)", ge=1)
    bert_heads: int = param(3, "small-BERT attention heads (thesis: 3)", ge=1)
    bert_intermediate: int = param(750, "small-BERT feed-forward width (thesis: 750)", ge=1)
    probing_sentences: int = param(300, "held-out vital-article sentences the probing tasks are built from", ge=100)
    probing_max_per_class: int = param(8, "at most this many sentences per label and task (balances the probes)", ge=1)
    probing_word_content_words: int = param(20, "target words of the word-content task (SentEval: 1,000)", ge=1)
    minilm_dir: str = param(
        "", 'stage-5 students to probe ("" : <run_dir>/distill/students when notebook 05 saved them)'
    )
    kd_speed_sentences: int = param(16, "sentences timed per model for the speed table", ge=1)

    def check(self) -> None:
        require(len(self.kd_seeds) >= 1, "kd_seeds", self.kd_seeds, "give at least one seed")
        require(len(self.kd_tasks) >= 1, "kd_tasks", self.kd_tasks, f"use a non-empty subset of {list(TASKS)}")
        require(
            len(self.kd_students) >= 1,
            "kd_students",
            self.kd_students,
            f"use a non-empty subset of {list(STUDENT_KINDS)}",
        )
        require(
            self.bert_hidden % self.bert_heads == 0,
            "bert_heads",
            self.bert_heads,
            f"bert_hidden={self.bert_hidden} is not a multiple of it",
        )
        require(
            self.augment_p_mask + self.augment_p_pos <= 1,
            "augment_p_pos",
            self.augment_p_pos,
            f"augment_p_mask + augment_p_pos must be <= 1 (augment_p_mask={self.augment_p_mask})",
        )
