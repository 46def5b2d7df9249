"""Stage 3 training settings (`TrainConfig`) and the models they build."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

import torch

from lib.common.device import check_precision, get_device, resolve_precision
from lib.linkpred.model import FeatureMLP, GatModel, ModelConfig, PlainGAT
from lib.metrics.link import SELECT_METRICS

MODEL_KINDS = ("gat_model", "plain_gat", "mlp")
SUPERVISIONS = ("mp", "disjoint")


class TrainingDiverged(RuntimeError):
    """The loss became NaN/inf; the last good checkpoint is kept."""


@dataclass(frozen=True)
class TrainConfig:
    """Training and evaluation settings; defaults are the seed's §5.4.1 values."""

    epochs: int = 2
    lr: float = 1e-3
    weight_decay: float = 0.01  # AdamW's default; the seed does not state one
    neg_rate: float = 0.3  # R_neg
    r_cos: float = 0.1  # A-AUC node sampling rate
    t_cos: float = 0.7  # A-AUC cosine threshold
    holdout_fraction: float = 0.1  # held-out protocols: share of a graph's edges held out of message passing
    new_node_fraction: float = 0.1  # new_nodes protocol: share of the test graphs' titles never seen in training
    supervision: str = "mp"  # "mp" (seed: score the message-passing edges) or "disjoint"
    disjoint_ratio: float = 0.3  # disjoint supervision: share of a training graph's edges used as positives per step
    select_metric: str = "auc"  # validation metric (uniform negatives) that picks the epoch: "auc" or "mrr"
    patience: int = 0  # early stopping: stop after this many epochs without a better validation score (0 = off)
    steps_per_graph: int = 1  # optimiser steps per training graph and epoch (the seed: 1), each with fresh pairs
    hard_negative_share: float = 0.0  # share of each step's negatives drawn at distance 2 in its message passing
    matched_negative_share: float = 0.0  # share drawn at a positive's own distance in the step's message passing
    hits_k: int = 50
    precision: str = "fp32"  # compute precision of training steps: "fp32", "bf16", "fp16" or "auto" (lib.common.device)
    device: str = "cpu"
    seed: int = 0
    log_aauc: bool = True  # A-AUC at every training step (as the seed's figures 3, 5, 7)
    log_eval: bool = True  # also score the step's pairs in eval mode (no dropout) after the update

    def __post_init__(self):
        checks = [("epochs", self.epochs >= 1, "use at least 1 epoch"), ("lr", self.lr > 0, "use a positive rate"),
                  ("neg_rate", self.neg_rate > 0, "use a positive rate such as the seed's 0.3"),
                  ("r_cos", 0 < self.r_cos <= 1, "use a fraction in (0, 1]"),
                  ("t_cos", -1 <= self.t_cos <= 1, "use a cosine in [-1, 1]"),
                  ("holdout_fraction", 0 < self.holdout_fraction < 1, "use a fraction in (0, 1) such as 0.1"),
                  ("hits_k", self.hits_k >= 1, "use a positive K such as 50"),
                  ("new_node_fraction", 0 < self.new_node_fraction < 1, "use a fraction in (0, 1) such as 0.1"),
                  ("supervision", self.supervision in SUPERVISIONS, f"use one of {SUPERVISIONS}"),
                  ("disjoint_ratio", 0 < self.disjoint_ratio < 1, "use a fraction in (0, 1) such as 0.3"),
                  ("select_metric", self.select_metric in SELECT_METRICS, f"use one of {SELECT_METRICS}"),
                  ("patience", isinstance(self.patience, int) and self.patience >= 0, "use 0 (off) or a count"),
                  ("steps_per_graph", isinstance(self.steps_per_graph, int) and self.steps_per_graph >= 1,
                   "use 1 (the seed) or more"),
                  ("hard_negative_share", 0 <= self.hard_negative_share <= 1, "use a share in [0, 1]"),
                  ("matched_negative_share", 0 <= self.matched_negative_share <= 1 - self.hard_negative_share,
                   "use a share in [0, 1 - hard_negative_share]")]
        for key, ok, fix in checks:
            if not ok:
                raise ValueError(f"parameter {key}={getattr(self, key)!r} is invalid: {fix}")
        check_precision(self.precision)

    def resolved(self) -> "TrainConfig":
        """This config with `precision` resolved for its device ("auto" -> what runs), as checkpoints store it."""
        return replace(self, precision=resolve_precision(self.precision, get_device(self.device)).name)

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------- models, checkpoints, training


def build_model(kind: str, model_cfg: dict) -> torch.nn.Module:
    """A fresh model of `kind` ("gat_model", "plain_gat", "mlp") from a plain config dict (ModelConfig's keys plus
    "baseline_dropout" for the two baselines)."""
    if kind == "gat_model":
        names = {f.name for f in fields(ModelConfig)}
        return GatModel(ModelConfig(**{k: v for k, v in model_cfg.items() if k in names}))
    keep = {k: model_cfg[k] for k in ("in_channels", "hidden_channels", "out_channels") if k in model_cfg}
    if kind == "plain_gat":
        return PlainGAT(**keep, heads=model_cfg.get("heads", 2), dropout=model_cfg.get("baseline_dropout", 0.5))
    if kind == "mlp":
        return FeatureMLP(**keep, dropout=model_cfg.get("baseline_dropout", 0.5))
    raise ValueError(f"model kind {kind!r} is unknown; use one of {MODEL_KINDS}")
