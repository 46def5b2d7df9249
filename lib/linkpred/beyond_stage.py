"""Notebook 03b's set-up and experiment: what it reloads of notebook 03, its training configurations, and the
seed × protocol loop that scores the single heuristics, the heuristic stack, the shortcut and every variant
(lib.linkpred.beyond) on the same pairs as notebook 03."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from lib.common import published
from lib.common.ahead import BUSY_SECONDS, ahead_main, busy
from lib.common.device import set_threads
from lib.common.params import ParamError, require
from lib.common.paths import read_rows, resolve
from lib.common.runinfo import load_json, read_json
from lib.embed.dataset import GraphDataset, load_split
from lib.linkpred import beyond
from lib.linkpred.checkpoint import load_checkpoint
from lib.linkpred.config import BeyondParams, GatParams, GatTrainingParams, TrainConfig, stored_settings
from lib.linkpred.data import usable_graphs
from lib.linkpred.evaluate import evaluate_heuristic
from lib.linkpred.heuristics import HEURISTICS, REGISTRY, check_heuristics
from lib.linkpred.model import ModelConfig
from lib.linkpred.protocols import ProtocolSplit, make_protocol
from lib.linkpred.sampling import TitlePairs


def load_stage3(cfg: BeyondParams) -> dict:
    """What notebook 03 left in cfg.run_dir for notebook 03b: {"metrics" (metrics.json), "rows" (train_gat_rows.csv),
    "graphs" {graph id: usable graph}, "splits" {seed: {"train", "val", "test": graph ids}}, "seeds", "gat_config"
    (the seed GatModel checkpoint's config), "protocol_settings" (notebook 03's, so the test pairs are the same)}.
    A run_dir without notebook 03, or protocols / seeds it did not run, stop here naming the fix."""
    run_path = resolve(cfg.run_dir)
    metrics = read_json(run_path / "metrics.json")
    rows = read_rows(
        run_path / "train_gat_rows.csv",
        "notebook 03's rows",
        "run notebook 03 on this run_dir again to write them",
        columns=["protocol", "seed"],
        write_back=False,
    )
    require(
        "train_gat" in metrics and not rows.empty,
        "run_dir",
        cfg.run_dir,
        "run notebook 03 (train_gat) on this run_dir first",
    )
    p03_file = run_path / "params_03_train_gat.json"
    p03 = GatParams.from_values(published.run_params(load_json(p03_file)["params"]) if p03_file.is_file() else {})
    missing = sorted(set(cfg.beyond_protocols) - set(rows["protocol"]))
    require(
        not missing,
        "beyond_protocols",
        cfg.beyond_protocols,
        f"notebook 03 did not run {missing}; add them to its protocols",
    )
    seeds = cfg.seeds
    require(
        set(seeds) <= set(rows["seed"]),
        "first_seed/n_seeds",
        seeds,
        f"notebook 03 ran seeds {sorted(set(rows['seed']))}",
    )
    ds = GraphDataset(run_path / "dataset")
    graphs = {g.graph_id: g for g in usable_graphs(ds.graphs(), ds.num_features)[0]}
    written = load_split(
        ds, seeds, n_train_graphs=cfg.n_train_graphs, n_test_graphs=cfg.n_test_graphs, val_fraction=cfg.val_fraction
    )
    seed_ckpt = metrics["train_gat"]["checkpoints"][str(seeds[0])]["gat_model"]["checkpoint"]
    return {
        "metrics": metrics,
        "rows": rows,
        "graphs": graphs,
        "seeds": seeds,
        "splits": {s: {k: [g for g in v if g in graphs] for k, v in sp.items()} for s, sp in written.items()},
        "gat_config": load_checkpoint(run_path / seed_ckpt)[1]["config"],
        "protocol_settings": p03.protocol_settings(),
    }


def configs(gat_config: dict, cfg: BeyondParams) -> tuple[ModelConfig, dict[int, TrainConfig]]:
    """(model configuration, {seed: TrainConfig}): notebook 03's GatModel settings (its checkpoint's, which must be
    cfg's but for BeyondParams.GAT_OVERRIDES) except what notebook 03b changes — supervision, epochs with early
    stopping on validation, steps per graph, training negatives, the MLP decoders' width and the heuristic stack's
    features (`stack_features`, which the stack bar is fitted on too); no per-step A-AUC / eval-mode logging."""
    model_cfg, train = stored_settings(gat_config, "notebook 03's GatModel checkpoint")
    check_notebook_03_training(cfg, GatTrainingParams.of_settings(model_cfg, train))
    base = replace(
        train,
        epochs=cfg.beyond_epochs,
        patience=cfg.beyond_patience,
        supervision=cfg.beyond_supervision,
        select_metric=cfg.beyond_select_metric,
        steps_per_graph=cfg.beyond_steps_per_graph,
        negative_mix={"dist2": cfg.beyond_dist2_share},
        neg_rate=cfg.beyond_neg_rate,
        device=cfg.device,
        precision=cfg.precision,
        log_aauc=False,
        log_eval=False,
    )
    model_cfg = replace(model_cfg, decoder_hidden=cfg.decoder_hidden, stack_features=list(cfg.stack_features))
    return model_cfg, {s: replace(base, seed=s) for s in cfg.seeds}


def check_notebook_03_training(cfg: BeyondParams, theirs: GatTrainingParams) -> None:
    """ParamError naming the first GatModel or training setting of `cfg` that differs from notebook 03's (`theirs`,
    read from its checkpoint), but for those notebook 03b sets itself (BeyondParams.GAT_OVERRIDES)."""
    ours = cfg.gat_training()
    for f in fields(GatTrainingParams):
        if f.name not in cfg.GAT_OVERRIDES and getattr(ours, f.name) != getattr(theirs, f.name):
            raise ParamError(
                f"parameter {f.name}={getattr(ours, f.name)!r} differs from notebook 03's "
                f"{getattr(theirs, f.name)!r} (its GatModel checkpoint in {cfg.run_dir}); notebook 03b "
                f"compares with that model, so give notebook 03's value (the runner does) or re-run "
                f"notebook 03 with this one",
                key=f.name,
            )


def protocol_splits(stage3: dict, protocols: list[str]) -> dict:
    """{(seed, protocol): ProtocolSplit} built as notebook 03 built them (same seeds, settings, negatives)."""
    graphs, splits, tp = stage3["graphs"], stage3["splits"], TitlePairs(stage3["graphs"].values())
    return {
        (s, p): make_protocol(graphs, splits[s], p, s, stage3["protocol_settings"], tp)
        for s in stage3["seeds"]
        for p in protocols
    }


def chosen_points(sweep_rows: pd.DataFrame, select_metric: str) -> dict:
    """{variant: its sweep point with the best validation score} (the metric a variant is selected on:
    beyond.variant_select_metric)."""
    return {
        v: beyond.best_point(g, beyond.variant_select_metric(v, select_metric))
        for v, g in sweep_rows.groupby("variant", sort=False)
    }


def plan_sentence(cfg: BeyondParams, n_graphs: int) -> str:
    """What notebook 03b runs, in one sentence: the graphs, seeds, protocols and where training departs from notebook
    03's."""
    return (
        f"{n_graphs} graphs; seeds {cfg.seeds}; protocols {cfg.beyond_protocols}; training settings of notebook "
        f"03's GatModel except: {cfg.beyond_supervision} supervision, {cfg.beyond_steps_per_graph} steps per graph, "
        f"{cfg.beyond_neg_rate} training negatives per positive of which {cfg.beyond_dist2_share:.0%} at distance "
        f"2, up to {cfg.beyond_epochs} epochs, early stopping on validation {cfg.beyond_select_metric}"
    )


def unit_folder(ckpt_root: str | Path, seed: int, protocol: str, variant: str) -> Path:
    """Where one training of notebook 03b (a variant on a seed's protocol split) keeps its checkpoints and record:
    the notebook (run_all) and the worker ahead of it (train_ahead) meet there."""
    return Path(ckpt_root) / f"seed{seed}-{protocol}" / variant


def run_all(
    psplits: dict[tuple, ProtocolSplit],
    variants: list[str],
    model_cfg: ModelConfig,
    cfgs: dict[int, TrainConfig],
    chosen: dict,
    ckpt_root: Path,
    progress: bool = True,
    heuristics=HEURISTICS,
) -> tuple[list, list, dict]:
    """Per (seed, protocol): each of the registered `heuristics` on its own (lib.linkpred.heuristics, so a heuristic
    registered after notebook 03 ran is scored here without running it again), the heuristic stack of
    model_cfg.stack_features (and its rescaled form where a rescaled variant runs: that variant's bar), the
    no-common-neighbour shortcut (not a bar: what one structural bit scores), and every variant trained with its
    `chosen` sweep point (checkpoints under ckpt_root/seed<S>-<protocol>/<variant>).
    Returns (rows {seed, protocol, negatives, model, metrics...; variants also val_auc / val_mrr of their selected
    epoch}, the stack's coefficients per split, {"seed/protocol/variant": {best_epoch, epochs_run}})."""
    rows, stack_coef, train_log = [], [], {}

    def add(s, p, model, means, **extra):
        rows.extend(
            {"seed": s, "protocol": p, "negatives": n, "model": model, **m, **extra.get(n, {})}
            for n, m in means.items()
        )

    heuristics = check_heuristics(heuristics)
    for (s, p), sp in tqdm(psplits.items(), desc="seed × protocol", disable=not progress):
        for h in heuristics:
            add(s, p, h, {n: m for n, m in evaluate_heuristic(h, sp.test, cfgs[s])["mean"].items() if m})
        mean, coef = beyond.evaluate_stack(sp, cfgs[s], features=model_cfg.stack_features)
        stack_coef.append({"seed": s, "protocol": p, **coef})
        add(s, p, "heuristic_stack", mean)
        if beyond.rescaled(variants):
            add(
                s,
                p,
                "heuristic_stack_rescaled",
                beyond.evaluate_stack(sp, cfgs[s], rescale=True, features=model_cfg.stack_features)[0],
            )
        add(s, p, beyond.SHORTCUT, beyond.evaluate_shortcut(sp, cfgs[s]))
        for v in variants:
            mean, res = beyond.run_variant(sp, v, model_cfg, cfgs[s], chosen[v], unit_folder(ckpt_root, s, p, v))
            train_log[f"{s}/{p}/{v}"] = {"best_epoch": res["best_epoch"], "epochs_run": len(res["val"])}
            add(s, p, f"gat_{v}", mean, **{n: beyond.validation_of(res, n) for n in mean})
    return rows, stack_coef, train_log


def with_stage3_rows(rows03: pd.DataFrame, rows: list, protocols: list[str], seeds: list[int]) -> pd.DataFrame:
    """Notebook 03's trained rows of the same seeds and protocols (the seed's GatModel, renamed "gat_model (seed)",
    and the baselines, as the seed trains them) followed by notebook 03b's, which hold the single heuristics."""
    sel = rows03[
        rows03["protocol"].isin(protocols)
        & rows03["seed"].isin(seeds)
        & rows03["supervision"].eq("mp")
        & ~rows03["model"].isin(REGISTRY)
    ].copy()
    sel["model"] = sel["model"].replace({"gat_model": "gat_model (seed)"})
    return pd.concat([sel.drop(columns="supervision"), pd.DataFrame(rows)], ignore_index=True)


def metrics_section(
    allrows: pd.DataFrame,
    gaps: pd.DataFrame,
    structure: pd.DataFrame,
    cfg: BeyondParams,
    chosen: dict,
    stack_coef: list,
    train_log: dict,
    sweep_seconds: float,
    seconds: float,
) -> dict:
    """The `beyond` section of metrics.json."""
    keys = ["protocol", "negatives", "model"]
    return {
        "seeds": cfg.seeds,
        "protocols": cfg.beyond_protocols,
        "variants": cfg.beyond_variants,
        "chosen": chosen,
        "sweep_seconds": round(sweep_seconds, 1),
        "seconds": round(seconds, 1),
        "mean": allrows.groupby(keys)
        .mean(numeric_only=True)
        .drop(columns="seed")
        .round(4)
        .reset_index()
        .to_dict("records"),
        "std": allrows.groupby(keys)[["auc", "mrr"]].std().round(4).reset_index().to_dict("records"),
        "gaps": gaps.to_dict("records"),
        "structure": structure.reset_index().to_dict("records"),
        "stack_coefficients": stack_coef,
        "train": train_log,
    }


def train_ahead(run_dir: str, seeds: list[int], busy_seconds: float = BUSY_SECONDS, progress: bool = True) -> list[str]:
    """Train notebook 03b's variants of `seeds` in this process, ahead of the notebook, which then reads their records
    back instead of training (beyond.run_variant): a second core's share of a long run, the same numbers. The notebook
    must have run its sweep on run_dir (params_03b_beyond.json and beyond_sweep.csv give the settings and the chosen
    points). Units (seed, protocol, variant) go in the order of `seeds`; one already recorded is skipped, and one whose
    checkpoints changed in the last busy_seconds is being trained by another process (the notebook, which goes up
    from the first seed), which ends this call. Returns the units trained here."""
    run_path = resolve(run_dir)
    need = [run_path / "params_03b_beyond.json", run_path / "beyond_sweep.csv"]
    require(all(p.is_file() for p in need), "run_dir", run_dir, "run notebook 03b on it until its sweep is written")
    cfg = BeyondParams.from_values({**published.run_params(load_json(need[0])["params"]), "run_dir": str(run_dir)})
    require(set(seeds) <= set(cfg.seeds), "seeds", seeds, f"notebook 03b on {run_dir} runs seeds {cfg.seeds}")
    set_threads(cfg.threads)
    chosen = chosen_points(pd.read_csv(need[1]), cfg.beyond_select_metric)
    stage3 = load_stage3(cfg)
    model_cfg, cfgs = configs(stage3["gat_config"], cfg)
    psplits = protocol_splits({**stage3, "seeds": list(seeds)}, cfg.beyond_protocols)
    done = []
    units = [(s, p, v) for s in seeds for p in cfg.beyond_protocols for v in cfg.beyond_variants]
    for s, p, v in tqdm(units, desc="units ahead", disable=not progress):
        folder = unit_folder(run_path / "checkpoints" / "beyond", s, p, v)
        if (folder / beyond.RECORD).is_file():
            continue
        if busy(folder, busy_seconds):
            break
        beyond.run_variant(psplits[(s, p)], v, model_cfg, cfgs[s], chosen[v], folder)
        done.append(f"seed{s}-{p}/{v}")
    return done


def main(argv: list[str] | None = None) -> int:
    return ahead_main(
        argv,
        prog="python -m lib.linkpred.beyond_stage",
        description="Train notebook 03b's variants of some seeds ahead of the notebook, in a second process (the "
        "notebook reads their records back instead of training). Start it after the notebook has written "
        "beyond_sweep.csv; give the seeds from the last down, as the notebook goes up from the first.",
        example="outputs/seed40",
        train_ahead=train_ahead,
        trained="trainings recorded ahead",
    )


if __name__ == "__main__":
    raise SystemExit(main())
