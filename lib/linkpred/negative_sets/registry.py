"""The registry of stage 3's negative sets: every module of lib.linkpred.negative_sets but `base` and this one defines
one set as `SET`, collected here in table order; the selection helpers, the one driver that draws a task's sets
(caching the slow ones by content), and the one that draws a training step's negatives from a mix of the sets that
have a training draw (TrainConfig.negative_mix)."""

from __future__ import annotations

import hashlib
import importlib
import io
import pkgutil
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

import lib.linkpred.negative_sets as package
from lib.common.paths import atomic_write_bytes, move_aside
from lib.common.registry import Registry
from lib.common.tensorfiles import read_checkpoint
from lib.linkpred.negative_sets.base import Draw, NegativeContext, NegativeSet, TrainingContext
from lib.linkpred.negatives import node_features

_ENTRIES = [
    importlib.import_module(f"{package.__name__}.{m.name}").SET
    for m in pkgutil.iter_modules(package.__path__)
    if m.name not in ("base", "registry")
]
REGISTRY: Registry[NegativeSet] = Registry(
    "negative set",
    "a module of lib.linkpred.negative_sets",
    about=lambda s: (
        (f"{s.label}: " if s.label != s.name else "")
        + s.summary
        + ("" if s.default else " (drawn only where `negative_sets` names it)")
    ),
)
for _entry in sorted(_ENTRIES, key=lambda s: (s.order, s.name)):
    REGISTRY.add(_entry)
NEGATIVE_SETS = tuple(REGISTRY)
"""Every registered negative set, in table order (uniform first)."""
DEFAULT_NEGATIVE_SETS = tuple(n for n, s in REGISTRY.items() if s.default)
"""The sets a protocol draws unless told otherwise (ProtocolSettings.negative_sets): those of the published runs."""
# validation metric that picks the epoch: on uniform negatives; *_<set>: on that negative set; *_both: mean over the
# uniform and dist2 sets; *_all: mean over every negative set the validation tasks hold
SELECT_METRICS = (
    "auc",
    "mrr",
    *(f"{m}_{n}" for n in NEGATIVE_SETS[1:] for m in ("auc", "mrr")),
    "auc_both",
    "mrr_both",
    "auc_all",
    "mrr_all",
)


def set_title(name: str) -> str:
    """A panel or column title of a negative set: its name (as the tables key it) and its label; a name the registry
    does not hold (a published run's) stays as it is."""
    label = REGISTRY[name].label if name in REGISTRY else name
    return f"{name} negatives" if label == name else f"{name} negatives ({label})"


def check_negatives(name: str) -> str:
    return REGISTRY.check(name)


def check_selection(names) -> tuple[str, ...]:
    """The selected sets in registry order; every name must exist and "uniform" must be among them (it picks the
    epoch and is every protocol's own negative set)."""
    names = [check_negatives(n) for n in names]
    if "uniform" not in names:
        raise ValueError(
            f"negative_sets={list(names)!r} lacks 'uniform', which every protocol needs to pick the epoch; add it"
        )
    return tuple(n for n in NEGATIVE_SETS if n in names)


def held_sets(tasks) -> tuple[str, ...]:
    """The default sets and every other set some of `tasks` hold, in registry order: the columns of every table."""
    held = {n for t in tasks for n in t.negative_sets}
    return tuple(n for n in NEGATIVE_SETS if n in DEFAULT_NEGATIVE_SETS or n in held)


def cache_key(entry: NegativeSet, ctx: NegativeContext) -> str:
    """Content key of one task's draw of a cached set: the set, its version and every input that decides the draw
    (message passing, features, global title ids, forbidden pairs, positives, K, the seed), nothing else."""
    h = hashlib.sha256(f"{entry.name} v{entry.version} k{ctx.per_positive} s{ctx.seed} n{ctx.tp.n}".encode())
    for a in (
        ctx.mp_edge_index.numpy(),
        node_features(ctx.data),
        ctx.gids,
        ctx.forbidden,
        ctx.pos.numpy(),
        ctx.anchor_ok if ctx.anchor_ok is not None else np.empty(0, bool),
    ):
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:32]


def _cached(entry: NegativeSet, ctx: NegativeContext, cache_dir) -> Draw:
    """entry.sample(ctx), kept in `<cache_dir>/<cache_key>.pt`: a protocol's tasks are built again by every notebook
    and every resumed run, while the key changes with any input, so a stale file is never read."""
    path = Path(cache_dir) / f"{cache_key(entry, ctx)}.pt"
    got = read_checkpoint(path, what="cached negative sets", consequence="they are built again")
    if got is not None:
        try:
            return Draw(got["neg"], got["owner"], int(got["missing"]))
        except (KeyError, TypeError, ValueError) as e:  # readable, but not what this function writes
            move_aside(path, "cached negative sets", f"no {e}", "they are built again")
    draw = entry.sample(ctx)
    buf = io.BytesIO()
    torch.save({"neg": draw.pairs, "owner": draw.owner, "missing": torch.tensor(draw.missing)}, buf)
    atomic_write_bytes(path, buf.getvalue())
    return draw


def draw_negatives(ctx: NegativeContext, names, cache_dir=None) -> dict[str, Draw]:
    """{set name: Draw} of one task for the selected sets `names`, in registry order. A per-positive set is left out
    when K = 0 or the task has no positive; a cached set is read from / kept in `cache_dir` when given."""
    out = {}
    for name in check_selection(names):
        entry = REGISTRY[name]
        if entry.per_positive and (ctx.per_positive <= 0 or ctx.pos.size(1) == 0):
            continue
        out[name] = _cached(entry, ctx, cache_dir) if entry.cached and cache_dir is not None else entry.sample(ctx)
    return out


def training_sets() -> tuple[str, ...]:
    """The registered sets with a training draw, in registry order: what a training mix may name besides uniform."""
    return tuple(n for n, s in REGISTRY.items() if s.train is not None and n != "uniform")


def check_training_mix(mix: dict) -> dict[str, float]:
    """A training mix {set name: share of each step's training negatives} in registry order without its zero shares;
    uniform takes the share the others leave. A name that is not a set with a training draw, a share outside [0, 1]
    or shares above 1 together stop here with one line naming the fix."""
    if not isinstance(mix, dict):
        raise ValueError(f"a training mix is {{negative set: share}}, not {mix!r}; give e.g. {{'dist2': 0.5}}")
    for name, share in mix.items():
        check_negatives(name)
        if name not in training_sets():
            raise ValueError(
                f"negative set {name!r} cannot be mixed into training (uniform takes the share the others "
                f"leave; a set needs a `train` draw); use one of {training_sets()}"
            )
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
            raise ValueError(f"the training share of {name!r} is {share!r}; use a share in [0, 1]")
    if sum(mix.values()) > 1:
        raise ValueError(f"the training shares {mix!r} add up to more than 1; lower them (uniform takes the rest)")
    return {n: mix[n] for n in REGISTRY if mix.get(n)}


def draw_training_negatives(ctx: TrainingContext, mix: dict, n_neg: int) -> Tensor:
    """n_neg training negatives [2, ≤ n_neg] of one step: round(share · n_neg) from each set of `mix`
    (check_training_mix) and the rest uniform, concatenated uniform first, then in registry order."""
    counts = {n: round(share * n_neg) for n, share in check_training_mix(mix).items()}
    parts = [REGISTRY["uniform"].train(ctx, n_neg - sum(counts.values()))]
    parts += [REGISTRY[n].train(ctx, c) for n, c in counts.items() if c]
    return torch.cat(parts, 1)
