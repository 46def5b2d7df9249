"""The one resumable training loop of every stage, and the one optimiser builder.

A trainer builds its modules and their optimiser (`build_optimizer`), names everything that has a state
(`parts`: modules, optimisers, schedules, gradient scalers: anything with state_dict / load_state_dict) and hands
`TrainingLoop.run` a function that performs one optimiser step and returns its log record. The loop

- resumes from `checkpoint` when the file is there and was made with the same `config` (other settings are refused by
  lib.common.runinfo.refuse_other_settings, naming the keys); an unreadable file, or one of another layout or whose
  parts do not fit, is moved aside with lib.common.paths.move_aside's warning and training starts over;
- runs steps `step .. steps - 1`, reseeding torch before each step from `step_seed(step)` when given (so a step
  draws the same dropout in any process), otherwise carrying the torch RNG state (CPU, and CUDA where used) through
  its checkpoints (the trainer seeds torch once before it builds its modules);
- calls `end_of_period(loop)` after every `period` steps and after the last (a learning-curve point, a validation
  epoch); a True return stops the run, and a resumed run of a stopped one stays stopped (early stopping);
- writes the checkpoint atomically every `checkpoint_every` steps, at period ends when asked, and after the last
  step; `max_steps` stops after that many steps of this call without writing, as a kill would;
- shows a tqdm bar (the record's "loss" as its postfix).

Every stage's checkpoint has one layout: {"layout", "config", "step", "seconds", "stopped", "parts": {name:
state_dict}, "rng": {"cpu", "cuda"}, "rows": [record per step], "extra": {the trainer's own resumable data}}.

Step-based (lib.distill.train, lib.distill.embedding, lib.kd.train)::

    opt, sched = build_optimizer(params, lr=1e-3, steps=len(plan), warmup_steps=10, weight_decay=0.01)
    loop = TrainingLoop({"model": model, "optimizer": opt, "schedule": sched}, config, len(plan),
                        checkpoint=path, checkpoint_every=100)

    def step(i: int) -> dict:
        return {"step": i, **optimizer_step(loss_terms(model, plan[i]), opt, sched, params)}

    loop.run(step, desc="student")
    loop.rows, loop.complete   # every step's record over every call; whether all steps ran

Epoch-based with validation, best-epoch selection and early stopping::

    loop = TrainingLoop(parts, config, epochs * per_epoch, checkpoint=path, checkpoint_every=50,
                        extra={"val": [], "best": None})

    def end_of_epoch(loop) -> bool:
        epoch = loop.step // per_epoch
        loop.extra["val"].append({"epoch": epoch, **validate(model)})
        best = max(loop.extra["val"], key=lambda r: r["auc"])["epoch"]
        if best == epoch:  # saved with the checkpoint, so a resumed run can go back to it
            loop.extra["best"] = (epoch, {k: v.detach().clone() for k, v in model.state_dict().items()})
        return epoch - best >= patience

    loop.run(step, period=per_epoch, end_of_period=end_of_epoch, checkpoint_period_ends=True)
    model.load_state_dict(loop.extra["best"][1])
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable
from pathlib import Path

import torch
from tqdm.auto import tqdm

from lib.common.paths import move_aside
from lib.common.runinfo import refuse_other_settings
from lib.common.tensorfiles import read_checkpoint, save_state

LAYOUT = "training-loop/1"
KEYS = ("layout", "config", "step", "seconds", "stopped", "parts", "rng", "rows", "extra")
STARTS_OVER = "training starts over"
SCHEDULES = ("linear", "constant")


def _warmup_then(step: int, warmup: int, steps: int, decay: bool) -> float:
    """The learning-rate factor at `step`: linear from 0 to 1 over `warmup` steps, then linear to 0 at `steps`
    (decay) or 1 (the arithmetic of transformers' linear and constant schedules with warm-up)."""
    if step < warmup:
        return float(step) / float(max(1, warmup))
    if not decay:
        return 1.0
    return max(0.0, float(steps - step) / float(max(1, steps - warmup)))


def build_optimizer(
    params: list,
    lr: float,
    steps: int,
    warmup_steps: int = 0,
    weight_decay: float = 0.0,
    schedule: str = "linear",
    fused: bool = True,
    decay_vectors: bool = False,
):
    """AdamW over `params` and its learning-rate schedule (a LambdaLR to step once per optimiser step).

    weight_decay: applied to matrices only (parameters of 2+ dimensions; biases and norms are not decayed) unless
    decay_vectors; 0 gives Adam. fused: one kernel per parameter group, used where every parameter is a float tensor on
    CPU or CUDA. schedule: "linear" (warm-up over `warmup_steps`, then linear decay to 0 at `steps`) or "constant"
    (the same warm-up, then the full rate). Returns (optimizer, schedule).
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule={schedule!r} is unknown; use one of {SCHEDULES}")
    if weight_decay and not decay_vectors:
        groups = [
            {"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
        ]
    else:
        groups = [{"params": list(params), "weight_decay": weight_decay}]
    fused = fused and all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params)
    opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), fused=fused or None)
    factor = functools.partial(_warmup_then, warmup=warmup_steps, steps=steps, decay=schedule == "linear")
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, factor)


def optimizer_step(terms: dict, opt, sched, params: list | None = None, clip: float = 1.0) -> dict[str, float]:
    """One update from a step's loss terms: zero_grad, backward of terms["loss"], clip the gradient norm of `params`
    to `clip` (no clipping when params is None), step, schedule; returns the terms as floats."""
    opt.zero_grad()
    terms["loss"].backward()
    if params is not None:
        torch.nn.utils.clip_grad_norm_(params, clip)
    opt.step()
    sched.step()
    return {k: float(v.detach()) for k, v in terms.items()}


def _rng_state() -> dict:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    return {"cpu": torch.get_rng_state(), "cuda": cuda}


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["cpu"])
    if state["cuda"] and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


class TrainingLoop:
    """One training run of `steps` optimiser steps over `parts` (name -> object with state_dict / load_state_dict),
    resumed from `checkpoint` when it holds this run (see the module docstring).

    config: the settings the run depends on (JSON-able; a checkpoint made with others is refused). extra: the
    trainer's own resumable data (torch-saveable: lists of records, a best state), read back as `loop.extra`.
    step_seed(step) -> int: reseed torch before each step (None: carry the RNG state in the checkpoint). writer:
    whether this process writes the checkpoint (rank 0 of a data-parallel job; every rank resumes from it).
    read_config(stored) -> a checkpoint's stored config under the current names (lib.common.published translates
    what published runs wrote), before it is compared with `config`.

    State: `step` (steps finished over every call), `seconds` (time in the step function over every call), `rows`
    (the step records over every call), `extra`, `stopped` (an end-of-period hook asked to stop), `resumed_from`
    (the step this process started at), `done` (steps of this process).
    """

    def __init__(
        self,
        parts: dict,
        config: dict,
        steps: int,
        checkpoint: str | Path | None = None,
        checkpoint_every: int = 0,
        extra: dict | None = None,
        step_seed: Callable[[int], int] | None = None,
        writer: bool = True,
        read_config: Callable[[dict], dict] | None = None,
    ):
        if steps < 0 or checkpoint_every < 0:
            raise ValueError(f"steps={steps}, checkpoint_every={checkpoint_every} must be >= 0")
        self.parts, self.config, self.steps, self.every = parts, config, steps, checkpoint_every
        self.checkpoint = Path(checkpoint) if checkpoint else None
        self.step_seed, self.writer, self.read_config = step_seed, writer, read_config
        self.step, self.seconds, self.rows, self.extra, self.stopped, self.done = (
            0,
            0.0,
            [],
            dict(extra or {}),
            False,
            0,
        )
        if self.checkpoint is not None:
            self._resume()
        self.resumed_from = self.step

    @property
    def complete(self) -> bool:
        """Whether the run is over: every step ran, or an end-of-period hook stopped it."""
        return self.stopped or self.step >= self.steps

    def _resume(self) -> None:
        path = self.checkpoint
        ck = read_checkpoint(path)  # an unreadable file is moved aside there, with the same warning
        if ck is None:
            return
        if not isinstance(ck, dict) or ck.get("layout") != LAYOUT or set(ck) != set(KEYS):
            move_aside(path, "checkpoint", f"it is not a {LAYOUT} checkpoint", STARTS_OVER)
            return
        if set(ck["parts"]) != set(self.parts):
            move_aside(
                path,
                "checkpoint",
                f"it holds the parts {sorted(ck['parts'])}, this run has {sorted(self.parts)}",
                STARTS_OVER,
            )
            return
        stored = self.read_config(ck["config"]) if self.read_config else ck["config"]
        refuse_other_settings(
            f"checkpoint {path}", stored, self.config, "use another output folder, or delete the file to start over"
        )
        fresh = {name: copy.deepcopy(part.state_dict()) for name, part in self.parts.items()}
        for name, part in self.parts.items():
            try:
                part.load_state_dict(ck["parts"][name])
            except (RuntimeError, ValueError, KeyError, IndexError) as e:
                for n, p in self.parts.items():  # a part that failed half-way: every part goes back to its start
                    p.load_state_dict(fresh[n])
                move_aside(
                    path, "checkpoint", f"its {name} does not fit this run: {str(e).splitlines()[0][:120]}", STARTS_OVER
                )
                return
        _set_rng_state(ck["rng"])
        self.step, self.seconds, self.stopped = ck["step"], ck["seconds"], ck["stopped"]
        self.rows, self.extra = ck["rows"], {**self.extra, **ck["extra"]}

    def save(self) -> Path | None:
        """Write the checkpoint (atomically; only the writer, only with a checkpoint path); returns its path."""
        if self.checkpoint is None or not self.writer:
            return None
        return save_state(
            self.checkpoint,
            {
                "layout": LAYOUT,
                "config": self.config,
                "step": self.step,
                "seconds": self.seconds,
                "stopped": self.stopped,
                "parts": {name: part.state_dict() for name, part in self.parts.items()},
                "rng": _rng_state(),
                "rows": self.rows,
                "extra": self.extra,
            },
        )

    def run(
        self,
        step_fn: Callable[[int], dict | None],
        max_steps: int | None = None,
        period: int = 0,
        end_of_period: Callable[[TrainingLoop], bool | None] | None = None,
        checkpoint_period_ends: bool = False,
        progress: bool = True,
        desc: str = "",
    ) -> int:
        """Run the remaining steps: step_fn(step) performs one optimiser step and returns its record (appended to
        `rows`; None appends nothing). Modules among the parts are in training mode during the run and in eval mode
        after it. Returns the number of steps this call ran."""
        modules = [p for p in self.parts.values() if isinstance(p, torch.nn.Module)]
        done = 0
        for m in modules:
            m.train()
        try:
            bar = tqdm(
                range(self.step, self.steps),
                desc=desc,
                disable=not progress or self.stopped,
                leave=False,
                initial=self.step,
                total=self.steps,
            )
            for step in bar if not self.stopped else ():
                if max_steps is not None and done >= max_steps:
                    break
                if self.step_seed is not None:
                    torch.manual_seed(self.step_seed(step))
                t0 = time.perf_counter()
                rec = step_fn(step)
                self.seconds += time.perf_counter() - t0
                if rec is not None:
                    self.rows.append(rec)
                    if progress and "loss" in rec:
                        bar.set_postfix(loss=f"{rec['loss']:.4g}", refresh=False)
                self.step, done = step + 1, done + 1
                last = self.step == self.steps
                period_end = bool(period) and (self.step % period == 0 or last)
                if period_end and end_of_period is not None and end_of_period(self):
                    self.stopped = True
                if (
                    (self.every and self.step % self.every == 0)
                    or last
                    or self.stopped
                    or (period_end and checkpoint_period_ends)
                ):
                    self.save()
                if self.stopped:
                    break
        finally:
            for m in modules:
                m.eval()
        self.done += done
        return done
