"""Stage 3: train the seed's GatModel for link prediction (seed §5.1).

Training (seed §5.1, §5.4.1): one step per training graph — encode, sample n_neg = round(n_pos · R_neg) non-edges
afresh, BCE-with-logits over the positives (label 1) and the non-edges (label 0), AdamW; 2 epochs, lr 1e-3.
Every step logs loss, AUC and A-AUC of that step. Supervision (`TrainConfig.supervision`):
  "mp":       the seed's way — the positives are the very edges the encoder passes messages over;
  "disjoint": at every step a seeded share (`disjoint_ratio`, 0.3) of the graph's edges is held out of message passing
              and used as the positives (what PyG's RandomLinkSplit(disjoint_train_ratio=...) does once, re-drawn
              each step), so training practises the task the leak-free protocols test.

Evaluation protocols and negative sets are built in `lib.linkpred.protocols` on title pairs across the overlapping
graphs; every scorer of a seed sees exactly the same pairs and message-passing edges. The epoch is chosen on
validation graphs prepared by the same protocol.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data

from lib.common import published
from lib.common.device import get_device, resolve_precision
from lib.common.seeding import derive_seed
from lib.common.training import TrainingLoop, build_optimizer
from lib.linkpred.checkpoint import epoch_checkpoints, epoch_file_readable, resumable_config, save_checkpoint
from lib.linkpred.config import TrainConfig, TrainingDiverged, build_model, settings_from
from lib.linkpred.data import usable_graphs
from lib.linkpred.evaluate import evaluate_model
from lib.linkpred.heuristics import HeuristicStack, reference_degree
from lib.linkpred.model import ModelConfig
from lib.linkpred.negative_sets.base import TrainingContext
from lib.linkpred.negative_sets.registry import draw_training_negatives, held_sets
from lib.linkpred.protocols import EvalTask, ProtocolSettings, graph_task
from lib.linkpred.sampling import split_edges
from lib.metrics.aauc import aauc
from lib.metrics.ranking import roc_auc


@dataclass
class TrainResult:
    kind: str
    history: list  # per step: {epoch, step, graph_id, loss, auc, aauc, auc_eval, aauc_eval, seconds}
    val: list  # per epoch: {epoch, auc, ap, ...} on validation graphs (leak-free)
    best_epoch: int
    checkpoint: str | None  # path of the selected epoch's checkpoint
    skipped: list = field(default_factory=list)
    resumed_from: int = 0  # epochs finished before this call (read from checkpoints)
    steps: int = 0  # optimiser steps of this call
    seconds: float = 0.0
    global_batch: int = 1  # training examples per step, over all ranks
    world: int = 1  # ranks


def _val_tasks(val: list, cfg: TrainConfig) -> list[EvalTask]:
    """Validation tasks; plain graphs get the within-graph hold-out of `cfg` (no dataset-wide protocol needed)."""
    settings = settings_from(ProtocolSettings, cfg)
    return [v if isinstance(v, EvalTask) else graph_task(v, "within_graph", cfg.seed, settings) for v in val]


def supervision_pairs(data: Data, cfg: TrainConfig, epoch: int, step: int) -> tuple[Tensor, Tensor]:
    """(message-passing edges [2, M], positives [2, P]) of one training step: the seed's "mp" scores the graph's own
    edges (both directions); "disjoint" holds a seeded `disjoint_ratio` of them out of message passing as positives
    (RandomLinkSplit's disjoint_train_ratio semantics, re-drawn per step with a seeded generator, which
    RandomLinkSplit — one split from the global RNG — does not offer)."""
    if cfg.supervision == "mp":
        return data.edge_index, data.edge_index
    return split_edges(
        data.edge_index, data.num_nodes, cfg.disjoint_ratio, derive_seed(cfg.seed, "disjoint", epoch, step)
    )


def training_negatives(data: Data, mp: Tensor, pos: Tensor, cfg: TrainConfig, epoch: int, step: int) -> Tensor:
    """round(P · neg_rate) non-edges [2, Q] of a training graph for one step, drawn from the registered negative sets
    of `cfg.negative_mix` by their share (lib.linkpred.negative_sets.registry.draw_training_negatives; e.g. "dist2":
    at distance 2 from a seeded positive's endpoint in the step's message passing, "matched": at a positive's own
    distance), the rest uniform; never an edge or, under leak_free and pair_split, a held-out pair. Seeded by
    (seed, epoch, step)."""
    ctx = TrainingContext(data, mp.cpu(), pos.cpu(), cfg.seed, epoch, step)
    return draw_training_negatives(ctx, cfg.negative_mix, round(pos.size(1) * cfg.neg_rate))


def validation_scores(model, tasks: list[EvalTask], cfg: TrainConfig, device) -> dict:
    """Validation metrics of one epoch: uniform negatives (auc, ap, hits@K, mrr); every other negative set the tasks
    hold (held_sets) as auc_<set>, mrr_<set> (so a model can be chosen per negative set on validation); their means
    over uniform and dist2 (auc_both, mrr_both) and over every set (auc_all, mrr_all)."""
    sets = held_sets(tasks)
    mean = evaluate_model(
        model, tasks, cfg, device=device, progress=False, with_aauc=False, negative_sets=sets, strata=False
    )["mean"]
    out = dict(mean["uniform"])
    for m in ("auc", "mrr"):
        for n in sets[1:]:
            out[f"{m}_{n}"] = mean[n].get(m)
        for key, group in (("both", ("uniform", "dist2")), ("all", sets)):
            vals = [v for n in group if (v := mean.get(n, {}).get(m)) is not None]
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


def init_model(
    kind: str, model_cfg: ModelConfig, train_graphs: list[Data], cfg: TrainConfig, device
) -> torch.nn.Module:
    """A fresh `kind` model seeded by (cfg.seed, kind) on `device` (decoder_init="stack": its feature part fitted on
    `train_graphs`)."""
    torch.manual_seed(derive_seed(cfg.seed, "init", kind))
    model = build_model(kind, model_cfg).to(device)
    rescale = model_cfg.decoder_rescale
    if model_cfg.decoder_init == "stack":
        # the same stack (ratio, seed, rescale) that lib.linkpred.beyond reports as a baseline for these graphs
        model.decoder.init_from_stack(
            HeuristicStack(
                ratio=cfg.disjoint_ratio, seed=cfg.seed, rescale=rescale, features=model_cfg.stack_features
            ).fit(train_graphs)
        )
    elif rescale:
        model.decoder.set_reference_degree(
            reference_degree(train_graphs, cfg.disjoint_ratio if cfg.supervision == "disjoint" else 0.0)
        )
    return model


def step_loss(run, data: Data, cfg: TrainConfig, kind: str, epoch: int, step: int, device, prec=None) -> dict:
    """The BCE loss of one training example: graph `data` at (epoch, step), `run` in training mode.

    run(x [N, F], mp [2, M], pairs [2, P]) -> (z [N, F_out], logits [P]) (an EncodeDecode, possibly inside
    DistributedDataParallel). Dropout, the disjoint split and the negatives are seeded by (seed, kind, epoch, step)
    alone, so an example draws the same samples whichever batch, rank or resumed run it falls in.
    Returns {"loss": scalar mean over the example's P + Q pairs, "logits", "labels": [P + Q], "z": [N, F_out],
    "x", "mp", "pos" [2, P], "neg" [2, Q]} on `device`. prec: cfg.precision resolved for `device`
    (lib.common.device.resolve_precision; resolved here when None).
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
    return {
        "loss": F.binary_cross_entropy_with_logits(logits, labels),
        "logits": logits,
        "labels": labels,
        "z": z,
        "x": x,
        "mp": mp,
        "pos": pos,
        "neg": neg,
    }


class OneProcess:
    """The ranks of a single process (rank 0 of 1), as train_model sees a data-parallel job: lib.run.distributed
    passes its own object with the same members (DDP wrapping, means and broadcasts over ranks, barriers)."""

    rank, world, device = 0, 1, None

    def wrap(self, module: torch.nn.Module) -> torch.nn.Module:
        return module

    def mean(self, values: dict) -> dict:
        return values

    def broadcast(self, obj):
        return obj

    def barrier(self) -> None:
        pass


LAST = "last.pt"  # the training loop's checkpoint (lib.common.training); epoch ends also write epoch_<e>.pt


@dataclass(frozen=True)
class Checkpointing:
    """Where and how train_model checkpoints: `folder` gets last.pt (lib.common.training's one layout, resumed from)
    at every epoch's end, every `every` steps with every > 0, and after the last step; and epoch_<e>.pt (the model
    at each epoch's end, load_checkpoint) for the epoch selection and the later notebooks. data_id identifies the
    training data (data_fingerprint): a checkpoint is resumed only when its data_id equals a non-empty data_id; with
    an empty one, or resume=False, training starts over and replaces the folder's checkpoints."""

    folder: Path | None = None
    data_id: str = ""
    resume: bool = True
    every: int = 0


@dataclass
class _StepContext:
    """What every training step of train_model reads."""

    run: torch.nn.Module  # EncodeDecode, possibly inside DistributedDataParallel
    opt: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    ranks: object  # OneProcess or lib.run.distributed's ranks
    cfg: TrainConfig
    kind: str
    device: torch.device
    prec: object  # cfg.precision resolved for device (lib.common.device.resolve_precision)


def checkpoint_config(kind: str, model_cfg: ModelConfig, cfg: TrainConfig, data_id: str) -> dict:
    """The plain config a checkpoint stores (lib.linkpred.config.stored_settings reads it back)."""
    return {"kind": kind, "model": asdict(model_cfg), "train": cfg.to_dict(), "data_id": data_id}


def _start_over(folder: Path) -> None:
    """Delete the folder's checkpoints: stale epochs of an earlier run must not be resumed or selected later."""
    for path in [*epoch_checkpoints(folder).values(), folder / LAST]:
        path.unlink(missing_ok=True)


def _train_step(ctx: _StepContext, batch: list, epoch: int, s: int, last_good: Path | None) -> dict:
    """One optimiser step on a global batch of (step, graph) examples, of which this rank takes its share; each
    rank's (G / W examples at most) loss is the sum of its examples' losses times W / G, so DDP's gradient average is
    the gradient of the mean loss over the batch. Returns its log record: the global mean loss; with one example in
    one process also that example's AUC, optionally A-AUC and eval-mode AUC (what the notebooks plot)."""
    run, opt, scaler, ranks, cfg, kind, device, prec = (
        ctx.run,
        ctx.opt,
        ctx.scaler,
        ctx.ranks,
        ctx.cfg,
        ctx.kind,
        ctx.device,
        ctx.prec,
    )
    per = cfg.graphs_per_step // ranks.world
    t0 = time.perf_counter()
    mine = batch[ranks.rank * per : (ranks.rank + 1) * per]
    weight = ranks.world / len(batch) if mine else 0.0  # a rank without an example joins with a zero-weighted one
    run.train()
    opt.zero_grad(set_to_none=True)
    local = 0.0
    for j, (step, data) in enumerate(mine or batch[:1]):
        with run.no_sync() if hasattr(run, "no_sync") and j < len(mine) - 1 else nullcontext():
            out = step_loss(run, data, cfg, kind, epoch, step, device, prec)
            if not torch.isfinite(out["loss"]):
                who = f" (rank {ranks.rank})" if ranks.world > 1 else ""
                raise TrainingDiverged(
                    f"{kind}{who}: loss is {out['loss'].item()} at epoch {epoch} step {step} (graph {data.graph_id}); "
                    f"training stopped; last good checkpoint: {last_good or 'none'}; lower lr or check the graph's "
                    f"features"
                )
            scaler.scale(out["loss"] * weight).backward()
        local += float(out["loss"].detach()) * weight
    scaler.step(opt)
    scaler.update()
    if len(batch) == 1 and ranks.world == 1:
        rec = _example_record(
            run.model,
            out,
            batch[0][1],
            cfg,
            epoch,
            batch[0][0],
            device,
            prec,
            logged=s % cfg.log_interval(batch[0][1].num_nodes) == 0,
        )
    else:
        rec = {"epoch": epoch, "step": s, "graphs": len(batch), **ranks.mean({"loss": local})}
    rec["seconds"] = time.perf_counter() - t0
    return rec


def log_aauc_rate(cfg: TrainConfig, num_nodes: int) -> float:
    """The node sampling rate of a training step's A-AUC: the seed's r_cos, lowered so that at most
    `cfg.log_aauc_cap(num_nodes)` nodes are sampled when there is a cap (its pairs, and so its cost, grow with the
    square)."""
    cap = cfg.log_aauc_cap(num_nodes)
    if not cap or num_nodes * cfg.r_cos <= cap:
        return cfg.r_cos
    return cap / num_nodes


def _example_record(
    model: torch.nn.Module,
    out: dict,
    data: Data,
    cfg: TrainConfig,
    epoch: int,
    step: int,
    device,
    prec,
    logged: bool = True,
) -> dict:
    """The log of a one-graph step: loss and AUC of its training-mode scores; where `logged` (every
    `cfg.log_interval(N)`-th step), optionally A-AUC (of at most `cfg.log_aauc_cap(N)` sampled nodes) and eval-mode
    AUC."""
    logits, labels, z = out["logits"].detach(), out["labels"], out["z"]
    rec = {
        "epoch": epoch,
        "step": step,
        "graph_id": str(data.graph_id),
        "loss": float(out["loss"].detach()),
        "auc": roc_auc(labels.cpu().numpy(), logits.cpu().numpy()),
    }
    if not logged:
        return rec
    r_cos = log_aauc_rate(cfg, data.num_nodes)
    if cfg.log_aauc:
        r = aauc(z.detach().float().cpu(), data.x, r_cos, cfg.t_cos, derive_seed(cfg.seed, "aauc", epoch, step))
        rec["aauc"] = r.value if r.defined else None
    if cfg.log_eval:  # dropout 0.75 makes training-mode scores noisy; eval mode shows what was learnt
        model.eval()
        with torch.no_grad(), prec.autocast(device):
            ze = model(out["x"], out["mp"]).float()
            le = model.decode(ze, torch.cat([out["pos"], out["neg"]], 1), out["mp"], out["x"]).float()
        rec["auc_eval"] = roc_auc(labels.cpu().numpy(), le.cpu().numpy())
        if cfg.log_aauc:
            r = aauc(ze.cpu(), data.x, r_cos, cfg.t_cos, derive_seed(cfg.seed, "aauc", epoch, step))
            rec["aauc_eval"] = r.value if r.defined else None
    return rec


def train_model(
    kind: str,
    model_cfg: ModelConfig,
    train_graphs: list[Data],
    val: list,
    cfg: TrainConfig,
    ckpt: Checkpointing = Checkpointing(),
    progress: bool = True,
    max_steps: int | None = None,
    ranks=None,
) -> tuple[torch.nn.Module, TrainResult]:
    """Train a fresh `kind` model per seed §5.1 and return it at the epoch with the best validation score.

    val: validation tasks (lib.linkpred.protocols.EvalTask, prepared by the protocol trained for) or plain graphs (then
    the within-graph hold-out), scored on rank 0 after every epoch. One optimiser step per `cfg.graphs_per_step`
    training examples (graph, repeat) — the notebooks' one graph by default; negatives, dropout and disjoint
    supervision are seeded per (seed, epoch, example), so a resumed run, or W ranks at G / W examples each, reproduce
    one uninterrupted process at G. ranks: the data-parallel job (lib.run.distributed); default one process. The
    steps run on lib.common.training's loop, checkpointed (rank 0 only) as `ckpt` says (Checkpointing); early
    stopping after `cfg.patience` epochs without a better validation score. A NaN/inf loss raises TrainingDiverged
    and leaves the last good checkpoint in place. max_steps stops after that many steps of this call, as a kill would.
    """
    ranks = ranks or OneProcess()
    device = ranks.device or get_device(cfg.device)
    G = cfg.graphs_per_step
    if G < ranks.world or G % ranks.world:
        raise ValueError(
            f"graphs_per_step={G} cannot be split evenly over {ranks.world} ranks; use a multiple of the "
            f"number of processes"
        )
    train_graphs, skipped = usable_graphs(train_graphs, model_cfg.in_channels)
    if not train_graphs:
        raise ValueError(f"no usable training graph ({len(skipped)} skipped: {skipped[:3]}); check the dataset")
    val_tasks = _val_tasks(val, cfg) if ranks.rank == 0 else []
    model = init_model(kind, model_cfg, train_graphs, cfg, device)
    # the seed's AdamW: every parameter decayed, constant rate (the schedule stays at 1)
    opt, _ = build_optimizer(
        list(model.parameters()),
        cfg.lr,
        0,
        weight_decay=cfg.weight_decay,
        schedule="constant",
        fused=False,
        decay_vectors=True,
    )
    prec = resolve_precision(cfg.precision, device)
    scaler = torch.amp.GradScaler(device.type, enabled=prec.grad_scaling)
    ctx = _StepContext(ranks.wrap(EncodeDecode(model)), opt, scaler, ranks, cfg, kind, device, prec)
    config = checkpoint_config(kind, model_cfg, replace(cfg, precision=prec.name), ckpt.data_id)
    folder = Path(ckpt.folder) if ckpt.folder else None
    if folder is not None and (not ckpt.resume or not ckpt.data_id):
        _start_over(folder)
    k = cfg.steps_per_graph
    items = [(i * k + r, g) for i, g in enumerate(train_graphs) for r in range(k)]
    n_steps = -(-len(items) // G)
    loop = TrainingLoop(
        {"model": model, "optimizer": opt, "scaler": scaler},
        resumable_config(config),
        cfg.epochs * n_steps,
        checkpoint=folder / LAST if folder else None,
        checkpoint_every=ckpt.every,
        extra={"val": [], "best": None, "last_epoch_file": None},
        writer=ranks.rank == 0,
        read_config=published.linkpred_config,
    )
    t_start = time.perf_counter()

    def step(i: int) -> dict:
        s = i % n_steps
        return _train_step(ctx, items[s * G : (s + 1) * G], i // n_steps + 1, s, loop.extra["last_epoch_file"])

    def end_of_epoch(loop: TrainingLoop) -> bool:
        epoch, val_log = loop.step // n_steps, loop.extra["val"]  # a period ends at a multiple of n_steps
        vm = validation_scores(model, val_tasks, cfg, device) if val_tasks else {}
        val_log.append(ranks.broadcast({"epoch": epoch, **vm}))
        best = _best_epoch(val_log, cfg.select_metric)
        if best == epoch:  # kept with the checkpoint: a resumed run can go back to it
            loop.extra["best"] = (epoch, {n: v.detach().clone() for n, v in model.state_dict().items()})
        if folder and ranks.rank == 0:
            loop.extra["last_epoch_file"] = str(
                save_checkpoint(folder / f"epoch_{epoch}.pt", model, opt, config, epoch, loop.rows, val_log)
            )
        ranks.barrier()  # the other ranks wait for rank 0's validation instead of running into the next epoch
        return bool(cfg.patience) and epoch - best >= cfg.patience  # early stop

    loop.run(
        step,
        max_steps=max_steps,
        period=n_steps,
        end_of_period=end_of_epoch,
        checkpoint_period_ends=True,
        progress=progress and ranks.rank == 0,
        desc=f"{kind} ({cfg.epochs} epochs)",
    )
    val_log = loop.extra["val"]
    best_epoch = _best_epoch(val_log, cfg.select_metric) if val_log else 0
    if folder and val_log and ranks.rank == 0:
        at_epoch_end = loop.step % n_steps == 0 and loop.step // n_steps == val_log[-1]["epoch"]
        _check_epoch_files(
            folder,
            best_epoch,
            val_log[-1]["epoch"] if at_epoch_end else None,
            lambda epoch: save_checkpoint(folder / f"epoch_{epoch}.pt", model, opt, config, epoch, loop.rows, val_log),
        )
    if val_log and best_epoch != val_log[-1]["epoch"]:
        model.load_state_dict(loop.extra["best"][1])
    if folder and val_log and ranks.rank == 0 and not epoch_file_readable(folder / f"epoch_{best_epoch}.pt"):
        save_checkpoint(folder / f"epoch_{best_epoch}.pt", model, opt, config, best_epoch, loop.rows, val_log)
    ckpts = epoch_checkpoints(folder) if folder else {}
    return model, TrainResult(
        kind,
        loop.rows,
        val_log,
        best_epoch,
        str(ckpts.get(best_epoch)) if ckpts else None,
        skipped,
        loop.resumed_from // n_steps,
        loop.done,
        time.perf_counter() - t_start,
        G,
        ranks.world,
    )


def _check_epoch_files(folder: Path, best_epoch: int, last_epoch: int | None, write_last) -> None:
    """Read every epoch checkpoint `folder` keeps but the selected one (train_model checks that one itself), when a run
    resumes or finishes: a damaged one would otherwise stay unnoticed until someone loads it. It is moved aside
    (RecoveryWarning); `write_last(epoch)` writes the last epoch's again (last_epoch: the epoch whose end the model is
    at now, None when it is at none); the weights of the others are kept nowhere else, which the warning says."""
    for epoch, path in epoch_checkpoints(folder).items():
        if epoch == best_epoch:
            continue
        if epoch == last_epoch:
            if not epoch_file_readable(path, "epoch checkpoint"):
                write_last(epoch)
        else:
            epoch_file_readable(
                path,
                "epoch checkpoint",
                f"it cannot be written again: its weights are kept nowhere else (later notebooks "
                f"load only the selected epoch, {best_epoch})",
            )


def _best_epoch(val_log: list[dict], metric: str) -> int:
    """The epoch with the best validation `metric` (a later epoch wins a tie)."""
    return max(val_log, key=lambda r: (r.get(metric) if r.get(metric) is not None else -1.0, r["epoch"]))["epoch"]
