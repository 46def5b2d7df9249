"""Stage 3 evaluation: a trained model, any pair scorer, or a heuristic on one protocol's test tasks."""

from __future__ import annotations

import math

import numpy as np
import torch
from tqdm.auto import tqdm

from lib.common.device import get_device
from lib.common.seeding import derive_seed
from lib.linkpred.config import TrainConfig
from lib.linkpred.heuristics import heuristic_scores
from lib.linkpred.negative_sets.registry import check_negatives, held_sets
from lib.linkpred.protocols import EvalTask
from lib.metrics.aauc import aauc, aauc_scored
from lib.metrics.link import set_metrics

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
def evaluate_model(
    model,
    tasks: list[EvalTask],
    cfg: TrainConfig,
    device=None,
    progress: bool = True,
    negative_sets=None,
    with_aauc: bool = True,
    strata: bool = True,
) -> dict:
    """Metrics of an embedding model (eval mode) on protocol tasks: {"mean": {negative set: {set_metrics' keys,
    aauc, aauc_self}}, "per_graph": rows}. A-AUC per graph (`aauc`: self-pairs excluded; `aauc_self`: the seed code's
    variant with every node's pair with itself) from the embeddings of the task's message-passing graph — scored by
    z_i · z_j for the dot decoder, by the model's own decoder otherwise. strata: also the per-stratum metrics.
    negative_sets: registry names; None: the sets the tasks hold (lib.linkpred.negative_sets.registry.held_sets)."""
    device = device or get_device(cfg.device)
    negative_sets = [check_negatives(n) for n in (held_sets(tasks) if negative_sets is None else negative_sets)]
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
            rows.append(
                {
                    "graph_id": t.graph_id,
                    "negatives": n,
                    **set_metrics(pos, score(neg).numpy(), t.owners(n), has_cn, cfg.hits_k),
                    **extra,
                }
            )
    return {"mean": _by_negatives(rows, negative_sets), "per_graph": rows}


def evaluate_scorer(score, tasks: list[EvalTask], cfg: TrainConfig, negative_sets=None) -> dict:
    """Metrics of any pair scorer score(task, pairs [2, P]) -> scores [P] on protocol tasks (same result shape as
    evaluate_model, without A-AUC)."""
    negative_sets = held_sets(tasks) if negative_sets is None else negative_sets
    rows = []
    for t in tasks:
        pos = np.asarray(score(t, t.pos))
        has_cn = t.pos_has_cn()
        for n in negative_sets:
            neg = t.negatives(check_negatives(n))
            if neg.size(1) == 0:
                continue
            rows.append(
                {
                    "graph_id": t.graph_id,
                    "negatives": n,
                    **set_metrics(pos, np.asarray(score(t, neg)), t.owners(n), has_cn, cfg.hits_k),
                }
            )
    return {"mean": _by_negatives(rows, negative_sets), "per_graph": rows}


def evaluate_heuristic(name: str, tasks: list[EvalTask], cfg: TrainConfig, negative_sets=None) -> dict:
    """Metrics of a heuristic scorer on the same tasks as evaluate_model (same shape of result, no A-AUC)."""
    return evaluate_scorer(
        lambda t, pairs: heuristic_scores(name, t.data.x, t.mp_edge_index, t.data.num_nodes, pairs),
        tasks,
        cfg,
        negative_sets,
    )
