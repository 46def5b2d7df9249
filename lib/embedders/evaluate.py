"""How notebook 05b judges a node embedder, each rule stated once.

- Validation (choices only): mean cosine to all-MiniLM-L6-v2's embedding per held-out title set, and the
  feature-cosine AUC on the validation topics' title-mention links (`validation_row`).
- Probes: `probe_row`, stage 5's polarity and topic linear probes and fidelity to its teacher (lib.distill.eval),
  every encoder through stage 2's encoder at `PROBE_TOKENS` tokens per text.
- Speed: `speed_table`, the median titles/s of stage 2's encoder over repetitions that alternate the encoders, so a
  noisy shared machine slows all of them alike; `ratio` is against all-MiniLM-L6-v2 measured in the same rounds.
- Paired differences: `paired_to_reference`, each encoder minus all-MiniLM-L6-v2 on the same source, protocol and
  seed, with lib.metrics.paired's 95% t-interval.
- The goal: `GOALS` (lib.embedders.goals) and `goal_rows`, one rule: every interval named by a goal lies above -margin,
  the encoder runs at most `max_layers` transformer layers, and its one-thread speed ratio is at least `speedup`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch
from threadpoolctl import threadpool_limits

from lib.common.timing import median_seconds_each
from lib.distill.eval import evaluate_embedder
from lib.embed.encoder import encode, load_model
from lib.embedders.encoders import REFERENCE
from lib.embedders.goals import Goal, goal_of
from lib.metrics.paired import all_of, mean_interval, verdicts
from lib.metrics.ranking import roc_auc


# ------------------------------------------------------------------------------------------------------ validation
def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-12)


def embed(folder: Path | None, titles: list[str]) -> np.ndarray:
    """Stage 2's vectors [N, D] of `titles` by the encoder in `folder` (None: all-MiniLM-L6-v2), unit length."""
    return unit(encode(load_model(folder), titles)[0])


def cosine_link_auc(x: np.ndarray, links: dict) -> float:
    """ROC AUC of the feature cosine on lib.embedders.data.validation_links' pairs; x [N, D] in links' title order."""
    x = unit(x)
    pairs = np.concatenate([links["pos"], links["neg"]])
    score = (x[pairs[:, 0]] * x[pairs[:, 1]]).sum(1)
    return roc_auc(np.r_[np.ones(len(links["pos"])), np.zeros(len(links["neg"]))], score)


def validation_row(
    folder: Path | None, sets: dict[str, list[str]], targets: dict[str, np.ndarray], links: dict
) -> dict:
    """{cos_<set>, cos_p05_<set> for each title set, link_auc}: the encoder's mean (and 5th-percentile) cosine to
    all-MiniLM-L6-v2 on each held-out set (targets[set] [N, 384]; NaN for an encoder of another width) and its
    feature-cosine AUC on the validation links."""
    row = {}
    for name, titles in sets.items():
        x = embed(folder, titles)
        # an encoder of another width (a PCA-narrowed static table) has no cosine to the target: NaN, not a guess
        cos = (x * unit(targets[name])).sum(1) if x.shape[1] == targets[name].shape[1] else np.full(len(x), np.nan)
        row[f"cos_{name}"] = float(cos.mean())
        row[f"cos_p05_{name}"] = float(np.quantile(cos, 0.05))
    row["link_auc"] = cosine_link_auc(embed(folder, links["titles"]), links)
    return row


# ---------------------------------------------------------------------------------------------------------- probes
PROBE_TOKENS = 64  # stage 5's probe length: a student saved at 64 tokens and all-MiniLM-L6-v2 read the same text


def probe_row(folder: Path | None, data: dict, teacher: dict, seed: int) -> dict:
    """{polarity_val, polarity_test, topic_val, topic_test, fid_cosine, fid_spearman} of the encoder in `folder`
    (lib.distill.eval.evaluate_embedder on lib.distill.data.build_datasets' tasks; teacher: the teacher's embeddings
    {"fid_val", "fid_test"} of data["fidelity"])."""
    model = load_model(folder)
    model.max_seq_length = PROBE_TOKENS
    return evaluate_embedder(lambda texts: encode(model, texts)[0], data, teacher, seed)


# ----------------------------------------------------------------------------------------------------------- speed
def titles_per_second(models: dict, titles: list[str], repeats: int, threads: int, batch_size: int = 256) -> dict:
    """{name: titles/s} of stage 2's encoder (lib.embed.encoder.encode: tokenising included, `batch_size` titles a
    batch) over `titles` with each of `models`, `threads` torch and BLAS threads: lib.common.timing's median of
    `repeats` rounds that time every model once in turn, after a warm-up batch each; the thread count is restored
    afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(threads):
            seconds = median_seconds_each(
                {k: lambda m=m: encode(m, titles, batch_size=batch_size) for k, m in models.items()},
                repeats,
                {k: lambda m=m: encode(m, titles[:64], batch_size=batch_size) for k, m in models.items()},
            )
    finally:
        torch.set_num_threads(before)
    return {k: len(titles) / s for k, s in seconds.items()}


def speed_table(folders: dict[str, Path | None], titles: list[str], repeats: int, threads: int = 1) -> pd.DataFrame:
    """Rows [encoder, threads, titles_per_s, ratio, repeats, titles]: `titles_per_second` of every encoder;
    ratio = titles_per_s / all-MiniLM-L6-v2's (which must be among `folders`)."""
    med = titles_per_second({k: load_model(v) for k, v in folders.items()}, titles, repeats, threads)
    return pd.DataFrame(
        [
            {
                "encoder": k,
                "threads": threads,
                "titles_per_s": v,
                "ratio": v / med[REFERENCE],
                "repeats": repeats,
                "titles": len(titles),
            }
            for k, v in med.items()
        ]
    )


# --------------------------------------------------------------------------------------------- paired and the goal
def paired_to_reference(lp: pd.DataFrame, metrics=("auc", "mrr")) -> pd.DataFrame:
    """Per (source, protocol, model, encoder) and metric: encoder minus all-MiniLM-L6-v2 paired by seed (mean, std,
    95% interval). lp: rows [source, embedder, seed, model, protocol, <metrics>]."""
    key = ["source", "protocol", "model"]
    ref = lp[lp.embedder == REFERENCE].set_index([*key, "seed"])
    rows = []
    for (source, protocol, model, enc), g in lp[lp.embedder != REFERENCE].groupby([*key, "embedder"], sort=False):
        g = g.set_index("seed")
        seeds = [s for s in g.index if (source, protocol, model, s) in ref.index]
        for m in metrics:
            d = [g.loc[s, m] - ref.loc[(source, protocol, model, s), m] for s in seeds]
            rows.append(
                {
                    "source": source,
                    "protocol": protocol,
                    "model": model,
                    "encoder": enc,
                    "metric": m,
                    "encoder_mean": float(g.loc[seeds, m].mean()),
                    **mean_interval(d),
                }
            )
    return pd.DataFrame(rows)


def goal_rows(paired: pd.DataFrame, speed: pd.DataFrame, layers: dict[str, int]) -> pd.DataFrame:
    """One row per encoder: its goal, the lowest interval bound per model, its speed ratio, and whether each part
    and the whole goal are met (columns encoder, goal, layers, ratio, worst_<model>, small, fast, close, met)."""
    auc = paired[paired.metric == "auc"]
    ratio = speed.set_index("encoder")["ratio"]
    rows = []
    for enc, n in layers.items():
        goal = goal_of(n)
        g = auc[auc.encoder == enc]
        worst = {
            m: float(g[g.model == m].ci_low.min()) if len(g[g.model == m]) else float("nan") for m, _ in goal.margins
        }
        # every (source, protocol) interval of every model above its goal's margin, by the project's one rule
        close = all(len(g[g.model == m]) and all_of(verdicts(g[g.model == m], -v)) == "met" for m, v in goal.margins)
        r = float(ratio.get(enc, float("nan")))
        row = {
            "encoder": enc,
            "goal": goal.name,
            "layers": n,
            "ratio": r,
            **{f"worst_{m}": v for m, v in worst.items()},
            "small": n <= goal.max_layers,
            "fast": bool(r >= goal.speedup),
            "close": close,
        }
        row["met"] = bool(row["small"] and row["fast"] and close)
        rows.append(row)
    return pd.DataFrame(rows)


def goal_sentence(row: pd.Series, goal: Goal) -> str:
    """The verdict on one encoder, printed from its goal row."""
    worst = "; ".join(f"lowest {m} AUC bound {row[f'worst_{m}']:+.3f} (needs > -{v:g})" for m, v in goal.margins)
    missing = [
        w
        for w, ok in (
            ("too many layers", row.small),
            ("too slow", row.fast),
            ("an interval falls below its margin", row.close),
        )
        if not ok
    ]
    return f"{row.encoder}: {row.ratio:.1f}x the titles/s; {worst}; goal ({goal.text()}) " + (
        "met." if row.met else f"not met ({', '.join(missing)})."
    )
