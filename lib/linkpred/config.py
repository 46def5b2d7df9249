"""Stage 3's settings: notebook 03's and 03b's parameters (`GatParams`, `BeyondParams`; see lib.common.config), the
training settings one model is trained with (`TrainConfig`), and the models they build.

A setting keeps its notebook name wherever it travels: `model_config`, `train_config` and `GatParams.protocol_settings`
copy every field of the target that the notebook declares under the same name (`settings_from`). The GatModel and its
training are one typed object, `GatTrainingParams` (lib.linkpred.model.GatModelParams, which ModelConfig inherits too,
and the training fields): every notebook that trains a GatModel (03, 03b, 05, 05b) inherits it, so a GatModel setting
added there is a parameter of each of them that the runner hands a `-p` value or a profile's to. A notebook that trains
its GatModels otherwise names what it sets itself, and why, in its `GAT_OVERRIDES`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, ClassVar, TypeVar

import torch

from lib.common import published
from lib.common.compute import PRECISIONS, check_precision
from lib.common.config import DeviceStageParams, param
from lib.common.device import get_device, resolve_precision
from lib.common.errors import WikigatError
from lib.common.params import ParamError
from lib.linkpred.decoders import VARIANTS
from lib.linkpred.heuristics import STACK, check_heuristics
from lib.linkpred.model import FeatureMLP, GatModel, GatModelParams, ModelConfig, PlainGAT
from lib.linkpred.names import MODEL_KINDS, PROTOCOLS
from lib.linkpred.negative_sets.registry import (
    DEFAULT_NEGATIVE_SETS,
    NEGATIVE_SETS,
    SELECT_METRICS,
    check_training_mix,
)
from lib.linkpred.protocols import ProtocolSettings

SUPERVISIONS = ("mp", "disjoint")


class TrainingDiverged(WikigatError, RuntimeError):
    """The loss became NaN/inf; the last good checkpoint is kept."""


LOG_EVERY_STEP_NODES = 5000
"""log_every=0 (the default) logs every step on graphs up to this size: the demo's and the published runs' (1,000-2,000
nodes), whose training curves stay the seed's; at the seed's 20,000 nodes the every-step logging costs +173% of a step
(benchmarks/bench_seed_scale.py)."""
LOG_THIN_EVERY = 10
LOG_THIN_AAUC_NODES = 1000
"""Above LOG_EVERY_STEP_NODES, log_every=0 logs every LOG_THIN_EVERY-th step with an A-AUC of at most
LOG_THIN_AAUC_NODES nodes: +6% of a step at 20,000 nodes (benchmarks/bench_seed_scale.py, train_thin)."""


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
    graphs_per_step: int = 1  # training examples (graph, repeat) per optimiser step, over all ranks (the seed: 1)
    # {registered negative set: share of each step's training negatives} (lib.linkpred.negative_sets.registry's
    # check_training_mix), e.g. {"dist2": 0.5}: half at distance 2 in the step's message passing; the rest uniform
    negative_mix: dict = field(default_factory=dict)
    hits_k: int = 50
    precision: str = "fp32"  # compute precision of training steps: "fp32", "bf16", "fp16" or "auto" (lib.common.device)
    device: str = "cpu"
    seed: int = 0
    log_aauc: bool = True  # A-AUC of training steps (as the seed's figures 3, 5, 7)
    log_eval: bool = True  # also score the step's pairs in eval mode (no dropout) after the update
    log_every: int = 0  # A-AUC and the eval-mode pass on every N-th step of an epoch (1: every step, as the seed;
    # 0: by graph size, log_interval)
    log_aauc_nodes: int = 0  # A-AUC while training samples at most this many nodes (0: by log_every, log_aauc_cap)

    def __post_init__(self):
        checks = [
            ("epochs", self.epochs >= 1, "use at least 1 epoch"),
            ("lr", self.lr > 0, "use a positive rate"),
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
            (
                "steps_per_graph",
                isinstance(self.steps_per_graph, int) and self.steps_per_graph >= 1,
                "use 1 (the seed) or more",
            ),
            (
                "graphs_per_step",
                isinstance(self.graphs_per_step, int) and self.graphs_per_step >= 1,
                "use 1 (the seed) or more",
            ),
            (
                "log_every",
                isinstance(self.log_every, int) and self.log_every >= 0,
                "use 0 (by graph size), 1 (every step, the seed) or more",
            ),
            (
                "log_aauc_nodes",
                isinstance(self.log_aauc_nodes, int) and self.log_aauc_nodes >= 0,
                "use 0 (by log_every) or a node count",
            ),
        ]
        for key, ok, fix in checks:
            if not ok:
                raise ValueError(f"parameter {key}={getattr(self, key)!r} is invalid: {fix}")
        try:
            mix = check_training_mix(self.negative_mix)
        except ValueError as e:
            raise ValueError(f"parameter negative_mix={self.negative_mix!r} is invalid: {e}") from None
        object.__setattr__(self, "negative_mix", mix)  # one spelling per mix: registry order, no zero shares
        check_precision(self.precision)

    def log_interval(self, num_nodes: int) -> int:
        """Every how many steps of an epoch a step on a graph of `num_nodes` nodes logs A-AUC and the eval-mode pass:
        log_every, or with log_every=0 every step up to LOG_EVERY_STEP_NODES nodes and every LOG_THIN_EVERY-th step
        above (there the logging of every step costs more than the step)."""
        return self.log_every or (1 if num_nodes <= LOG_EVERY_STEP_NODES else LOG_THIN_EVERY)

    def log_aauc_cap(self, num_nodes: int) -> int:
        """At most how many nodes a training step's A-AUC samples on a graph of `num_nodes` nodes (0: no cap, the
        seed's r_cos sample): log_aauc_nodes, or with both at 0 LOG_THIN_AAUC_NODES above LOG_EVERY_STEP_NODES."""
        if self.log_aauc_nodes or self.log_every:
            return self.log_aauc_nodes
        return 0 if num_nodes <= LOG_EVERY_STEP_NODES else LOG_THIN_AAUC_NODES

    def resolved(self) -> TrainConfig:
        """This config with `precision` resolved for its device ("auto" -> what runs), as checkpoints store it."""
        return replace(self, precision=resolve_precision(self.precision, get_device(self.device)).name)

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------- models, checkpoints, training


def build_model(kind: str, model_cfg: ModelConfig) -> torch.nn.Module:
    """A fresh model of `kind` ("gat_model", "plain_gat", "mlp"); the two baselines take GatModel's widths and heads
    with `baseline_dropout`."""
    if kind == "gat_model":
        return GatModel(model_cfg)
    widths = dict(
        in_channels=model_cfg.in_channels,
        hidden_channels=model_cfg.gat_hidden,
        out_channels=model_cfg.gat_out,
        dropout=model_cfg.baseline_dropout,
    )
    if kind == "plain_gat":
        return PlainGAT(**widths, heads=model_cfg.gat_heads)
    if kind == "mlp":
        return FeatureMLP(**widths)
    raise ValueError(f"model kind {kind!r} is unknown; use one of {MODEL_KINDS}")


Settings = TypeVar("Settings")


def settings_from(cls: type[Settings], source: Any, **values) -> Settings:
    """A `cls` dataclass (ModelConfig, TrainConfig, ProtocolSettings) holding every field of it that `source` (a stage
    config or another settings object) has under the same name, then `values`; the rest keep their defaults."""
    shared = {f.name: getattr(source, f.name) for f in fields(cls) if hasattr(source, f.name)}
    return cls(**{**shared, **values})


def stored_settings(config: dict, where: str) -> tuple[ModelConfig, TrainConfig]:
    """(ModelConfig, TrainConfig) of a checkpoint's stored config (lib.linkpred.train.checkpoint_config; an older
    checkpoint's read through lib.common.published.linkpred_config); a config with other fields raises one ValueError
    naming `where` and the fix."""
    try:
        config = published.linkpred_config(config)
        return ModelConfig(**config["model"]), TrainConfig(**config["train"])
    except (KeyError, TypeError) as e:
        raise ValueError(
            f"{where} holds settings this code does not read ({e}); re-run notebook 03 on this run "
            f"folder to train it again"
        ) from None


# ---------------------------------------------------------------- the GatModel and its training, one typed object


@dataclass(frozen=True)
class GatTrainingParams(GatModelParams):
    """The GatModel (GatModelParams) and how it is trained: the fields every notebook that trains a GatModel (03, 03b,
    05, 05b) inherits under these names, so a value given with `-p` or in a profile reaches each of them."""

    GAT_OVERRIDES: ClassVar[dict[str, str]] = {}
    """Notebook 03's settings (GatParams fields) that this notebook trains its GatModels with otherwise: name -> what it
    uses instead and why. Every field of GatTrainingParams not named here reaches its GatModels as given."""

    gat_epochs: int = param(2, "GatModel training epochs, seed §5.4.1", ge=1)
    gat_lr: float = param(0.001, "GatModel learning rate, seed §5.4.1 (AdamW)", gt=0)
    neg_rate: float = param(0.3, "R_neg: negatives per positive edge, seed §5.4.1", gt=0)
    r_cos: float = param(0.1, "A-AUC node sampling rate, seed §5.4.1", gt=0, le=1)
    t_cos: float = param(0.7, "A-AUC cosine threshold, seed §5.4.1", ge=-1, le=1)
    disjoint_ratio: float = param(
        0.3, "disjoint supervision: share of a training graph's edges scored, not passed, per step", gt=0, lt=1
    )
    select_metric: str = param(
        "auc", 'validation metric (uniform negatives) that picks the epoch: "auc" or "mrr"', choices=SELECT_METRICS
    )
    log_every: int = param(
        0,
        "training curves: A-AUC and the eval-mode pass on every N-th step of an epoch (1: every "
        "step, as the seed's figures; 0: every step on graphs of up to "
        f"{LOG_EVERY_STEP_NODES:,} nodes, every {LOG_THIN_EVERY}th with an A-AUC of at most "
        f"{LOG_THIN_AAUC_NODES:,} nodes above, where every step costs more than the step)",
        ge=0,
    )
    log_aauc_nodes: int = param(
        0,
        "training curves: A-AUC samples at most this many nodes (0: round(r_cos · N), the "
        "seed's, capped as log_every 0 says)",
        ge=0,
    )

    def gat_training(self) -> GatTrainingParams:
        """This config's GatModel and training settings alone (a notebook config holds its other parameters too)."""
        return GatTrainingParams(**{f.name: getattr(self, f.name) for f in fields(GatTrainingParams)})

    def model_config(self, in_channels: int) -> ModelConfig:
        """The GatModel (and baselines') settings for node features of width `in_channels`."""
        return settings_from(ModelConfig, self.gat_training(), in_channels=in_channels)

    def train_config(self, seed: int) -> TrainConfig:
        """The TrainConfig of a GatModel trained with these settings: gat_epochs epochs at gat_lr."""
        return settings_from(TrainConfig, self.gat_training(), epochs=self.gat_epochs, lr=self.gat_lr, seed=seed)

    @classmethod
    def of_settings(cls, model_cfg: ModelConfig, train: TrainConfig) -> GatTrainingParams:
        """The GatModel and training settings a (ModelConfig, TrainConfig) pair was built with (model_config and
        train_config the other way round; defaults for a field neither holds)."""
        values = {**asdict(model_cfg), **asdict(train), "gat_epochs": train.epochs, "gat_lr": train.lr}
        return GatTrainingParams(**{f.name: values[f.name] for f in fields(GatTrainingParams) if f.name in values})


# ---------------------------------------------------------------- notebooks 03 and 03b: their parameters

PROTOCOLS_WHY = "evaluation protocols (lib.linkpred.protocols)"


@dataclass(frozen=True)
class GatParams(GatTrainingParams, DeviceStageParams):
    """Notebook 03's parameters: the seed's GatModel (it and its training: GatTrainingParams), its baselines and the
    heuristics under every protocol."""

    NOTEBOOK: ClassVar[str] = "03_train_gat.ipynb"

    precision: str = param(
        "fp32",
        "compute precision: fp32, bf16, fp16 or auto (bf16 where the CPU/GPU has it natively)",
        choices=PRECISIONS,
    )
    first_seed: int = param(
        0, "first seed; seeds first_seed .. first_seed+n_seeds-1 each re-split, re-initialise and re-sample", ge=0
    )
    n_seeds: int = param(2, "independent runs for mean ± std", ge=1)
    n_train_graphs: int = param(
        0, "training graphs incl. validation ones; 0 means every usable graph not in test", ge=0
    )
    n_test_graphs: int = param(2, "test graphs (seed experiments: 10 / 20 / 35)", ge=1)
    val_fraction: float = param(0.1, "share of the training graphs used only to choose the epoch", ge=0, lt=1)
    protocols: list[str] = param(list(PROTOCOLS), PROTOCOLS_WHY, choices=PROTOCOLS)
    train_supervision: list[str] = param(
        list(SUPERVISIONS),
        '"mp": score the message-passing edges (seed); "disjoint": held-out ones',
        choices=SUPERVISIONS,
    )
    new_node_fraction: float = param(
        0.1, "new_nodes: share of the test graphs' titles kept out of every training graph", gt=0, lt=1
    )
    holdout_fraction: float = param(
        0.1, "held-out protocols: share of each test/validation graph's edges held out", gt=0, lt=1
    )
    negatives_per_positive: int = param(
        20,
        "K, negatives of each positive's own of the per-positive sets (heart, "
        "matched; lib.linkpred.negative_sets; 0: none)",
        ge=0,
    )
    negative_sets: list[str] = param(
        list(DEFAULT_NEGATIVE_SETS),
        "negative sets every evaluation task draws, each "
        "reported on its own (lib.linkpred.negative_sets; uniform is required)",
        choices=NEGATIVE_SETS,
    )
    baseline_epochs: int = param(2, "epochs for the MLP and plain-GAT baselines (same loop as GatModel)", ge=1)
    models: list[str] = param(
        list(MODEL_KINDS),
        "model kinds trained and scored: gat_model (required; notebooks 03b and 04 read it) and the baselines "
        "plain_gat and mlp (leaving them out halves the training at the seed's scale)",
        choices=MODEL_KINDS,
    )

    def check(self) -> None:
        for key in ("protocols", "train_supervision"):
            if not getattr(self, key):
                raise ParamError(f"parameter {key}=[] is invalid: list at least one", key=key)
        if "gat_model" not in self.models:
            raise ParamError(
                f"parameter models={self.models!r} lacks 'gat_model', the model this stage studies; add it",
                key="models",
            )
        if "uniform" not in self.negative_sets:
            raise ParamError(
                f"parameter negative_sets={self.negative_sets!r} lacks 'uniform', which picks the epoch; add it",
                key="negative_sets",
            )

    @property
    def seeds(self) -> list[int]:
        return list(range(self.first_seed, self.first_seed + self.n_seeds))

    def train_config(self, seed: int, kind: str = "gat_model", supervision: str = "mp") -> TrainConfig:
        """The TrainConfig of one trained model: `kind` for gat_epochs (GatModel) or baseline_epochs, at gat_lr."""
        epochs = self.gat_epochs if kind == "gat_model" else self.baseline_epochs
        return settings_from(TrainConfig, self, epochs=epochs, lr=self.gat_lr, supervision=supervision, seed=seed)

    def protocol_settings(self) -> ProtocolSettings:
        """What notebook 03's protocols are built with (lib.linkpred.protocols.make_protocol)."""
        return settings_from(ProtocolSettings, self)


@dataclass(frozen=True)
class BeyondParams(GatTrainingParams, DeviceStageParams):
    """Notebook 03b's parameters: decoders beyond the seed's dot product, on notebook 03's splits and test pairs, with
    notebook 03's GatModel and training (GatTrainingParams, checked against notebook 03's checkpoint) but for
    GAT_OVERRIDES."""

    NOTEBOOK: ClassVar[str] = "03b_beyond_seed.ipynb"
    GAT_OVERRIDES: ClassVar[dict[str, str]] = {
        "gat_epochs": "beyond_epochs, with early stopping on validation (beyond_patience): decoders learn at their "
        "own pace",
        "gat_lr": "sweep_lr, chosen on validation per variant",
        "gat_dropout": "sweep_dropout, chosen on validation per variant",
        "gat_levels": "sweep_levels, chosen on validation per variant",
        "neg_rate": "beyond_neg_rate: training negatives of both kinds well represented",
        "select_metric": "beyond_select_metric: the metric the decoders are compared by",
        "train_supervision": "beyond_supervision: one supervision for every variant",
    }

    precision: str = param(
        "fp32",
        "compute precision: fp32, bf16, fp16 or auto (bf16 where the CPU/GPU has it natively)",
        choices=PRECISIONS,
    )
    first_seed: int = param(0, "first seed; the same seeds, splits and test pairs as notebook 03", ge=0)
    n_seeds: int = param(2, "independent runs for mean ± std", ge=1)
    n_train_graphs: int = param(0, "must equal notebook 02's (the split is read from dataset/split.json)", ge=0)
    n_test_graphs: int = param(2, "must equal notebook 02's", ge=1)
    val_fraction: float = param(0.1, "must equal notebook 02's", ge=0, lt=1)
    beyond_protocols: list[str] = param(
        ["leak_free", "new_nodes"],
        "protocols in which no held-out link was seen (notebook 03; params/beyond.yaml adds pair_split)",
        choices=PROTOCOLS,
    )
    beyond_variants: list[str] = param(
        ["dot", "ncn_feat", "ncn_stack_uniform", "ncn_stack_matched"],
        "decoders tried (lib.linkpred.decoders.VARIANTS; the demo: four, so CI stays short)",
        choices=tuple(VARIANTS),
    )
    beyond_supervision: str = param(
        "disjoint", '"disjoint" (held-out edges scored) or "mp" (the seed\'s way)', choices=SUPERVISIONS
    )
    beyond_epochs: int = param(4, "maximum epochs per model (one step per training graph)", ge=1)
    beyond_patience: int = param(1, "early stopping: epochs without a better validation score", ge=0)
    beyond_select_metric: str = param(
        "mrr_all",
        "validation metric for early stopping and the sweep (mrr_all: mean MRR over every negative set)",
        choices=SELECT_METRICS,
    )
    beyond_steps_per_graph: int = param(
        1, "optimiser steps per training graph and epoch, each with fresh pairs (the seed: 1)", ge=1
    )
    beyond_neg_rate: float = param(
        1.0, "training negatives per positive (the seed: 0.3), so both kinds below are well represented", gt=0
    )
    beyond_dist2_share: float = param(
        0.5, "share of training negatives at distance 2 in the step's message passing (the rest uniform)", ge=0, le=1
    )
    decoder_hidden: int = param(64, "width of the MLP decoders", ge=1)
    stack_features: list[str] = param(
        list(STACK),
        "heuristics of the stack bar and of the decoders' pair features "
        "(lib.linkpred.heuristics.REGISTRY; the published runs: these four)",
    )
    sweep_dropout: list[float] = param([0.75, 0.25], "dropout grid (the seed: 0.75 at every site)", ge=0, lt=1)
    sweep_levels: list[int] = param([4], "DeepGAT levels grid (the seed: 4)", ge=1)
    sweep_lr: list[float] = param([0.001], "AdamW learning-rate grid (the seed: 0.001)", gt=0)

    def check(self) -> None:
        for key in (
            "beyond_protocols",
            "beyond_variants",
            "stack_features",
            "sweep_dropout",
            "sweep_levels",
            "sweep_lr",
        ):
            if not getattr(self, key):
                raise ParamError(f"parameter {key}=[] is invalid: list at least one", key=key)
        try:  # not `choices`: a heuristic registered after this module was imported is a valid feature too
            check_heuristics(self.stack_features)
        except ValueError as e:
            raise ParamError(
                f"parameter stack_features={self.stack_features!r} is invalid: {e}", key="stack_features"
            ) from None

    @property
    def seeds(self) -> list[int]:
        return list(range(self.first_seed, self.first_seed + self.n_seeds))
