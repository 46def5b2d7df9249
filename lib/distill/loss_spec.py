"""Which loss terms a stage-5 run uses and with which weight, by name and without torch (the configs and the runner
check them before any work): `LossSpec`, the MiniLM variants, the teacher-attention definitions and
DistillError (the L_EMB kinds are lib.embed.config.EMBEDDING_LOSSES). lib.distill.losses computes the terms."""

from __future__ import annotations

from dataclasses import dataclass

from lib.common.errors import WikigatError
from lib.embed.config import EMBEDDING_LOSSES


class DistillError(WikigatError, ValueError):
    """Bad input to stage 5 (models, tokenizers, corpus, relation heads, losses); the message names the
    input and the fix."""


ATTENTION_DEFINITIONS = ("eager", "qk")
"""The teacher attention a student is distilled on: the teacher's own ("eager") or softmax(qk) (qk_attention)."""


def check_soft_targets(temperature: float, alpha: float) -> None:
    """L_OUT's temperature T > 0 and soft-target share alpha in [0, 1], else DistillError."""
    if temperature <= 0:
        raise DistillError(f"temperature={temperature} must be > 0")
    if not 0 <= alpha <= 1:
        raise DistillError(f"alpha={alpha} must lie in [0, 1] (weight of the soft-target part of L_OUT)")


TERMS = ("at", "vr", "vmse", "emb", "out", "ce")


@dataclass(frozen=True)
class LossSpec:
    """Weights of the loss terms of one run; a weight of 0 switches the term off.

    at: L_AT, vr: L_VR, vmse: value MSE (Table 6), emb: L_EMB (`embedding_loss` of kind `emb_loss` between the
    student's mean-pooled embedding and a target encoder's), out: L_OUT = alpha T^2 KL(teacher || student at T) +
    (1 - alpha) CE.
    The undistilled control is `LossSpec.parse("ce")`: L_OUT with alpha = 0, i.e. the task loss alone.
    """

    at: float = 0.0
    vr: float = 0.0
    vmse: float = 0.0
    out: float = 0.0
    temperature: float = 1.0
    alpha: float = 0.5
    emb: float = 0.0
    emb_loss: str = "cosine"

    @classmethod
    def parse(
        cls,
        combo: str,
        w_at: float = 1.0,
        w_vr: float = 1.0,
        w_out: float = 1.0,
        w_vmse: float = 1.0,
        temperature: float = 1.0,
        alpha: float = 0.5,
        w_emb: float = 1.0,
        emb_loss: str = "cosine",
    ) -> LossSpec:
        """'at+vr+out' -> LossSpec(at=w_at, vr=w_vr, out=w_out, ...); 'ce' = hard-label task loss only; 'at+vr+emb'
        adds L_EMB of kind `emb_loss`."""
        terms = [t.strip().lower() for t in str(combo).split("+") if t.strip()]
        bad = [t for t in terms if t not in TERMS]
        if not terms or bad or len(set(terms)) != len(terms) or ("ce" in terms and "out" in terms):
            raise DistillError(
                f"loss combination {combo!r} is not valid; join distinct terms of {TERMS} with '+', "
                "e.g. 'at+vr', 'at+vr+out' or 'ce' (the control); 'ce' and 'out' exclude each other"
            )
        for name, w in (("w_at", w_at), ("w_vr", w_vr), ("w_out", w_out), ("w_vmse", w_vmse), ("w_emb", w_emb)):
            if w < 0:
                raise DistillError(f"{name}={w} must be >= 0")
        if emb_loss not in EMBEDDING_LOSSES:
            raise DistillError(f"embedding loss {emb_loss!r} is unknown; use one of {EMBEDDING_LOSSES}")
        spec = cls(
            at=w_at * ("at" in terms),
            vr=w_vr * ("vr" in terms),
            vmse=w_vmse * ("vmse" in terms),
            out=w_out * ("out" in terms or "ce" in terms),
            temperature=temperature,
            alpha=0.0 if "ce" in terms else alpha,
            emb=w_emb * ("emb" in terms),
            emb_loss=emb_loss,
        )
        check_soft_targets(temperature, spec.alpha)
        return spec

    @property
    def needs_task(self) -> bool:
        return self.out > 0

    @property
    def needs_teacher_logits(self) -> bool:
        return self.out > 0 and self.alpha > 0

    @property
    def needs_attention(self) -> bool:
        return self.at > 0 or self.vr > 0 or self.vmse > 0

    @property
    def needs_embedding(self) -> bool:
        return self.emb > 0

    def label(self) -> str:
        """The combination as a table cell, e.g. '1·AT + 1·VR + 1·OUT(T=2, α=0.5)' or '1·CE'."""
        parts = [f"{w:g}·{n}" for n, w in (("AT", self.at), ("VR", self.vr), ("VMSE", self.vmse)) if w > 0]
        if self.emb > 0:
            parts.append(f"{self.emb:g}·EMB({self.emb_loss})")
        if self.out > 0:
            parts.append(
                f"{self.out:g}·CE" if self.alpha == 0 else f"{self.out:g}·OUT(T={self.temperature:g}, α={self.alpha:g})"
            )
        return " + ".join(parts) or "none"


VARIANT_SPECS = {
    "minilm": LossSpec(at=1, vr=1),
    "no_value_relation": LossSpec(at=1),
    "value_mse": LossSpec(at=1, vmse=1),
    "layer_to_layer": LossSpec(at=1, vr=1),
}
VARIANTS = tuple(VARIANT_SPECS)
