"""The embedding loss stage 2's trained static student and stage 5's students share: a student's pooled sentence
embeddings against a target encoder's (cosine, MSE, in-batch similarity relations), a pure function of tensors."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from lib.embed.config import EMBEDDING_LOSSES
from lib.embed.encoder import EmbedError


def embedding_loss(
    student: torch.Tensor,
    target: torch.Tensor,
    loss: str = "cosine",
    w_rel: float = 0.0,
    proj: nn.Module | None = None,
    normalise: bool = True,
) -> dict[str, torch.Tensor]:
    """Loss terms of a batch: student pooled embeddings [B, D_s] against target embeddings [B, D_t].

    proj: a map D_s -> D_t (a learned nn.Linear where the widths differ). normalise: compare unit vectors (the target
    encoder normalises, as all-MiniLM-L6-v2 does). loss: "cosine" (mean 1 - cos), "mse" (mean squared error per
    dimension), or both summed. w_rel: weight of the relation term, the MSE between the in-batch cosine matrices
    [B, B] of student and target (the pair geometry link prediction reads). Returns {"L_cos", "L_mse", "L_rel",
    "loss"}, each a scalar; terms not asked for are 0. Every term is 0 when student equals target.
    """
    if loss not in EMBEDDING_LOSSES:
        raise EmbedError(f"loss={loss!r} is unknown; use one of {EMBEDDING_LOSSES}")
    s = proj(student) if proj is not None else student
    if s.shape != target.shape:
        raise EmbedError(
            f"student embeddings {tuple(s.shape)} and targets {tuple(target.shape)} differ in shape; "
            "give a projection to the target's width"
        )
    t = target.to(s.dtype)
    if normalise:
        s, t = F.normalize(s, dim=-1), F.normalize(t, dim=-1)
    zero = s.new_zeros(())
    terms = {"L_cos": zero, "L_mse": zero, "L_rel": zero}
    if "cosine" in loss:
        terms["L_cos"] = (1 - F.cosine_similarity(s, t, dim=-1)).mean()
    if "mse" in loss:
        terms["L_mse"] = F.mse_loss(s, t)
    if w_rel > 0:
        sn, tn = F.normalize(s, dim=-1), F.normalize(t, dim=-1)
        terms["L_rel"] = F.mse_loss(sn @ sn.T, tn @ tn.T)
    terms["loss"] = terms["L_cos"] + terms["L_mse"] + w_rel * terms["L_rel"]
    return terms
