"""Stage 5: MiniLM deep self-attention distillation (Wang et al. 2020, eq. 6-10) at a scale a CPU can run —
the experiment of notebook 05: its parameters and `run_grid`, every student and ablation beside its undistilled control.

Teacher all-mpnet-base-v2 (12 x 768, 12 heads), teacher assistant all-MiniLM-L6-v2 (6 x 384, 12 heads), BERT-architecture
students (M x 384, 12 heads) that use the teacher's vocabulary. Parts: lib.distill.models (teacher, hooked encoders,
students), lib.distill.losses, lib.distill.cache (teacher targets), lib.distill.data, lib.distill.train (the loop),
lib.distill.eval (probes, fidelity, figures), lib.distill.lp (a student as stage 3's node embedder),
lib.distill.verdicts (what the numbers say).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from lib.common.device import PRECISIONS
from lib.distill.cache import ATTENTION_DEFINITIONS, TeacherCache, TeacherTargetStore
from lib.distill.checkpoint import GridCheckpoint
from lib.distill.data import build_datasets, load_rotten_tomatoes, load_vital_articles, split_ids, split_sentences  # noqa: F401
from lib.distill.eval import encode, evaluate, fidelity_of, head_accuracy, task_accuracy
from lib.distill.losses import VARIANT_SPECS, DistillError, LossSpec
from lib.distill.lp import REFERENCE as LP_REFERENCE  # noqa: F401
from lib.distill.lp import link_prediction_available, link_prediction_eval, lp_table, lp_verdicts  # noqa: F401
from lib.distill.models import Encoder, encoder_identity, make_student, save_sentence_transformer
from lib.distill.train import (
    DistillConfig,
    FinetuneConfig,
    TaskTargets,
    distill,
    finetune_teacher,
    predict_logits,
    train_student,
)

ABLATIONS = ("-Value-Rel", "Value-MSE", "+Layer-to-Layer")
METHOD_VARIANT = {"MiniLM": "minilm", "-Value-Rel": "no_value_relation", "Value-MSE": "value_mse",
                  "+Layer-to-Layer": "layer_to_layer", "MiniLM (w/ TA)": "minilm"}
TASKS = ("polarity", "topic")
CONTROL = "ce"

NOTEBOOK_PARAMS = ("run_dir", "device", "distill_seeds", "students", "student_hidden", "student_heads", "relation_heads",
                   "teacher_attention", "student_inits", "ablation_students", "ta_students", "ta_source",
                   "transfer_sentences", "distill_steps", "distill_batch_size", "distill_max_seq_len", "distill_lr",
                   "distill_warmup_frac", "distill_weight_decay", "cache_teacher_targets", "tasks", "task_students",
                   "task_losses", "task_steps", "task_lr", "w_at", "w_vr", "w_out", "kd_temperature", "kd_alpha",
                   "teacher_ft_steps", "teacher_ft_layers", "teacher_ft_lr", "task_train", "task_eval",
                   "fidelity_sentences", "speed_sentences", "save_students", "lp_students", "lp_epochs", "lp_protocols",
                   "precision", "ablation_inits", "ablation_seeds", "eval_every", "checkpoint_every")
"""Notebook 05's parameters; names shared with other stages' generic keys carry a `distill_` prefix, dropped in `p`."""


def check_params(p: dict) -> None:
    """sanity_checks before any work: every impossible combination names its key and the fix."""
    from lib.common.params import require

    require(len(p["seeds"]) >= 1, "seeds", p["seeds"], "give at least one seed")
    require(all(1 <= m <= 12 for m in p["students"]), "students", p["students"], "student layer counts must be 1..12")
    require(set(p["ablation_students"]) <= set(p["students"]), "ablation_students", p["ablation_students"],
            "ablations run on students that are in `students`")
    require(set(p.get("ablation_inits", [])) <= set(p["student_inits"]), "ablation_inits", p.get("ablation_inits"),
            "list inits of `student_inits` ([] = every init)")
    require(set(p.get("ablation_seeds", [])) <= set(p["seeds"]), "ablation_seeds", p.get("ablation_seeds"),
            "list seeds of `distill_seeds` ([] = every seed)")
    require(p.get("eval_every", 0) >= 0 and p.get("checkpoint_every", 0) >= 0, "eval_every", p.get("eval_every"),
            "eval_every and checkpoint_every are step counts >= 0 (0: off)")
    require(set(p["ta_students"]) <= set(p["students"]), "ta_students", p["ta_students"], "must be a subset of `students`")
    require(p["ta_source"] in ("pretrained", "distilled"), "ta_source", p["ta_source"], "use 'pretrained' or 'distilled'")
    require(p["ta_source"] == "pretrained" or 6 in p["students"], "ta_source", p["ta_source"],
            "'distilled' uses the 6-layer MiniLM student as assistant; add 6 to `students`")
    require(all(m < 6 for m in p["ta_students"]) or p["ta_source"] == "pretrained", "ta_students", p["ta_students"],
            "a distilled 6-layer assistant can only teach students with fewer than 6 layers")
    require(len(p["student_inits"]) >= 1 and set(p["student_inits"]) <= {"random", "assistant"}, "student_inits",
            p["student_inits"], "list 'random' and/or 'assistant'")
    require(p["student_hidden"] % p["relation_heads"] == 0 and 768 % p["relation_heads"] == 0, "relation_heads",
            p["relation_heads"], "must divide both the teacher (768) and the student hidden size")
    require(p["teacher_attention"] in ATTENTION_DEFINITIONS, "teacher_attention", p["teacher_attention"],
            f"use one of {ATTENTION_DEFINITIONS}")
    require(p["teacher_attention"] == "qk" or p["relation_heads"] == 12, "relation_heads", p["relation_heads"],
            "teacher_attention='eager' is the teacher's own 12-head attention; use 12 or teacher_attention='qk'")
    require(p["student_hidden"] % p["student_heads"] == 0, "student_heads", p["student_heads"], "must divide student_hidden")
    require(p["transfer_sentences"] >= p["batch_size"], "transfer_sentences", p["transfer_sentences"],
            "need at least one batch of transfer sentences")
    require(set(p.get("lp_students", [])) <= set(p["students"]) and (p.get("save_students", True) or not p.get("lp_students")),
            "lp_students", p.get("lp_students"), "link prediction uses saved MiniLM students: list members of `students` "
            "and keep save_students=True")
    from lib.linkpred.sampling import PROTOCOLS

    require(not p.get("lp_students") or (p.get("lp_protocols") and set(p["lp_protocols"]) <= set(PROTOCOLS)),
            "lp_protocols", p.get("lp_protocols"), f"list protocols of {PROTOCOLS} (the clean one: 'leak_free')")
    require(p["task_train"] >= 24 and p["task_eval"] >= 12, "task_train", p["task_train"],
            "use >= 24 training and >= 12 evaluation texts per task so each class can appear")
    require(set(p["tasks"]) <= set(TASKS), "tasks", p["tasks"], f"list tasks of {TASKS}")
    require(set(p["task_students"]) <= set(p["students"]), "task_students", p["task_students"],
            "the task-specific stage runs on students that are in `students`")
    require(not p["tasks"] or CONTROL in p["task_losses"], "task_losses", p["task_losses"],
            f"include the control {CONTROL!r} (task loss only) so every distilled student has its undistilled control")
    for combo in p["task_losses"]:
        try:
            LossSpec.parse(combo, p["w_at"], p["w_vr"], p["w_out"], 1.0, p["kd_temperature"], p["kd_alpha"])
        except DistillError as e:
            require(False, "task_losses", p["task_losses"], str(e))
    require(p["task_steps"] >= 1 and p["teacher_ft_steps"] >= 0, "task_steps", p["task_steps"],
            "task_steps must be >= 1 and teacher_ft_steps >= 0")
    require(0 <= p["teacher_ft_layers"] <= 12, "teacher_ft_layers", p["teacher_ft_layers"], "fine-tune 0..12 top layers")
    require(p.get("precision", "fp32") in PRECISIONS, "precision", p.get("precision"), f"use one of {PRECISIONS}")


def _teacher_source(enc: Encoder, p: dict, cache_root):
    """The disk cache when `cache_teacher_targets` (and the encoder has a folder), else a fresh in-memory cache."""
    if p["cache_teacher_targets"] and enc.source is not None:
        kw = {} if cache_root is None else {"root": cache_root}
        return TeacherTargetStore(enc, encoder_identity(enc), p["max_seq_len"], p["teacher_attention"],
                                  precision=p.get("precision", "fp32"), **kw)
    return TeacherCache(enc, None, p["max_seq_len"], definition=p["teacher_attention"],
                        precision=p.get("precision", "fp32"))


@dataclass
class _Run:
    """What the stages of one `run_grid` call share."""
    p: dict
    teacher: Encoder
    assistant: Encoder
    data: dict
    ck: "GridCheckpoint"
    hist: dict
    rows: list
    temb: dict
    passes: dict
    shared: object
    ta_shared: object
    base: dict
    kd: dict
    cache_root: object
    save_dir: Path | None
    progress: bool
    wait: bool = True


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
    p, data = g.p, g.data
    task_targets = {}
    for task in p["tasks"]:
        df = data[task]["train"]
        n_cls = int(max(data[task][s].label.max() for s in ("train", "val", "test"))) + 1
        tt = TaskTargets(df.text.tolist(), df.label.values, n_cls)
        row = dict(_once(g, f"teacher fine-tuned ({task})", partial(_task_teacher_run, g, task, tt)))
        tt.teacher_logits = np.asarray(row.pop("_logits"), dtype=np.float32)
        task_targets[task] = tt
        g.rows.append(row)
    return task_targets


def _task_teacher_run(g: _Run, task: str, tt: TaskTargets, done) -> dict:
    p = g.p
    ft = finetune_teacher(g.teacher, tt, FinetuneConfig(steps=p["teacher_ft_steps"], batch_size=p["batch_size"],
                                                       max_seq_len=p["max_seq_len"], lr=p["teacher_ft_lr"],
                                                       layers=p["teacher_ft_layers"], seed=p["seeds"][0]), g.progress)
    logits = predict_logits(ft, tt.texts, p["max_seq_len"])
    row = {"model": f"teacher fine-tuned ({task})", "student": "12x768", "stage": "reference",
           "method": "teacher fine-tuned", "task": task, "init": "", "seed": -1,
           "task_train": float((logits.argmax(1) == tt.labels).mean()),
           **head_accuracy(ft, g.data, task, p["max_seq_len"]), "_logits": logits.tolist()}
    return g.ck.put(row, g.hist)


def _task_specific(g: _Run, task_targets: dict) -> None:
    """Task-specific rows: every combination of `task_losses` on `task_students`, per seed, init and task."""
    p, pending = g.p, []
    for seed in p["seeds"]:
        tcache = g.shared or _teacher_source(g.teacher, p, g.cache_root)
        for init in p["student_inits"]:
            for task in p["tasks"]:
                for m in p["task_students"]:
                    for combo in p["task_losses"]:
                        name = f"{m}x{p['student_hidden']} {task} {combo} {init} s{seed}"
                        _add(g, pending, name, partial(_task_specific_run, g, name, tcache, task_targets[task], seed,
                                                       init, task, m, combo))
    _settle(g, pending)


def _task_specific_run(g: _Run, name: str, tcache, tt: TaskTargets, seed: int, init: str, task: str, m: int,
                       combo: str, done) -> dict:
    p, teacher = g.p, g.teacher
    spec = LossSpec.parse(combo, p["w_at"], p["w_vr"], p["w_out"], 1.0, p["kd_temperature"], p["kd_alpha"])
    st = make_student(teacher.tokenizer, m, p["student_hidden"], p["student_heads"], seed=seed,
                      init_from=g.assistant if init == "assistant" else None, device=teacher.model.device)
    cfg = DistillConfig(steps=p["task_steps"], lr=p["task_lr"], seed=seed, losses=combo, **g.base, **g.kd)
    g.hist[name] = distill(tcache, st, tt.texts, cfg, progress=g.progress, task=tt)
    g.passes[id(tcache)] = tcache
    return g.ck.put({"model": name, "student": f"{m}x{p['student_hidden']}", "stage": "task-specific",
                     "method": "control (task loss only)" if combo == CONTROL else "distilled",
                     "task": task, "combo": combo, "losses": spec.label(), "init": init,
                     "seed": seed, "final_loss": float(g.hist[name].loss.iloc[-5:].mean()),
                     **task_accuracy(st, g.data, task, p["max_seq_len"], seed),
                     **fidelity_of(st, g.data, g.temb, p["max_seq_len"])}, g.hist)


def _task_agnostic(g: _Run) -> dict[str, pd.DataFrame]:
    """Task-agnostic rows: MiniLM, the ablations, w/ TA and the controls per seed and init; returns the learning curves."""
    p, pending = g.p, []
    curves: dict[str, pd.DataFrame] = {}
    abl_inits, abl_seeds = p.get("ablation_inits") or p["student_inits"], p.get("ablation_seeds") or p["seeds"]
    for seed in p["seeds"]:
        tcache = g.shared or _teacher_source(g.teacher, p, g.cache_root)
        for init in p["student_inits"]:
            trained = {}
            plan = [(m, "MiniLM") for m in p["students"]]
            if init in abl_inits and seed in abl_seeds:
                plan += [(m, meth) for m in p["ablation_students"] for meth in ABLATIONS]
            plan += [(m, "MiniLM (w/ TA)") for m in p["ta_students"]]
            plan += [(m, "no distillation") for m in p["students"]]
            for m, meth in plan:
                name = f"{m}x{p['student_hidden']} {meth} {init} s{seed}"
                folder = Path(g.save_dir) / student_folder(m, p["student_hidden"], seed, meth, init) if (
                    g.save_dir is not None
                    and (meth == "MiniLM" or (meth == "no distillation" and m in p.get("lp_students", [])))) else None
                make = partial(_agnostic_run, g, name, tcache, trained, curves, seed, init, m, meth, folder)
                # a finished row whose saved model is missing is trained again: every run is seeded, so it reproduces
                # the same student
                redo = partial(lambda f: f is not None and not (f / "config.json").is_file(), folder)
                if meth == "MiniLM" and m == 6 and p["ta_source"] == "distilled" and p["ta_students"]:
                    # the 6x384 teacher assistant is needed in memory by the w/ TA rows that follow: always trained
                    g.rows.append(_once(g, name, make, curves, lambda: True))
                else:
                    _add(g, pending, name, make, curves, redo)
    _settle(g, pending)
    return curves


def _agnostic_run(g: _Run, name: str, tcache, trained: dict, curves: dict, seed: int, init: str, m: int, meth: str,
                  folder: Path | None, done) -> dict:
    p, teacher, assistant = g.p, g.teacher, g.assistant
    st = make_student(teacher.tokenizer, m, p["student_hidden"], p["student_heads"], seed=seed,
                      init_from=assistant if init == "assistant" else None, device=teacher.model.device)
    spec = VARIANT_SPECS[METHOD_VARIANT[meth]] if meth in METHOD_VARIANT else LossSpec()
    trained_for = {}
    if meth != "no distillation":
        if meth == "MiniLM (w/ TA)":
            src = (g.ta_shared or _teacher_source(assistant, p, g.cache_root)) if p["ta_source"] == "pretrained" \
                else TeacherCache(trained[6], None, p["max_seq_len"], definition=p["teacher_attention"],
                                  precision=p.get("precision", "fp32"))
        else:
            src = tcache
        cfg = DistillConfig(variant=METHOD_VARIANT[meth], steps=p["steps"], lr=p["lr"], seed=seed, **g.base)
        res = train_student(src, st, g.data["transfer"], cfg, progress=g.progress,
                            checkpoint=g.ck.steps_file(name) if p.get("checkpoint_every") else None,
                            checkpoint_every=p.get("checkpoint_every", 0), eval_every=p.get("eval_every", 0),
                            evaluate=lambda enc: evaluate(enc, g.data, g.temb, p["max_seq_len"], seed))
        g.hist[name] = res["losses"]
        if len(res["curve"]):
            curves[name] = res["curve"]
        trained_for = {"steps": len(res["losses"]), "train_s": res["seconds"]}
        g.passes[id(src)] = src
    if meth == "MiniLM":
        trained[m] = st
    if folder is not None:
        save_sentence_transformer(st, folder, p["max_seq_len"])
    return done or g.ck.put({"model": name, "student": f"{m}x{p['student_hidden']}", "stage": "task-agnostic",
                             "method": meth, "losses": spec.label(), "init": init, "seed": seed,
                             "final_loss": float(g.hist[name].loss.iloc[-5:].mean()) if name in g.hist else float("nan"),
                             **trained_for, **evaluate(st, g.data, g.temb, p["max_seq_len"], seed)}, g.hist, curves)


def run_grid(p: dict, teacher: Encoder, assistant: Encoder, data: dict, save_dir: Path | None = None,
             progress: bool = True, cache_root=None, checkpoint: Path | None = None,
             wait: bool = True) -> tuple[pd.DataFrame, dict, dict]:
    """Distil and evaluate the grid of notebook 05; returns (results, {run name: loss history}, info).

    Task-specific rows come first (they carry the comparison with the controls), then the task-agnostic ones.
    Task-agnostic rows (transfer corpus, linear probes): per seed and init, every student with MiniLM (L_AT + L_VR),
    the ablations on `ablation_students` (only for `ablation_inits` x `ablation_seeds`; [] = all), w/ TA on
    `ta_students`, and the undistilled control of every student. With `eval_every` > 0 each distilled run is also
    evaluated every that many steps (info["curves"]: run name -> DataFrame [step, metrics]); with `checkpoint_every`
    > 0 (and a checkpoint folder) a run interrupted mid-way resumes from its last step checkpoint.
    Task-specific rows: per task, seed and init, every combination of `task_losses` on `task_students`, started from
    the same init ('ce' = the control: hard labels only), scored by the student's own head; L_OUT's soft targets come
    from the teacher fine-tuned on the task (reference row 'teacher fine-tuned'). info: teacher passes, wall time and
    learning curves. Distilled rows carry `steps` and `train_s` (training wall time over every resumed call).
    checkpoint: a folder where finished runs are kept, so a killed grid resumes (see GridCheckpoint). Several processes
    may work on one checkpoint folder at once (lib.distill.worker): each run is trained by whichever claims it first;
    the others skip it and, with `wait`, take its row when it is done (wait=False: leave it out of the results).
    """
    t0 = time.perf_counter()
    ck = GridCheckpoint(checkpoint, p)
    ev = dict(max_seq_len=p["max_seq_len"])
    temb = {f"fid_{s}": encode(teacher, data["fidelity"][s], **ev) for s in ("val", "test")}
    shared = _teacher_source(teacher, p, cache_root) if p["cache_teacher_targets"] else None
    ta_shared = _teacher_source(assistant, p, cache_root) if p["cache_teacher_targets"] else None
    base = dict(batch_size=p["batch_size"], max_seq_len=p["max_seq_len"], warmup_frac=p["warmup_frac"],
                weight_decay=p["weight_decay"], relation_heads=p["relation_heads"], teacher_attention=p["teacher_attention"])
    kd = dict(w_at=p["w_at"], w_vr=p["w_vr"], w_out=p["w_out"], temperature=p["kd_temperature"], alpha=p["kd_alpha"])
    g = _Run(p, teacher, assistant, data, ck, {}, [], temb, {}, shared, ta_shared, base, kd, cache_root,
             save_dir, progress, wait)
    for name, enc, student, method in (("teacher (mpnet 12x768)", teacher, "12x768", "teacher"),
                                       ("assistant (MiniLM-L6 6x384)", assistant, "6x384", "assistant (pre-trained)")):
        g.rows.append(_once(g, name, lambda _, name=name, enc=enc, student=student, method=method: ck.put({
            "model": name, "student": student, "stage": "reference", "method": method, "init": "", "seed": -1,
            **evaluate(enc, data, temb, p["max_seq_len"], 0)}, g.hist)))
    # task-specific stage first: it answers the goal (distilled vs control over seeds) if a long grid is cut short
    _task_specific(g, _task_teachers(g))
    curves = _task_agnostic(g)
    info = {"teacher_sentences": int(sum(s.teacher_sentences for s in g.passes.values())),
            "wall_s": time.perf_counter() - t0, "curves": curves}
    return pd.DataFrame([r for r in g.rows if r is not None]), g.hist, info


def student_folder(layers: int, hidden: int, seed: int, method: str = "MiniLM", init: str = "random") -> str:
    """Folder name of a saved task-agnostic student: the MiniLM one, or its undistilled control (for link prediction)."""
    kind = {"MiniLM": "student", "no distillation": "control"}[method]
    return f"{kind}_{layers}x{hidden}_{init}_s{seed}"
