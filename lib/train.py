"""Stage 3: train the seed's GatModel for link prediction (seed §5.1) and evaluate it honestly beside baselines.

Training (seed §5.1, §5.4.1): one step per training graph — encode, sample n_neg = round(n_pos · R_neg) non-edges
afresh, BCE-with-logits over the graph's edges (label 1) and the non-edges (label 0), AdamW; 2 epochs, lr 1e-3.
Every step logs loss, AUC and A-AUC of that step.

Two evaluation protocols, on the same seeded pairs for every scorer:
  "seed":      the seed code's protocol — score a graph's existing edges (which are also its message-passing
               edges, a leak) against round(n_pos · R_neg) sampled non-edges;
  "leak_free": hold `holdout_fraction` of a graph's undirected edges out of message passing and score them against
               as many sampled non-edges (non-edges of the full graph).
Metrics: AUC, AP, Hits@50, MRR (and A-AUC for embedding models).  Epoch selection uses the leak-free AUC on
validation graphs carved out of the training graphs.
"""
from __future__ import annotations

import math
import random
import re
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Iterable

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from sklearn.metrics import average_precision_score, roc_auc_score
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import negative_sampling, to_undirected
from tqdm.auto import tqdm

from lib.aauc import aauc
from lib.device import get_device
from lib.model import FeatureMLP, GatModel, ModelConfig, PlainGAT
from lib.paths import atomic_write_bytes

MODEL_KINDS = ("gat_model", "plain_gat", "mlp")
HEURISTICS = ("cosine", "pref_attach", "common_neighbours", "adamic_adar")
PROTOCOLS = ("seed", "leak_free")


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
    holdout_fraction: float = 0.1  # leak-free protocol: share of a graph's edges held out of message passing
    hits_k: int = 50
    amp: bool = False  # mixed precision; only on CUDA
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
                  ("hits_k", self.hits_k >= 1, "use a positive K such as 50")]
        for key, ok, fix in checks:
            if not ok:
                raise ValueError(f"parameter {key}={getattr(self, key)!r} is invalid: {fix}")
        if self.amp and not self.device.startswith("cuda"):
            raise ValueError(f"amp=True needs device='cuda' (got device={self.device!r}); use params/cpu.yaml (amp off)")

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------- seeds, input checks, synthetic graphs


def derive_seed(*parts) -> int:
    """A 63-bit seed from (run seed, purpose, epoch, step, ...) so every random draw is reproducible on its own."""
    ints = [p if isinstance(p, int) else int.from_bytes(str(p).encode()[:16].ljust(16, b"\0"), "little") % 2**63
            for p in parts]
    return int(np.random.SeedSequence(ints).generate_state(1, dtype=np.uint64)[0] >> 1)


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


def split_graphs(graph_ids: list, n_train: int, n_test: int, val_fraction: float, seed: int
                 ) -> tuple[list, list, list]:
    """Seeded (train, val, test) graph ids: n_test for test, n_train (0 = all the rest) for training, of which a
    `val_fraction` share (at least 1 graph when > 0) becomes validation for epoch selection."""
    ids = list(graph_ids)
    if n_test < 1 or n_test >= len(ids):
        raise ValueError(f"n_test_graphs={n_test} must be between 1 and {len(ids) - 1} for {len(ids)} usable graphs")
    rest = len(ids) - n_test
    n_train = n_train or rest
    if n_train > rest:
        raise ValueError(f"n_train_graphs={n_train} + n_test_graphs={n_test} exceed the {len(ids)} usable graphs; "
                         f"lower them or crawl more roots")
    if not 0 <= val_fraction < 1:
        raise ValueError(f"val_fraction={val_fraction} must be in [0, 1)")
    perm = torch.randperm(len(ids), generator=torch.Generator().manual_seed(seed)).tolist()
    test = [ids[i] for i in perm[:n_test]]
    train = [ids[i] for i in perm[n_test:n_test + n_train]]
    n_val = max(1, round(val_fraction * len(train))) if val_fraction > 0 else 0
    if n_val >= len(train):
        raise ValueError(f"val_fraction={val_fraction} leaves no training graph out of {len(train)}")
    return train[n_val:], train[:n_val], test


# ---------------------------------------------------------------- negatives and evaluation pairs


def sample_negatives(edge_index: Tensor, num_nodes: int, num_neg: int, seed: int) -> Tensor:
    """num_neg non-edges [2, ≤num_neg] of the graph `edge_index` (never a self-loop, never an edge), seeded.

    PyG's negative_sampling draws from Python's global `random`; it runs here under a seeded state that is restored
    afterwards, so the caller's random stream is untouched.
    """
    state = random.getstate()
    try:
        random.seed(seed)
        neg = negative_sampling(edge_index, num_nodes=num_nodes, num_neg_samples=int(num_neg), method="sparse")
    finally:
        random.setstate(state)
    return neg


@dataclass
class EvalPairs:
    """What one scorer sees for one graph under one protocol.

    mp_edge_index [2, M]: edges available for message passing / neighbourhood heuristics;
    pos [2, P], neg [2, Q]: node pairs to score (label 1 / 0)."""

    graph_id: object
    protocol: str
    mp_edge_index: Tensor
    pos: Tensor
    neg: Tensor


def leak_free_split(edge_index: Tensor, num_nodes: int, fraction: float, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """Hold `fraction` of the undirected edges out: (mp_edge_index [2, 2(E-P)] both directions, pos [2, P] with
    u < v, neg [2, P] non-edges of the *full* graph).  The held-out edges are absent from mp_edge_index in both
    directions."""
    und = edge_index[:, edge_index[0] < edge_index[1]]
    e = und.size(1)
    p = min(max(1, round(fraction * e)), e - 1)
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(e, generator=g)
    pos, keep = und[:, perm[:p]], und[:, perm[p:]]
    mp = to_undirected(keep, num_nodes=num_nodes)
    neg = sample_negatives(edge_index, num_nodes, p, derive_seed(seed, "neg"))
    return mp, pos, neg


def eval_pairs(data: Data, protocol: str, cfg: TrainConfig, seed: int) -> EvalPairs:
    """The seeded pairs of `data` for `protocol` ("seed" or "leak_free"), shared by every scorer."""
    n, ei = data.num_nodes, data.edge_index
    s = derive_seed(seed, "eval", protocol, str(getattr(data, "graph_id", "")))
    if protocol == "seed":
        neg = sample_negatives(ei, n, round(ei.size(1) * cfg.neg_rate), s)
        return EvalPairs(data.graph_id, protocol, ei, ei, neg)
    if protocol == "leak_free":
        mp, pos, neg = leak_free_split(ei, n, cfg.holdout_fraction, s)
        return EvalPairs(data.graph_id, protocol, mp, pos, neg)
    raise ValueError(f"protocol={protocol!r} must be one of {PROTOCOLS}")


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


# ---------------------------------------------------------------- heuristic scorers


def _adjacency(mp_edge_index: Tensor, n: int) -> sp.csr_matrix:
    ei = mp_edge_index.numpy()
    return sp.csr_matrix((np.ones(ei.shape[1], dtype=np.float64), (ei[0], ei[1])), shape=(n, n))


def heuristic_scores(name: str, x: Tensor, mp_edge_index: Tensor, num_nodes: int, pairs: Tensor) -> np.ndarray:
    """Scores [P] of node pairs [2, P] by a graph/feature heuristic (no training).

    cosine: cos(x_u, x_v); pref_attach: deg(u)·deg(v); common_neighbours: |N(u) ∩ N(v)|;
    adamic_adar: Σ_{w ∈ N(u) ∩ N(v)} 1 / log deg(w).  Degrees and neighbourhoods come from mp_edge_index only.
    Hand-written with scipy.sparse: PyG has no pair heuristics and networkx's are pure Python (too slow at 20k nodes).
    """
    u, v = pairs[0].numpy(), pairs[1].numpy()
    if name == "cosine":
        xn = F.normalize(x.double(), dim=1).numpy()
        return np.einsum("ij,ij->i", xn[u], xn[v])
    a = _adjacency(mp_edge_index, num_nodes)
    deg = np.asarray(a.sum(1)).ravel()
    if name == "pref_attach":
        return deg[u] * deg[v]
    if name == "common_neighbours":
        return np.asarray(a[u].multiply(a[v]).sum(1)).ravel()
    if name == "adamic_adar":
        with np.errstate(divide="ignore"):
            w = np.where(deg > 1, 1.0 / np.log(np.maximum(deg, 2)), 0.0)  # a common neighbour has degree >= 2
        return np.asarray(a[u].multiply(a[v]).multiply(w[None, :]).sum(1)).ravel()
    raise ValueError(f"heuristic {name!r} is unknown; use one of {HEURISTICS}")


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
    """A checkpoint's config minus what may change on resume (the number of epochs)."""
    return {**config, "train": {k: v for k, v in config["train"].items() if k != "epochs"}}


@dataclass
class TrainResult:
    kind: str
    history: list  # per step: {epoch, step, graph_id, loss, auc, aauc, auc_eval, aauc_eval, seconds}
    val: list  # per epoch: {epoch, auc, ap, ...} on validation graphs (leak-free)
    best_epoch: int
    checkpoint: str | None  # path of the selected epoch's checkpoint
    skipped: list = field(default_factory=list)
    resumed_from: int = 0


def train_model(kind: str, model_cfg: dict, train_graphs: list[Data], val_graphs: list[Data], cfg: TrainConfig,
                ckpt_dir: str | Path | None = None, resume: bool = True, progress: bool = True,
                max_steps: int | None = None, data_id: str = "") -> tuple[torch.nn.Module, TrainResult]:
    """Train a fresh `kind` model per seed §5.1 and return it at the epoch with the best validation AUC.

    One optimiser step per training graph; negatives and dropout are seeded per (seed, epoch, step), so a run resumed
    from an epoch checkpoint reproduces an uninterrupted one.  A NaN/inf loss raises TrainingDiverged and leaves the
    last good epoch checkpoint in place.  max_steps (for tests) stops after that many steps in total.
    data_id identifies the training data (see `data_fingerprint`); a checkpoint made on other data is never resumed.
    """
    device = get_device(cfg.device)
    in_ch = model_cfg["in_channels"]
    train_graphs, skipped = usable_graphs(train_graphs, in_ch)
    val_graphs, skipped_val = usable_graphs(val_graphs, in_ch)
    skipped += skipped_val
    if not train_graphs:
        raise ValueError(f"no usable training graph ({len(skipped)} skipped: {skipped[:3]}); check the dataset")
    torch.manual_seed(derive_seed(cfg.seed, "init", kind))
    model = build_model(kind, model_cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    scaler = torch.amp.GradScaler("cuda", enabled=cfg.amp)
    config = {"kind": kind, "model": dict(model_cfg), "train": cfg.to_dict(), "data_id": data_id}
    history, val, start_epoch, last_good = [], [], 1, None
    ckpt_dir = Path(ckpt_dir) if ckpt_dir else None
    if ckpt_dir and resume and (found := epoch_checkpoints(ckpt_dir)):
        last_epoch, path = list(found.items())[-1]
        ck = torch.load(path, map_location=device, weights_only=True)
        if _comparable(ck["config"]) != _comparable(config):
            raise ValueError(f"checkpoint {path} was made with a different configuration; use another run_dir or "
                             f"pass resume=False to start over")
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        history, val, start_epoch, last_good = ck["history"], ck["val"], last_epoch + 1, path
    resumed_from = start_epoch - 1
    steps_done, interrupted = 0, False
    for epoch in range(start_epoch, cfg.epochs + 1):
        bar = tqdm(train_graphs, desc=f"{kind} epoch {epoch}/{cfg.epochs}", disable=not progress, leave=False)
        for step, data in enumerate(bar):
            if max_steps is not None and steps_done >= max_steps:
                interrupted = True
                break
            t0 = time.perf_counter()
            model.train()
            torch.manual_seed(derive_seed(cfg.seed, "dropout", kind, epoch, step))
            x, ei = data.x.to(device), data.edge_index.to(device)
            neg = sample_negatives(data.edge_index, data.num_nodes, round(ei.size(1) * cfg.neg_rate),
                                   derive_seed(cfg.seed, "train-neg", epoch, step)).to(device)
            with torch.autocast(device.type, dtype=torch.float16, enabled=cfg.amp):
                z = model(x, ei)
                logits = torch.cat([model.decode(z, ei), model.decode(z, neg)]).float()
            labels = torch.cat([torch.ones(ei.size(1)), torch.zeros(neg.size(1))]).to(device)
            loss = F.binary_cross_entropy_with_logits(logits, labels)
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
                with torch.no_grad(), torch.autocast(device.type, dtype=torch.float16, enabled=cfg.amp):
                    ze = model(x, ei).float()
                    le = torch.cat([model.decode(ze, ei), model.decode(ze, neg)])
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
        vm = evaluate_model(model, val_graphs, "leak_free", cfg, device=device, progress=False)["mean"] \
            if val_graphs else {}
        val.append({"epoch": epoch, **vm})
        if ckpt_dir:
            last_good = save_checkpoint(ckpt_dir / f"epoch_{epoch}.pt", model, opt, config, epoch, history, val)
    best = max(val, key=lambda r: (r.get("auc", -1.0), r["epoch"])) if val else None
    best_epoch = best["epoch"] if best else 0
    ckpts = epoch_checkpoints(ckpt_dir) if ckpt_dir else {}
    if best and best_epoch != val[-1]["epoch"] and best_epoch in ckpts:
        model.load_state_dict(torch.load(ckpts[best_epoch], map_location=device, weights_only=True)["model"])
    return model, TrainResult(kind, history, val, best_epoch, str(ckpts.get(best_epoch)) if ckpts else None,
                              skipped, resumed_from)


# ---------------------------------------------------------------- evaluation


def _summarise(per_graph: list[dict]) -> dict:
    keys = [k for k in (per_graph[0] if per_graph else {}) if k != "graph_id"]
    out = {}
    for k in keys:
        vals = [r[k] for r in per_graph if r.get(k) is not None and not math.isnan(r[k])]
        # A-AUC is left out of the mean on graphs where it is undefined; n_<key> says on how many it was defined.
        if k.startswith("aauc"):
            out[f"n_{k}"] = len(vals)
        out[k] = float(np.mean(vals)) if vals else None
    return out


@torch.no_grad()
def evaluate_model(model, graphs: list[Data], protocol: str, cfg: TrainConfig, device=None, progress: bool = True
                   ) -> dict:
    """Mean and per-graph metrics of an embedding model (eval mode) under `protocol`, plus A-AUC per graph
    (`aauc`: self-pairs excluded; `aauc_self`: the seed code's variant with every node's pair with itself)."""
    device = device or get_device(cfg.device)
    model.eval()
    rows = []
    for data in tqdm(graphs, desc=f"eval {protocol}", disable=not progress, leave=False):
        pr = eval_pairs(data, protocol, cfg, cfg.seed)
        z = model(data.x.to(device), pr.mp_edge_index.to(device)).float().cpu()
        m = link_metrics(model.decode(z, pr.pos).numpy(), model.decode(z, pr.neg).numpy(), cfg.hits_k)
        s = derive_seed(cfg.seed, "eval-aauc", str(data.graph_id))
        r = aauc(z, data.x, cfg.r_cos, cfg.t_cos, s)
        r_self = aauc(z, data.x, cfg.r_cos, cfg.t_cos, s, include_self=True)  # the seed code's variant
        rows.append({"graph_id": str(data.graph_id), **m, "aauc": r.value if r.defined else None,
                     "aauc_self": r_self.value if r_self.defined else None})
    return {"mean": _summarise(rows), "per_graph": rows}


def evaluate_heuristic(name: str, graphs: list[Data], protocol: str, cfg: TrainConfig) -> dict:
    """Mean and per-graph metrics of a heuristic scorer on the same pairs as evaluate_model."""
    rows = []
    for data in graphs:
        pr = eval_pairs(data, protocol, cfg, cfg.seed)
        pos = heuristic_scores(name, data.x, pr.mp_edge_index, data.num_nodes, pr.pos)
        neg = heuristic_scores(name, data.x, pr.mp_edge_index, data.num_nodes, pr.neg)
        rows.append({"graph_id": str(data.graph_id), **link_metrics(pos, neg, cfg.hits_k)})
    return {"mean": _summarise(rows), "per_graph": rows}


def data_fingerprint(graphs: Iterable[Data]) -> str:
    """sha256 over the graphs' ids, sizes and feature/edge bytes: which data a checkpoint was trained on."""
    import hashlib

    h = hashlib.sha256()
    for g in graphs:
        h.update(str(g.graph_id).encode())
        h.update(g.x.numpy().tobytes())
        h.update(g.edge_index.numpy().tobytes())
    return h.hexdigest()[:16]


def run_experiment(graphs: dict, train_ids: list, val_ids: list, test_ids: list, model_cfg: dict, cfg: TrainConfig,
                   run_dir: str | Path | None, models: Iterable[str] = MODEL_KINDS,
                   heuristics: Iterable[str] = HEURISTICS, baseline_epochs: int | None = None,
                   progress: bool = True) -> dict:
    """Train `models` and score them with `heuristics` on the test graphs under both protocols.

    graphs: graph_id -> Data.  Returns {"rows": [{seed, model, protocol, auc, ap, hits@K, mrr, aauc}],
    "train": {kind: TrainResult as dict}, "skipped": [...]}.  Checkpoints go to run_dir/checkpoints/seed<S>/<kind>/.
    """
    in_ch = model_cfg["in_channels"]
    test, skipped = usable_graphs([graphs[i] for i in test_ids], in_ch)
    rows, train_out = [], {}
    for kind in models:
        kcfg = cfg if (kind == "gat_model" or baseline_epochs is None) else \
            TrainConfig(**{**cfg.to_dict(), "epochs": baseline_epochs})
        ckpt = Path(run_dir) / "checkpoints" / f"seed{cfg.seed}" / kind if run_dir else None
        tr, va = [graphs[i] for i in train_ids], [graphs[i] for i in val_ids]
        model, res = train_model(kind, model_cfg, tr, va, kcfg, ckpt_dir=ckpt, progress=progress,
                                 data_id=data_fingerprint(tr + va))
        train_out[kind] = asdict(res)
        skipped += res.skipped
        for protocol in PROTOCOLS:
            m = evaluate_model(model, test, protocol, cfg, progress=False)["mean"]
            rows.append({"seed": cfg.seed, "model": kind, "protocol": protocol, **m})
    for name in heuristics:
        for protocol in PROTOCOLS:
            m = evaluate_heuristic(name, test, protocol, cfg)["mean"]
            rows.append({"seed": cfg.seed, "model": name, "protocol": protocol, **m})
    return {"rows": rows, "train": train_out, "skipped": skipped}


def summary_table(rows: list[dict], metrics=("auc", "ap", "hits@50", "mrr", "aauc", "aauc_self")):
    """pandas DataFrame (protocol, model) × metric of 'mean ± std' over seeds, plus n_seeds."""
    import pandas as pd

    df = pd.DataFrame(rows)
    out = []
    for (protocol, model), g in df.groupby(["protocol", "model"], sort=False):
        rec = {"protocol": protocol, "model": model, "n_seeds": g["seed"].nunique()}
        for m in metrics:
            v = g[m].dropna() if m in g else []
            rec[m] = f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0:.3f}" if len(v) else "n/a"
        out.append(rec)
    return pd.DataFrame(out).set_index(["protocol", "model"])


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


def plot_auc_vs_aauc(rows: list[dict], n_train: int, path: str | Path | None = None):
    """Test AUC against test A-AUC for the embedding models (both protocols, every seed) beside the seed's points."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for r in SEED_REPORTED:
        ax.scatter(r["aauc"], r["auc"], marker="*", s=160, color="k")
        ax.annotate(f"seed report, {r['train_graphs']} train", (r["aauc"], r["auc"]), textcoords="offset points",
                    xytext=(6, -3), fontsize=8)
    marks = {"seed": "o", "leak_free": "s"}
    for i, kind in enumerate(MODEL_KINDS):
        for protocol, m in marks.items():
            pts = [(r["aauc"], r["auc"]) for r in rows if r["model"] == kind and r["protocol"] == protocol
                   and r.get("aauc") is not None]
            if pts:
                ax.scatter(*zip(*pts), marker=m, color=f"C{i}", alpha=0.8, label=f"{kind} · {protocol}")
    ax.set(xlabel="A-AUC (test graphs)", ylabel="AUC (test graphs)",
           title=f"this run ({n_train} train graphs) vs the seed report")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
    return fig

