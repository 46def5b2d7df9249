"""Stage 4 studies with the A-AUC: trained models reloaded from a run folder, the trend with training-set
size and the AUC / A-AUC trade-off, per-topic tables."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from lib.aauc.config import AaucParams
from lib.common.params import require
from lib.common.runinfo import load_json
from lib.common.seeding import derive_seed
from lib.linkpred.checkpoint import load_checkpoint
from lib.linkpred.config import TrainConfig, build_model, settings_from, stored_settings
from lib.linkpred.evaluate import evaluate_model
from lib.linkpred.model import ModelConfig
from lib.linkpred.names import MODEL_KINDS
from lib.linkpred.protocols import ProtocolSettings, make_protocol
from lib.linkpred.sampling import TRAIN_SET, TitlePairs
from lib.linkpred.train import init_model, train_model
from lib.metrics.aauc import aauc, aauc_thresholds, top_new_links
from lib.viz.graph import drawn_nodes, graph_to_html


def load_run_models(run_dir, device: str = "cpu") -> dict:
    """The stage-3 results of `run_dir` (notebook 03): {"seeds": [S...], "splits": {S: {train, val, test}},
    "checkpoints": {S: {kind: Path}}, "models": {S: {kind: model in eval mode}}, "configs": {S: {kind: the
    checkpoint's (ModelConfig, TrainConfig)}}}.

    Raises FileNotFoundError naming what is missing (metrics.json, its train_gat section, a checkpoint file) and
    telling to run notebook 03 on that run folder."""
    run = Path(run_dir)
    fix = f"run notebook 03 (train_gat) with run_dir={str(run_dir)!r} first"
    metrics = run / "metrics.json"
    if not metrics.is_file():
        raise FileNotFoundError(f"run folder {run} has no metrics.json; {fix}")
    tg = load_json(metrics).get("train_gat")
    if not tg or not tg.get("checkpoints"):
        raise FileNotFoundError(f"{metrics} has no train_gat checkpoints; {fix}")
    out = {"seeds": [], "splits": {}, "checkpoints": {}, "models": {}, "configs": {}}
    for s, kinds in sorted(tg["checkpoints"].items(), key=lambda kv: int(kv[0])):
        seed = int(s)
        out["seeds"].append(seed)
        out["splits"][seed] = tg["splits"][s]
        out["checkpoints"][seed], out["models"][seed], out["configs"][seed] = {}, {}, {}
        for kind, rec in kinds.items():
            # the recorded path may be absolute from another clone: fall back to the same file inside run_dir
            path = Path(rec["checkpoint"]) if rec.get("checkpoint") else None
            path = run / path if path is not None and not path.is_absolute() else path  # recorded relative to run_dir
            sub = rec.get("folder", f"checkpoints/seed{seed}/{kind}")
            local = run / sub / (path.name if path else f"epoch_{rec.get('best_epoch')}.pt")
            path = path if path is not None and path.is_file() else local
            if not path.is_file():
                raise FileNotFoundError(
                    f"checkpoint {path} of seed {seed} / {kind} is missing in run folder {run}; {fix}"
                )
            model, ck = load_checkpoint(path, device)
            out["checkpoints"][seed][kind] = path
            out["configs"][seed][kind] = stored_settings(ck["config"], f"checkpoint {path}")
            out["models"][seed][kind] = model.eval()
    return out


def analysed_splits(splits: dict, analysis_graphs: int) -> dict:
    """Stage 3's splits {seed: {train, val, test}} with each seed's test list cut to its first `analysis_graphs`
    graphs (0: all of them), the graphs notebook 04's studies score."""
    require(
        isinstance(analysis_graphs, int) and analysis_graphs >= 0,
        "analysis_graphs",
        analysis_graphs,
        "use 0 (every test graph) or a positive count",
    )
    if not analysis_graphs:
        return splits
    return {seed: {**parts, "test": parts["test"][:analysis_graphs]} for seed, parts in splits.items()}


def trend_slopes(df) -> dict[str, dict[str, float]]:
    """Least-squares slope of the mean AUC and A-AUC over seeds against ln(training graphs), per protocol:
    df columns protocol, train_graphs, auc, aauc (one row per seed and size). NaN where fewer than two sizes have a
    defined value (one size in the grid, or A-AUC None because no test pair passed its cosine thresholds)."""

    out = {}
    for protocol, g in df.groupby("protocol"):
        out[protocol] = {}
        for k in ("auc", "aauc"):
            m = pd.to_numeric(g[k], errors="coerce").groupby(g["train_graphs"]).mean().dropna()
            out[protocol][k] = (
                float(np.polyfit(np.log(m.index.to_numpy(float)), m.to_numpy(float), 1)[0])
                if len(m) > 1
                else float("nan")
            )
    return out


@torch.no_grad()
def embed_graph(model, data, device="cpu") -> Tensor:
    """Eval-mode embeddings z [N, F_out] (float32, CPU) of one graph, message passing over all its edges (the seed
    code's setting for A-AUC)."""
    model.eval()
    return model(data.x.to(device), data.edge_index.to(device)).float().cpu()


def reference_embeddings(kind: str, data, out_channels: int, seed: int, model_cfg: ModelConfig | None = None) -> Tensor:
    """Embeddings [N, ·] of a reference scorer that needs no training.

    "features": the input features themselves, L2-normalised in float64, so z_i·z_j is exactly the cosine the labels
    threshold (A-AUC 1.0 by construction); "random": seeded N(0, 1) vectors [N, out_channels];
    "untrained": a GatModel with the initial weights `lib.linkpred.train.train_model` draws for this seed
    (eval mode)."""

    if kind == "features":
        return torch.nn.functional.normalize(data.x.double(), dim=1)
    if kind == "random":
        g = torch.Generator().manual_seed(derive_seed(seed, "random-scorer", str(data.graph_id)))
        return torch.randn(data.num_nodes, out_channels, generator=g)
    if kind == "untrained":
        torch.manual_seed(derive_seed(seed, "init", "gat_model"))
        return embed_graph(build_model("gat_model", model_cfg), data)
    raise ValueError(f"reference scorer {kind!r} is unknown; use 'features', 'random' or 'untrained'")


def nested_subsets(train_ids: list, sizes: list, seed: int) -> dict:
    """{size: the first `size` graphs of one seeded permutation of train_ids}: each subset contains the smaller ones."""
    if not sizes or min(sizes) < 1 or max(sizes) > len(train_ids):
        raise ValueError(
            f"size_grid={sizes!r} must hold sizes between 1 and the {len(train_ids)} training graphs of "
            f"the stage-3 split; lower it or train stage 3 on more graphs"
        )
    perm = torch.randperm(len(train_ids), generator=torch.Generator().manual_seed(int(seed))).tolist()
    return {n: [train_ids[i] for i in perm[:n]] for n in sorted(sizes)}


def uniform_only(cfg: TrainConfig) -> ProtocolSettings:
    """The protocol settings of `cfg` drawing uniform negatives only: the size trend and the untrained GatModel are
    scored on them alone, and the others cost far more to draw at the seed's graph size (dist2 looks at every anchor's
    distance-2 neighbourhood). Each set has its own seeded stream, so the uniform pairs are the same as with every set
    drawn."""
    return settings_from(ProtocolSettings, cfg, negatives_per_positive=0, negative_sets=("uniform",))


def size_trend(
    graphs: dict,
    splits: dict,
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    params: AaucParams,
    progress: bool = True,
    protocols: tuple = ("seed", "leak_free"),
) -> list[dict]:
    """Train a fresh GatModel per (seed of `params.seeds`, size of `params.size_grid`, training set) for
    `params.size_epochs` epochs on nested subsets of that seed's stage-3 training graphs
    (no validation, the last epoch is kept as the seed code did) and evaluate it on that seed's test graphs under
    each protocol (uniform negatives). A protocol that cleans the training graphs ("leak_free", "new_nodes") trains on
    its cleaned copies of the same subset. graphs: graph_id -> Data. Returns rows {seed, train_graphs, protocol, auc,
    ap, ..., aauc, aauc_self}."""
    rows = []
    tp = TitlePairs(graphs.values())
    jobs = [
        (s, n, ids) for s in params.seeds for n, ids in nested_subsets(splits[s]["train"], params.size_grid, s).items()
    ]
    epochs, device = params.size_epochs, params.device
    built = {}
    for s, n, ids in tqdm(jobs, desc="size trend", disable=not progress):
        cfg = replace(train_cfg, epochs=epochs, seed=s, device=device, log_aauc=False, log_eval=False)
        settings = uniform_only(cfg)
        models = {}
        for protocol in protocols:
            if (s, protocol) not in built:
                sp = splits[s]
                built[s, protocol] = make_protocol(graphs, sp, protocol, s, settings, tp)
            ps = built[s, protocol]
            if TRAIN_SET[protocol] not in models:
                subset = [g for g in ps.train if g.graph_id in set(ids)]
                models[TRAIN_SET[protocol]], _ = train_model("gat_model", model_cfg, subset, [], cfg, progress=False)
            m = evaluate_model(models[TRAIN_SET[protocol]], ps.test, cfg, progress=False, negative_sets=("uniform",))[
                "mean"
            ]["uniform"]
            rows.append({"seed": s, "train_graphs": n, "protocol": protocol, **m})
    return rows


def topic_table(rows: list[dict]) -> pd.DataFrame:
    """Per-topic A-AUC rows ({topic, value, n_pos, n_neg} per graph and seed, from aauc_by_group) -> one row per topic:
    mean and std of the defined values, how many were defined out of how many graphs, pair counts; most positive
    pairs first. No rows (a source without topic labels) give an empty table with the same columns."""

    cols = ["aauc", "aauc_std", "defined", "graphs", "n_pos", "n_neg"]
    if not rows:
        return pd.DataFrame(columns=cols, index=pd.Index([], name="topic"))
    return (
        pd.DataFrame(rows)
        .groupby("topic")
        .agg(
            aauc=("value", "mean"),
            aauc_std=("value", "std"),
            defined=("value", "count"),
            graphs=("value", "size"),
            n_pos=("n_pos", "sum"),
            n_neg=("n_neg", "sum"),
        )
        .sort_values("n_pos", ascending=False)
    )


def seed_slopes(seed_reported: list[dict]) -> dict[str, float]:
    """The seed report's AUC and A-AUC change per e-fold of training graphs (least squares against ln size)."""
    x = np.log([r["train_graphs"] for r in seed_reported])
    return {k: float(np.polyfit(x, [r[k] for r in seed_reported], 1)[0]) for k in ("auc", "aauc")}


def trend_sentences(trend: pd.DataFrame, slope: dict, seed_slope: dict, size_grid: list) -> list[str]:
    """One sentence per protocol on the A-AUC trend with training-set size against the seed's, and whether the spread
    over seeds is larger than the change across the grid (then it is not a trend). trend: size_trend rows."""
    out = []
    for protocol, sl in slope.items():
        if np.isnan(sl["aauc"]):
            out.append(
                f"{protocol}: no A-AUC trend (one training-set size, or A-AUC undefined at fewer than two sizes)"
            )
            continue
        spread = trend[trend["protocol"] == protocol].groupby("train_graphs")["aauc"].std().mean()
        direction = "rises" if sl["aauc"] > 0 else "falls"
        same = (sl["aauc"] > 0) == (seed_slope["aauc"] > 0)
        change = abs(sl["aauc"]) * np.log(max(size_grid) / min(size_grid))
        out.append(
            f"{protocol}: A-AUC {direction} with the number of training graphs ({sl['aauc']:+.4f} per e-fold; "
            f"seed report {seed_slope['aauc']:+.4f}), "
            f"{'the same direction as' if same else 'the opposite direction to'}"
            f" the seed; AUC {sl['auc']:+.4f} per e-fold. The spread over seeds ({spread:.3f} std per size) is "
            f"{'larger' if spread > change else 'smaller'} than the change across the grid."
        )
    return out


def sensitivity(
    z: dict, graphs: dict, seed: int, r_cos: float, t_cos: float, t_cos_grid: list, r_cos_grid: list, samples: int = 3
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A-AUC of the embeddings z {graph_id: [N, F]} against the threshold (every T in t_cos_grid at r_cos, with and
    without self-pairs) and against the sampling rate (every R in r_cos_grid at t_cos, `samples` node samples each:
    the spread from sampling alone). Returns (by threshold, by rate), one row per graph and setting."""
    by_t, by_r = [], []
    for g, zg in z.items():
        s, x = derive_seed(seed, "eval-aauc", g), graphs[g].x
        plain = aauc_thresholds(zg, x, r_cos, t_cos_grid, s)
        with_self = aauc_thresholds(zg, x, r_cos, t_cos_grid, s, include_self=True)
        for t, r, rs in zip(t_cos_grid, plain, with_self, strict=True):
            by_t.append(
                {
                    "graph_id": g,
                    "t_cos": t,
                    "n_pos": r.n_pos,
                    "n_neg": r.n_neg,
                    "share_pos": r.share_pos,
                    "aauc": r.to_dict()["value"],
                    "aauc_self": rs.to_dict()["value"],
                }
            )
        for rc in r_cos_grid:
            for rep in range(samples):
                r = aauc(zg, x, rc, t_cos, derive_seed(s, "r_cos", rep))
                by_r.append(
                    {
                        "graph_id": g,
                        "r_cos": rc,
                        "sample": rep,
                        "n_nodes": r.n_nodes,
                        "n_pos": r.n_pos,
                        "aauc": r.to_dict()["value"],
                    }
                )
    return pd.DataFrame(by_t), pd.DataFrame(by_r)


UNTRAINED_SCORERS = ("features", "random", "untrained")  # scored from reference_embeddings, in every run
REFERENCE_SCORERS = (*UNTRAINED_SCORERS, "mlp", "plain_gat", "gat_model")


def reference_scores(
    models: dict, splits: dict, graphs: dict, model_cfg: ModelConfig, params: AaucParams, scorers=REFERENCE_SCORERS
) -> pd.DataFrame:
    """A-AUC (without and with self-pairs, at params.r_cos / params.t_cos) of every scorer on every test graph of every
    seed of `params.seeds`: the raw features, random
    and untrained-GatModel vectors (reference_embeddings) and the trained stage-3 models {seed: {kind: model}}.
    One row per (seed, graph, scorer); self_share_of_pos is the share of positives that self-pairs would add."""
    rows, device, r_cos, t_cos = [], params.device, params.r_cos, params.t_cos
    out_channels = model_cfg.gat_out
    for s in params.seeds:
        for g in splits[s]["test"]:
            data, a_seed = graphs[g], derive_seed(s, "eval-aauc", g)
            # a run trained without its baselines (notebook 03's `models`) has no mlp / plain_gat to score
            for name in [n for n in scorers if n in UNTRAINED_SCORERS or n in models[s]]:
                z = (
                    reference_embeddings(name, data, out_channels, s, model_cfg)
                    if name in UNTRAINED_SCORERS
                    else embed_graph(models[s][name], data, device)
                )
                r, rs = aauc(z, data.x, r_cos, t_cos, a_seed), aauc(z, data.x, r_cos, t_cos, a_seed, include_self=True)
                rows.append(
                    {
                        "seed": s,
                        "graph_id": g,
                        "scorer": name,
                        "aauc": r.to_dict()["value"],
                        "aauc_self": rs.to_dict()["value"],
                        "n_pos": r.n_pos,
                        "n_pos_self": rs.n_pos,
                        "self_share_of_pos": r.n_nodes / rs.n_pos if rs.n_pos else float("nan"),
                    }
                )
    return pd.DataFrame(rows)


def untrained_rows(
    graphs: dict,
    splits: dict,
    seeds: list,
    protocols: list,
    train_cfg: TrainConfig,
    model_cfg: ModelConfig,
    device="cpu",
) -> list[dict]:
    """Test AUC / A-AUC of the GatModel before any training step (the initialisation stage 3 starts from, built by
    lib.linkpred.train.init_model) per seed and protocol, uniform negatives."""

    rows = []
    for s in seeds:
        cfg = replace(train_cfg, seed=s, device=str(device))
        settings = uniform_only(cfg)
        m0 = init_model("gat_model", model_cfg, [], cfg, device)
        sp = splits[s]
        for protocol in protocols:
            tasks = make_protocol(graphs, sp, protocol, s, settings).test
            mean = evaluate_model(m0, tasks, cfg, progress=False, negative_sets=("uniform",))["mean"]["uniform"]
            rows.append({"label": "untrained GatModel", "seed": s, "protocol": protocol, **mean})
    return rows


def tradeoff_points(
    trend: pd.DataFrame, stage3_rows: pd.DataFrame, untrained: list[dict], seeds: list, supervision: str
) -> pd.DataFrame:
    """The points of the AUC / A-AUC trade-off figure: the size trend's GatModels, stage 3's trained kinds (uniform
    negatives, the trend's protocols and `supervision`, these seeds) and the untrained GatModel (untrained_rows);
    columns label, seed, protocol, auc, aauc, aauc_self."""
    s3 = stage3_rows[
        stage3_rows["model"].isin(MODEL_KINDS)
        & stage3_rows["seed"].isin(seeds)
        & stage3_rows["protocol"].isin(set(trend["protocol"]))
        & (stage3_rows["negatives"] == "uniform")
        & (stage3_rows["supervision"] == supervision)
    ]
    return pd.concat(
        [
            trend.assign(label=trend["train_graphs"].map(lambda n: f"GatModel, {n} train graphs")),
            s3.assign(label=s3["model"].map(lambda k: f"stage 3: {k}")),
            pd.DataFrame(untrained),
        ],
        ignore_index=True,
    )[["label", "seed", "protocol", "auc", "aauc", "aauc_self"]]


def picture_graph(graphs: dict, root: str) -> str:
    """The id of the graph crawled from `root` (its first title or recorded root); a root the dataset lacks is
    refused naming some of the roots it has (notebook 04 checks this first, before its studies run)."""
    gid = next((g for g, d in graphs.items() if d.titles[0] == root or d.root == root), None)
    roots = sorted(d.root for d in graphs.values())
    shown = ", ".join(repr(r) for r in roots[:10]) + (f" and {len(roots) - 10} more" if len(roots) > 10 else "")
    require(gid is not None, "picture_root", root, f"use one of the dataset's {len(roots)} roots: {shown}")
    return gid


def new_links_picture(model, graphs: dict, ds, crawl_dir, html_dir, params: AaucParams) -> dict:
    """The `params.top_k` non-edges the trained `model` scores highest in the graph crawled from `params.picture_root`
    (lib.metrics.aauc.top_new_links), drawn dashed over the crawl graph as an offline pyvis page
    (lib.viz.graph.graph_to_html, view `params.picture_view`, at most lib.viz.graph.MAX_DRAWN_NODES nodes, those
    nearest the root). Returns {"graph_id", "html" (path), "nodes_drawn",
    "nodes", "table": DataFrame [u, v, logit, title cosine]}. A root the dataset lacks stops here naming the fix."""
    root, top_k, view, seed, device = (
        params.picture_root,
        params.top_k,
        params.picture_view,
        params.first_seed,
        params.device,
    )
    gid = picture_graph(graphs, root)
    data = graphs[gid]
    pairs, logits = top_new_links(embed_graph(model, data, device), data.edge_index, top_k)
    crawl_graph = ds.crawl_graph(gid, crawl_dir)
    html = graph_to_html(
        crawl_graph, Path(html_dir) / f"04_new_links_{gid}.html", extra_edges=pairs.T.tolist(), seed=seed, view=view
    )
    drawn = len(drawn_nodes(crawl_graph, pairs.T.tolist(), view)[0])
    xn = F.normalize(data.x.double(), dim=1)
    table = pd.DataFrame(
        {
            "u": [data.titles[i] for i in pairs[0]],
            "v": [data.titles[j] for j in pairs[1]],
            "logit": logits.numpy().round(2),
            "title cosine": (xn[pairs[0]] * xn[pairs[1]]).sum(1).numpy().round(3),
        }
    )
    return {"graph_id": gid, "html": html, "nodes_drawn": drawn, "nodes": crawl_graph.num_nodes, "table": table}
