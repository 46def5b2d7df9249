"""Stage 3 experiment: every model kind × seed trained, selected on validation and evaluated on the same tasks."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from lib.common import published
from lib.common.ahead import BUSY_SECONDS, ahead_main, busy
from lib.common.device import set_threads
from lib.common.params import require
from lib.common.paths import resolve
from lib.common.runinfo import load_json
from lib.embed.dataset import GraphDataset, load_split
from lib.linkpred.audit import leak_audit
from lib.linkpred.checkpoint import data_fingerprint
from lib.linkpred.config import GatParams
from lib.linkpred.data import graph_problem, usable_graphs
from lib.linkpred.evaluate import evaluate_heuristic, evaluate_model
from lib.linkpred.heuristics import HEURISTICS, REGISTRY
from lib.linkpred.kernels import kernels_status
from lib.linkpred.names import MODEL_KINDS, check_protocol
from lib.linkpred.protocols import ProtocolSplit, make_protocol
from lib.linkpred.sampling import TRAIN_SET, TitlePairs
from lib.linkpred.train import Checkpointing, train_model
from lib.metrics.link import SEED_REPORTED


def checkpoint_folder(run_dir: str | Path, seed: int, key: tuple[str, str, str]) -> Path:
    """Where a model of notebook 03 keeps its checkpoints, for key (train set, supervision, kind):
    run_dir/checkpoints/seed<S>/<train set>-<supervision>/<kind>."""
    return Path(run_dir) / "checkpoints" / f"seed{seed}" / f"{key[0]}-{key[1]}" / key[2]


def training_units(params: GatParams, models: Iterable[str]) -> list[tuple[str, str, str]]:
    """(protocol, supervision, kind) of every model notebook 03 trains for one seed, in its order: protocols that
    train on the same graphs (lib.linkpred.sampling.TRAIN_SET) share the first one's model."""
    units, keys = [], set()
    for p in params.protocols:
        for sv in params.train_supervision:
            for kind in models:
                if (TRAIN_SET[p], sv, kind) not in keys:
                    keys.add((TRAIN_SET[p], sv, kind))
                    units.append((p, sv, kind))
    return units


def train_unit(
    kind: str,
    supervision: str,
    split: ProtocolSplit,
    params: GatParams,
    in_channels: int,
    seed: int,
    run_dir: str | Path | None,
    progress: bool = True,
) -> tuple:
    """(model, TrainResult) of one of notebook 03's models: `kind` trained on the split's training graphs with
    `supervision`, selected on its validation tasks, checkpointed in checkpoint_folder (resumed from it)."""
    key = (TRAIN_SET[split.protocol], supervision, kind)
    return train_model(
        kind,
        params.model_config(in_channels),
        split.train,
        split.val,
        params.train_config(seed, kind, supervision),
        Checkpointing(
            checkpoint_folder(run_dir, seed, key) if run_dir else None, data_fingerprint(split.train, split.val)
        ),
        progress=progress,
    )


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
    cfg = params.train_config(seed)
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
                    model, res = train_unit(kind, sv, sp_, params, in_channels, seed, run_dir, progress)
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
    whether the fused step's C++ CPU kernels were built (lib.linkpred.kernels: their sums differ from the torch ops'
    in the last bits), seeds and splits, mean / std rows per (protocol, negatives, supervision, model), the audit and
    verdicts, and the selected checkpoints relative to run_path (the run folder can move) — "checkpoints" holds the
    seed's way (`seed_supervision` on the graphs' own edges) per model kind, "checkpoints_all" every trained model."""

    def rec(s, key, v):
        train_set, supervision, kind = key.split("/")
        return {
            "best_epoch": v["best_epoch"],
            "folder": checkpoint_folder("", s, (train_set, supervision, kind)).as_posix(),
            "checkpoint": Path(v["checkpoint"]).relative_to(run_path).as_posix() if v["checkpoint"] else None,
        }

    every = {str(s): {k: rec(s, k, v) for k, v in r["train"].items()} for s, r in results.items()}
    keys = ["protocol", "negatives", "supervision", "model"]
    return {
        **facts,
        "cpu_kernels": kernels_status(),
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


def train_ahead(run_dir: str, seeds: list[int], busy_seconds: float = BUSY_SECONDS, progress: bool = True) -> list[str]:
    """Train notebook 03's models of `seeds` in this process, ahead of the notebook, which then reloads their finished
    checkpoints instead of training (train_model resumes them): a second core's share of a long run, the same
    numbers. The notebook must have started on run_dir (its params_03_train_gat.json gives the settings). Units
    (seed, training_units) go in the reverse of the notebook's order, seed by seed in the order given; one whose
    checkpoints changed in the last busy_seconds is being trained, or was just trained, by the notebook, which goes
    up from the first seed: that ends this call. Returns the units trained (or reloaded) here."""
    run_path = resolve(run_dir)
    record = run_path / "params_03_train_gat.json"
    require(record.is_file(), "run_dir", run_dir, "start notebook 03 on it first (it writes params_03_train_gat.json)")
    params = GatParams.from_values({**published.run_params(load_json(record)["params"]), "run_dir": str(run_dir)})
    require(set(seeds) <= set(params.seeds), "seeds", seeds, f"notebook 03 on {run_dir} runs seeds {params.seeds}")
    set_threads(params.threads)
    ds = GraphDataset(run_path / "dataset")
    in_channels = params.model_config(ds.num_features or 384).in_channels
    graphs = {g.graph_id: g for g in usable_graphs(ds.graphs(), in_channels)[0]}
    written = load_split(
        ds,
        list(seeds),
        n_train_graphs=params.n_train_graphs,
        n_test_graphs=params.n_test_graphs,
        val_fraction=params.val_fraction,
    )
    tp = TitlePairs(graphs.values())
    built: dict = {}  # (seed, protocol) -> ProtocolSplit, made when first needed: the notebook builds them the same way
    done = []
    units = [(s, *u) for s in seeds for u in reversed(training_units(params, params.models))]
    for s, p, sv, kind in tqdm(units, desc="models ahead", disable=not progress):
        folder = checkpoint_folder(run_path, s, (TRAIN_SET[p], sv, kind))
        if busy(folder, busy_seconds):
            break
        if (s, p) not in built:
            roles = {k: [g for g in v if g in graphs] for k, v in written[s].items()}
            built[(s, p)] = make_protocol(graphs, roles, p, s, params.protocol_settings(), tp)
        train_unit(kind, sv, built[(s, p)], params, in_channels, s, run_path, progress=False)
        done.append(f"seed{s}/{TRAIN_SET[p]}-{sv}/{kind}")
    return done


def main(argv: list[str] | None = None) -> int:
    return ahead_main(
        argv,
        prog="python -m lib.linkpred.stage",
        description="Train notebook 03's models of some seeds ahead of the notebook, in a second process (the "
        "notebook reloads their finished checkpoints instead of training). Start it once the notebook has started "
        "(it writes params_03_train_gat.json first); give the seeds from the last down, as the notebook goes up from "
        "the first.",
        example="outputs/seed315",
        train_ahead=train_ahead,
        trained="models trained ahead",
    )


if __name__ == "__main__":
    raise SystemExit(main())
