"""Stage 5 comparisons: students against their undistilled controls, the goal and budget verdicts, and the init used
for link prediction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from lib.distill.config import DistillParams
from lib.distill.eval import CURVE_METRICS, curve_trends, difference_sentences, paired_differences
from lib.distill.losses import DistillError
from lib.distill.lp import REFERENCE as LP_REFERENCE
from lib.distill.stage import ABLATIONS, CONTROL, embedding_method, student_folder


def versus_control(results: pd.DataFrame, metrics=("task_test", "fid_cosine")) -> pd.DataFrame:
    """Task-specific rows: per (student, init, task, combination) mean ± std over seeds and the mean gain over the
    'ce' control (same student, init, task and seeds). Columns <metric>_mean, <metric>_std, <metric>_gain, runs."""
    ts = results[results.stage == "task-specific"]
    if ts.empty:
        return pd.DataFrame()
    keys = ["student", "init", "task", "combo"]
    g = ts.groupby(keys, sort=False)
    out = g[list(metrics)].mean().add_suffix("_mean").join(g[list(metrics)].std().add_suffix("_std"))
    out["losses"] = g["losses"].first()
    out["scored_by"] = g["scored_by"].first()
    out["runs"] = g.size()
    ctrl = out.xs(CONTROL, level="combo")
    for m in metrics:
        out[f"{m}_gain"] = [out.loc[i, f"{m}_mean"] - ctrl.loc[i[:3], f"{m}_mean"] for i in out.index]
    return out


def agnostic_versus_control(
    results: pd.DataFrame, metrics=("polarity_test", "topic_test", "fid_cosine")
) -> pd.DataFrame:
    """Task-agnostic rows: per (student, init, method) mean, std and gain over 'no distillation' (linear probes)."""
    ta = results[results.stage == "task-agnostic"]
    if ta.empty:
        return pd.DataFrame()
    g = ta.groupby(["student", "init", "method"], sort=False)
    out = g[list(metrics)].mean().add_suffix("_mean").join(g[list(metrics)].std().add_suffix("_std"))
    out["losses"] = g["losses"].first()
    out["runs"] = g.size()
    ctrl = out.xs("no distillation", level="method")
    for m in metrics:
        out[f"{m}_gain"] = [out.loc[i, f"{m}_mean"] - ctrl.loc[i[:2], f"{m}_mean"] for i in out.index]
    return out


def goal_verdicts(vs: pd.DataFrame, combo: str) -> list[str]:
    """One sentence per (student, init): does `combo` beat the 'ce' control on both tasks' accuracy and on fidelity?

    Printed by notebook 05 so its conclusions come from the numbers."""
    if vs.empty or combo not in vs.index.get_level_values("combo"):
        return [f"no task-specific rows with the combination {combo!r}; nothing to conclude"]
    out = []
    for (student, init), part in vs.xs(combo, level="combo").groupby(level=["student", "init"], sort=False):
        gains = {
            f"{task} accuracy": part.loc[(student, init, task), "task_test_gain"]
            for task in part.index.get_level_values("task")
        }
        gains["fidelity cosine"] = float(np.mean(part["fid_cosine_gain"]))
        lost = [k for k, v in gains.items() if v <= 0]
        txt = ", ".join(f"{k} {v:+.3f}" for k, v in gains.items())
        verdict = "beats its control on all of them" if not lost else f"does NOT beat its control on {', '.join(lost)}"
        out.append(f"{student} ({init} init), {combo} vs ce over {int(part['runs'].min())} seed(s): {txt} -> {verdict}")
    return out


def choose_init(results: pd.DataFrame, students: list[str]) -> tuple[str, str]:
    """The init whose MiniLM students score best on validation (mean of polarity_val and topic_val over `students`
    and seeds; test numbers are never looked at) and a sentence saying so: (init, sentence)."""
    agn = results[(results.stage == "task-agnostic") & (results.method == "MiniLM") & results.student.isin(students)]
    if agn.empty:
        raise DistillError(f"no task-agnostic MiniLM rows for students {students}; run the grid with them first")
    score = ((agn.polarity_val + agn.topic_val) / 2).groupby(agn.init, sort=False).mean()
    best = str(score.idxmax())
    txt = ", ".join(f"{i} {v:.3f}" for i, v in score.items())
    return best, f"init chosen on validation (mean polarity/topic probe accuracy): {txt} -> {best}"


def lp_embedders(
    students_dir: Path, results: pd.DataFrame, cfg: DistillParams
) -> tuple[list[tuple[str, int, Path | None]], str]:
    """Notebook 05's node embedders for link prediction, per seed: all-MiniLM-L6-v2 (folder None) and, for every
    student of `lp_students`, its MiniLM student, its students of `embedding_methods` and its undistilled control of
    the init `choose_init` picks, labelled '<m>x<h> <init> MiniLM' / '<m>x<h> <init> AT+VR+EMB' / '<m>x<h> <init> no
    distillation' (lp_verdicts pairs each with the control). Returns (triples, sentence)."""
    if not cfg.lp_students:
        return [], "no lp_students: link prediction skipped"
    h = cfg.student_hidden
    init, why = choose_init(results, [f"{m}x{h}" for m in cfg.lp_students])
    out = [(LP_REFERENCE, s, None) for s in cfg.distill_seeds]
    out += [
        (f"{m}x{h} {init} {meth}", s, Path(students_dir) / student_folder(m, h, s, meth, init))
        for s in cfg.distill_seeds
        for m in cfg.lp_students
        for meth in ("MiniLM", *map(embedding_method, cfg.embedding_methods), "no distillation")
    ]
    return sorted(out, key=lambda e: e[1]), why


def budget_verdicts(results: pd.DataFrame, curves: dict[str, pd.DataFrame], metrics=CURVE_METRICS) -> list[str]:
    """What a reader can conclude from a task-agnostic grid, printed by notebook 05 from the numbers: every distilled
    student against its undistilled control (paired by seed, 95% interval), MiniLM against each ablation (the paper's
    Tables 5-7 put MiniLM above all three), and which learning curves still rise over the last fifth of training."""
    out = ["distilled - undistilled control (same student, init and seed):"]
    out += ["  " + x for x in difference_sentences(paired_differences(results, metrics=metrics))]
    abl = [
        paired_differences(results, reference=a, methods=("MiniLM",), metrics=metrics)
        for a in ABLATIONS
        if a in set(results.method)
    ]
    abl = [a for a in abl if len(a)]
    if abl:
        out.append("MiniLM - ablation (the paper's Tables 5-7 ordering holds where the difference is above 0):")
        out += ["  " + x for x in difference_sentences(pd.concat(abl, ignore_index=True), "MiniLM", "{versus}")]
    tr = curve_trends(curves, results, metrics)
    if len(tr):
        for word, sel in (("still rising", tr[tr.rising]), ("flat or falling", tr[~tr.rising])):
            cells = [f"{r.student} {r.init} {r.method} {r.metric} {r['mean']:+.3f}" for _, r in sel.iterrows()]
            out.append(
                f"learning curves {word} from step {int(tr.from_step.min())} to {int(tr.to_step.max())}: "
                + ("; ".join(cells) if cells else "none")
            )
    return out
