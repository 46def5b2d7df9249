"""Stage 3: train the seed's GatModel for link prediction (seed §5.1) and evaluate it honestly beside baselines.

Training (seed §5.1, §5.4.1): one step per training graph — encode, sample n_neg = round(n_pos · R_neg) non-edges
afresh, BCE-with-logits over the positives (label 1) and the non-edges (label 0), AdamW; 2 epochs, lr 1e-3.
Every step logs loss, AUC and A-AUC of that step. Supervision (`TrainConfig.supervision`):
  "mp":       the seed's way — the positives are the very edges the encoder passes messages over;
  "disjoint": at every step a seeded share (`disjoint_ratio`, 0.3) of the graph's edges is held out of message passing
              and used as the positives (what PyG's RandomLinkSplit(disjoint_train_ratio=...) does once, re-drawn
              each step), so training practises the task the leak-free protocols test.

Evaluation protocols ("seed", "within_graph", "leak_free", "pair_split", "new_nodes") and negative sets ("uniform",
"hard") are built in `lib.protocols` on title pairs across the overlapping graphs; every scorer of a seed sees exactly the same
pairs and message-passing edges. Metrics: AUC, AP, Hits@50, MRR (and A-AUC for embedding models). The epoch is
chosen on validation graphs prepared by the same protocol.
"""
from __future__ import annotations

import math
import random
import re
import time
import warnings
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Iterable

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import average_precision_score, roc_auc_score
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected
from tqdm.auto import tqdm

from lib.aauc import aauc, aauc_scored
from lib.dataset import split_graphs  # noqa: F401  (re-exported: one split function for every stage)
from lib.device import check_precision, get_device, resolve_precision
from lib.heuristics import HEURISTICS, heuristic_scores  # noqa: F401  (re-exported)
from lib.model import FeatureMLP, GatModel, ModelConfig, PlainGAT
from lib.paths import atomic_write_bytes
from lib.protocols import (GRAPH_PROTOCOLS, NEGATIVE_SETS, PER_POSITIVE, PROTOCOLS, TRAIN_SET, EvalTask, check_negatives,
                           check_protocol, derive_seed, graph_task, leak_audit, make_protocol, sample_negatives,
                           split_edges, TitlePairs, training_exclusions)

MODEL_KINDS = ("gat_model", "plain_gat", "mlp")
SUPERVISIONS = ("mp", "disjoint")
# validation metric that picks the epoch: on uniform negatives; *_<set>: on that negative set; *_both: mean over the
# uniform and dist2 sets; *_all: mean over every negative set the validation tasks hold
SELECT_METRICS = ("auc", "mrr", *(f"{m}_{n}" for n in NEGATIVE_SETS[1:] for m in ("auc", "mrr")),
                  "auc_both", "mrr_both", "auc_all", "mrr_all")
STRATA = ("cn", "no_cn")  # positives with / without a common neighbour in the message passing


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
    precision: str = "fp32"  # compute precision of training steps: "fp32", "bf16", "fp16" or "auto" (lib.device)
    amp: bool | None = None  # deprecated alias: amp=True means precision="fp16" (the old CUDA profile)
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
        if self.amp:  # amp=False never meant more than "no float16 autocast", which precision already says
            if self.precision not in ("fp32", "fp16"):
                raise ValueError(f"amp=True (deprecated: float16 autocast) contradicts precision={self.precision!r}; "
                                 f"drop amp and keep precision")
            warnings.warn("TrainConfig(amp=True) is deprecated; use precision='fp16' (or 'auto')", DeprecationWarning,
                          stacklevel=3)
            object.__setattr__(self, "precision", "fp16")
        object.__setattr__(self, "amp", None)
        check_precision(self.precision)

    def resolved(self) -> "TrainConfig":
        """This config with `precision` resolved for its device ("auto" -> what runs), as checkpoints store it."""
        return replace(self, precision=resolve_precision(self.precision, get_device(self.device)).name)

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "amp"}


# ---------------------------------------------------------------- seeds, input checks, synthetic graphs


def graph_problem(data: Data, in_channels: int | None = None) -> str | None:
    """Why `data` cannot be used for link prediction (None if it can); a wrong feature width is an error."""
    x = data.x
    if in_channels is not None and (x.dim() != 2 or x.size(1) != in_channels):
        raise ValueError(f"graph {getattr(data, 'graph_id', '?')} has features of shape {tuple(x.shape)} but the "
                         f"model expects width {in_channels}; re-embed the dataset or set in_channels")
    if data.num_nodes < 2:
        return f"{data.num_nodes} node(s); link prediction needs at least 2"
    if data.edge_index.size(1) == 0:
        return "no edges"
    if not torch.isfinite(x).all():
        return "features contain NaN/inf"
    if data.edge_index.size(1) // 2 < 2:
        return "fewer than 2 undirected edges; cannot hold any out"
    return None


def usable_graphs(graphs: Iterable[Data], in_channels: int) -> tuple[list[Data], list[dict]]:
    """(usable graphs, [{graph_id, reason}] of the skipped ones)."""
    ok, skipped = [], []
    for g in graphs:
        why = graph_problem(g, in_channels)
        (skipped.append({"graph_id": getattr(g, "graph_id", None), "reason": why}) if why else ok.append(g))
    return ok, skipped


def synthetic_graph(num_nodes: int = 300, num_edges: int = 1200, in_channels: int = 384, num_clusters: int = 6,
                    homophily: float = 0.9, seed: int = 0, graph_id: str = "synthetic") -> Data:
    """A stochastic-block graph whose edges follow feature clusters, so a model can learn them.

    x: [N, in_channels] float32 (cluster centre + noise), edge_index: [2, ≈2·num_edges] undirected, coalesced,
    no self-loops.  For tests and benchmarks when no crawled dataset is at hand.
    """
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(num_clusters, in_channels, generator=g)
    cluster = torch.randint(0, num_clusters, (num_nodes,), generator=g)
    x = centres[cluster] + 0.8 * torch.randn(num_nodes, in_channels, generator=g)
    src = torch.randint(0, num_nodes, (num_edges,), generator=g)
    same = torch.rand(num_edges, generator=g) < homophily
    order = torch.argsort(cluster)
    counts = torch.bincount(cluster, minlength=num_clusters)
    starts = torch.cumsum(counts, 0) - counts
    pick = (torch.rand(num_edges, generator=g) * counts[cluster[src]]).long()
    dst_same = order[starts[cluster[src]] + pick]
    dst_rand = torch.randint(0, num_nodes, (num_edges,), generator=g)
    dst = torch.where(same, dst_same, dst_rand)
    keep = src != dst
    ei = to_undirected(torch.stack([src[keep], dst[keep]]), num_nodes=num_nodes)
    return Data(x=x.float(), edge_index=ei, num_nodes=num_nodes, graph_id=graph_id,
                titles=[f"n{i}" for i in range(num_nodes)], root=0, topics=[None] * num_nodes)


# ---------------------------------------------------------------- metrics


def link_metrics(pos: np.ndarray, neg: np.ndarray, hits_k: int = 50) -> dict:
    """AUC, AP, Hits@K and MRR of positive scores [P] against negative scores [Q] (higher = more likely an edge).

    Hits@K follows OGB's link-prediction convention (share of positives scored above the K-th best negative; 1 if
    there are fewer than K negatives).  MRR: mean over positives of 1 / (1 + #negatives scored at least as high),
    a ranking of each held-out edge against the shared negatives.  Both hand-written because neither sklearn nor
    PyG has these shared-negative forms and torchmetrics is not a dependency.
    """
    pos, neg = np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64)
    y = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
    s = np.r_[pos, neg]
    neg_sorted = np.sort(neg)
    kth = neg_sorted[-hits_k] if len(neg) >= hits_k else -np.inf
    rank = 1 + (len(neg) - np.searchsorted(neg_sorted, pos, side="left"))
    return {"auc": float(roc_auc_score(y, s)), "ap": float(average_precision_score(y, s)),
            f"hits@{hits_k}": float((pos > kth).mean()), "mrr": float((1.0 / rank).mean())}


def set_metrics(pos: np.ndarray, neg: np.ndarray, owner: np.ndarray | None = None, has_cn: np.ndarray | None = None,
                hits_k: int = 50) -> dict:
    """Metrics of one negative set of one task: AUC and AP over every positive [P] and negative [Q] score; MRR and
    Hits@{1,10} of each positive among its negatives (its own when owner [Q] maps every negative to its positive, as
    for "heart" and "matched"; all of them otherwise), Hits@K (shared sets only, OGB's form, `link_metrics`); and,
    with has_cn [P], the same AUC and MRR within each stratum of positives (STRATA: auc_cn, mrr_no_cn, ...; a
    per-positive set keeps the stratum's own negatives) plus pos_no_cn, the share of positives without a common
    neighbour. A stratum without positives (or negatives) gets None."""
    from lib.negatives import ranking_metrics

    def one(p, q, o):
        if len(p) == 0 or len(q) == 0:
            return {"auc": None, "ap": None, "mrr": None, "hits@1": None, "hits@10": None}
        m = link_metrics(p, q, hits_k)
        m.update(ranking_metrics(p, q, o))
        if o is not None:
            m.pop(f"hits@{hits_k}")  # with K own negatives per positive, Hits@50 says nothing
        return m

    pos, neg = np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64)
    out = one(pos, neg, owner)
    if has_cn is not None:
        has_cn = np.asarray(has_cn, dtype=bool)
        out["pos_no_cn"] = float((~has_cn).mean()) if len(has_cn) else None
        for name, mask in zip(STRATA, (has_cn, ~has_cn)):
            if owner is None:
                m = one(pos[mask], neg, None)
            else:
                keep = mask[owner]
                new_index = np.cumsum(mask) - 1  # positive index -> index within the stratum
                m = one(pos[mask], neg[keep], new_index[owner[keep]])
            out[f"auc_{name}"], out[f"mrr_{name}"] = m["auc"], m["mrr"]
    return out


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


def save_checkpoint(path: Path, model, optimizer, config: dict, epoch: int, history: list, val: list) -> Path:
    """state_dicts + plain config + metrics (loadable with torch.load(weights_only=True); no pickled objects)."""
    import io

    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "config": config,
                "epoch": epoch, "history": history, "val": val}, buf)
    return atomic_write_bytes(path, buf.getvalue())


def load_checkpoint(path: str | Path, device: str = "cpu") -> tuple[torch.nn.Module, dict]:
    """(model with the checkpoint's weights, the checkpoint dict)."""
    ck = torch.load(path, map_location=device, weights_only=True)
    model = build_model(ck["config"]["kind"], ck["config"]["model"])
    model.load_state_dict(ck["model"])
    return model.to(device), ck


def epoch_checkpoints(ckpt_dir: Path) -> dict[int, Path]:
    out = {}
    for p in Path(ckpt_dir).glob("epoch_*.pt"):
        m = re.fullmatch(r"epoch_(\d+)\.pt", p.name)
        if m:
            out[int(m.group(1))] = p
    return dict(sorted(out.items()))


def _comparable(config: dict) -> dict:
    """A checkpoint's config minus what may change on resume (the number of epochs); checkpoints from before
    `precision` (with `amp`) compare as the float32 / float16 runs they were."""
    train = {k: v for k, v in config["train"].items() if k not in ("epochs", "amp")}
    train.setdefault("precision", "fp16" if config["train"].get("amp") else "fp32")
    train.setdefault("matched_negative_share", 0.0)  # checkpoints from before it trained without
    return {**config, "train": train}


@dataclass
class TrainResult:
    kind: str
    history: list  # per step: {epoch, step, graph_id, loss, auc, aauc, auc_eval, aauc_eval, seconds}
    val: list  # per epoch: {epoch, auc, ap, ...} on validation graphs (leak-free)
    best_epoch: int
    checkpoint: str | None  # path of the selected epoch's checkpoint
    skipped: list = field(default_factory=list)
    resumed_from: int = 0


def _val_tasks(val: list, cfg: TrainConfig) -> list[EvalTask]:
    """Validation tasks; plain graphs get the within-graph hold-out of `cfg` (no dataset-wide protocol needed)."""
    return [v if isinstance(v, EvalTask) else graph_task(v, "within_graph", cfg.seed, cfg.holdout_fraction,
                                                         cfg.neg_rate) for v in val]


def supervision_pairs(data: Data, cfg: TrainConfig, epoch: int, step: int) -> tuple[Tensor, Tensor]:
    """(message-passing edges [2, M], positives [2, P]) of one training step: the seed's "mp" scores the graph's own
    edges (both directions); "disjoint" holds a seeded `disjoint_ratio` of them out of message passing as positives
    (RandomLinkSplit's disjoint_train_ratio semantics, re-drawn per step with a seeded generator, which
    RandomLinkSplit — one split from the global RNG — does not offer)."""
    if cfg.supervision == "mp":
        return data.edge_index, data.edge_index
    return split_edges(data.edge_index, data.num_nodes, cfg.disjoint_ratio,
                       derive_seed(cfg.seed, "disjoint", epoch, step))


def training_negatives(data: Data, mp: Tensor, pos: Tensor, cfg: TrainConfig, epoch: int, step: int) -> Tensor:
    """round(P · neg_rate) non-edges [2, Q] of a training graph for one step: uniform, except a `hard_negative_share`
    of them at distance exactly 2 from a (seeded) positive's endpoint in the step's message passing — HeaRT's idea
    (Li et al., 2023) used in training, so a model learns what separates a link from a near miss — and a
    `matched_negative_share` at a (seeded) positive's own distance from its first endpoint (lib.negatives, the
    "matched" set), where "has a common neighbour" separates nothing."""
    n_neg = round(pos.size(1) * cfg.neg_rate)
    n_hard = round(cfg.hard_negative_share * n_neg)
    n_matched = round(cfg.matched_negative_share * n_neg)
    excluded = training_exclusions(data)  # edges, and under leak_free the held-out pairs (never a training negative)
    uni = sample_negatives(excluded, data.num_nodes, n_neg - n_hard - n_matched,
                           derive_seed(cfg.seed, "train-neg", epoch, step))
    if n_hard == 0 and n_matched == 0:
        return uni
    from lib.protocols import hard_negatives

    out = [uni]
    tp = TitlePairs([data])
    forbidden = tp.edge_keys(data, excluded)
    if n_hard:
        g = torch.Generator().manual_seed(derive_seed(cfg.seed, "train-hard-anchors", epoch, step))
        anchors = pos[:, torch.randperm(pos.size(1), generator=g)[:n_hard]]
        out.append(hard_negatives(mp.cpu(), data, tp.gids(data), tp, forbidden, anchors.cpu(),
                                  derive_seed(cfg.seed, "train-hard", epoch, step))[0])
    if n_matched:
        from lib.heuristics import adjacency
        from lib.negatives import matched_negatives

        g = torch.Generator().manual_seed(derive_seed(cfg.seed, "train-matched-anchors", epoch, step))
        anchors = pos[:, torch.randperm(pos.size(1), generator=g)[:n_matched]].cpu()
        a = adjacency(mp.cpu(), data.num_nodes, cache=False)
        out.append(matched_negatives(a, data, tp.gids(data), tp, forbidden, anchors, 1,
                                     derive_seed(cfg.seed, "train-matched", epoch, step))[0])
    return torch.cat(out, 1)


def validation_scores(model, tasks: list[EvalTask], cfg: TrainConfig, device) -> dict:
    """Validation metrics of one epoch: uniform negatives (auc, ap, hits@K, mrr); every other negative set the tasks
    hold as auc_<set>, mrr_<set> (so a model can be chosen per negative set on validation); their means over uniform
    and dist2 (auc_both, mrr_both) and over every set (auc_all, mrr_all)."""
    mean = evaluate_model(model, tasks, cfg, device=device, progress=False, with_aauc=False,
                          negative_sets=NEGATIVE_SETS, strata=False)["mean"]
    out = dict(mean["uniform"])
    for m in ("auc", "mrr"):
        for n in NEGATIVE_SETS[1:]:
            out[f"{m}_{n}"] = mean[n].get(m)
        for key, sets in (("both", ("uniform", "dist2")), ("all", NEGATIVE_SETS)):
            vals = [mean[n].get(m) for n in sets if mean[n].get(m) is not None]
            out[f"{m}_{key}"] = float(np.mean(vals)) if vals else None
    return out


class EncodeDecode(torch.nn.Module):
    """model(x, mp) then model.decode(z, pairs, mp, x) as one forward, so DistributedDataParallel wraps both
    (a decoder with parameters is then part of the wrapped module)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x: Tensor, mp: Tensor, pairs: Tensor) -> tuple[Tensor, Tensor]:
        """x [N, F], mp [2, M], pairs [2, P] -> (z [N, F_out], logits [P])."""
        z = self.model(x, mp)
        return z, self.model.decode(z, pairs, mp, x)  # one call for positives and negatives: see PairDecoder


def init_model(kind: str, model_cfg: dict, train_graphs: list[Data], cfg: TrainConfig, device) -> torch.nn.Module:
    """A fresh `kind` model seeded by (cfg.seed, kind) on `device` (decoder_init="stack": its feature part fitted on
    `train_graphs`)."""
    torch.manual_seed(derive_seed(cfg.seed, "init", kind))
    model = build_model(kind, model_cfg).to(device)
    rescale = bool(model_cfg.get("decoder_rescale"))
    if model_cfg.get("decoder_init") == "stack":
        # the same stack (ratio, seed, rescale) that lib.beyond reports as a baseline for these graphs
        from lib.heuristics import HeuristicStack

        model.decoder.init_from_stack(HeuristicStack(ratio=cfg.disjoint_ratio, seed=cfg.seed, rescale=rescale)
                                      .fit(train_graphs))
    elif rescale:
        from lib.heuristics import reference_degree

        model.decoder.set_reference_degree(reference_degree(
            train_graphs, cfg.disjoint_ratio if cfg.supervision == "disjoint" else 0.0))
    return model


def step_loss(run, data: Data, cfg: TrainConfig, kind: str, epoch: int, step: int, device, prec=None) -> dict:
    """The BCE loss of one training example: graph `data` at (epoch, step), `run` in training mode.

    run(x [N, F], mp [2, M], pairs [2, P]) -> (z [N, F_out], logits [P]) (an EncodeDecode, possibly inside
    DistributedDataParallel). Dropout, the disjoint split and the negatives are seeded by (seed, kind, epoch, step)
    alone, so an example draws the same samples whichever batch, rank or resumed run it falls in.
    Returns {"loss": scalar mean over the example's P + Q pairs, "logits", "labels": [P + Q], "z": [N, F_out],
    "x", "mp", "pos" [2, P], "neg" [2, Q]} on `device`. prec: cfg.precision resolved for `device`
    (lib.device.resolve_precision; resolved here when None).
    """
    prec = prec or resolve_precision(cfg.precision, device)
    torch.manual_seed(derive_seed(cfg.seed, "dropout", kind, epoch, step))
    mp, pos = supervision_pairs(data, cfg, epoch, step)
    x, mp, pos = data.x.to(device), mp.to(device), pos.to(device)
    neg = training_negatives(data, mp, pos, cfg, epoch, step).to(device)
    with prec.autocast(device):
        z, logits = run(x, mp, torch.cat([pos, neg], 1))  # one decode call: see PairDecoder
        logits = logits.float()
    labels = torch.cat([torch.ones(pos.size(1)), torch.zeros(neg.size(1))]).to(device)
    return {"loss": F.binary_cross_entropy_with_logits(logits, labels), "logits": logits, "labels": labels, "z": z,
            "x": x, "mp": mp, "pos": pos, "neg": neg}


def train_model(kind: str, model_cfg: dict, train_graphs: list[Data], val: list, cfg: TrainConfig,
                ckpt_dir: str | Path | None = None, resume: bool = True, progress: bool = True,
                max_steps: int | None = None, data_id: str = "") -> tuple[torch.nn.Module, TrainResult]:
    """Train a fresh `kind` model per seed §5.1 and return it at the epoch with the best validation score.

    val: validation tasks (lib.protocols.EvalTask, prepared by the protocol trained for) or plain graphs (then the
    within-graph hold-out). One optimiser step per training graph; negatives, dropout and disjoint supervision are
    seeded per (seed, epoch, step), so a run resumed from an epoch checkpoint reproduces an uninterrupted one. A
    NaN/inf loss raises TrainingDiverged and leaves the last good epoch checkpoint in place. max_steps (for tests)
    stops after that many steps in total. data_id identifies the training data (see `data_fingerprint`): a checkpoint
    is resumed only when its data_id equals a non-empty data_id; with an empty one training starts over and replaces
    the folder's epoch checkpoints.
    """
    device = get_device(cfg.device)
    in_ch = model_cfg["in_channels"]
    train_graphs, skipped = usable_graphs(train_graphs, in_ch)
    val_tasks = _val_tasks(val, cfg)
    if not train_graphs:
        raise ValueError(f"no usable training graph ({len(skipped)} skipped: {skipped[:3]}); check the dataset")
    model = init_model(kind, model_cfg, train_graphs, cfg, device)
    run = EncodeDecode(model)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    prec = resolve_precision(cfg.precision, device)
    scaler = torch.amp.GradScaler(device.type, enabled=prec.grad_scaling)
    config = {"kind": kind, "model": dict(model_cfg), "train": replace(cfg, precision=prec.name).to_dict(),
              "data_id": data_id}
    history, val_log, start_epoch, last_good = [], [], 1, None
    ckpt_dir = Path(ckpt_dir) if ckpt_dir else None
    found = epoch_checkpoints(ckpt_dir) if ckpt_dir else {}
    if found and (not resume or not data_id):
        for path in found.values():  # starting over: stale epochs of an earlier run must not be selected later
            path.unlink()
        found = {}
    if found:
        last_epoch, path = list(found.items())[-1]
        ck = torch.load(path, map_location=device, weights_only=True)
        if _comparable(ck["config"]) != _comparable(config):
            what = "other training data" if ck["config"].get("data_id") != data_id else "a different configuration"
            raise ValueError(f"checkpoint {path} was made with {what}; use another run_dir or pass resume=False to "
                             f"start over")
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        history, val_log, start_epoch, last_good = ck["history"], ck["val"], last_epoch + 1, path
    resumed_from = start_epoch - 1
    steps_done, interrupted, best_state = 0, False, None
    for epoch in range(start_epoch, cfg.epochs + 1):
        if cfg.patience and val_log and val_log[-1]["epoch"] - _best_epoch(val_log, cfg.select_metric) >= cfg.patience:
            break  # early stop (checked from the validation log, so a resumed run stops where the first one did)
        k = cfg.steps_per_graph
        bar = tqdm([(i * k + r, g) for i, g in enumerate(train_graphs) for r in range(k)],
                   desc=f"{kind} epoch {epoch}/{cfg.epochs}", disable=not progress, leave=False)
        for step, data in bar:
            if max_steps is not None and steps_done >= max_steps:
                interrupted = True
                break
            t0 = time.perf_counter()
            model.train()
            out = step_loss(run, data, cfg, kind, epoch, step, device, prec)
            loss, logits, labels, z, x, mp, pos, neg = (out[k] for k in ("loss", "logits", "labels", "z", "x", "mp",
                                                                            "pos", "neg"))
            if not torch.isfinite(loss):
                raise TrainingDiverged(
                    f"{kind}: loss is {loss.item()} at epoch {epoch} step {step} (graph {data.graph_id}); training "
                    f"stopped; last good checkpoint: {last_good or 'none (no epoch finished)'}; lower lr or check "
                    f"the graph's features")
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            rec = {"epoch": epoch, "step": step, "graph_id": str(data.graph_id), "loss": float(loss.detach()),
                   "auc": float(roc_auc_score(labels.cpu().numpy(), logits.detach().cpu().numpy()))}
            if cfg.log_aauc:
                r = aauc(z.detach().float().cpu(), data.x, cfg.r_cos, cfg.t_cos, derive_seed(cfg.seed, "aauc", epoch, step))
                rec["aauc"] = r.value if r.defined else None
            if cfg.log_eval:  # dropout 0.75 makes training-mode scores noisy; eval mode shows what was learnt
                model.eval()
                with torch.no_grad(), prec.autocast(device):
                    ze = model(x, mp).float()
                    le = model.decode(ze, torch.cat([pos, neg], 1), mp, x).float()
                rec["auc_eval"] = float(roc_auc_score(labels.cpu().numpy(), le.cpu().numpy()))
                if cfg.log_aauc:
                    r = aauc(ze.cpu(), data.x, cfg.r_cos, cfg.t_cos, derive_seed(cfg.seed, "aauc", epoch, step))
                    rec["aauc_eval"] = r.value if r.defined else None
            rec["seconds"] = time.perf_counter() - t0
            history.append(rec)
            steps_done += 1
            bar.set_postfix(loss=f"{rec['loss']:.3f}", auc=f"{rec['auc']:.3f}")
        if interrupted:
            break  # partial epoch: no checkpoint, as if the run had been killed here
        vm = validation_scores(model, val_tasks, cfg, device) if val_tasks else {}
        val_log.append({"epoch": epoch, **vm})
        if not ckpt_dir and _best_epoch(val_log, cfg.select_metric) == epoch:  # no checkpoint folder to go back to
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        if ckpt_dir:
            last_good = save_checkpoint(ckpt_dir / f"epoch_{epoch}.pt", model, opt, config, epoch, history, val_log)
    best_epoch = _best_epoch(val_log, cfg.select_metric) if val_log else 0
    ckpts = epoch_checkpoints(ckpt_dir) if ckpt_dir else {}
    if val_log and best_epoch != val_log[-1]["epoch"]:
        if best_epoch in ckpts:
            model.load_state_dict(torch.load(ckpts[best_epoch], map_location=device, weights_only=True)["model"])
        elif best_state is not None:
            model.load_state_dict(best_state)
    return model, TrainResult(kind, history, val_log, best_epoch, str(ckpts.get(best_epoch)) if ckpts else None,
                              skipped, resumed_from)


def _best_epoch(val_log: list[dict], metric: str) -> int:
    """The epoch with the best validation `metric` (a later epoch wins a tie)."""
    return max(val_log, key=lambda r: (r.get(metric) if r.get(metric) is not None else -1.0, r["epoch"]))["epoch"]


# ---------------------------------------------------------------- evaluation


def _summarise(per_graph: list[dict]) -> dict:
    keys = [k for k in (per_graph[0] if per_graph else {}) if k not in ("graph_id", "negatives")]
    out = {}
    for k in keys:
        vals = [r[k] for r in per_graph if r.get(k) is not None and not math.isnan(r[k])]
        # A-AUC is left out of the mean on graphs where it is undefined; n_<key> says on how many it was defined.
        if k.startswith("aauc"):
            out[f"n_{k}"] = len(vals)
        out[k] = float(np.mean(vals)) if vals else None
    return out


def _by_negatives(rows: list[dict], negative_sets) -> dict:
    return {n: _summarise([r for r in rows if r["negatives"] == n]) for n in negative_sets}


def _decodes_with_dot(model) -> bool:
    return getattr(getattr(model, "cfg", None), "decoder", "dot") == "dot"


@torch.no_grad()
def evaluate_model(model, tasks: list[EvalTask], cfg: TrainConfig, device=None, progress: bool = True,
                   negative_sets=NEGATIVE_SETS, with_aauc: bool = True, strata: bool = True) -> dict:
    """Metrics of an embedding model (eval mode) on protocol tasks: {"mean": {negative set: {set_metrics' keys,
    aauc, aauc_self}}, "per_graph": rows}. A-AUC per graph (`aauc`: self-pairs excluded; `aauc_self`: the seed code's
    variant with every node's pair with itself) from the embeddings of the task's message-passing graph — scored by
    z_i · z_j for the dot decoder, by the model's own decoder otherwise. strata: also the per-stratum metrics."""
    device = device or get_device(cfg.device)
    negative_sets = [check_negatives(n) for n in negative_sets]
    model.eval()
    rows = []
    for t in tqdm(tasks, desc="eval", disable=not progress, leave=False):
        x, mp = t.data.x.to(device), t.mp_edge_index.to(device)
        z = model(x, mp).float()

        def score(pairs):
            return model.decode(z, pairs.to(device), mp, x).float().cpu()

        extra = {}
        if with_aauc:
            s = derive_seed(cfg.seed, "eval-aauc", t.graph_id)
            if _decodes_with_dot(model):
                r = aauc(z.cpu(), t.data.x, cfg.r_cos, cfg.t_cos, s)
                r_self = aauc(z.cpu(), t.data.x, cfg.r_cos, cfg.t_cos, s, include_self=True)  # the seed code's variant
            else:
                r = aauc_scored(score, t.data.x, cfg.r_cos, cfg.t_cos, s)
                r_self = aauc_scored(score, t.data.x, cfg.r_cos, cfg.t_cos, s, include_self=True)
            extra = {"aauc": r.value if r.defined else None, "aauc_self": r_self.value if r_self.defined else None}
        pos = score(t.pos).numpy()
        has_cn = t.pos_has_cn() if strata else None
        for n in negative_sets:
            neg = t.negatives(n)
            if neg.size(1) == 0:
                continue
            rows.append({"graph_id": t.graph_id, "negatives": n,
                         **set_metrics(pos, score(neg).numpy(), t.owners(n), has_cn, cfg.hits_k), **extra})
    return {"mean": _by_negatives(rows, negative_sets), "per_graph": rows}


def evaluate_scorer(score, tasks: list[EvalTask], cfg: TrainConfig, negative_sets=NEGATIVE_SETS) -> dict:
    """Metrics of any pair scorer score(task, pairs [2, P]) -> scores [P] on protocol tasks (same result shape as
    evaluate_model, without A-AUC)."""
    rows = []
    for t in tasks:
        pos = np.asarray(score(t, t.pos))
        has_cn = t.pos_has_cn()
        for n in negative_sets:
            neg = t.negatives(check_negatives(n))
            if neg.size(1) == 0:
                continue
            rows.append({"graph_id": t.graph_id, "negatives": n,
                         **set_metrics(pos, np.asarray(score(t, neg)), t.owners(n), has_cn, cfg.hits_k)})
    return {"mean": _by_negatives(rows, negative_sets), "per_graph": rows}


def evaluate_heuristic(name: str, tasks: list[EvalTask], cfg: TrainConfig, negative_sets=NEGATIVE_SETS) -> dict:
    """Metrics of a heuristic scorer on the same tasks as evaluate_model (same shape of result, no A-AUC)."""
    return evaluate_scorer(lambda t, pairs: heuristic_scores(name, t.data.x, t.mp_edge_index, t.data.num_nodes, pairs),
                           tasks, cfg, negative_sets)


def data_fingerprint(graphs: Iterable[Data], tasks: Iterable[EvalTask] = ()) -> str:
    """sha256 over the graphs' ids, features and edges (and validation tasks' pairs of every negative set): the data a
    checkpoint was trained and selected on."""
    import hashlib

    h = hashlib.sha256()
    for g in graphs:
        h.update(str(g.graph_id).encode())
        h.update(g.x.numpy().tobytes())
        h.update(g.edge_index.numpy().tobytes())
        if getattr(g, "held_out_pairs", None) is not None:  # they change the training negatives
            h.update(b"held_out" + g.held_out_pairs.numpy().tobytes())
    for t in tasks:  # every negative set: an epoch may be selected on any of them
        for part in (t.mp_edge_index, t.pos, t.neg, t.neg_hard, *(p for pair in t.per_positive.values() for p in pair)):
            h.update(part.numpy().tobytes())
    return h.hexdigest()[:16]


def run_experiment(graphs: dict, train_ids: list, val_ids: list, test_ids: list, model_cfg: dict, cfg: TrainConfig,
                   run_dir: str | Path | None, models: Iterable[str] = MODEL_KINDS,
                   heuristics: Iterable[str] = HEURISTICS, protocols: Iterable[str] = PROTOCOLS,
                   supervisions: Iterable[str] = ("mp",), baseline_epochs: int | None = None,
                   progress: bool = True, tp: TitlePairs | None = None, splits: dict | None = None,
                   per_positive: int = PER_POSITIVE) -> dict:
    """Train `models` and score them and the `heuristics` on the test graphs under each protocol and negative set.

    graphs: graph_id -> Data (the whole dataset). Protocols that leave the training graphs untouched ("seed",
    "within_graph") share one trained model per (supervision, kind). Returns {"rows": [{seed, model, protocol,
    supervision, negatives, auc, ap, hits@K, mrr, aauc, aauc_self}], "train": {"<train set>/<supervision>/<kind>":
    TrainResult as dict}, "audit": [leak_audit rows], "skipped": [...], "protocols": {protocol: ProtocolSplit}}.
    Checkpoints go to run_dir/checkpoints/seed<S>/<train set>-<supervision>/<kind>/. splits: protocol ->
    ProtocolSplit of this seed already built (the notebook's audit ones), else built here with `per_positive`.
    """
    protocols = [check_protocol(p) for p in protocols]
    supervisions = list(supervisions)
    for sv in supervisions:
        if sv not in SUPERVISIONS:
            raise ValueError(f"supervision {sv!r} does not exist; use one of {SUPERVISIONS}")
    in_ch = model_cfg["in_channels"]
    tp = tp or TitlePairs(graphs.values())
    global_links = np.unique(np.concatenate([tp.edge_keys(g) for g in graphs.values()]))
    splits = {p: (splits or {}).get(p) or make_protocol(
        graphs, train_ids, val_ids, test_ids, p, cfg.seed, cfg.holdout_fraction, cfg.neg_rate, cfg.new_node_fraction,
        tp=tp, global_links=global_links, per_positive=per_positive) for p in protocols}
    for sp_ in splits.values():
        sp_.test = [t for t in sp_.test if graph_problem(t.data, in_ch) is None]
    rows, train_out, skipped = [], {}, []
    audit = [leak_audit(sp_) for sp_ in splits.values()]
    for sp_ in splits.values():
        skipped += [{**k, "protocol": sp_.protocol} for k in sp_.skipped]
    trained = {}  # (train set, supervision, kind) -> model
    for p, sp_ in splits.items():
        for sv in supervisions:
            for kind in models:
                key = (TRAIN_SET[p], sv, kind)
                if key not in trained:
                    epochs = cfg.epochs if (kind == "gat_model" or baseline_epochs is None) else baseline_epochs
                    kcfg = TrainConfig(**{**cfg.to_dict(), "epochs": epochs, "supervision": sv})
                    ckpt = Path(run_dir) / "checkpoints" / f"seed{cfg.seed}" / f"{key[0]}-{sv}" / kind \
                        if run_dir else None
                    model, res = train_model(kind, model_cfg, sp_.train, sp_.val, kcfg, ckpt_dir=ckpt,
                                             progress=progress, data_id=data_fingerprint(sp_.train, sp_.val))
                    trained[key] = model
                    train_out["/".join(key)] = asdict(res)
                    skipped += [{**k, "protocol": p} for k in res.skipped]
                means = evaluate_model(trained[key], sp_.test, cfg, progress=False)["mean"]
                for neg, m in means.items():
                    if not m:  # a set this protocol cannot have (matched under seed: positives are edges)
                        continue
                    rows.append({"seed": cfg.seed, "model": kind, "protocol": p, "supervision": sv, "negatives": neg,
                                 **m})
    for name in heuristics:
        for p, sp_ in splits.items():
            for neg, m in evaluate_heuristic(name, sp_.test, cfg)["mean"].items():
                if not m:
                    continue
                rows.append({"seed": cfg.seed, "model": name, "protocol": p, "supervision": "none", "negatives": neg,
                             **m})
    return {"rows": rows, "train": train_out, "audit": audit, "skipped": skipped, "protocols": splits}


def mean_std(v) -> str:
    """'mean ± std' of a series over seeds (std 0 with one seed): the cell of every results table."""
    return f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0:.3f}"


def results_table(rows, metric: str = "auc", index=("model", "supervision"), strata: bool = False,
                  order: list | None = None):
    """Notebook 03/03b results: index × (protocol, negative set[, stratum]) of 'mean ± std' over seeds of `metric`;
    strata=True splits the positives into those with a common neighbour in the message passing ('cn') and without
    ('no_cn') from the per-stratum columns <metric>_cn / <metric>_no_cn. order: the index values to show, in order."""
    import pandas as pd

    df = pd.DataFrame(rows)
    if strata:
        cols = [f"{metric}_{st}" for st in STRATA if f"{metric}_{st}" in df]
        keys = [*index, "protocol", "negatives", "seed"]
        df = df[keys + cols].melt(id_vars=keys, value_vars=cols, var_name="stratum",
                                  value_name=metric).dropna(subset=[metric])
        df["stratum"] = df["stratum"].str.removeprefix(f"{metric}_")
    columns = ["protocol", "negatives", "stratum"] if strata else ["protocol", "negatives"]
    df = df.dropna(subset=[metric])
    t = df.pivot_table(index=list(index), columns=columns, values=metric, aggfunc=mean_std, sort=False)
    rank = {"protocol": {p: i for i, p in enumerate(dict.fromkeys(df["protocol"]))},
            "negatives": {n: i for i, n in enumerate(NEGATIVE_SETS)}, "stratum": {s: i for i, s in enumerate(STRATA)}}
    t = t[sorted(t.columns, key=lambda c: tuple(rank[k].get(v, 99) for k, v in zip(columns, c)))]
    if order is not None:
        t = t.reindex([o for o in order if o in t.index])
    return t


def summary_table(rows: list[dict], metrics=("auc", "ap", "hits@50", "mrr", "aauc", "aauc_self"),
                  by=("protocol", "negatives", "supervision", "model")):
    """pandas DataFrame (protocol, negatives, supervision, model) × metric of 'mean ± std' over seeds, plus n_seeds
    (grouping keys missing from the rows are left out)."""
    import pandas as pd

    df = pd.DataFrame(rows)
    by = [b for b in by if b in df]
    out = []
    for key, g in df.groupby(by, sort=False):
        rec = {**dict(zip(by, key if isinstance(key, tuple) else (key,))), "n_seeds": g["seed"].nunique()}
        for m in metrics:
            v = g[m].dropna() if m in g else []
            rec[m] = f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0:.3f}" if len(v) else "n/a"
        out.append(rec)
    return pd.DataFrame(out).set_index(by)


# ---------------------------------------------------------------- reporting helpers for notebook 03

# The seed report's own numbers (its code, test split, one run each, scoring message-passing edges).
SEED_REPORTED = [
    {"train_graphs": 40, "test_graphs": 10, "auc": 0.900, "aauc": 0.772},
    {"train_graphs": 180, "test_graphs": 20, "auc": 0.922, "aauc": 0.628},
    {"train_graphs": 315, "test_graphs": 35, "auc": 0.927, "aauc": 0.578},
]


def plot_training(history: list[dict], title: str, path: str | Path | None = None):
    """The seed's figures 3–8 for one run: per-step AUC and A-AUC (left) and loss (right)."""
    import matplotlib.pyplot as plt

    steps = np.arange(1, len(history) + 1)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.6))

    def series(key):
        return [np.nan if h.get(key) is None else h[key] for h in history]

    a.plot(steps, series("auc"), color="C0", ls=":", label="AUC, training mode")
    a.plot(steps, series("aauc"), color="C1", ls=":", label="A-AUC, training mode")
    if any(h.get("auc_eval") is not None for h in history):
        a.plot(steps, series("auc_eval"), color="C0", label="AUC, eval mode after the step")
        a.plot(steps, series("aauc_eval"), color="C1", label="A-AUC, eval mode after the step")
    a.set(xlabel="training step (one graph)", ylabel="score", title=f"AUC vs A-AUC — {title}")
    a.legend(fontsize=7)
    b.plot(steps, [h["loss"] for h in history], color="C3")
    b.set(xlabel="training step (one graph)", ylabel="BCE loss", title=f"loss — {title}")
    for ax in (a, b):
        for e in sorted({h["epoch"] for h in history})[1:]:
            ax.axvline(next(i for i, h in enumerate(history, 1) if h["epoch"] == e) - 0.5, color="grey", lw=0.6)
    fig.tight_layout()
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
    return fig


def plot_auc_vs_aauc(rows: list[dict], n_train: int, path: str | Path | None = None, negatives: str = "uniform",
                     supervision: str = "mp"):
    """Test AUC against test A-AUC for the embedding models (every protocol and seed; one negative set and
    supervision) beside the seed's points."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for r in SEED_REPORTED:
        ax.scatter(r["aauc"], r["auc"], marker="*", s=160, color="k")
        ax.annotate(f"seed report, {r['train_graphs']} train", (r["aauc"], r["auc"]), textcoords="offset points",
                    xytext=(6, -3), fontsize=8)
    marks = dict(zip(PROTOCOLS, "os^vD"))
    for i, kind in enumerate(MODEL_KINDS):
        for protocol, m in marks.items():
            pts = [(r["aauc"], r["auc"]) for r in rows if r["model"] == kind and r["protocol"] == protocol
                   and r.get("negatives", negatives) == negatives and r.get("supervision", supervision) == supervision
                   and r.get("aauc") is not None]
            if pts:
                ax.scatter(*zip(*pts), marker=m, color=f"C{i}", alpha=0.8, label=f"{kind} · {protocol}")
    ax.set(xlabel="A-AUC (test graphs)", ylabel="AUC (test graphs)",
           title=f"this run ({n_train} train graphs, {supervision} supervision, {negatives} negatives) vs the seed report")
    ax.legend(fontsize=6, loc="lower left", ncol=2)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
    return fig
