"""Stage 5, embedding objective: how a student is judged (lib.distill.embedding trains it).

- Validation: `embed`, `mean_cosine`, `validation_links` and `cosine_link_auc` (the feature-cosine heuristic on the
  vital-article title-mention links among validation titles, which no test graph is read for).
- Speed: `titles_per_second` (stage 2's encoder and batching).
- Results: `frontier_rows` (one row per encoder, protocol and seed, in the columns the static-model frontier shares),
  `paired_to_reference` (differences paired by seed, 95% intervals) and `goal_sentences`.
"""
from __future__ import annotations

import os
import time

import numpy as np
import pandas as pd
import torch
from scipy.stats import t as student_t
from sklearn.metrics import roc_auc_score

from lib.crawl.sources import embedded_snapshot
from lib.distill.eval import encode
from lib.distill.losses import DistillError
from lib.distill.models import Encoder
from lib.embed.encoder import encode as encode_titles
from lib.embed.encoder import load_model


# ------------------------------------------------------------------------------------------------------ validation
@torch.no_grad()
def embed(enc: Encoder, texts: list[str], max_seq_len: int = 64, batch_size: int = 128) -> np.ndarray:
    """Unit-length mean-pooled embeddings [N, D] float32 of an in-memory encoder (eval mode)."""
    enc.model.eval()
    x = encode(enc, texts, max_seq_len, batch_size)
    return x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-12)


def mean_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Mean row-wise cosine between a [N, D] and b [N, D]."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True).clip(1e-12)
    b = b / np.linalg.norm(b, axis=1, keepdims=True).clip(1e-12)
    return float((a * b).sum(1).mean())


def validation_links(titles: list[str], seed: int = 0, negatives_per_positive: int = 5) -> dict:
    """Link pairs among `titles` for a feature-cosine AUC that never reads a test graph: the stage 1 `embedded`
    source's title-mention links (vital articles) with both ends in `titles`, undirected, against seeded uniform
    non-linked pairs of `titles`. Returns {"titles": [str], "pos": [P, 2], "neg": [P * k, 2]} (indices into titles)."""
    links = embedded_snapshot().links
    index = {t: i for i, t in enumerate(titles)}
    pos = {(min(index[a], index[b]), max(index[a], index[b])) for a, outs in links.items() if a in index
           for b in outs if b in index and b != a}
    if not pos:
        raise DistillError(f"none of the {len(titles)} validation titles link to each other in the embedded source; "
                           "hold out more vital-article titles")
    rng = np.random.default_rng(seed)
    neg: set[tuple[int, int]] = set()
    want = negatives_per_positive * len(pos)
    while len(neg) < want:
        u, v = rng.integers(0, len(titles), size=2)
        p = (min(u, v), max(u, v))
        if u != v and p not in pos:
            neg.add((int(p[0]), int(p[1])))
    return {"titles": list(titles), "pos": np.array(sorted(pos)), "neg": np.array(sorted(neg))}


def cosine_link_auc(x: np.ndarray, links: dict) -> float:
    """ROC AUC of the feature-cosine heuristic on `validation_links`' pairs, features x [N, D] in links' title order."""
    xn = x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-12)
    pairs = np.concatenate([links["pos"], links["neg"]])
    score = (xn[pairs[:, 0]] * xn[pairs[:, 1]]).sum(1)
    return float(roc_auc_score(np.r_[np.ones(len(links["pos"])), np.zeros(len(links["neg"]))], score))


def titles_per_second(model_dir: str | os.PathLike | None, titles: list[str], threads: int, batch_size: int = 256,
                      repeats: int = 3) -> float:
    """Best-of-`repeats` titles per second of stage 2's encoder (lib.embed.encoder.encode: tokenising included,
    equal-length batches) for the sentence-transformers folder `model_dir` (None = all-MiniLM-L6-v2) on `threads`
    CPU threads; the thread count is restored afterwards."""
    model = load_model(model_dir)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        encode_titles(model, titles[:batch_size], batch_size)
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            encode_titles(model, titles, batch_size)
            best = min(best, time.perf_counter() - t0)
    finally:
        torch.set_num_threads(before)
    return len(titles) / best


# --------------------------------------------------------------------------------------------------------- results
FRONTIER_COLUMNS = ("encoder", "kind", "layers", "titles_per_s_1thread", "titles_per_s_all", "protocol", "seed",
                    "gat_auc", "gat_mrr", "cosine_auc")


def frontier_rows(lp: pd.DataFrame, speed: pd.DataFrame | None, arms: pd.DataFrame, reference: str) -> pd.DataFrame:
    """One row per (encoder, protocol, seed) in FRONTIER_COLUMNS from lib.distill.lp.link_prediction_eval's rows
    [embedder, seed, protocol, model, auc, mrr]; speed: indexed by encoder with titles_per_s_<t>thread columns (the
    largest thread count is `titles_per_s_all`); arms: validation rows indexed by arm (init, layers)."""
    gat = lp[lp.model == "gat_model"].set_index(["embedder", "protocol", "seed"])
    cos = lp[lp.model == "cosine"].set_index(["embedder", "protocol", "seed"])
    threads = sorted(int(c.split("_")[-1][:-6]) for c in speed.columns if c.startswith("titles_per_s_")) \
        if speed is not None else []
    rows = []
    for (name, protocol, seed), g in gat.iterrows():
        ref = name == reference
        sp = speed.loc[name] if speed is not None and name in speed.index else None
        rows.append({"encoder": name, "kind": "sentence-transformer" if ref else f"student-{arms.loc[name, 'init']}",
                     "layers": 6 if ref else int(arms.loc[name, "layers"]),
                     "titles_per_s_1thread": float(sp["titles_per_s_1thread"]) if sp is not None and 1 in threads
                     else np.nan,
                     "titles_per_s_all": float(sp[f"titles_per_s_{threads[-1]}thread"]) if sp is not None and threads
                     else np.nan,
                     "protocol": protocol, "seed": int(seed), "gat_auc": float(g["auc"]), "gat_mrr": float(g["mrr"]),
                     "cosine_auc": float(cos.loc[(name, protocol, seed), "auc"])})
    return pd.DataFrame(rows, columns=list(FRONTIER_COLUMNS))


def paired_to_reference(front: pd.DataFrame, reference: str, metrics=("gat_auc", "gat_mrr", "cosine_auc"),
                        margin: float = 0.01) -> pd.DataFrame:
    """Per (encoder, protocol, metric): mean of encoder minus `reference` paired by seed, std, 95% t-interval and
    `within_margin` (the whole interval lies above -margin: no loss larger than `margin` is supported by the seeds)."""
    ref = front[front.encoder == reference].set_index(["protocol", "seed"])
    rows = []
    for (enc, protocol), g in front[front.encoder != reference].groupby(["encoder", "protocol"], sort=False):
        g = g.set_index("seed")
        seeds = [s for s in g.index if (protocol, s) in ref.index]
        for m in metrics:
            d = np.array([g.loc[s, m] - ref.loc[(protocol, s), m] for s in seeds], dtype=float)
            n = len(d)
            mean = float(d.mean()) if n else float("nan")
            half = float(student_t.ppf(0.975, n - 1) * d.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
            rows.append({"encoder": enc, "protocol": protocol, "metric": m, "seeds": n,
                         "encoder_mean": float(g.loc[seeds, m].mean()), "reference_mean": float(ref.loc[
                             [(protocol, s) for s in seeds], m].mean()), "diff": mean,
                         "std": float(d.std(ddof=1)) if n > 1 else float("nan"), "ci_low": mean - half,
                         "ci_high": mean + half, "within_margin": bool(n > 1 and mean - half > -margin)})
    return pd.DataFrame(rows)


def goal_sentences(paired: pd.DataFrame, speed: pd.DataFrame | None, layers: dict[str, int], max_layers: int = 3,
                   margin: float = 0.01, min_ratio: float = 2.0) -> list[str]:
    """One sentence per student on the goal (at most `max_layers` layers; GatModel AUC and feature-cosine AUC within
    `margin` of the reference, paired by seed; at least `min_ratio` x the reference's titles/s at every thread count),
    printed from `paired_to_reference`'s rows and the speed table (indexed by encoder, ratio_<t>thread columns).

    "within" is read twice: the mean paired difference is above -margin (the point estimate), and the whole 95%
    interval is (what the seeds support)."""
    out = []
    for enc, g in paired[paired.metric.isin(["gat_auc", "cosine_auc"])].groupby("encoder", sort=False):
        parts = [f"{r.metric} {r.protocol} {r['diff']:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}]"
                 for _, r in g.iterrows()]
        point = bool((g["diff"] > -margin).all())
        supported = bool(g.within_margin.all())
        ratios = ({c.split("_")[1]: float(speed.loc[enc, c]) for c in speed.columns if c.startswith("ratio_")}
                  if speed is not None and enc in speed.index else {})
        fast = bool(ratios) and all(v >= min_ratio for v in ratios.values())
        n_layers = layers.get(enc)
        small = n_layers is not None and n_layers <= max_layers
        speed_txt = ", ".join(f"{v:.2f}x at {k}" for k, v in ratios.items()) or "speed not measured"
        verdict = ("met" if point and supported and fast and small else
                   "met by the point estimates but not supported by the seeds' intervals" if point and fast and small
                   else "not met")
        out.append(f"{enc} ({n_layers} layers; {speed_txt}): paired differences to the reference (95% interval) "
                   f"{'; '.join(parts)}; goal {verdict}.")
    return out


PROBE_METRICS = ("polarity_test", "topic_test", "fid_cosine")


def versus_control(probes: pd.DataFrame, students: list[str], control: str, n_test: int,
                   thresholds: dict[str, float] | None = None, min_se: float = 2.0) -> tuple[pd.DataFrame, str]:
    """Students (one row per distillation seed in `probes`, rows indexed by `embedder`) against their untrained
    `control` on PROBE_METRICS: mean over seeds, difference to the control, its standard error over the seeds
    (sd / sqrt(n); the control is one deterministic model), and for the two accuracies also the binomial standard
    error of a difference of two accuracies on `n_test` texts each. A metric counts as beaten when the difference is at
    least `min_se` of every standard error that applies; `thresholds` (metric -> least mean) is the other half of the
    goal. Returns (table [metric, student_mean, control, diff, se_seeds, se_binomial, beaten, reaches], sentence)."""
    p = probes.set_index("embedder")
    rows = []
    for m in PROBE_METRICS:
        x = p.loc[students, m].astype(float).to_numpy()
        c = float(p.loc[control, m])
        diff = float(x.mean() - c)
        se_seeds = float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")
        se_bin = float(np.sqrt(x.mean() * (1 - x.mean()) / n_test + c * (1 - c) / n_test)) if m != "fid_cosine" \
            else float("nan")
        ses = [v for v in (se_seeds, se_bin) if np.isfinite(v)]
        beaten = bool(ses) and all(diff >= min_se * v for v in ses)
        reaches = thresholds is None or m not in thresholds or x.mean() >= thresholds[m]
        rows.append({"metric": m, "student_mean": float(x.mean()), "control": c, "diff": diff, "se_seeds": se_seeds,
                     "se_binomial": se_bin, "beaten": beaten, "reaches": bool(reaches)})
    t = pd.DataFrame(rows)
    cells = "; ".join(f"{r.metric} {r.student_mean:.3f} vs {r.control:.3f} ({r.diff:+.3f}, "
                      f"{r.diff / r.se_seeds:.1f} SE over seeds"
                      + (f", {r.diff / r.se_binomial:.1f} binomial SE" if np.isfinite(r.se_binomial) else "") + ")"
                      for r in t.itertuples())
    met = bool(t.beaten.all() and t.reaches.all())
    need = ", ".join(f"{k.split('_')[0]} >= {v:.2f}" for k, v in (thresholds or {}).items())
    return t, (f"{len(students)} seed(s) against the untrained control: {cells}; goal (beat it by >= {min_se:g} SE on "
               f"each{', ' + need if need else ''}) {'met' if met else 'not met'}.")
