"""Notebook 06's comparisons beside the distilled students: the fine-tuned task teachers, size and speed of every
model, task accuracy of frozen encoders with a logistic-regression head, and the closing sentences printed from the
numbers."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lib.distill.models import Encoder
from lib.distill.train import predict_logits
from lib.kd.config import KdParams
from lib.kd.stage import build_student, encoder_representations, frozen_task_accuracy, speed, task_teacher, teacher_task


def task_teachers(teacher: Encoder, data: dict, cfg: KdParams, folder: str | Path) -> dict[str, Encoder]:
    """{task: the teacher fine-tuned on it} — the ones lib.kd.stage.run_students saved in folder (reloaded, not
    trained again)."""
    return {
        task: task_teacher(teacher, *teacher_task(data[task], cfg), folder, progress=False)[0] for task in cfg.kd_tasks
    }


def speed_table(
    teacher: Encoder, fine_tuned: dict[str, Encoder], encoders: dict[str, Encoder], cfg: KdParams, texts: list[str]
) -> pd.DataFrame:
    """Parameters (total, without embeddings, in millions) and sentences per second on `texts` of the fine-tuned
    teacher of the first task, a fresh student of every kind (speed does not depend on training) and every frozen
    encoder of `encoders`; speedup relative to the teacher (first row)."""
    first, L = fine_tuned[cfg.kd_tasks[0]], cfg.kd_max_seq_len
    sized = [("teacher (fine-tuned)", teacher.param_counts(), lambda x: predict_logits(first, x, L))]
    for kind in cfg.kd_students:
        s = build_student(kind, teacher, first.head.out_features, cfg, 0)
        sized.append((kind, s.param_counts(), lambda x, s=s: s.predict_logits(x, L)))
    for name, enc in encoders.items():
        sized.append((name, enc.param_counts(), lambda x, e=enc: encoder_representations(e, x, L)))
    out = pd.DataFrame(
        [
            {
                "model": n,
                "params_M": c["params_total"] / 1e6,
                "non_embedding_M": (c["params_total"] - c["params_embedding"]) / 1e6,
                "sentences_per_s": speed(fn, texts),
            }
            for n, c, fn in sized
        ]
    )
    out["speedup"] = out.sentences_per_s / out.sentences_per_s.iloc[0]
    return out


def frozen_table(encoders: dict[str, Encoder], data: dict, cfg: KdParams) -> pd.DataFrame:
    """Test accuracy per (task, encoder) of a logistic-regression head on frozen mean-pooled representations: what
    an encoder gives a task without any fine-tuning. Rows task, model, test."""
    out = {}
    for task in cfg.kd_tasks:
        d = data[task]
        for name, enc in encoders.items():
            x = {s: encoder_representations(enc, d[s].text.tolist(), cfg.kd_max_seq_len) for s in ("train", "test")}
            out[(task, name)] = frozen_task_accuracy(x, d, cfg.kd_seeds[0])
    return pd.Series(out, name="test").rename_axis(["task", "model"]).reset_index()


def closing_sentences(
    table: pd.DataFrame, teachers: list[dict], frozen: pd.DataFrame, probing: pd.DataFrame
) -> list[str]:
    """Per task: the fine-tuned teacher, the best distilled student (its share of the teacher's accuracy, its size)
    and the best frozen encoder; then which model's representations sit highest and lowest above the majority class
    in the probing tasks."""
    out = []
    for t in teachers:
        best = table[(table.task == t["task"]) & (table.method == "kd")].sort_values("test").iloc[-1]
        out.append(
            f"{t['task']}: fine-tuned teacher {t['test']:.3f} test accuracy; best distilled student "
            f"{best.student} {best.test:.3f} ({best.test / t['test']:.0%} of the teacher) with "
            f"{best.params_m:.1f}M parameters"
        )
        fz = frozen[frozen.task == t["task"]].sort_values("test").iloc[-1]
        out.append(f"  frozen encoder + logistic regression, best: {fz.model} {fz.test:.3f}")
    gap = (probing.drop(index="majority") - probing.loc["majority"]).mean(axis=1).sort_values()
    out.append(
        f"probing, mean accuracy above the majority class over {probing.shape[1]} tasks: highest "
        f"{gap.index[-1]} (+{gap.iloc[-1]:.3f}), lowest {gap.index[0]} (+{gap.iloc[0]:.3f})"
    )
    return out
