"""Stage 5 -> stages 2-3: link prediction with a distilled student as the node embedder.

The only place stage 5 calls lib.train (`train.usable_graphs`, `train.split_graphs`, `train.run_experiment`); all
of it sits in `link_prediction_eval`, so a change of lib.train's API is adapted here and nowhere else.
"""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from lib.distill_losses import DistillError


def link_prediction_available() -> bool:
    """True when stages 2-3 (lib.embed with load_model, lib.train) are present in this checkout."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("lib.embed", "lib.train"))


def link_prediction_eval(run_dir: str | os.PathLike, student_dirs: list[Path], seed: int = 0, epochs: int = 2,
                         n_test_graphs: int = 2, val_fraction: float = 0.1, progress: bool = False) -> pd.DataFrame:
    """Seed-report link prediction with each student as the stage-2 node embedder, next to all-MiniLM-L6-v2.

    For every embedder: embed the crawl's titles into its own deduplicated store (lib.embed), build a dataset in
    run_dir/distill/lp/<name>/ (lib.dataset), train the stage-3 GatModel with the seed defaults for `epochs` on the
    same graph split (the run's split.json when there is one) and score test graphs under the seed and leak_free
    protocols (uniform negatives); the cosine heuristic is the feature-only reference.
    Returns rows {embedder, dim, model, protocol, auc, ap, hits@50, mrr, aauc}.
    """
    from lib import crawl, dataset, embed, train
    from lib.model import ModelConfig

    run_dir = Path(run_dir)
    if not link_prediction_available():
        raise DistillError("link prediction needs lib.embed and lib.train (stages 2-3) in this checkout")
    if not (run_dir / "crawl" / "manifest.json").is_file():
        raise DistillError(f"run_dir={str(run_dir)!r} has no crawl; run notebook 01 on this run_dir first")
    files = crawl.ok_graph_files(run_dir / "crawl")
    from lib.graphio import read_graph
    titles = [t for f in files for t in read_graph(f).titles]
    rows = []
    for name, mdir in [("all-MiniLM-L6-v2", None)] + [(Path(d).name, Path(d)) for d in student_dirs]:
        model = embed.load_model(mdir)
        store = embed.open_store(model)
        embed.embed_titles(titles, model, store, progress=progress)
        out = run_dir / "distill" / "lp" / name
        dataset.build_dataset(files, store, out, progress=progress)
        ds = dataset.GraphDataset(out)
        usable, _ = train.usable_graphs([ds[i] for i in range(len(ds))], ds.num_features)
        graphs = {g.graph_id: g for g in usable}
        if (run_dir / "dataset" / "split.json").is_file():  # the run's one split (notebook 02), same graphs
            sp = dataset.load_split(dataset.GraphDataset(run_dir / "dataset"), [seed])[seed]
            tr, va, te = ([g for g in sp[k] if g in graphs] for k in ("train", "val", "test"))
        else:
            tr, va, te = train.split_graphs(sorted(graphs), 0, n_test_graphs, val_fraction, seed)
        model_cfg = {**ModelConfig(in_channels=ds.num_features).to_dict(), "baseline_dropout": 0.5}
        res = train.run_experiment(graphs, tr, va, te, model_cfg, train.TrainConfig(epochs=epochs, seed=seed), None,
                                   models=["gat_model"], heuristics=["cosine"], protocols=("seed", "leak_free"),
                                   progress=progress)
        rows += [{"embedder": name, "dim": ds.num_features, **{k: v for k, v in r.items()
                                                                 if k not in ("negatives", "supervision")}}
                 for r in res["rows"] if r["negatives"] == "uniform"]
    return pd.DataFrame(rows)
