"""Stage 3 experiment: every model kind × seed trained, selected on validation and evaluated on the same tasks."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path

import numpy as np

from lib.linkpred.audit import leak_audit
from lib.linkpred.checkpoint import data_fingerprint
from lib.linkpred.config import GatParams
from lib.linkpred.data import graph_problem
from lib.linkpred.evaluate import evaluate_heuristic, evaluate_model
from lib.linkpred.heuristics import HEURISTICS, REGISTRY
from lib.linkpred.names import MODEL_KINDS, check_protocol
from lib.linkpred.protocols import make_protocol
from lib.linkpred.sampling import TRAIN_SET, TitlePairs
from lib.linkpred.train import Checkpointing, train_model
from lib.metrics.link import SEED_REPORTED


def run_experiment(
    graphs: dict,
    roles: dict,
    params: GatParams,
    seed: int,
    in_channels: int,
    run_dir: str | Path | None,
    scorers: Iterable[str] = (*MODEL_KINDS, *HEURISTICS),
    progress: bool = True,
    splits: dict | None = None,
) -> dict:
    """Train the model kinds among `scorers` and score them and the heuristics among them on the test graphs of one
    seed under each of `params.protocols` and every negative set, each model kind with each of
    `params.train_supervision`; every setting is `params`' (GatParams.model_config / train_config /
    protocol_settings). A trained model's rows also carry val_auc / val_mrr: its selected epoch's validation score on
    that negative set (what lib.metrics.selection.choose_on_validation picks a best model by).

    graphs: graph_id -> Data (the whole dataset); roles: {"train", "val", "test": graph ids} of this seed; in_channels:
    the node features' width. Protocols that leave the training graphs untouched ("seed", "within_graph") share one
    trained model per (supervision, kind). Returns {"rows": [{seed, model, protocol, supervision, negatives, auc, ap,
    hits@K, mrr, aauc, aauc_self}], "train": {"<train set>/<supervision>/<kind>": TrainResult as dict}, "audit":
    [leak_audit rows], "skipped": [...], "protocols": {protocol: ProtocolSplit}}. Checkpoints go to
    run_dir/checkpoints/seed<S>/<train set>-<supervision>/<kind>/. splits: protocol -> ProtocolSplit of this seed
    already built (the notebook's audit ones), else built here.
    """
    protocols = [check_protocol(p) for p in params.protocols]
    scorers = list(scorers)
    models = [k for k in scorers if k in MODEL_KINDS]
    heuristics = [h for h in scorers if h not in MODEL_KINDS]
    unknown = [h for h in heuristics if h not in REGISTRY]
    if unknown:
        raise ValueError(
            f"scorer {unknown[0]!r} does not exist; use model kinds {MODEL_KINDS} or heuristics {tuple(REGISTRY)}"
        )
    model_cfg, cfg = params.model_config(in_channels), params.train_config(seed)
    splits = splits or {}
    missing = [p for p in protocols if p not in splits]
    if missing:
        tp = TitlePairs(graphs.values())
        global_links = np.unique(np.concatenate([tp.edge_keys(g) for g in graphs.values()]))
        splits = {
            **splits,
            **{p: make_protocol(graphs, roles, p, seed, params.protocol_settings(), tp, global_links) for p in missing},
        }
    splits = {p: splits[p] for p in protocols}
    for sp_ in splits.values():
        sp_.test = [t for t in sp_.test if graph_problem(t.data, in_channels) is None]
    rows, train_out, skipped = [], {}, []
    audit = [leak_audit(sp_) for sp_ in splits.values()]
    for sp_ in splits.values():
        skipped += [{**k, "protocol": sp_.protocol} for k in sp_.skipped]
    trained, selected = {}, {}  # (train set, supervision, kind) -> model, its selected epoch's validation scores
    for p, sp_ in splits.items():
        for sv in params.train_supervision:
            for kind in models:
                key = (TRAIN_SET[p], sv, kind)
                if key not in trained:
                    ckpt = Path(run_dir) / "checkpoints" / f"seed{seed}" / f"{key[0]}-{sv}" / kind if run_dir else None
                    model, res = train_model(
                        kind,
                        model_cfg,
                        sp_.train,
                        sp_.val,
                        params.train_config(seed, kind, sv),
                        Checkpointing(ckpt, data_fingerprint(sp_.train, sp_.val)),
                        progress=progress,
                    )
                    trained[key] = model
                    train_out["/".join(key)] = asdict(res)
                    selected[key] = next((v for v in res.val if v["epoch"] == res.best_epoch), {})
                    skipped += [{**k, "protocol": p} for k in res.skipped]
                means = evaluate_model(trained[key], sp_.test, cfg, progress=False)["mean"]
                for neg, m in means.items():
                    if not m:  # a set this protocol cannot have (matched under seed: positives are edges)
                        continue
                    sfx = "" if neg == "uniform" else f"_{neg}"  # validation_scores' key of this negative set
                    rows.append(
                        {
                            "seed": seed,
                            "model": kind,
                            "protocol": p,
                            "supervision": sv,
                            "negatives": neg,
                            **m,
                            **{f"val_{k}": selected[key].get(f"{k}{sfx}") for k in ("auc", "mrr")},
                        }
                    )
    for name in heuristics:
        for p, sp_ in splits.items():
            for neg, m in evaluate_heuristic(name, sp_.test, cfg)["mean"].items():
                if not m:
                    continue
                rows.append({"seed": seed, "model": name, "protocol": p, "supervision": "none", "negatives": neg, **m})
    return {"rows": rows, "train": train_out, "audit": audit, "skipped": skipped, "protocols": splits}


# ---------------------------------------------------------------- notebook 03's parameters and metrics section


def metrics_section(
    df, audit, verdict, results: dict, splits: dict, run_path: Path, seed_supervision: str, **facts
) -> dict:
    """The `train_gat` section of metrics.json: `facts` (n_parameters, topic_labelled_share, seconds, skipped, ...),
    seeds and splits, mean / std rows per (protocol, negatives, supervision, model), the audit and verdicts, and the
    selected checkpoints relative to run_path (the run folder can move) — "checkpoints" holds the seed's way
    (`seed_supervision` on the graphs' own edges) per model kind, "checkpoints_all" every trained model."""

    def rec(s, key, v):
        train_set, supervision, kind = key.split("/")
        return {
            "best_epoch": v["best_epoch"],
            "folder": f"checkpoints/seed{s}/{train_set}-{supervision}/{kind}",
            "checkpoint": Path(v["checkpoint"]).relative_to(run_path).as_posix() if v["checkpoint"] else None,
        }

    every = {str(s): {k: rec(s, k, v) for k, v in r["train"].items()} for s, r in results.items()}
    keys = ["protocol", "negatives", "supervision", "model"]
    return {
        **facts,
        "seeds": list(results),
        "splits": {str(s): sp for s, sp in splits.items()},
        "protocol_skipped": [k for r in results.values() for k in r["skipped"]],
        "mean": df.groupby(keys).mean(numeric_only=True).drop(columns="seed").round(4).reset_index().to_dict("records"),
        "std": df.groupby(keys)[["auc", "mrr"]].std().round(4).reset_index().to_dict("records"),
        "audit": audit.to_dict("records"),
        "verdict": verdict.to_dict("records"),
        "checkpoints": {
            s: {k.split("/")[-1]: v for k, v in c.items() if k.startswith(f"graphs/{seed_supervision}/")}
            for s, c in every.items()
        },
        "checkpoints_all": every,
        "seed_reported": SEED_REPORTED,
    }
