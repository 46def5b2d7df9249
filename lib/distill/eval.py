"""Stage 5 evaluation: sentence embeddings, linear probes (polarity, 12-way topic), fidelity to the teacher, speed
(paper Table 4), result tables shaped like the paper's, and the figures of notebook 05.

Like OGB's Evaluator: encoders and texts in, numbers out; no training happens here except the probes' heads.
"""

from __future__ import annotations

import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.ticker import NullFormatter
from scipy.stats import spearmanr
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from lib.common.timing import REPEATS, median_seconds
from lib.distill.models import Encoder, StudentShape, make_student
from lib.distill.train import predict_logits
from lib.metrics.paired import mean_interval, verdict
from lib.viz.figures import saved


@torch.no_grad()
def encode(enc: Encoder, texts: list[str], max_seq_len: int, batch_size: int = 64) -> np.ndarray:
    """Mean-pooled sentence embeddings over non-pad tokens: [N, D] float32 (how both sentence-transformers pool)."""
    out = []
    for i in range(0, len(texts), batch_size):
        b = enc.tokenize(texts[i : i + batch_size], max_seq_len)
        h, _, _ = enc.run(b)
        m = b["attention_mask"][..., None].to(h.device, h.dtype)
        out.append(((h * m).sum(1) / m.sum(1).clamp(min=1)).float().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, enc.hidden), np.float32)


def linear_probe(x_train, y_train, x_eval: dict, seed: int = 0, C: float = 1.0) -> dict[str, float]:
    """Accuracy of a logistic-regression head on frozen, standardised embeddings (sklearn; eval split -> accuracy)."""
    clf = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000, random_state=seed))
    clf.fit(x_train, y_train)
    return {k: float((clf.predict(x) == y).mean()) for k, (x, y) in x_eval.items()}


def fidelity(
    student_fit: np.ndarray, teacher_fit: np.ndarray, student_eval: np.ndarray, teacher_eval: np.ndarray
) -> dict:
    """Embedding fidelity on held-out sentences.

    cosine: mean cosine between the teacher embedding and the student embedding mapped into the teacher space by a
    least-squares linear map fitted on other sentences (dimensions differ, 384 vs 768); spearman: Spearman correlation
    of the pairwise cosine similarities (upper triangle) of student vs teacher, which needs no map.
    """

    def unit(x):
        return x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-12)

    mapped = Ridge(alpha=1.0).fit(student_fit, teacher_fit).predict(student_eval)
    cos = float((unit(mapped) * unit(teacher_eval)).sum(1).mean())
    iu = np.triu_indices(len(student_eval), 1)
    ss, tt = unit(student_eval) @ unit(student_eval).T, unit(teacher_eval) @ unit(teacher_eval).T
    return {"fid_cosine": cos, "fid_spearman": float(spearmanr(ss[iu], tt[iu]).statistic)}


def fidelity_of(enc: Encoder, data: dict, teacher_emb: dict, max_seq_len: int) -> dict:
    """Fidelity of `enc` to the teacher on the fidelity sentences (ridge map fitted on val, scored on test)."""
    fv = encode(enc, data["fidelity"]["val"], max_seq_len)
    ft = encode(enc, data["fidelity"]["test"], max_seq_len)
    return fidelity(fv, teacher_emb["fid_val"], ft, teacher_emb["fid_test"])


def evaluate(
    enc: Encoder, data: dict, teacher_emb: dict, max_seq_len: int, seed: int = 0, is_teacher: bool = False
) -> dict:
    """Polarity and topic accuracy (linear head, val and test) and fidelity to the teacher (test) for one encoder.

    teacher_emb: {"fid_val": [N, 768], "fid_test": [N, 768]} from `encode(teacher, ...)`. is_teacher: `enc` is that
    teacher, whose embeddings of the fidelity sentences are teacher_emb already (the same batches, so the same floats)
    and are not computed again.
    """

    def embed(texts: list[str]) -> np.ndarray:
        for split in ("val", "test"):
            if is_teacher and texts == data["fidelity"][split]:
                return teacher_emb[f"fid_{split}"]
        return encode(enc, texts, max_seq_len)

    return evaluate_embedder(embed, data, teacher_emb, seed)


def evaluate_embedder(embed, data: dict, teacher_emb: dict, seed: int = 0) -> dict:
    """`evaluate` for any text embedder: `embed(texts: list[str]) -> [N, D]` (a static model, a SentenceTransformer).

    Returns {polarity_val, polarity_test, topic_val, topic_test, fid_cosine, fid_spearman}."""
    res = {}
    for task in ("polarity", "topic"):
        e = {s: embed(data[task][s].text.tolist()) for s in ("train", "val", "test")}
        acc = linear_probe(
            e["train"],
            data[task]["train"].label.values,
            {s: (e[s], data[task][s].label.values) for s in ("val", "test")},
            seed,
        )
        res[f"{task}_val"], res[f"{task}_test"] = acc["val"], acc["test"]
    res.update(
        fidelity(
            embed(data["fidelity"]["val"]),
            teacher_emb["fid_val"],
            embed(data["fidelity"]["test"]),
            teacher_emb["fid_test"],
        )
    )
    return res


def task_accuracy(enc: Encoder, data: dict, task: str, max_seq_len: int, seed: int = 0) -> dict:
    """Accuracy on `task`'s val and test texts: {task_val, task_test, scored_by}.

    Scored by the encoder's own classification head when a task loss trained one ('ce' or L_OUT in the combination);
    a combination without one (e.g. 'at+vr' on the task texts) is scored by a linear probe on frozen embeddings.
    """
    if enc.head is not None:
        return {
            **{
                f"task_{s}": float(
                    (
                        predict_logits(enc, data[task][s].text.tolist(), max_seq_len).argmax(1)
                        == data[task][s].label.values
                    ).mean()
                )
                for s in ("val", "test")
            },
            "scored_by": "head",
        }
    e = {s: encode(enc, data[task][s].text.tolist(), max_seq_len) for s in ("train", "val", "test")}
    acc = linear_probe(
        e["train"],
        data[task]["train"].label.values,
        {s: (e[s], data[task][s].label.values) for s in ("val", "test")},
        seed,
    )
    return {"task_val": acc["val"], "task_test": acc["test"], "scored_by": "probe"}


head_accuracy = task_accuracy


def time_inference(
    enc: Encoder, texts: list[str], max_seq_len: int, batch_size: int = 32, repeats: int = REPEATS
) -> float:
    """Seconds to embed `texts`, scaled to 1,000 sentences: lib.common.timing's median of `repeats` passes after a
    warm-up batch."""
    seconds = median_seconds(
        lambda: encode(enc, texts, max_seq_len, batch_size),
        repeats,
        warm_up=lambda: encode(enc, texts[:batch_size], max_seq_len, batch_size),
    )
    return seconds * 1000 / len(texts)


@torch.no_grad()
def last_layer_attention(enc: Encoder, sentence: str, max_seq_len: int = 64) -> tuple[np.ndarray, list[str]]:
    """Last-layer attention of one sentence from the eager implementation (eval mode, no dropout):
    ([H, T, T], tokens)."""
    b = enc.tokenize([sentence], max_seq_len)
    _, atts, qkv = enc.run(b, attentions=True)
    L = enc.num_layers - 1
    return atts[L][0].cpu().numpy(), enc.tokenizer.convert_ids_to_tokens(b["input_ids"][0])


def paper_table(
    results: pd.DataFrame,
    metrics=("polarity_test", "topic_test", "fid_cosine", "fid_spearman"),
    group=("student", "method"),
) -> pd.DataFrame:
    """`group` x metrics as 'mean ± std' over seeds (std shown only with >= 2 seeds), like Tables 3, 5-7."""
    results = results.assign(**{c: results[c].astype(object).where(results[c].notna(), "") for c in group})
    g = results.groupby(list(group), sort=False)[list(metrics)]
    mean, std, n = g.mean(), g.std(), g.size()

    def cell(mu, sd, k):
        if not np.isfinite(mu):
            return ""
        return f"{mu:.3f}" if k < 2 or not np.isfinite(sd) else f"{mu:.3f} ± {sd:.3f}"

    out = pd.DataFrame(
        {m: [cell(a, b, k) for a, b, k in zip(mean[m].values, std[m].values, n.values)] for m in metrics},
        index=mean.index,
    )
    out["runs"] = n.values
    return out


def speed_table(
    teacher: Encoder,
    assistant: Encoder,
    texts: list[str],
    max_seq_len: int,
    batch_size: int = 32,
    shapes=((12, 768), (6, 768), (12, 384), (6, 384), (4, 384), (3, 384)),
    repeats: int = REPEATS,
) -> pd.DataFrame:
    """Table 4 on this CPU: layers, hidden, parameters, seconds per 1,000 sentences and speed-up vs the teacher.

    The 12x768 row is the real mpnet teacher; the other shapes are BERT students (random weights: speed does not depend
    on their values) with the teacher's vocabulary; the assistant row is all-MiniLM-L6-v2.
    """
    rows = []
    models = [("teacher (mpnet)", teacher), ("assistant (MiniLM-L6)", assistant)]
    models += [
        (f"student {m}x{h}", make_student(teacher.tokenizer, StudentShape(m, h), device=teacher.model.device))
        for m, h in shapes
        if (m, h) != (12, 768)
    ]
    for name, enc in models:
        c = enc.param_counts()
        rows.append(
            {
                "model": name,
                "layers": enc.num_layers,
                "hidden": enc.hidden,
                "params_emb_M": c["params_embedding"] / 1e6,
                "params_trm_M": c["params_transformer"] / 1e6,
                "s_per_1000": time_inference(enc, texts, max_seq_len, batch_size, repeats),
            }
        )
    df = pd.DataFrame(rows)
    df["speedup"] = df.s_per_1000.iloc[0] / df.s_per_1000
    return df


LOSS_NAMES = {
    "L_AT": "L_AT (attention KL)",
    "L_VR": "L_VR (value-relation KL)",
    "L_VMSE": "L_VMSE (value MSE)",
    "loss": "total loss",
}


def _loss_rows(hist: dict, per_row: int) -> list[list[str]]:
    """Runs grouped by their number of steps (one stage's runs share a budget), longest first, each group cut into
    rows of at most `per_row` runs of about equal size."""
    groups: dict[int, list[str]] = {}
    for name, h in hist.items():
        groups.setdefault(len(h), []).append(name)
    rows = []
    for _, names in sorted(groups.items(), reverse=True):
        k = -(-len(names) // per_row)
        size = -(-len(names) // k)
        rows += [names[i : i + size] for i in range(0, len(names), size)]
    return rows


def plot_loss_curves(hist: dict, path: str | os.PathLike | None = None, points: int = 100, per_row: int = 8):
    """One column per loss term (L_AT, L_VR, L_VMSE, total) and one row per group of at most `per_row` runs (runs of
    one step budget together), each row with its own legend; a run of more than `points` steps is drawn as its
    rolling mean over len/points steps (the raw per-step losses of long runs overlap into a band)."""
    terms = [t for t in ("L_AT", "L_VR", "L_VMSE", "loss") if any(t in h for h in hist.values())]
    rows = _loss_rows(hist, per_row)
    fig, axes = plt.subplots(
        len(rows), len(terms), figsize=(3.4 * len(terms) + 2.6, 2.8 * len(rows) + 0.5), squeeze=False
    )
    window = max(1, max((len(h) for h in hist.values()), default=1) // points)
    for r, names in enumerate(rows):
        for ax, t in zip(axes[r], terms):
            for i, name in enumerate(names):
                h = hist[name]
                if t in h and h[t].notna().any():
                    ax.plot(h.step, h[t].rolling(window, min_periods=1).mean(), label=name, lw=1, color=f"C{i}")
            if not ax.lines:
                ax.set_visible(False)
                continue
            ax.set(yscale="log", xlabel="step" if r == len(rows) - 1 else None)
            ax.yaxis.set_minor_formatter(NullFormatter())
            if r == 0:
                ax.set_title(LOSS_NAMES[t], fontsize=9)
        handles = [plt.Line2D([], [], color=f"C{i}") for i in range(len(names))]
        axes[r][-1].legend(handles, names, fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
        axes[r][-1].set_visible(True)
    fig.suptitle(
        "Distillation losses per step" + (f" (rolling mean over {window} steps)" if window > 1 else ""), fontsize=10
    )
    return saved(fig, path, 110, outer_legend=True)


def plot_attention_maps(maps: dict, heads=(0, 1, 2, 3), path: str | os.PathLike | None = None):
    """Supplement Figures 1-3: rows = models, columns = last-layer heads; maps: name -> ([H, T, T], tokens)."""
    fig, axes = plt.subplots(len(maps), len(heads), figsize=(3.4 * len(heads), 4.0 * len(maps) + 0.4), squeeze=False)
    for r, (name, (att, toks)) in enumerate(maps.items()):
        size = 7 if len(toks) <= 24 else 5.5
        for c, h in enumerate(heads):
            ax = axes[r][c]
            ax.imshow(att[h], cmap="viridis", vmin=0, vmax=1)
            ax.set_title(f"{name} · head {h}", fontsize=8)
            ax.set_xticks(range(len(toks)), toks, rotation=90, fontsize=size)
            ax.set_yticks(range(len(toks)), toks if c == 0 else [], fontsize=size)
    fig.suptitle(
        "Last-layer attention over one sentence: row = query token, column = key token; colour = attention "
        "probability, dark 0 to yellow 1",
        fontsize=10,
    )
    return saved(fig, path, 130, rect=(0, 0, 1, 0.98))


def plot_versus_control(vs: pd.DataFrame, metric: str = "task_test", path: str | os.PathLike | None = None):
    """One panel per (student, init, task): mean ± std over seeds of `metric` per loss combination (control first).

    vs: the output of lib.distill.verdicts.versus_control (index student, init, task, combo;
    columns <metric>_mean/_std).
    """
    groups = list(dict.fromkeys(i[:3] for i in vs.index))
    fig, axes = plt.subplots(1, len(groups), figsize=(3.2 * len(groups), 3.2), squeeze=False, sharey=False)
    for ax, key in zip(axes[0], groups):
        part = vs.xs(key, level=("student", "init", "task"))
        ax.bar(
            range(len(part)),
            part[f"{metric}_mean"],
            yerr=part[f"{metric}_std"].fillna(0),
            capsize=3,
            color=["0.6" if c == "ce" else "C0" for c in part.index],
        )
        ax.set_xticks(range(len(part)), part.index, rotation=45, fontsize=7)
        lo = float((part[f"{metric}_mean"] - part[f"{metric}_std"].fillna(0)).min())
        ax.set_ylim(max(0.0, lo - 0.05), None)
        ax.set_title(f"{key[0]} {key[1]} · {key[2]}\n{metric} (n={int(part['runs'].min())})", fontsize=8)
    return saved(fig, path, 110)


CURVE_METRICS = ("fid_cosine", "polarity_test", "topic_test")


def paired_differences(
    results: pd.DataFrame, reference: str = "no distillation", metrics=CURVE_METRICS, methods: tuple | None = None
) -> pd.DataFrame:
    """Task-agnostic rows: per (student, init, method) and metric, the difference to `reference` (the same student,
    init and seed), its mean, std and 95% t-interval over the paired seeds (no interval with one seed).

    methods: the methods compared (default every other one). Columns student, init, method, versus, metric, seeds,
    diff, std, ci_low, ci_high."""
    ta = results[results.stage == "task-agnostic"]
    ref = ta[ta.method == reference].set_index(["student", "init", "seed"])
    rows = []
    for (student, init, method), g in ta[ta.method != reference].groupby(["student", "init", "method"], sort=False):
        if methods is not None and method not in methods:
            continue
        g = g.set_index("seed")
        seeds = [s for s in g.index if (student, init, s) in ref.index]
        if not seeds:  # e.g. a student without the reference's ablation rows
            continue
        for m in metrics:
            d = [g.loc[s, m] - ref.loc[(student, init, s), m] for s in seeds]
            rows.append(
                {
                    "student": student,
                    "init": init,
                    "method": method,
                    "versus": reference,
                    "metric": m,
                    **mean_interval(d),
                }
            )
    return pd.DataFrame(rows)


def _interval_word(r) -> str:
    """Where the interval lies against 0, by the project's one rule (lib.metrics.paired.verdict)."""
    if r.seeds < 2:
        return "one seed, no interval"
    return {"met": "above 0", "missed": "below 0", "undecided": "includes 0"}[verdict(r.ci_low, r.ci_high, 0.0)]


def difference_sentences(diffs: pd.DataFrame, subject: str = "{method}", versus: str = "{versus}") -> list[str]:
    """One sentence per (student, init, method, versus) of `paired_differences`: each metric's mean difference with its
    95% interval and whether the interval lies above 0 (a win the seeds support), below 0, or includes 0."""
    out = []
    for (student, init, method, _), part in diffs.groupby(["student", "init", "method", "versus"], sort=False):
        r0 = part.iloc[0]
        cells = []
        for r in part.itertuples():
            ci = f" [{r.ci_low:+.3f}, {r.ci_high:+.3f}]" if r.seeds > 1 else ""
            cells.append(f"{r.metric} {r.diff:+.3f}{ci} ({_interval_word(r)})")
        who = subject.format(method=method, versus=r0.versus)
        ref = versus.format(method=method, versus=r0.versus)
        out.append(f"{student} ({init} init), {who} - {ref} over {int(r0.seeds)} seed(s): " + "; ".join(cells))
    return out


def curve_trends(
    curves: dict[str, pd.DataFrame], results: pd.DataFrame, metrics=CURVE_METRICS, tail: float = 0.2
) -> pd.DataFrame:
    """Does a learning curve still rise? Per (student, init, method) and metric: the change over the last `tail` of
    the steps (last evaluation minus the one nearest to (1 - tail)·steps), mean and std over seeds, and 'rising'
    when the mean change is positive and, with >= 2 seeds, more than twice its standard error."""
    meta = results.set_index("model")
    rows = []
    for name, c in curves.items():
        if name not in meta.index or len(c) < 2:
            continue
        last = c.step.max()
        j = (c.step - (1 - tail) * last).abs().idxmin()
        r = meta.loc[name]
        for m in metrics:
            rows.append(
                {
                    "student": r.student,
                    "init": r.init,
                    "method": r.method,
                    "seed": r.seed,
                    "metric": m,
                    "from_step": int(c.step[j]),
                    "to_step": int(last),
                    "change": float(c[m].iloc[-1] - c.loc[j, m]),
                }
            )
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame(rows)
    g = df.groupby(["student", "init", "method", "metric", "from_step", "to_step"], sort=False)["change"]
    out = g.agg(["mean", "std", "size"]).reset_index().rename(columns={"size": "seeds"})
    se = out["std"] / np.sqrt(out.seeds)
    out["rising"] = (out["mean"] > 0) & ((out.seeds < 2) | (out["mean"] > 2 * se))
    return out


CURVE_NAMES = {
    "fid_cosine": "fidelity: cosine to the teacher's embedding",
    "fid_spearman": "fidelity: Spearman",
    "polarity_test": "polarity: test accuracy (linear probe)",
    "topic_test": "topic: test accuracy (linear probe)",
}


def plot_learning_curves(
    curves: dict[str, pd.DataFrame], results: pd.DataFrame, metrics=CURVE_METRICS, path: str | os.PathLike | None = None
):
    """One panel per metric: mean over seeds (band: min-max) of every (student, init, method) against steps; the
    step-0 point is the undistilled control; dashed lines are the teacher and the pre-trained assistant."""
    meta = results.set_index("model")
    long = pd.concat(
        [
            c.assign(
                student=meta.loc[n, "student"],
                init=meta.loc[n, "init"],
                method=meta.loc[n, "method"],
                seed=meta.loc[n, "seed"],
            )
            for n, c in curves.items()
            if n in meta.index
        ],
        ignore_index=True,
    )
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.4 * len(metrics), 3.6), squeeze=False)
    refs = results[results.stage == "reference"].set_index("method")
    for ax, m in zip(axes[0], metrics):
        for i, (key, g) in enumerate(long.groupby(["student", "init", "method"], sort=False)):
            s = g.groupby("step")[m]
            seeds = g["seed"].nunique()
            ax.plot(
                s.mean().index,
                s.mean(),
                color=f"C{i}",
                lw=1.4,
                label=f"{' '.join(key)} ({seeds} seed{'s' * (seeds != 1)})",
            )
            ax.fill_between(s.mean().index, s.min(), s.max(), color=f"C{i}", alpha=0.15, lw=0)
        for ls, who in (("--", "teacher"), (":", "assistant (pre-trained)")):
            if who in refs.index and m in refs:
                ax.axhline(float(refs.loc[who, m]), color="0.3", ls=ls, lw=1, label=who)
        ax.set(xlabel="distillation step")
        ax.set_title(CURVE_NAMES.get(m, m), fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        fontsize=7,
        loc="center left",
        bbox_to_anchor=(1.0, 0.5),
        frameon=False,
        title="student init method (line: mean, band: min–max)",
        title_fontsize=7,
    )
    fig.suptitle("Learning curves of the task-agnostic students (step 0 = the undistilled control)", fontsize=10)
    return saved(fig, path, 110, outer_legend=True)
