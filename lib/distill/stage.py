"""Stage 5: MiniLM deep self-attention distillation (Wang et al. 2020, eq. 6-10) at a scale a CPU can run —
the experiment of notebook 05: `run_grid`, every student and ablation beside its undistilled control.

Teacher all-mpnet-base-v2 (12 x 768, 12 heads), teacher assistant all-MiniLM-L6-v2 (6 x 384, 12 heads),
BERT-architecture students (M x 384, 12 heads) that use the teacher's vocabulary. Parts: lib.distill.config (the
notebook's parameters, DistillParams), lib.distill.models (teacher, hooked encoders, students), lib.distill.losses,
lib.distill.cache (teacher targets), lib.distill.data, lib.distill.train (the loop), lib.distill.eval (probes, fidelity,
figures), lib.distill.lp (a student as stage 3's node embedder), lib.distill.verdicts (what the numbers say).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from lib.distill.cache import TeacherCache, TeacherTargetStore
from lib.distill.checkpoint import GridCheckpoint
from lib.distill.config import CONTROL, DistillParams
from lib.distill.eval import encode, evaluate, fidelity_of, head_accuracy, task_accuracy
from lib.distill.loss_spec import VARIANT_SPECS, DistillError, LossSpec
from lib.distill.models import Encoder, StudentShape, encoder_identity, make_student, save_sentence_transformer
from lib.distill.train import (
    DistillConfig,
    FinetuneConfig,
    RunHooks,
    TaskTargets,
    distill,
    finetune_teacher,
    predict_logits,
    train_student,
)

ABLATIONS = ("-Value-Rel", "Value-MSE", "+Layer-to-Layer")
METHOD_VARIANT = {
    "MiniLM": "minilm",
    "-Value-Rel": "no_value_relation",
    "Value-MSE": "value_mse",
    "+Layer-to-Layer": "layer_to_layer",
    "MiniLM (w/ TA)": "minilm",
}
RETRAINABLE = re.compile(r"(\d+)x(\d+) (MiniLM|-Value-Rel|Value-MSE|\+Layer-to-Layer) (random|assistant) s(\d+)")
"""A task-agnostic run `retrain_first_steps` can re-train alone, by its name in the grid: its own student, teacher and
seed (a "w/ TA" run needs its assistant, an embedding run the embedding targets)."""


def teacher_fidelity_embeddings(teacher: Encoder, data: dict, max_seq_len: int) -> dict:
    """The teacher's embeddings of the held-out fidelity sentences, {"fid_val": [N, 768], "fid_test": [N, 768]}: what
    every student's fidelity is scored against (lib.distill.eval.evaluate)."""
    return {f"fid_{s}": encode(teacher, data["fidelity"][s], max_seq_len) for s in ("val", "test")}


def _teacher_source(enc: Encoder, cfg: DistillParams, cache_root):
    """The disk cache when `cache_teacher_targets` (and the encoder has a folder), else a fresh in-memory cache."""
    if cfg.cache_teacher_targets and enc.source is not None:
        kw = {} if cache_root is None else {"root": cache_root}
        return TeacherTargetStore(
            enc, encoder_identity(enc), cfg.distill_max_seq_len, cfg.teacher_attention, precision=cfg.precision, **kw
        )
    return TeacherCache(enc, None, cfg.distill_max_seq_len, definition=cfg.teacher_attention, precision=cfg.precision)


@dataclass
class _Run:
    """What the stages of one `run_grid` call share."""

    cfg: DistillParams
    teacher: Encoder
    assistant: Encoder
    data: dict
    ck: GridCheckpoint
    hist: dict
    rows: list
    temb: dict
    passes: dict
    emb_targets: np.ndarray | None
    shared: object
    ta_shared: object
    cache_root: object
    save_dir: Path | None
    progress: bool
    wait: bool = True

    @property
    def base(self) -> dict:
        return shared_settings(self.cfg)

    @property
    def kd(self) -> dict:
        """DistillConfig settings of the task-specific runs' L_OUT."""
        c = self.cfg
        return dict(w_at=c.w_at, w_vr=c.w_vr, w_out=c.w_out, temperature=c.out_temperature, alpha=c.out_soft_share)


@dataclass(frozen=True)
class Cell:
    """One run of the grid: its seed, its student's init ('random', 'assistant') and layer count, and what it trains
    (task-specific: the loss combination of `task`, 'at+vr+out' or the control 'ce'; task-agnostic: the method,
    'MiniLM', 'AT+VR+EMB', 'no distillation', ...)."""

    seed: int
    init: str
    layers: int
    method: str
    task: str = ""


def _student(g: _Run, cell: Cell) -> Encoder:
    """The untrained student of `cell`, seeded by its seed, on the teacher's device."""
    c = g.cfg
    shape = StudentShape(cell.layers, c.student_hidden, c.student_heads)
    return make_student(
        g.teacher.tokenizer,
        shape,
        seed=cell.seed,
        init_from=g.assistant if cell.init == "assistant" else None,
        device=g.teacher.model.device,
    )


def shared_settings(c: DistillParams) -> dict:
    """DistillConfig settings every run of the grid of `c` shares."""
    return dict(
        batch_size=c.distill_batch_size,
        max_seq_len=c.distill_max_seq_len,
        warmup_frac=c.distill_warmup_frac,
        weight_decay=c.distill_weight_decay,
        relation_heads=c.relation_heads,
        teacher_attention=c.teacher_attention,
    )


def _never() -> bool:
    return False


def _once(g: _Run, name: str, make, curves: dict | None = None, redo=_never, wait: bool = True) -> dict | None:
    """The row of run `name`: finished earlier (maybe by another process on the same folder) or made now by
    `make(done)` under this process's claim on it. redo(): make it although it is finished (a model needed in memory
    or a saved folder gone). None when another process holds the claim and not `wait`."""
    done = g.ck.get(name, g.hist, curves)
    if done is not None and not redo():
        return done
    hold = g.ck.claim(name, wait)
    if hold is None:
        return None
    with hold:
        g.ck.refresh()  # the process that held the claim may have just finished the run
        done = g.ck.get(name, g.hist, curves)
        return done if done is not None and not redo() else make(done)


def _add(g: _Run, pending: list, name: str, make, curves: dict | None = None, redo=_never) -> None:
    """Append the row of run `name` to g.rows; a run another process is training leaves a gap, filled by _settle."""
    row = _once(g, name, make, curves, redo, wait=False)
    if row is None:
        pending.append((len(g.rows), name, make, curves, redo))
    g.rows.append(row)


def _settle(g: _Run, pending: list) -> None:
    """Fill the gaps _add left, in grid order: wait for the other process's run (or make it, if that process died);
    with g.wait False (a helper worker) a gap still held elsewhere stays empty."""
    for i, name, make, curves, redo in pending:
        g.rows[i] = _once(g, name, make, curves, redo, wait=False)
        if g.rows[i] is None and g.wait:
            print(f"waiting for {name!r}: another process on this checkpoint folder is training it", flush=True)
            g.rows[i] = _once(g, name, make, curves, redo, wait=True)


def _task_teachers(g: _Run) -> dict:
    """Task teachers: fine-tuned once per task (seed of the first run), shared by every seed and student."""
    data = g.data
    task_targets = {}
    for task in g.cfg.tasks:
        df = data[task]["train"]
        n_cls = int(max(data[task][s].label.max() for s in ("train", "val", "test"))) + 1
        tt = TaskTargets(df.text.tolist(), df.label.values, n_cls)
        row = dict(_once(g, f"teacher fine-tuned ({task})", partial(_task_teacher_run, g, task, tt)))
        tt.teacher_logits = np.asarray(row.pop("_logits"), dtype=np.float32)
        task_targets[task] = tt
        g.rows.append(row)
    return task_targets


def _task_teacher_run(g: _Run, task: str, tt: TaskTargets, done) -> dict:
    c = g.cfg
    ft = finetune_teacher(
        g.teacher,
        tt,
        FinetuneConfig(
            steps=c.teacher_ft_steps,
            batch_size=c.distill_batch_size,
            max_seq_len=c.distill_max_seq_len,
            lr=c.teacher_ft_lr,
            layers=c.teacher_ft_layers,
            seed=c.distill_seeds[0],
        ),
        g.progress,
    )
    logits = predict_logits(ft, tt.texts, c.distill_max_seq_len)
    row = {
        "model": f"teacher fine-tuned ({task})",
        "student": "12x768",
        "stage": "reference",
        "method": "teacher fine-tuned",
        "task": task,
        "init": "",
        "seed": -1,
        "task_train": float((logits.argmax(1) == tt.labels).mean()),
        **head_accuracy(ft, g.data, task, c.distill_max_seq_len),
        "_logits": logits.tolist(),
    }
    return g.ck.put(row, g.hist)


def _task_specific(g: _Run, task_targets: dict) -> None:
    """Task-specific rows: every combination of `task_losses` on `task_students`, per seed, init and task."""
    c, pending = g.cfg, []
    for seed in c.distill_seeds:
        tcache = g.shared or _teacher_source(g.teacher, c, g.cache_root)
        for init in c.student_inits:
            for task in c.tasks:
                for m in c.task_students:
                    for combo in c.task_losses:
                        name = f"{m}x{c.student_hidden} {task} {combo} {init} s{seed}"
                        _add(
                            g,
                            pending,
                            name,
                            partial(
                                _task_specific_run,
                                g,
                                name,
                                tcache,
                                task_targets[task],
                                Cell(seed, init, m, combo, task),
                            ),
                        )
    _settle(g, pending)


def _task_specific_run(g: _Run, name: str, tcache, tt: TaskTargets, cell: Cell, done) -> dict:
    c, seed, init, task, m, combo = g.cfg, cell.seed, cell.init, cell.task, cell.layers, cell.method
    spec = c.loss_spec(combo)
    st = _student(g, cell)
    train_cfg = DistillConfig(steps=c.task_steps, lr=c.task_lr, seed=seed, losses=combo, **g.base, **g.kd)
    g.hist[name] = distill(tcache, st, tt.texts, train_cfg, progress=g.progress, task=tt)
    g.passes[id(tcache)] = tcache
    return g.ck.put(
        {
            "model": name,
            "student": f"{m}x{c.student_hidden}",
            "stage": "task-specific",
            "method": "control (task loss only)" if combo == CONTROL else "distilled",
            "task": task,
            "combo": combo,
            "losses": spec.label(),
            "init": init,
            "seed": seed,
            "final_loss": float(g.hist[name].loss.iloc[-5:].mean()),
            **task_accuracy(st, g.data, task, c.distill_max_seq_len, seed),
            **fidelity_of(st, g.data, g.temb, c.distill_max_seq_len),
        },
        g.hist,
    )


def embedding_method(combo: str) -> str:
    """The `method` of a task-agnostic run with L_EMB: 'at+vr+emb' -> 'AT+VR+EMB'."""
    return "+".join(t.strip().upper() for t in combo.split("+"))


def embedding_targets(cfg: DistillParams, teacher: Encoder, assistant: Encoder, texts: list[str]) -> np.ndarray:
    """L_EMB's targets [N, D_e]: the mean-pooled sentence embeddings of `texts` by `cfg.embedding_target` (minilm:
    the assistant all-MiniLM-L6-v2, 384; teacher: all-mpnet-base-v2, 768), cut at the grid's token limit."""
    with torch.no_grad():
        return encode(assistant if cfg.embedding_target == "minilm" else teacher, texts, cfg.distill_max_seq_len)


def _task_agnostic(g: _Run) -> dict[str, pd.DataFrame]:
    """Task-agnostic rows: MiniLM, the ablations, w/ TA, the L_EMB combinations and the controls per seed and init;
    returns the learning curves."""
    c, pending = g.cfg, []
    curves: dict[str, pd.DataFrame] = {}
    abl_inits, abl_seeds = c.ablation_inits or c.student_inits, c.ablation_seeds or c.distill_seeds
    for seed in c.distill_seeds:
        tcache = g.shared or _teacher_source(g.teacher, c, g.cache_root)
        for init in c.student_inits:
            trained = {}
            plan = [(m, "MiniLM") for m in c.students]
            if init in abl_inits and seed in abl_seeds:
                plan += [(m, meth) for m in c.ablation_students for meth in ABLATIONS]
            plan += [(m, "MiniLM (w/ TA)") for m in c.ta_students]
            plan += [(m, embedding_method(combo)) for m in c.students for combo in c.embedding_methods]
            plan += [(m, "no distillation") for m in c.students]
            saved = {"MiniLM", *map(embedding_method, c.embedding_methods)}
            for m, meth in plan:
                name = f"{m}x{c.student_hidden} {meth} {init} s{seed}"
                folder = (
                    Path(g.save_dir) / student_folder(m, c.student_hidden, seed, meth, init)
                    if (
                        g.save_dir is not None and (meth in saved or (meth == "no distillation" and m in c.lp_students))
                    )
                    else None
                )
                make = partial(_agnostic_run, g, name, tcache, trained, curves, Cell(seed, init, m, meth), folder)
                # a finished row whose saved model is missing is trained again: every run is seeded, so it reproduces
                # the same student
                redo = partial(lambda f: f is not None and not (f / "config.json").is_file(), folder)
                if meth == "MiniLM" and m == 6 and c.ta_source == "distilled" and c.ta_students:
                    # the 6x384 teacher assistant is needed in memory by the w/ TA rows that follow: always trained
                    g.rows.append(_once(g, name, make, curves, lambda: True))
                else:
                    _add(g, pending, name, make, curves, redo)
    _settle(g, pending)
    return curves


def _agnostic_run(
    g: _Run, name: str, tcache, trained: dict, curves: dict, cell: Cell, folder: Path | None, done
) -> dict:
    c, assistant, seed, init, m, meth = g.cfg, g.assistant, cell.seed, cell.init, cell.layers, cell.method
    st = _student(g, cell)
    combo = {embedding_method(x): x for x in c.embedding_methods}.get(meth)
    spec = (
        VARIANT_SPECS[METHOD_VARIANT[meth]]
        if meth in METHOD_VARIANT
        else (c.embedding_spec(combo) if combo else LossSpec())
    )
    trained_for = {}
    if meth != "no distillation":
        if meth == "MiniLM (w/ TA)":
            src = (
                (g.ta_shared or _teacher_source(assistant, c, g.cache_root))
                if c.ta_source == "pretrained"
                else TeacherCache(
                    trained[6], None, c.distill_max_seq_len, definition=c.teacher_attention, precision=c.precision
                )
            )
        else:
            src = tcache
        if combo:
            train_cfg = DistillConfig(
                steps=c.distill_steps,
                lr=c.distill_lr,
                seed=seed,
                losses=combo,
                w_at=c.w_at,
                w_vr=c.w_vr,
                w_emb=c.w_emb,
                emb_loss=c.embedding_loss,
                **g.base,
            )
        else:
            train_cfg = DistillConfig(
                variant=METHOD_VARIANT[meth], steps=c.distill_steps, lr=c.distill_lr, seed=seed, **g.base
            )
        hooks = RunHooks(
            checkpoint=g.ck.steps_file(name) if c.checkpoint_every else None,
            checkpoint_every=c.checkpoint_every,
            eval_every=c.eval_every,
            evaluate=lambda enc: evaluate(enc, g.data, g.temb, c.distill_max_seq_len, seed),
        )
        res = train_student(
            src,
            st,
            g.data["transfer"],
            train_cfg,
            progress=g.progress,
            hooks=hooks,
            embedding=g.emb_targets if combo else None,
        )
        g.hist[name] = res["losses"]
        if len(res["curve"]):
            curves[name] = res["curve"]
        trained_for = {"steps": len(res["losses"]), "train_s": res["seconds"]}
        g.passes[id(src)] = src
    if meth == "MiniLM":
        trained[m] = st
    if folder is not None:
        save_sentence_transformer(st, folder, c.distill_max_seq_len)
    losses = spec.label() + (f" → {c.embedding_target}" if combo else "")
    return done or g.ck.put(
        {
            "model": name,
            "student": f"{m}x{c.student_hidden}",
            "stage": "task-agnostic",
            "method": meth,
            "losses": losses,
            "init": init,
            "seed": seed,
            "final_loss": float(g.hist[name].loss.iloc[-5:].mean()) if name in g.hist else float("nan"),
            **trained_for,
            **evaluate(st, g.data, g.temb, c.distill_max_seq_len, seed),
        },
        g.hist,
        curves,
    )


def run_grid(
    cfg: DistillParams,
    teacher: Encoder,
    assistant: Encoder,
    data: dict,
    save_dir: Path | None = None,
    progress: bool = True,
    cache_root=None,
    checkpoint: Path | None = None,
    wait: bool = True,
) -> tuple[pd.DataFrame, dict, dict]:
    """Distil and evaluate the grid of notebook 05's parameters `cfg`; returns (results, {run name: loss history},
    info).

    Task-specific rows come first (they carry the comparison with the controls), then the task-agnostic ones.
    Task-agnostic rows (transfer corpus, linear probes): per seed and init, every student with MiniLM (L_AT + L_VR),
    the ablations on `ablation_students` (only for `ablation_inits` x `ablation_seeds`; [] = all), w/ TA on
    `ta_students`, every combination of `embedding_methods` (L_EMB against `embedding_target`'s embeddings of the
    transfer corpus, method 'AT+VR+EMB' and so on) and the undistilled control of every student. With `eval_every` > 0
    each distilled run is also evaluated every that many steps (info["curves"]: run name -> DataFrame [step, metrics]);
    with `checkpoint_every` > 0 (and a checkpoint folder) a run interrupted mid-way resumes from its last step
    checkpoint. Task-specific rows: per task, seed and init, every combination of `task_losses` on `task_students`,
    started from the same init ('ce' = the control: hard labels only), scored by the student's own head; L_OUT's soft
    targets come from the teacher fine-tuned on the task (reference row 'teacher fine-tuned'). info: teacher passes,
    wall time and learning curves. Distilled rows carry `steps` and `train_s` (training wall time over every resumed
    call). reuse_runs: the finished runs of that published folder are taken instead of trained (GridCheckpoint.adopt;
    their rows carry `reused_from`).
    checkpoint: a folder where finished runs are kept, so a killed grid resumes (see GridCheckpoint). Several processes
    may work on one checkpoint folder at once (lib.distill.worker): each run is trained by whichever claims it first;
    the others skip it and, with `wait`, take its row when it is done (wait=False: leave it out of the results).
    """
    t0 = time.perf_counter()
    ck = GridCheckpoint(checkpoint, cfg)
    if cfg.reuse_runs:
        ck.adopt(cfg.reuse_runs)
    temb = teacher_fidelity_embeddings(teacher, data, cfg.distill_max_seq_len)
    shared = _teacher_source(teacher, cfg, cache_root) if cfg.cache_teacher_targets else None
    ta_shared = _teacher_source(assistant, cfg, cache_root) if cfg.cache_teacher_targets else None
    emb = embedding_targets(cfg, teacher, assistant, data["transfer"]) if cfg.embedding_methods else None
    g = _Run(
        cfg,
        teacher,
        assistant,
        data,
        ck,
        {},
        [],
        temb,
        {},
        emb,
        shared,
        ta_shared,
        cache_root,
        save_dir,
        progress,
        wait,
    )
    for name, enc, student, method in (
        ("teacher (mpnet 12x768)", teacher, "12x768", "teacher"),
        ("assistant (MiniLM-L6 6x384)", assistant, "6x384", "assistant (pre-trained)"),
    ):
        g.rows.append(
            _once(
                g,
                name,
                lambda _, name=name, enc=enc, student=student, method=method: ck.put(
                    {
                        "model": name,
                        "student": student,
                        "stage": "reference",
                        "method": method,
                        "init": "",
                        "seed": -1,
                        **evaluate(enc, data, temb, cfg.distill_max_seq_len, 0, is_teacher=enc is teacher),
                    },
                    g.hist,
                ),
            )
        )
    # task-specific stage first: it answers the goal (distilled vs control over seeds) if a long grid is cut short
    _task_specific(g, _task_teachers(g))
    curves = _task_agnostic(g)
    info = {
        "teacher_sentences": int(sum(s.teacher_sentences for s in g.passes.values())),
        "wall_s": time.perf_counter() - t0,
        "curves": curves,
    }
    return pd.DataFrame([r for r in g.rows if r is not None]), g.hist, info


# method -> the kind that starts its saved folder's name; any other method's kind is its name lowercased, "+" -> "_"
FOLDER_KINDS = {"MiniLM": "student", "no distillation": "control"}


def student_folder(layers: int, hidden: int, seed: int, method: str = "MiniLM", init: str = "random") -> str:
    """Folder name of a saved task-agnostic student: the MiniLM one, one trained with L_EMB ('AT+VR+EMB' ->
    'at_vr_emb_...'), or its undistilled control (for link prediction)."""
    kind = FOLDER_KINDS.get(method) or method.lower().replace("+", "_")
    return f"{kind}_{layers}x{hidden}_{init}_s{seed}"


def folder_method(kind: str) -> str:
    """The method of a saved student from its folder's kind (lib.common.published.parse_student_folder), student_folder
    read backwards: "student" -> "MiniLM", "control" -> "no distillation", "at_vr_emb" -> "AT+VR+EMB"."""
    return {k: m for m, k in FOLDER_KINDS.items()}.get(kind) or kind.upper().replace("_", "+")


def retrain_first_steps(
    cfg: DistillParams,
    run: str,
    steps: int,
    teacher: Encoder,
    assistant: Encoder,
    data: dict,
    cache_root=None,
    progress: bool = True,
) -> pd.DataFrame:
    """The learning curve of the grid's task-agnostic run `run` (RETRAINABLE, e.g. "3x384 MiniLM random s1") re-trained
    alone for its first `steps` steps: the student, teacher targets and batches of the grid `cfg` describes and the
    whole run's learning-rate schedule, stopped by RunHooks.max_steps as a kill would, so each curve point (every
    `eval_every` steps, and after the last when `steps` is the whole run) is the grid's own. data: build_datasets of
    `cfg` (its first distillation seed); cache_root: the teacher-target store's folder (None: the shared cache). Returns
    [points, 1 + 6]: step and the metrics of lib.distill.eval.evaluate."""
    match = RETRAINABLE.fullmatch(run)
    if match is None:
        raise DistillError(
            f"run {run!r} cannot be re-trained alone; name a task-agnostic run of the grid's results.csv as "
            "'<layers>x<hidden> <MiniLM|-Value-Rel|Value-MSE|+Layer-to-Layer> <random|assistant> s<seed>'"
        )
    layers, hidden, method, init, seed = int(match[1]), int(match[2]), match[3], match[4], int(match[5])
    if hidden != cfg.student_hidden or steps < 1 or steps > cfg.distill_steps:
        raise DistillError(
            f"run {run!r} for {steps} steps is not in this grid ({cfg.student_hidden}-wide students, "
            f"{cfg.distill_steps} steps); name one of its runs and 1 to {cfg.distill_steps} steps"
        )
    temb = teacher_fidelity_embeddings(teacher, data, cfg.distill_max_seq_len)
    student = make_student(
        teacher.tokenizer,
        StudentShape(layers, cfg.student_hidden, cfg.student_heads),
        seed=seed,
        init_from=assistant if init == "assistant" else None,
        device=teacher.model.device,
    )
    train_cfg = DistillConfig(
        variant=METHOD_VARIANT[method], steps=cfg.distill_steps, lr=cfg.distill_lr, seed=seed, **shared_settings(cfg)
    )
    hooks = RunHooks(
        eval_every=cfg.eval_every,
        max_steps=steps,
        evaluate=lambda enc: evaluate(enc, data, temb, cfg.distill_max_seq_len, seed),
    )
    res = train_student(
        _teacher_source(teacher, cfg, cache_root), student, data["transfer"], train_cfg, progress=progress, hooks=hooks
    )
    curve = res["curve"]
    if steps == cfg.distill_steps and (curve.empty or curve["step"].iloc[-1] != steps):
        # a grid without learning curves (eval_every 0) scores each run once, after its last step: its results row
        student.model.eval()
        curve = pd.concat([curve, pd.DataFrame([{"step": steps, **hooks.evaluate(student)}])], ignore_index=True)
    return curve
