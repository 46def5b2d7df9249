"""Stage 3 experiment: every model kind × seed trained, selected on validation and evaluated on the same tasks."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Iterable

import numpy as np

from lib.linkpred.audit import leak_audit
from lib.linkpred.checkpoint import data_fingerprint
from lib.linkpred.config import MODEL_KINDS, SUPERVISIONS, TrainConfig
from lib.linkpred.data import graph_problem
from lib.linkpred.evaluate import evaluate_heuristic, evaluate_model
from lib.linkpred.heuristics import HEURISTICS
from lib.linkpred.protocols import make_protocol
from lib.linkpred.sampling import PER_POSITIVE, PROTOCOLS, TRAIN_SET, TitlePairs, check_protocol
from lib.linkpred.train import train_model
from lib.metrics.link import SEED_REPORTED


def run_experiment(graphs: dict, train_ids: list, val_ids: list, test_ids: list, model_cfg: dict, cfg: TrainConfig,
                   run_dir: str | Path | None, models: Iterable[str] = MODEL_KINDS,
                   heuristics: Iterable[str] = HEURISTICS, protocols: Iterable[str] = PROTOCOLS,
                   supervisions: Iterable[str] = ("mp",), baseline_epochs: int | None = None,
                   progress: bool = True, tp: TitlePairs | None = None, splits: dict | None = None,
                   per_positive: int = PER_POSITIVE) -> dict:
    """Train `models` and score them and the `heuristics` on the test graphs under each protocol and negative set.
    A trained model's rows also carry val_auc / val_mrr: its selected epoch's validation score on that negative set
    (what lib.metrics.link.choose_on_validation picks a best model by).

    graphs: graph_id -> Data (the whole dataset). Protocols that leave the training graphs untouched ("seed",
    "within_graph") share one trained model per (supervision, kind). Returns {"rows": [{seed, model, protocol,
    supervision, negatives, auc, ap, hits@K, mrr, aauc, aauc_self}], "train": {"<train set>/<supervision>/<kind>":
    TrainResult as dict}, "audit": [leak_audit rows], "skipped": [...], "protocols": {protocol: ProtocolSplit}}.
    Checkpoints go to run_dir/checkpoints/seed<S>/<train set>-<supervision>/<kind>/. splits: protocol ->
    ProtocolSplit of this seed already built (the notebook's audit ones), else built here with `per_positive`.
    """
    protocols = [check_protocol(p) for p in protocols]
    supervisions = list(supervisions)
    for sv in supervisions:
        if sv not in SUPERVISIONS:
            raise ValueError(f"supervision {sv!r} does not exist; use one of {SUPERVISIONS}")
    in_ch = model_cfg["in_channels"]
    tp = tp or TitlePairs(graphs.values())
    global_links = np.unique(np.concatenate([tp.edge_keys(g) for g in graphs.values()]))
    splits = {p: (splits or {}).get(p) or make_protocol(
        graphs, train_ids, val_ids, test_ids, p, cfg.seed, cfg.holdout_fraction, cfg.neg_rate, cfg.new_node_fraction,
        tp=tp, global_links=global_links, per_positive=per_positive) for p in protocols}
    for sp_ in splits.values():
        sp_.test = [t for t in sp_.test if graph_problem(t.data, in_ch) is None]
    rows, train_out, skipped = [], {}, []
    audit = [leak_audit(sp_) for sp_ in splits.values()]
    for sp_ in splits.values():
        skipped += [{**k, "protocol": sp_.protocol} for k in sp_.skipped]
    trained, selected = {}, {}  # (train set, supervision, kind) -> model, its selected epoch's validation scores
    for p, sp_ in splits.items():
        for sv in supervisions:
            for kind in models:
                key = (TRAIN_SET[p], sv, kind)
                if key not in trained:
                    epochs = cfg.epochs if (kind == "gat_model" or baseline_epochs is None) else baseline_epochs
                    kcfg = TrainConfig(**{**cfg.to_dict(), "epochs": epochs, "supervision": sv})
                    ckpt = Path(run_dir) / "checkpoints" / f"seed{cfg.seed}" / f"{key[0]}-{sv}" / kind \
                        if run_dir else None
                    model, res = train_model(kind, model_cfg, sp_.train, sp_.val, kcfg, ckpt_dir=ckpt,
                                             progress=progress, data_id=data_fingerprint(sp_.train, sp_.val))
                    trained[key] = model
                    train_out["/".join(key)] = asdict(res)
                    selected[key] = next((v for v in res.val if v["epoch"] == res.best_epoch), {})
                    skipped += [{**k, "protocol": p} for k in res.skipped]
                means = evaluate_model(trained[key], sp_.test, cfg, progress=False)["mean"]
                for neg, m in means.items():
                    if not m:  # a set this protocol cannot have (matched under seed: positives are edges)
                        continue
                    sfx = "" if neg == "uniform" else f"_{neg}"  # validation_scores' key of this negative set
                    rows.append({"seed": cfg.seed, "model": kind, "protocol": p, "supervision": sv, "negatives": neg,
                                 **m, **{f"val_{k}": selected[key].get(f"{k}{sfx}") for k in ("auc", "mrr")}})
    for name in heuristics:
        for p, sp_ in splits.items():
            for neg, m in evaluate_heuristic(name, sp_.test, cfg)["mean"].items():
                if not m:
                    continue
                rows.append({"seed": cfg.seed, "model": name, "protocol": p, "supervision": "none", "negatives": neg,
                             **m})
    return {"rows": rows, "train": train_out, "audit": audit, "skipped": skipped, "protocols": splits}


# ---------------------------------------------------------------- notebook 03's parameters and summary

def summary(df, audit, verdict, results: dict, splits: dict, run_path: Path, seed_supervision: str,
            **facts) -> dict:
    """The `train_gat` section of metrics.json: `facts` (n_parameters, topic_labelled_share, seconds, skipped, ...),
    seeds and splits, mean / std rows per (protocol, negatives, supervision, model), the audit and verdicts, and the
    selected checkpoints relative to run_path (the run folder can move) — "checkpoints" holds the seed's way
    (`seed_supervision` on the graphs' own edges) per model kind, "checkpoints_all" every trained model."""
    def rec(s, key, v):
        train_set, supervision, kind = key.split("/")
        return {"best_epoch": v["best_epoch"], "folder": f"checkpoints/seed{s}/{train_set}-{supervision}/{kind}",
                "checkpoint": Path(v["checkpoint"]).relative_to(run_path).as_posix() if v["checkpoint"] else None}

    every = {str(s): {k: rec(s, k, v) for k, v in r["train"].items()} for s, r in results.items()}
    keys = ["protocol", "negatives", "supervision", "model"]
    return {**facts, "seeds": list(results), "splits": {str(s): sp for s, sp in splits.items()},
            "protocol_skipped": [k for r in results.values() for k in r["skipped"]],
            "mean": df.groupby(keys).mean(numeric_only=True).drop(columns="seed").round(4).reset_index()
            .to_dict("records"),
            "std": df.groupby(keys)[["auc", "mrr"]].std().round(4).reset_index().to_dict("records"),
            "audit": audit.to_dict("records"), "verdict": verdict.to_dict("records"),
            "checkpoints": {s: {k.split("/")[-1]: v for k, v in c.items() if k.startswith(f"graphs/{seed_supervision}/")}
                            for s, c in every.items()},
            "checkpoints_all": every, "seed_reported": SEED_REPORTED}
