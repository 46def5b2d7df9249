"""What one negative set is: its registry entry (NegativeSet), what its sampler reads for one evaluation task
(NegativeContext) and what it returns (Draw), and what its training draw reads for one training step
(TrainingContext)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from lib.common.seeding import derive_seed
from lib.linkpred.heuristics import adjacency
from lib.linkpred.sampling import TitlePairs, training_exclusions

SHARED, OWN = "shared", "own"  # how a set's negatives are ranked against the positives (NegativeSet.ranking)


@dataclass(frozen=True)
class Draw:
    """One task's negatives of one set: pairs [2, Q] (node ids of the task's graph), owner [Q] (index into the task's
    positives of the positive each negative belongs to; None when every negative is every positive's) and the number
    of positives for which the sampler found no negative."""

    pairs: Tensor
    owner: Tensor | None = None
    missing: int = 0


@dataclass(frozen=True)
class NegativeContext:
    """What a sampler reads for one evaluation task. Every negative is a pair (u, w) of `data`'s nodes, u != w, whose
    title pair is not in `forbidden` (sorted title-pair keys: the links the protocol rules out); where `anchor_ok` [N]
    is given only such nodes may be a negative's first endpoint (new_nodes: an unseen title)."""

    protocol: str
    data: Data  # the evaluation graph (x [N, F], titles, topics; edge_index = every edge it may know of)
    mp_edge_index: Tensor  # [2, M] message passing, both directions
    pos: Tensor  # [2, P] the task's positives
    gids: np.ndarray  # [N] global title ids of the graph's nodes
    tp: TitlePairs
    forbidden: np.ndarray
    seed: int  # the task's seed: each set derives its own stream from it under its own salt
    neg_rate: float  # "seed" protocol: uniform negatives per positive edge
    per_positive: int  # K, negatives of each positive's own for sets with NegativeSet.per_positive
    anchor_ok: np.ndarray | None = None


class TrainingContext:
    """What a set's training draw reads for one training step (lib.linkpred.train): the training graph `data`, the
    step's message passing mp_edge_index [2, M] and positives pos [2, P] (CPU), and the seed, epoch and step from which
    each set derives its own streams under its own salts (step_seed). The title ids and the pairs no negative may take
    (`excluded`: the graph's edges and held-out pairs; `forbidden`: their title-pair keys) are built on first use."""

    def __init__(self, data: Data, mp_edge_index: Tensor, pos: Tensor, seed: int, epoch: int, step: int):
        self.data, self.mp_edge_index, self.pos = data, mp_edge_index, pos
        self.seed, self.epoch, self.step = seed, epoch, step

    def step_seed(self, salt: str) -> int:
        """The seed of a draw of this step under `salt`."""
        return derive_seed(self.seed, salt, self.epoch, self.step)

    def anchors(self, n: int, salt: str) -> Tensor:
        """n of the step's positives [2, n], drawn without replacement under `salt`: where a set anchors its pairs."""
        g = torch.Generator().manual_seed(self.step_seed(salt))
        return self.pos[:, torch.randperm(self.pos.size(1), generator=g)[:n]]

    @cached_property
    def excluded(self) -> Tensor:
        """[2, E + 2H] the graph's edges and, under leak_free and pair_split, its held-out pairs (both directions)."""
        return training_exclusions(self.data)

    @cached_property
    def tp(self) -> TitlePairs:
        return TitlePairs([self.data])

    @property
    def gids(self) -> np.ndarray:
        return self.tp.gids(self.data)

    @cached_property
    def forbidden(self) -> np.ndarray:
        return self.tp.edge_keys(self.data, self.excluded)


@dataclass(frozen=True)
class NegativeSet:
    """One registry entry: a set of evaluation negatives, drawn per task by `sample`.

    ranking: SHARED (every negative ranks against every positive of the task: AUC, MRR, Hits@K over all of them) or OWN
    (each negative belongs to one positive: MRR, Hits@k per positive among its own, beside the AUC); per_positive: the
    set draws `NegativeContext.per_positive` negatives of each positive's own, so K = 0 builds none; cached: drawing
    costs seconds per task, so draws are kept on disk under a content key (raise `version` whenever `sample` changes
    what it returns); can_miss: a positive may get no negative (the audit counts them as <name>_missing); order: the
    set's place in every table (uniform first); default: drawn unless a protocol is told otherwise (the sets of the
    published runs; a new set stays out, so those runs and the notebooks' outputs keep their numbers); summary: one
    sentence for the results page and the notebooks; train(ctx: TrainingContext, n) -> [2, ≤ n]: n training negatives
    of one step, so the set can be mixed into training by name (TrainConfig.negative_mix; None: it cannot)."""

    name: str
    label: str
    sample: Callable[[NegativeContext], Draw]
    summary: str
    ranking: str = SHARED
    per_positive: bool = False
    cached: bool = False
    can_miss: bool = True
    version: int = 1
    order: int = 100
    default: bool = False
    train: Callable[[TrainingContext, int], Tensor] | None = None

    @property
    def audit_key(self) -> str:
        """Prefix of the set's audit columns (<audit_key>_pairs, <audit_key>_true_links)."""
        return "test_neg" if self.name == "uniform" else f"test_neg_{self.name}"


def own_negatives(ctx: NegativeContext, sampler: Callable, name: str) -> Draw:
    """The Draw of a sampler of lib.linkpred.negatives that gives each positive its own negatives (heart_negatives,
    matched_negatives: same arguments, the message-passing adjacency first, seeded by the set's name)."""
    a = adjacency(ctx.mp_edge_index, ctx.data.num_nodes)
    return Draw(
        *sampler(
            a,
            ctx.data,
            ctx.gids,
            ctx.tp,
            ctx.forbidden,
            ctx.pos,
            ctx.per_positive,
            derive_seed(ctx.seed, name),
            ctx.anchor_ok,
        )
    )
