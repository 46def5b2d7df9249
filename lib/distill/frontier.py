"""How small can stage 3's node embedder be: the speed-quality frontier of every encoder stage 2 can load.

Each encoder — all-MiniLM-L6-v2 (stage 2's default), model2vec static models distilled from it (lib.embed.static),
all-mpnet-base-v2 (stage 5's teacher), and any saved student (lib.distill.embedding: students trained to match
all-MiniLM-L6-v2's embedding, their untrained layer-dropped controls, a weight-rounded copy of all-MiniLM-L6-v2 that
shows the seeds' noise floor) — is measured as
- the node embedder of stage 3: GatModel test AUC / MRR and feature-cosine AUC on the same test pairs, per protocol and
  seed (lib.distill.lp.link_prediction_eval, uniform negatives, mp supervision);
- a sentence encoder: stage 5's polarity and topic probes and fidelity to the teacher (lib.distill.eval);
- a title encoder: titles per second through lib.embed.encoder.encode at 1 thread and at all threads.
`paired_to_reference` gives each encoder's difference to all-MiniLM-L6-v2 paired by seed with a 95% t-interval,
`goal_sentences` says from those numbers whether an encoder meets the goal (at most 3 transformer layers or static;
both AUCs within `tolerance`, interval included, at >= `speedup` x the reference's titles/s), and `plot_frontier`
draws titles/s against GatModel and feature-cosine AUC.
A choice between static variants is made on validation AUC only (`choose_on_validation`).
"""
from __future__ import annotations

import json
import os
import statistics
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import torch
from threadpoolctl import threadpool_limits

from lib.common.paths import append_csv_rows, locked, rows_with
from lib.distill.eval import encode, evaluate_embedder, paired_differences
from lib.distill.lp import REFERENCE
from lib.distill.models import assistant_path, load_encoder
from lib.embed.encoder import default_model_dir, load_model, model_identity
from lib.embed.encoder import encode as encode_titles
from lib.embed.static import STATIC_CONFIG, StaticEncoder, distil
from lib.viz.figures import saved


@dataclass(frozen=True)
class Embedder:
    """One encoder of the frontier. folder None = all-MiniLM-L6-v2; kind "transformer", "student" (a transformer
    trained or cut down here), "control" (a student's untrained counterpart) or "static"."""

    label: str
    folder: Path | None
    kind: str = "transformer"

    @property
    def architecture(self) -> str:
        """'static' or 'L<layers>-H<hidden>-F<feed-forward>' from the folder's config.json: encoders that should run
        at the same speed."""
        if self.kind == "static":
            return "static"
        c = json.loads(((self.folder or assistant_path()) / "config.json").read_text())
        return f"L{c['num_hidden_layers']}-H{c['hidden_size']}-F{c.get('intermediate_size', 0)}"

    @property
    def layers(self) -> int:
        """Transformer layers (0 for a static model), read from the folder's config.json."""
        if self.kind == "static":
            return 0
        return int(json.loads(((self.folder or assistant_path()) / "config.json").read_text())["num_hidden_layers"])


def static_embedder(root: str | os.PathLike, pca_dims: int | None, seed: int = 0,
                    source: Embedder | None = None) -> Embedder:
    """The model2vec model distilled from all-MiniLM-L6-v2 (or from the transformer `source`, e.g. a student) with
    `pca_dims` (None: no PCA) in root/m2v_<dims>[_<source folder>]; distilled only when the folder is absent or was
    made with other settings."""
    dims = f"pca{pca_dims}" if pca_dims else "nopca"
    name, made_from = (f"m2v_{dims}", REFERENCE) if source is None else (f"m2v_{dims}_{source.folder.name}",
                                                                          source.label)
    folder = Path(root) / name
    cfg = folder / STATIC_CONFIG
    made = json.loads(cfg.read_text()) if cfg.is_file() else {}
    if made.get("pca_dims") != pca_dims or made.get("seed") != seed or made.get("source") != made_from:
        distil(default_model_dir() if source is None else source.folder, folder, pca_dims=pca_dims, seed=seed,
               source_name=made_from)
    return Embedder(f"static {dims}" + ("" if source is None else f" of {source.label}"), folder, "static")


# ------------------------------------------------------------------------------------------------------ speed
def titles_per_second(model, titles: list[str], threads: int, reps: int = 3, batch_size: int = 256) -> list[float]:
    """Titles/s of `lib.embed.encoder.encode(model, titles)` (stage 2's path) with `threads` torch and BLAS threads,
    one value per repetition after a warm-up."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(threads):
            encode_titles(model, titles[:batch_size], batch_size=batch_size)
            out = []
            for _ in range(reps):
                t0 = time.perf_counter()
                encode_titles(model, titles, batch_size=batch_size)
                out.append(len(titles) / (time.perf_counter() - t0))
    finally:
        torch.set_num_threads(before)
    return out


def speed_rows(embedders: list[Embedder], titles: list[str], threads=(1, 2), reps: int = 3) -> pd.DataFrame:
    """Median titles/s per (embedder, threads) on the same titles; repetitions alternate the embedders, so a noisy
    shared machine slows all of them alike. Columns embedder, threads, titles_per_s, reps, titles."""
    models = {e.label: load_model(e.folder) for e in embedders}
    runs = {(e.label, t): [] for e in embedders for t in threads}
    for _ in range(reps):
        for t in threads:
            for e in embedders:
                runs[(e.label, t)] += titles_per_second(models[e.label], titles, t, reps=1)
    return pd.DataFrame([{"embedder": k[0], "threads": k[1], "titles_per_s": statistics.median(v), "reps": len(v),
                          "titles": len(titles)} for k, v in runs.items()])


# ------------------------------------------------------------------------------------------------------ probes
def probe_rows(embedders: list[Embedder], data: dict, teacher_emb: dict, max_seq_len: int, seed: int = 0,
               rows_file: str | os.PathLike | None = None) -> pd.DataFrame:
    """Stage 5's polarity / topic probes and fidelity (lib.distill.eval) per embedder, at `max_seq_len` tokens per text.
    Transformers run through lib.distill.models.Encoder exactly as stage 5 evaluates them; static models cut texts at
    as many of their own tokens. Finished embedders are kept in `rows_file` (resumable; processes sharing it probe
    each model once)."""
    rows_file = Path(rows_file) if rows_file else None
    rows = []
    for e in embedders:
        folder = e.folder or assistant_path()
        key = {"embedder": e.label, "model_id": model_identity(folder), "seed": seed, "max_seq_len": max_seq_len}
        # one process at a time per model; the rows are read under the lock, so a model another process sharing
        # rows_file probed meanwhile is taken from the file
        with locked(rows_file.with_name(f"{rows_file.name}.{key['model_id']}")) if rows_file else nullcontext():
            done = pd.read_csv(rows_file) if rows_file and rows_file.is_file() else pd.DataFrame()
            old = rows_with(done, key)
            if len(old):
                rows.append(old.iloc[0].to_dict())
                continue
            if e.kind == "static":
                enc = StaticEncoder(folder, max_seq_length=max_seq_len)
                res = evaluate_embedder(lambda texts: enc.encode(texts)[0], data, teacher_emb, seed)
            else:
                enc = load_encoder(folder)
                res = evaluate_embedder(lambda texts: encode(enc, texts, max_seq_len), data, teacher_emb, seed)
            rows.append({**key, **res})
            if rows_file:
                append_csv_rows(rows_file, [rows[-1]])
    return pd.DataFrame(rows)


def carry_over(ids: dict[str, str], sources: list[Path], rows_file: Path, keys: list[str], fixed: dict) -> int:
    """Append to `rows_file` the rows of the CSV files `sources` whose `model_id` is one of `ids` (label -> model
    identity) and whose columns agree with `fixed`, under the label of that identity, unless `rows_file` already holds
    the same (label, model_id, *keys) row; `keys` must name a row uniquely within one model (for link prediction:
    seed, epochs, protocols, model and protocol). The same weights under the same settings give the same numbers, so
    a frontier re-run next to an earlier one does not compute them again. Returns the number of rows added."""
    have = pd.read_csv(rows_file) if Path(rows_file).is_file() else pd.DataFrame(columns=["embedder", "model_id",
                                                                                         *keys])
    seen = {tuple(map(str, r)) for r in have[["embedder", "model_id", *keys]].itertuples(index=False)}
    new = []
    for src in sources:
        rows = pd.read_csv(src)
        for k, v in fixed.items():
            rows = rows[rows[k].astype(str) == str(v)]
        for label, mid in ids.items():
            for r in rows[rows.model_id == mid].to_dict("records"):
                key = tuple(map(str, [label, mid, *(r[k] for k in keys)]))
                if key not in seen:
                    seen.add(key)
                    new.append({**r, "embedder": label})
    if new:
        append_csv_rows(rows_file, new)
    return len(new)


# ------------------------------------------------------------------------------------------------------ summary
def paired_to_reference(lp: pd.DataFrame, reference: str = REFERENCE, metrics=("auc", "mrr")) -> pd.DataFrame:
    """Per (protocol, model, embedder) and metric: the difference to `reference` on the same seed, its mean, std and
    95% t-interval over the paired seeds (lib.distill.eval.paired_differences). Columns protocol, model, embedder,
    metric, seeds, diff, std, ci_low, ci_high."""
    df = lp.assign(stage="task-agnostic", student=lp.protocol + "|" + lp.model, init="", method=lp.embedder)
    out = paired_differences(df, reference=reference, metrics=metrics)
    out[["protocol", "model"]] = out.student.str.split("|", expand=True)
    return out.rename(columns={"method": "embedder"})[["protocol", "model", "embedder", "metric", "seeds", "diff",
                                                      "std", "ci_low", "ci_high"]]


def choose_on_validation(lp: pd.DataFrame, candidates: list[str]) -> str:
    """The candidate with the best GatModel validation AUC (mean over protocols and seeds); test numbers unused."""
    val = lp[(lp.model == "gat_model") & lp.embedder.isin(candidates)].groupby("embedder")["val_auc"].mean()
    return str(val.idxmax())


def summary_table(lp: pd.DataFrame, probes: pd.DataFrame, speed: pd.DataFrame,
                  embedders: list[Embedder] | None = None) -> pd.DataFrame:
    """One row per embedder: kind and layers (from `embedders`), dim, seeds, mean +- std over seeds of GatModel and
    cosine test AUC / MRR per protocol, probes, fidelity and titles/s per thread count (speed-up against the
    reference's in the same run)."""
    g = lp.groupby(["embedder", "protocol", "model"])
    stats = g[["auc", "mrr"]].mean().join(g[["auc", "mrr"]].std(), rsuffix="_std").reset_index()
    wide = stats.pivot(index="embedder", columns=["model", "protocol"])
    wide.columns = [f"{m}_{p}_{k}" for k, m, p in wide.columns]
    out = wide.join(lp.groupby("embedder")["dim"].first()).join(lp.groupby("embedder")["seed"].nunique().rename(
        "seeds"))
    if embedders is not None:
        out = out.join(pd.DataFrame([{"embedder": e.label, "kind": e.kind, "layers": e.layers} for e in embedders])
                       .set_index("embedder"))
    out = out.join(probes.set_index("embedder")[["polarity_test", "topic_test", "fid_cosine", "fid_spearman"]])
    sp = speed.pivot(index="embedder", columns="threads", values="titles_per_s")
    for t in sp.columns:
        out[f"titles_per_s_{t}t"] = sp[t]
        out[f"speedup_{t}t"] = sp[t] / sp.loc[REFERENCE, t]
    order = [e for e in lp.embedder.drop_duplicates()]
    return out.loc[order].reset_index()


def speed_spread(table: pd.DataFrame, embedders: list[Embedder], threads: int = 1) -> list[str]:
    """For every transformer architecture measured more than once: the range of its speed-ups at `threads`
    thread(s), one sentence each — how far the timing alone moves a ratio on this machine."""
    arch = {e.label: e.architecture for e in embedders}
    t = table.assign(arch=table.embedder.map(arch))
    out = []
    for a, g in t[t.arch != "static"].groupby("arch", sort=False):
        if len(g) > 1:
            col = g[f"speedup_{threads}t"]
            out.append(f"{', '.join(g.embedder)} share one architecture ({a}) and measured {col.min():.2f}x to "
                       f"{col.max():.2f}x at {threads} thread(s)")
    return out


def goal_sentences(diffs: pd.DataFrame, table: pd.DataFrame, tolerance: float = 0.01, speedup: float = 2.0,
                   max_layers: int = 3) -> list[str]:
    """Per embedder other than the reference: does it meet the goal? At most `max_layers` transformer layers (a
    static model has none; a table without a `layers` column is not checked), GatModel AUC and cosine AUC differences
    to the reference with their 95% intervals inside +-tolerance under every protocol, and at least `speedup` x the
    reference's titles/s at every thread count measured. An encoder whose intervals all stay above -tolerance but
    reach above +tolerance (no loss beyond the tolerance is supported, a gain may be) is said to meet the goal read as
    non-inferiority only. Printed from the numbers."""
    out = []
    auc = diffs[diffs.metric == "auc"]
    for emb in [e for e in table.embedder if e != REFERENCE]:
        d = auc[(auc.embedder == emb) & auc.model.isin(["gat_model", "cosine"])]
        inside = bool(len(d)) and bool(((d.ci_low >= -tolerance) & (d.ci_high <= tolerance)).all())
        no_loss = bool(len(d)) and bool((d.ci_low >= -tolerance).all())
        cells = "; ".join(f"{r.model} {r.protocol} {r['diff']:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}]"
                          for _, r in d.iterrows())
        row = table.set_index("embedder").loc[emb]
        ups = {c: row[c] for c in table.columns if c.startswith("speedup_")}
        fast = bool(ups) and all(v >= speedup for v in ups.values())
        small = "layers" not in table.columns or int(row["layers"]) <= max_layers
        speed = ", ".join(f"{v:.2f}x at {c[len('speedup_'):-1]} thread(s)" for c, v in ups.items())
        verdict = ("meets the goal" if inside and fast and small else
                   "meets the goal read as non-inferiority only (no interval below -{t}, one above +{t})".format(
                       t=tolerance) if no_loss and fast and small else "does not meet the goal")
        why = [] if inside or (no_loss and fast and small) else [f"an AUC interval leaves ±{tolerance}"]
        why += [] if fast else [f"below {speedup}x speed"]
        why += [] if small else [f"{int(row['layers'])} layers > {max_layers}"]
        out.append(f"{emb}: AUC - {REFERENCE} over {int(d.seeds.min()) if len(d) else 0} seeds: {cells}; speed "
                   f"{speed} -> {verdict}" + (f" ({', '.join(why)})" if why else ""))
    return out


def plot_frontier(table: pd.DataFrame, protocols: list[str], threads: int = 1, path: str | os.PathLike | None = None):
    """Rows GatModel and feature-cosine test AUC, one column per protocol: titles/s at `threads` thread(s) (log x)
    against the AUC (mean, bar: std over seeds), one marker per encoder; the shaded band is the reference's AUC +-0.01
    and the dotted line 2x its speed."""
    markers = "osD^vP*Xh<>p"
    fig, axes = plt.subplots(2, len(protocols), figsize=(4.6 * len(protocols) + 3.2, 7.2), squeeze=False)
    ref = table.set_index("embedder").loc[REFERENCE]
    for row, (model, name) in enumerate((("gat_model", "GatModel"), ("cosine", "feature-cosine"))):
        for ax, p in zip(axes[row], protocols):
            for i, r in enumerate(table.itertuples()):
                ax.errorbar(getattr(r, f"titles_per_s_{threads}t"), getattr(r, f"{model}_{p}_auc"),
                            yerr=getattr(r, f"{model}_{p}_auc_std"), fmt=markers[i % len(markers)],
                            color=plt.cm.tab20(i % 20), ms=7, capsize=3, label=f"{r.embedder} ({int(r.dim)}-d)")
            y0 = ref[f"{model}_{p}_auc"]
            ax.axhspan(y0 - 0.01, y0 + 0.01, color="0.85", zorder=0, label=f"{REFERENCE} AUC ±0.01")
            ax.axvline(2 * ref[f"titles_per_s_{threads}t"], color="0.4", ls=":", label=f"2x {REFERENCE} titles/s")
            ax.set(xscale="log", title=f"{p}: {name} test AUC", xlabel=f"titles per second ({threads} thread"
                   f"{'s' if threads > 1 else ''}, log)", ylabel="test AUC (mean, bar: std over seeds)")
            ax.grid(alpha=0.3, which="both")
    axes[0][-1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8, frameon=False)
    return saved(fig, path, 130, outer_legend=True)
