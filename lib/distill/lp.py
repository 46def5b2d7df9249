"""Stage 5 -> stages 2-3: link prediction with a distilled student as the node embedder.

The only place stages 5 and 5b call stage 3 (`usable_graphs`, `split_graphs`, `run_experiment`); all of it sits in
`graph_link_prediction` (any graph files; `link_prediction_eval` on a run folder's crawl). Its GatModels are trained
with the GatModel and training settings of the calling notebook's config (GatTrainingParams, which notebooks 03, 03b,
05 and 05b inherit alike, so a `-p` value reaches each); what the study sets itself (`lp_params`) each of those
configs names in its GAT_OVERRIDES.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from lib.common.graphio import read_graph
from lib.common.paths import append_csv_rows, locked, read_rows, rows_with
from lib.crawl import campaign as crawl
from lib.distill.losses import DistillError
from lib.embed import dataset
from lib.embed.dataset import split_graphs
from lib.embed.encoder import load_model, model_id_of
from lib.embed.store import embed_titles, open_store
from lib.linkpred.config import GatParams, GatTrainingParams
from lib.linkpred.data import usable_graphs
from lib.linkpred.stage import run_experiment

REFERENCE = "all-MiniLM-L6-v2"
LP_MODELS = ("gat_model", "cosine")
"""What `link_prediction_eval` scores per pair: the seed's GatModel and the feature-only cosine heuristic."""


def link_prediction_available() -> bool:
    """True when stages 2-3 (lib.embed.encoder with load_model, lib.linkpred.train) are present in this checkout."""

    return all(importlib.util.find_spec(m) is not None for m in ("lib.embed.encoder", "lib.linkpred.train"))


def link_prediction_eval(
    run_dir: str | os.PathLike,
    embedders: list[tuple[str, int, Path | None]],
    training: GatTrainingParams,
    protocols: tuple = ("leak_free",),
    n_test_graphs: int = 2,
    val_fraction: float = 0.1,
    rows_file: str | os.PathLike | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Seed-report link prediction with each embedder as the stage-2 node embedder on a run folder's crawl, one
    GatModel per (embedder, seed) trained with `training` (notebook 05's config; `graph_link_prediction` on notebook
    01's graphs, datasets in run_dir/distill/lp/), on the run's graph split of that seed (notebook 02's split.json; a
    seeded split of `n_test_graphs` and `val_fraction` when the run has none)."""
    run_dir = Path(run_dir)
    if not link_prediction_available():
        raise DistillError(
            "link prediction needs lib.embed.encoder and lib.linkpred.train (stages 2-3) in this checkout"
        )
    if not (run_dir / "crawl" / "manifest.json").is_file():
        raise DistillError(f"run_dir={str(run_dir)!r} has no crawl; run notebook 01 on this run_dir first")
    split = run_dir / "dataset" / "split.json"
    return graph_link_prediction(
        crawl.ok_graph_files(run_dir / "crawl"),
        embedders,
        run_dir / "distill" / "lp",
        lambda seed: lp_params(training, seed, protocols, n_test_graphs, val_fraction),
        split_file=split if split.is_file() else None,
        rows_file=rows_file,
        progress=progress,
    )


def graph_link_prediction(
    files: list[Path],
    embedders: list[tuple[str, int, Path | None]],
    out_root: Path,
    params_of: Callable[[int], GatParams],
    split_file: Path | None = None,
    rows_file: str | os.PathLike | None = None,
    key: dict | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Seed-report link prediction on the graph `files` with each embedder as the stage-2 node embedder.

    embedders: (label, seed, model folder) triples; folder None = all-MiniLM-L6-v2, else a saved sentence-transformers
    or model2vec folder. For each: embed the graphs' titles into the model's deduplicated store (lib.embed.encoder),
    build a dataset in out_root/<model identity>/ (lib.embed.dataset; a retrained encoder saved in the same folder is
    another model, with its own dataset and checkpoints), train the stage-3 GatModel with `params_of(seed)`
    (notebook 03's GatParams, e.g. `lp_params`) on that seed's graph split (`split_file`, notebook 02's split.json of
    these graphs; else `split_graphs` seeded by the seed) and score the test graphs under its protocols with uniform
    negatives; the `cosine` heuristic is the feature-only reference. Resumable: finished (embedder, seed) pairs are
    kept in `rows_file` (keyed by the model's content identity, the GatModel's epochs and other settings
    (`changed_settings`) and `key`, so a retrained student or another GatModel is scored again)
    and GatModel epochs are checkpointed in the dataset folder. Several processes may share one rows file: a pair is
    scored under a lock on its dataset folder and appended under a lock on the file.
    Returns rows {embedder, seed, dim, model, protocol, auc, ap, hits@50, mrr, aauc, val_auc, model_id, **key}.
    """
    for label, seed, mdir in embedders:
        if mdir is not None and not Path(mdir).is_dir():
            raise DistillError(f"embedder {label!r} (seed {seed}): no saved model at {mdir}; save the model first")
    titles = [t for f in files for t in read_graph(f).titles]
    rows_file = Path(rows_file) if rows_file else None
    rows = []
    for label, seed, mdir in embedders:
        model = load_model(mdir)
        params = params_of(seed)
        pair = dict(
            embedder=label,
            seed=seed,
            model_id=model_id_of(model),
            epochs=params.gat_epochs,
            gat_settings=changed_settings(params),
            protocols="+".join(params.protocols),
            **(key or {}),
        )
        out = Path(out_root) / pair["model_id"]
        out.parent.mkdir(parents=True, exist_ok=True)
        # one process at a time per dataset folder; the rows are read under the lock, so a pair another process
        # scored meanwhile is taken from the rows file, not trained twice
        with locked(out):
            done = _done_rows(rows_file)
            old = rows_with(done, pair)
            # a pair counts as done only with a row for each model and protocol (a killed copy may leave fewer)
            if len(old) and {(m, p) for m in LP_MODELS for p in params.protocols} <= set(
                zip(old["model"], old["protocol"])
            ):
                rows += old.to_dict("records")
                continue
            rows += _score(files, titles, model, pair, out, split_file, params, progress, rows_file)
    return pd.DataFrame(rows)


def _done_rows(rows_file: Path | None) -> pd.DataFrame:
    """The finished rows kept in `rows_file`, read under its lock (a damaged file is moved aside, its pairs scored
    again)."""
    if rows_file is None:
        return pd.DataFrame()
    with locked(rows_file):
        return read_rows(rows_file, "link-prediction rows", "their (embedder, seed) pairs are scored again")


def lp_params(
    training: GatTrainingParams, seed: int, protocols: tuple, n_test_graphs: int, val_fraction: float
) -> GatParams:
    """Notebook 03's settings for one (embedder, seed) pair: the GatModel and its training as `training` (notebook
    05's or 05b's config) gives them, then what the study sets itself, as those configs' GAT_OVERRIDES name it: this
    seed, one model, `protocols`, the seed's supervision only, no per-positive negative sets (only the uniform rows
    are kept: skip their cost) and the split's sizes; notebook 03's defaults for the rest."""
    return GatParams(
        **asdict(training.gat_training()),
        first_seed=seed,
        n_seeds=1,
        protocols=list(protocols),
        train_supervision=["mp"],
        negatives_per_positive=0,
        n_test_graphs=n_test_graphs,
        val_fraction=val_fraction,
    )


def changed_settings(params: GatParams) -> str:
    """The GatModel and training settings of `params` other than the defaults and gat_epochs (a key of its own), as
    "name=value;..." ("defaults" for none): what a finished (embedder, seed) pair's rows were trained with."""
    ours, default = asdict(params.gat_training()), asdict(GatTrainingParams())
    return ";".join(f"{k}={v}" for k, v in ours.items() if v != default[k] and k != "gat_epochs") or "defaults"


def _score(
    files: list,
    titles: list[str],
    model,
    key: dict,
    out: Path,
    split_file: Path | None,
    params: GatParams,
    progress: bool,
    rows_file: Path | None,
) -> list[dict]:
    """One (embedder, seed) pair of `graph_link_prediction`: embed, build the dataset in `out`, train and score with
    `params`."""
    seed = params.first_seed

    store = open_store(model)
    embed_titles(titles, model, store, progress=progress)
    dataset.build_dataset(files, store, out, progress=progress)
    ds = dataset.GraphDataset(out)
    usable, _ = usable_graphs([ds[i] for i in range(len(ds))], ds.num_features)
    graphs = {g.graph_id: g for g in usable}
    if split_file is not None:  # the run's one split (notebook 02), same graphs
        sp = dataset.load_split(dataset.GraphDataset(split_file.parent), [seed])[seed]
        tr, va, te = ([g for g in sp[k] if g in graphs] for k in ("train", "val", "test"))
    else:
        tr, va, te = split_graphs(sorted(graphs), 0, params.n_test_graphs, params.val_fraction, seed)
    res = run_experiment(
        graphs,
        {"train": tr, "val": va, "test": te},
        params,
        seed,
        ds.num_features,
        out,
        scorers=LP_MODELS,
        progress=progress,
    )
    new = [
        {**key, "dim": ds.num_features, **{k: v for k, v in r.items() if k not in ("negatives", "supervision", "seed")}}
        for r in res["rows"]
        if r["negatives"] == "uniform"
    ]
    if rows_file:
        append_csv_rows(rows_file, new, replace=key)  # the pair's rows replace an incomplete set of them
    return new


def lp_table(lp: pd.DataFrame, metrics=("auc", "mrr")) -> pd.DataFrame:
    """Mean and std over seeds per (protocol, embedder, model): columns <metric>_mean, <metric>_std, seeds."""
    g = lp.groupby(["protocol", "embedder", "model"], sort=False)
    out = g[list(metrics)].mean().add_suffix("_mean").join(g[list(metrics)].std().add_suffix("_std"))
    out["seeds"] = g["seed"].nunique()
    return out


def lp_verdicts(
    lp: pd.DataFrame, protocol: str = "leak_free", model: str = "gat_model", metric: str = "auc"
) -> list[str]:
    """One sentence per distilled student: it against its undistilled control as node embedder (labels
    '<student> <method>' and '<student> no distillation', e.g. '3x384 random MiniLM'), paired by seed, from the
    numbers in `lp`."""
    sel = lp[(lp.protocol == protocol) & (lp.model == model)]
    labels = sorted(sel.embedder.unique())
    out = []
    for ctrl in [x for x in labels if x.endswith(" no distillation")]:
        student = ctrl[: -len(" no distillation")]
        c = sel[sel.embedder == ctrl].set_index("seed")[metric]
        for label in [x for x in labels if x.startswith(student + " ") and x != ctrl]:
            method = label[len(student) + 1 :]
            d = sel[sel.embedder == label].set_index("seed")[metric]
            seeds = sorted(set(d.index) & set(c.index))
            if not seeds:
                continue
            gain = d[seeds] - c[seeds]
            std = f" ± {gain.std():.3f}" if len(seeds) > 1 else ""
            word = (
                "beats"
                if gain.mean() > 0 and (gain > 0).all()
                else ("ties" if gain.mean() == 0 else "does not consistently beat")
            )
            who = "distilled" if method == "MiniLM" else method
            out.append(
                f"{student}: {who} {d[seeds].mean():.3f} vs control {c[seeds].mean():.3f} {metric.upper()} "
                f"({protocol}, {model}); gain {gain.mean():+.3f}{std} over {len(seeds)} seed(s): the "
                f"{who} student {word} its control as node embedder"
            )
    return out
