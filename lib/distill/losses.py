"""Stage 5 losses, pure functions of tensors: MiniLM eq. 6-9 on relation heads, the value-MSE ablation, L_OUT, and the
embedding term L_EMB (lib.embed.losses.embedding_loss: the student's pooled sentence embedding against a target
encoder's).

Queries, keys and values of one layer, [B, T, D], are split into R relation heads of size D / R, so a teacher and a
student with different hidden sizes or head counts compare head by head. `LossSpec` (lib.distill.loss_spec) names
which terms a run uses and with which weight; `combined_loss` adds them up. Nothing here loads a model or
touches a file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from lib.distill.loss_spec import VARIANT_SPECS, VARIANTS, DistillError, LossSpec, check_soft_targets
from lib.embed.losses import embedding_loss


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[B, T, D] -> [B, R, T, D/R] (relation heads); DistillError when R does not divide D."""
    b, t, d = x.shape
    if heads < 1 or d % heads:
        raise DistillError(
            f"relation_heads={heads} does not divide the hidden size {d}; pick a common divisor "
            "of the teacher's and the student's hidden sizes (e.g. 12 for 768 and 384)"
        )
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


def qk_attention(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor, heads: int) -> torch.Tensor:
    """softmax(q_r k_r^T / sqrt(d_r)) with pad columns masked: [B, T, D] x2 -> [B, R, T, T] (no position bias)."""
    return masked_log_softmax(relation_scores(q, k, heads), mask).exp()


def attention_transfer_loss(
    p_teacher: torch.Tensor, q_s: torch.Tensor, k_s: torch.Tensor, mask: torch.Tensor, heads: int
) -> torch.Tensor:
    """L_AT (eq. 6). p_teacher [B, R, T, T] teacher attention; q_s, k_s [B, T, D'] student queries/keys of one layer.

    Student attention is recomputed from its queries and keys (pre-dropout; identical to BERT's eager attention,
    which has no position bias) so relation heads and training-mode dropout do not change what is compared.
    """
    return kl_rows(p_teacher, masked_log_softmax(relation_scores(q_s, k_s, heads), mask), mask)


def value_relation(v: torch.Tensor, mask: torch.Tensor, heads: int) -> torch.Tensor:
    """Eq. 7/8: VR = softmax(V_a V_a^T / sqrt(d_k)) per relation head, pad columns masked.
    v [B, T, D] -> [B, R, T, T]."""
    return qk_attention(v, v, mask, heads)


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


def kd_output_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor | None,
    labels: torch.Tensor | None,
    temperature: float = 1.0,
    alpha: float = 0.5,
) -> torch.Tensor:
    """L_OUT of the slides: alpha * T^2 * KL(softmax(z_t/T) || softmax(z_s/T)) + (1 - alpha) * CE(z_s, y).

    logits [B, C], labels [B]. alpha=1 is pure soft-label KD, alpha=0 pure hard-label CE. The T^2 factor keeps the
    soft part's gradient scale independent of T (Hinton et al. 2015).
    """
    check_soft_targets(temperature, alpha)
    loss = student_logits.new_zeros(())
    if alpha > 0:
        if teacher_logits is None:
            raise DistillError("kd_output_loss with alpha > 0 needs teacher_logits")
        soft = F.kl_div(
            F.log_softmax(student_logits / temperature, -1),
            F.log_softmax(teacher_logits / temperature, -1),
            reduction="batchmean",
            log_target=True,
        )
        loss = loss + alpha * temperature**2 * soft
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


@dataclass(frozen=True)
class StudentOutputs:
    """The student's forward pass of one step: qkv (student layer, role) -> [B, T, D']; mask [B, T]; pooled [B, D']
    its mean-pooled embeddings and logits [B, C] of its task head, None where the step needs none."""

    qkv: dict
    mask: torch.Tensor
    pooled: torch.Tensor | None = None
    logits: torch.Tensor | None = None


@dataclass(frozen=True)
class StepTargets:
    """What the student of one step is matched to: layers: teacher layer -> {"att": [B, R, T, T], "v": [B, T, D]};
    teacher_logits [B, C] and labels [B] of a task; embedding [B, D_e] the target encoder's embeddings; None where the
    step needs none."""

    layers: dict
    teacher_logits: torch.Tensor | None = None
    labels: torch.Tensor | None = None
    embedding: torch.Tensor | None = None


def combined_loss(
    student: StudentOutputs,
    targets: StepTargets,
    pairs: list[tuple[int, int]],
    heads: int,
    spec: LossSpec,
    proj: nn.Module | None = None,
    emb_proj: nn.Module | None = None,
) -> dict[str, torch.Tensor]:
    """Loss terms of one step: {L_AT, L_VR, L_VMSE, L_EMB, L_OUT (those switched on, unweighted), loss (weighted sum)}.

    pairs: (teacher layer, student layer) averaged over; proj Linear(D', D) of value MSE; emb_proj Linear(D', D_e)
    where the embedding widths differ.
    """
    qkv, mask, pooled = student.qkv, student.mask, student.pooled
    at, vr, vm = [], [], []
    for t, s in pairs if spec.needs_attention else []:
        tg = targets.layers[t]
        if spec.at > 0:
            at.append(attention_transfer_loss(tg["att"], qkv[(s, "q")], qkv[(s, "k")], mask, heads))
        if spec.vr > 0:
            vr.append(value_relation_loss(tg["v"], qkv[(s, "v")], mask, heads))
        if spec.vmse > 0:
            vm.append(value_mse_loss(tg["v"], qkv[(s, "v")], proj, mask))
    terms, weights = {}, {}
    for name, xs, w in (("L_AT", at, spec.at), ("L_VR", vr, spec.vr), ("L_VMSE", vm, spec.vmse)):
        if xs:
            terms[name], weights[name] = torch.stack(xs).mean(), w
    if spec.emb > 0:
        if pooled is None or targets.embedding is None:
            raise DistillError(
                "L_EMB needs the student's pooled embeddings and the target encoder's; pass "
                "embedding targets for the corpus"
            )
        terms["L_EMB"] = embedding_loss(pooled, targets.embedding, spec.emb_loss, 0.0, emb_proj)["loss"]
        weights["L_EMB"] = spec.emb
    if spec.out > 0:
        if student.logits is None:
            raise DistillError("L_OUT needs student logits; give the run a task (texts with labels)")
        terms["L_OUT"] = kd_output_loss(
            student.logits, targets.teacher_logits, targets.labels, spec.temperature, spec.alpha
        )
        weights["L_OUT"] = spec.out
    if not terms:
        raise DistillError(f"loss combination {spec.label()} has no term switched on; give at least one weight > 0")
    terms["loss"] = sum(weights[k] * v for k, v in terms.items())
    return terms


def distill_losses(
    targets: dict,
    qkv: dict,
    mask: torch.Tensor,
    pairs: list[tuple[int, int]],
    heads: int,
    variant: str,
    proj: nn.Module | None = None,
) -> dict[str, torch.Tensor]:
    """Task-agnostic loss terms of one step for a named MiniLM `variant` (see VARIANT_SPECS)."""
    if variant not in VARIANT_SPECS:
        raise DistillError(f"variant={variant!r} is unknown; use one of {VARIANTS}")
    return combined_loss(StudentOutputs(qkv, mask), StepTargets(targets), pairs, heads, VARIANT_SPECS[variant], proj)
