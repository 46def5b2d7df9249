"""A static title encoder trained, not only distilled: a model2vec table (lib.embed.static.distil) whose token vectors
are trained on transfer texts so that its title embeddings match a target encoder's (all-MiniLM-L6-v2) on titles it
never saw.

- `StaticTrainConfig`: the hyper-parameters of one run, with `check()`.
- `train_static(init_dir, out_dir, texts, targets, plan, cfg)`: trains the table rows of the tokens of the texts the
  plan draws (and, if asked, their SIF weights) and a bias-free linear map from the table's width to the target's, on
  lib.common.training's loop (checkpoint, resume). The student embedding of a text is lib.embed.static.pool of its
  tokens (StaticEncoder's pooling) times the map; the objective is the mean 1 - cosine to the target
  (lib.embed.losses.embedding_loss). Pooling is linear in the table, so the map is folded into it
  (table @ map^T): the saved folder is a plain model2vec folder of the target's width that StaticEncoder reads and
  that encodes exactly as the trained student.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn as nn

from lib.common.runinfo import read_record
from lib.common.training import TrainingLoop, build_optimizer, optimizer_step
from lib.embed.losses import embedding_loss
from lib.embed.static import STATIC_CONFIG, StaticEncoder, StaticModelError, bags, pool


@dataclass(frozen=True)
class StaticTrainConfig:
    """Hyper-parameters of one static-model training run (the batch plan is drawn by the caller with batch_size and
    seed, e.g. lib.distill.embedding.mixture_plan(sizes, weights, steps, batch_size, seed))."""

    steps: int = 2000
    batch_size: int = 256
    lr: float = 3e-4  # of 1e-4, 3e-4, 1e-3 the best on unseen titles; 1e-3 overfits the training texts
    warmup_frac: float = 0.05
    weight_decay: float = 0.0  # decay pulls a row towards 0, not towards its distilled vector
    seed: int = 0
    train_weights: bool = False  # SIF weights stay the distilled ones: a title's unseen tokens keep their share

    def check(self) -> None:
        """Raise StaticModelError naming the first impossible field."""
        rules = [
            ("steps", self.steps >= 1, ">= 1"),
            ("batch_size", self.batch_size >= 1, ">= 1"),
            ("lr", self.lr > 0, "> 0"),
            ("warmup_frac", 0 <= self.warmup_frac < 1, "in [0, 1)"),
            ("weight_decay", self.weight_decay >= 0, ">= 0"),
        ]
        for name, ok, rule in rules:
            if not ok:
                raise StaticModelError(
                    f"StaticTrainConfig {name}={getattr(self, name)!r} must be {rule}; pass a value {rule}"
                )


class _Student(nn.Module):
    """The trainable part of a static model: rows [U, d] of the table (the rows the texts use), the SIF weights [W] of
    the tokens they use, and the map d -> D_t."""

    def __init__(self, rows: np.ndarray, weights: np.ndarray, target_width: int, train_weights: bool):
        super().__init__()
        self.rows = nn.Parameter(torch.from_numpy(rows.copy()))
        self.weights = nn.Parameter(torch.from_numpy(weights.copy()), requires_grad=train_weights)
        self.map = nn.Linear(rows.shape[1], target_width, bias=False)

    def forward(self, rows: torch.Tensor, offsets: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """[n, d] pooled embeddings (before the map) of titles given as local row and token indices [T]."""
        return pool(self.rows, rows, offsets, self.weights[tokens])


def train_static(
    init_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    texts: list[str],
    targets: np.ndarray,
    plan: list[np.ndarray],
    cfg: StaticTrainConfig,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 0,
    max_steps: int | None = None,
) -> dict:
    """Train the static model in `init_dir` (a model2vec folder) so its embedding of texts[i] matches targets[i]
    [N, D_t] in cosine, and save it to `out_dir` (replaced atomically) once every step has run.

    plan: index batches cfg.steps x [cfg.batch_size] into `texts`; the texts it draws are the training texts.
    Trained: the table rows of the tokens that occur in them (other rows keep their distilled values and reach the
    output through the map) and a bias-free map nn.Linear(d, D_t), started at the least-squares fit of the distilled
    embeddings of the training texts to their targets; with cfg.train_weights also the SIF weights of those tokens.
    checkpoint: a file written atomically every `checkpoint_every` steps and after the last; a call with the same
    settings resumes from it and reproduces the uninterrupted run bit for bit; other settings are refused naming the
    keys. max_steps: stop after that many steps of this call, as a kill would (nothing is saved to out_dir). Training
    takes seconds, so there is no progress bar. Saved: table [V, D_t] float32 = the trained table @ map^T, the SIF
    weights, the tokenizer, and static.json (the distillation's record plus "trained": the config and the number of
    training texts, and "dim"). Returns {"losses": DataFrame [step, loss], "steps" (this call), "seconds" (over every
    call), "complete"}.
    """
    cfg.check()
    if len(plan) != cfg.steps or any(len(b) != cfg.batch_size for b in plan):
        raise StaticModelError(
            f"the batch plan has {len(plan)} batches of sizes {sorted({len(b) for b in plan})}, "
            f"the config {cfg.steps} of {cfg.batch_size}; build it with the config's steps and "
            f"batch_size"
        )
    if targets.ndim != 2 or len(texts) != len(targets):
        raise StaticModelError(f"{len(texts)} texts but targets of shape {targets.shape}; give one target row per text")
    drawn = np.concatenate(plan)
    if drawn.min() < 0 or drawn.max() >= len(texts):
        raise StaticModelError(
            f"the batch plan draws indices {drawn.min()}..{drawn.max()} from {len(texts)} texts; "
            f"build it over these texts"
        )
    init = StaticEncoder(init_dir)
    keep = np.unique(drawn)  # the texts trained on: a source of weight 0 in the plan leaves no trace
    local = [np.searchsorted(keep, b) for b in plan]
    ids, _ = init.token_ids([texts[i] for i in keep])
    flat, starts = bags(ids)
    lens = np.diff(starts, append=len(flat))
    used_rows, row_of = np.unique(flat if init.mapping is None else init.mapping[flat], return_inverse=True)
    used_tokens, token_of = np.unique(flat, return_inverse=True)
    weights = np.ones(len(init.model.tokens), np.float32) if init.weights is None else init.weights
    student = _Student(init.table[used_rows], weights[used_tokens], targets.shape[1], cfg.train_weights)
    tgt = torch.as_tensor(targets[keep], dtype=torch.float32)

    def forward(idx: np.ndarray) -> torch.Tensor:
        n, s = lens[idx], starts[idx]
        off = np.concatenate([[0], np.cumsum(n)[:-1]])
        at = np.repeat(s - off, n) + np.arange(n.sum())
        return student(torch.from_numpy(row_of[at]), torch.from_numpy(off), torch.from_numpy(token_of[at]))

    with torch.no_grad():
        x = nn.functional.normalize(forward(np.arange(len(keep))), dim=1)
        # a truncated SVD: a table without PCA is singular (all-MiniLM-L6-v2's has 2 null directions), where the
        # exact fit's gain of ~1e7 along them turns every row update into a jump of the output
        fit = torch.linalg.lstsq(
            x.double(), nn.functional.normalize(tgt, dim=1).double(), rcond=1e-6, driver="gelsd"
        ).solution
        student.map.weight.copy_(fit.T)
    params = [p for p in student.parameters() if p.requires_grad]
    opt, sched = build_optimizer(params, cfg.lr, cfg.steps, round(cfg.warmup_frac * cfg.steps), cfg.weight_decay)
    config = {
        "init": _digest(init.table),
        "cfg": dataclasses.asdict(cfg),
        "texts": len(keep),
        "plan": _digest(drawn),
        "targets": _digest(targets),
    }
    loop = TrainingLoop(
        {"student": student, "optimizer": opt, "schedule": sched}, config, cfg.steps, checkpoint, checkpoint_every
    )

    def step(i: int) -> dict:
        terms = embedding_loss(forward(local[i]), tgt[local[i]], "cosine", proj=student.map)
        return {"step": i, **optimizer_step({"loss": terms["loss"]}, opt, sched, params)}

    done = loop.run(step, max_steps, progress=False)
    if loop.complete:
        _save(init, Path(out_dir), student, used_rows, used_tokens, {**dataclasses.asdict(cfg), "texts": len(keep)})
    return {
        "losses": pd.DataFrame(loop.rows, columns=["step", "loss"]),
        "steps": done,
        "seconds": loop.seconds,
        "complete": loop.complete,
    }


def _digest(x: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()[:16]


@torch.no_grad()
def _save(
    init: StaticEncoder, out_dir: Path, student: _Student, used_rows: np.ndarray, used_tokens: np.ndarray, trained: dict
) -> None:
    """Write the trained model: the distilled table with the trained rows put back, times the map (folded)."""
    table = init.table.copy()
    table[used_rows] = student.rows.numpy()
    folded = np.ascontiguousarray((torch.from_numpy(table) @ student.map.weight.T).numpy(), dtype=np.float32)
    model = init.model
    model.embedding = folded
    model.config["hidden_dim"] = int(folded.shape[1])
    if init.weights is not None or trained["train_weights"]:
        weights = np.ones(len(model.tokens), np.float32) if init.weights is None else init.weights.copy()
        weights[used_tokens] = student.weights.numpy()
        model.weights = weights
    record = read_record(
        init.path / STATIC_CONFIG,
        "static model record",
        "the trained model records only the initial model's folder name",
    ) or {"source": init.path.name}
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    model.save_pretrained(tmp)
    (tmp / STATIC_CONFIG).write_text(
        json.dumps({**record, "trained": trained, "dim": int(folded.shape[1])}, indent=1) + "\n"
    )
    if not np.array_equal(StaticEncoder(tmp).table, folded):
        shutil.rmtree(tmp)
        raise StaticModelError(f"the table written for {str(out_dir)!r} does not read back as trained; nothing saved")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(tmp, out_dir)
