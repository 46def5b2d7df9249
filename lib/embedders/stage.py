"""Notebook 05b's steps: node embedders trained on transfer texts and scored as stage 3's node embedder on link
sources whose titles none of them saw. Everything goes to <run_dir>/embedders/ and every step resumes: built encoder
folders are kept (made.json), training checkpoints in work/, finished link-prediction pairs in lp_rows.csv."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter

from lib.common.paths import CACHE, append_csv_rows, atomic_write_text, read_rows, resolve, rows_with
from lib.distill import embedding
from lib.distill.data import build_datasets
from lib.distill.eval import encode as encode_texts
from lib.distill.lp import graph_link_prediction, lp_params
from lib.distill.models import ensure_teacher, load_encoder
from lib.embed.encoder import default_model_dir, model_identity
from lib.embedders import data, encoders, evaluate, sources
from lib.embedders.config import EmbeddersParams, shares
from lib.embedders.goals import GOALS, goal_of
from lib.viz.figures import saved

TARGETS = CACHE / "embedders"


def folder(run_path: Path) -> Path:
    return run_path / "embedders"


def write_csv(path: Path, df: pd.DataFrame) -> None:
    atomic_write_text(path, df.to_csv(index=False))


def crawl_settings(cfg: EmbeddersParams, run_path: Path, spec: sources.Spec) -> sources.Crawl:
    return sources.Crawl(
        cfg.embedder_graphs,
        cfg.embedder_graph_nodes,
        cfg.embedder_data_seed,
        cfg.embedder_test_graphs,
        folder(run_path) / "crawl" / spec.slug,
    )


def source_graphs(cfg: EmbeddersParams, spec: sources.Spec, part: data.Partition | None, run_path: Path) -> list[Path]:
    """The graph files of one source of `embedder_sources` (lib.embedders.sources; part: None for a source of your
    own, made before the partition)."""
    return spec.entry.graphs(spec.argument, None if spec.entry.own else part, crawl_settings(cfg, run_path, spec))


def prepare(cfg: EmbeddersParams) -> dict:
    """The partition (every title of a link source of your own held out too), the transfer texts by kind with their
    all-MiniLM-L6-v2 targets, the held-out title sets with theirs, and the validation links."""
    own = {
        spec.label: sources.graph_titles(source_graphs(cfg, spec, None, resolve(cfg.run_dir)))
        for spec in sources.parse_all(cfg.embedder_sources)
        if spec.entry.own
    }
    part = data.partition(
        cfg.embedder_val_topics,
        cfg.embedder_test_topics,
        cfg.embedder_in_domain_fraction,
        cfg.embedder_data_seed,
        own=own,
    )
    texts = data.transfer_texts(part, cfg.embedder_text_kinds, cfg.embedder_max_texts, cfg.embedder_data_seed)
    rng = np.random.default_rng(cfg.embedder_data_seed)

    def sample(titles: list[str], n: int = 1000) -> list[str]:
        return sorted(titles[i] for i in rng.permutation(len(titles))[:n]) if len(titles) > n else list(titles)

    sets = {
        "validation": sample(part.val),
        "in_domain": sample(part.in_domain),
        **{f"test_{k}": sample(v) for k, v in part.test.items()},
    }
    links = data.validation_links(part.val, cfg.embedder_data_seed)
    return {
        "partition": part,
        "texts": texts,
        "sets": sets,
        "links": links,
        "targets": {k: embedding.target_embeddings(v, cache_dir=TARGETS, progress=False) for k, v in texts.items()},
        "set_targets": {k: embedding.target_embeddings(v, cache_dir=TARGETS, progress=False) for k, v in sets.items()},
        "counts": data.text_counts(texts, part),
    }


def recipe(cfg: EmbeddersParams, ctx: dict, mix: str, steps: int) -> encoders.Recipe:
    kinds = list(ctx["texts"])
    return encoders.Recipe(
        texts=[t for k in kinds for t in ctx["texts"][k]],
        targets=np.concatenate([ctx["targets"][k] for k in kinds]),
        sizes={k: len(ctx["texts"][k]) for k in kinds},
        weights=shares(mix, kinds),
        steps=steps,
        static_steps=cfg.embedder_static_steps,
        batch_size=cfg.embedder_batch_size,
        lr=cfg.embedder_lr,
        static_lr=cfg.embedder_static_lr,
        seed=cfg.embedder_data_seed,
    )


def choose_mix(cfg: EmbeddersParams, ctx: dict, run_path: Path) -> tuple[str, pd.DataFrame]:
    """(the chosen mix, one validation row per candidate): the first student of `embedder_encoders` trained
    `embedder_choice_steps` on each candidate mix; the best mean cosine on the validation topics' titles wins (the
    test sources are never read)."""
    students = [s for s in map(encoders.parse, cfg.embedder_encoders) if s.kind == "student"]
    if len(cfg.embedder_mixes) == 1 or not students:
        return cfg.embedder_mixes[0], pd.DataFrame()
    rows = []
    for i, mix in enumerate(cfg.embedder_mixes):
        built = encoders.build(
            students[0], recipe(cfg, ctx, mix, cfg.embedder_choice_steps), folder(run_path) / "choice" / f"mix{i}"
        )
        rows.append(
            {
                "mix": mix,
                "student": students[0].label,
                "steps": cfg.embedder_choice_steps,
                **evaluate.validation_row(
                    built,
                    {"validation": ctx["sets"]["validation"]},
                    {"validation": ctx["set_targets"]["validation"]},
                    ctx["links"],
                ),
            }
        )
    table = pd.DataFrame(rows)
    write_csv(folder(run_path) / "mixes.csv", table)
    return str(table.loc[table.cos_validation.idxmax(), "mix"]), table


def build_encoders(cfg: EmbeddersParams, ctx: dict, mix: str, run_path: Path) -> dict[str, dict]:
    """label -> {"folder": Path | None, "layers", "kind"}: all-MiniLM-L6-v2 and every encoder of `embedder_encoders`,
    the trained ones on `mix`."""
    rec = recipe(cfg, ctx, mix, cfg.embedder_steps)
    out = {encoders.REFERENCE: {"folder": None, "layers": 6, "kind": "reference"}}
    for spec in map(encoders.parse, cfg.embedder_encoders):
        out[spec.label] = {
            "folder": encoders.build(spec, rec, folder(run_path)),
            "layers": spec.layers,
            "kind": spec.kind,
        }
    return out


def validation_table(built: dict[str, dict], ctx: dict, run_path: Path) -> pd.DataFrame:
    """One row per encoder: cosine to all-MiniLM-L6-v2 on each held-out title set and the validation link AUC."""
    table = pd.DataFrame(
        [
            {"encoder": k, **evaluate.validation_row(e["folder"], ctx["sets"], ctx["set_targets"], ctx["links"])}
            for k, e in built.items()
        ]
    )
    write_csv(folder(run_path) / "validation.csv", table)
    return table


def crawl_sources(cfg: EmbeddersParams, part: data.Partition, run_path: Path) -> dict[str, list[Path]]:
    """source label -> its graph files (lib.embedders.sources): a link table crawled from `embedder_graphs` roots
    drawn per topic (lib.crawl.campaign.draw_offline_roots), each breadth-first (Algorithm 1) to
    `embedder_graph_nodes` nodes; a run folder's graphs as notebook 01 crawled them."""
    return {spec.label: source_graphs(cfg, spec, part, run_path) for spec in sources.parse_all(cfg.embedder_sources)}


def link_prediction(
    cfg: EmbeddersParams,
    graphs: dict[str, list[Path]],
    built: dict[str, dict],
    run_path: Path,
    progress: bool = True,
) -> pd.DataFrame:
    """Rows [source, embedder, seed, model, protocol, auc, mrr, ...]: every encoder as stage 3's node embedder on
    every source, seeds 0 .. embedder_seeds-1 (lib.distill.lp.graph_link_prediction: notebook 03's GatModel trained
    with cfg's GatModel and training settings)."""
    rows = []
    specs = {spec.label: spec for spec in sources.parse_all(cfg.embedder_sources)}
    for source, files in graphs.items():
        pairs = [(label, s, e["folder"]) for label, e in built.items() for s in range(cfg.embedder_seeds)]
        key, where = {"source": source}, folder(run_path) / "lp" / specs[source].slug
        if specs[source].entry.own:  # its graphs may change under one label (a list edited, a run crawled again)
            key["graphs"] = sources.graphs_digest(files)
            where = where / key["graphs"]
        rows.append(
            graph_link_prediction(
                files,
                pairs,
                where,
                lambda seed: lp_params(cfg, seed, tuple(cfg.embedder_protocols), cfg.embedder_test_graphs, 0.1),
                rows_file=folder(run_path) / "lp_rows.csv",
                key=key,
                progress=progress,
            )
        )
    lp = pd.concat(rows, ignore_index=True)
    write_csv(folder(run_path) / "lp.csv", lp)
    return lp


def probes(cfg: EmbeddersParams, built: dict[str, dict], run_path: Path) -> pd.DataFrame:
    """One row per encoder on stage 5's probes (`embedder_probe_texts` texts per task; none when 0). Finished
    encoders are kept in probe_rows.csv under their model identity, so a re-run probes only what is new."""
    if not cfg.embedder_probe_texts:
        return pd.DataFrame()
    n = cfg.embedder_probe_texts
    rows_file = folder(run_path) / "probe_rows.csv"
    done = read_rows(rows_file, "probe rows", "its encoders are probed again", columns=["model_id"])
    keys = {
        label: {"encoder": label, "model_id": model_identity(e["folder"] or default_model_dir()), "texts": n}
        for label, e in built.items()
    }
    kept = {label: rows_with(done, key) for label, key in keys.items()}
    if all(len(old) for old in kept.values()):  # every encoder probed already: no teacher to load
        return pd.DataFrame([old.iloc[0].to_dict() for old in kept.values()])
    datasets = build_datasets(cfg.embedder_data_seed, 1, n, n // 2, max(n // 5, 50))  # no transfer text is used
    teacher = load_encoder(ensure_teacher())
    temb = {f"fid_{s}": encode_texts(teacher, datasets["fidelity"][s], evaluate.PROBE_TOKENS) for s in ("val", "test")}
    rows = []
    for label, e in built.items():
        if len(kept[label]):
            rows.append(kept[label].iloc[0].to_dict())
            continue
        rows.append({**keys[label], **evaluate.probe_row(e["folder"], datasets, temb, cfg.embedder_data_seed)})
        append_csv_rows(rows_file, [rows[-1]])
    return pd.DataFrame(rows)


def speed(cfg: EmbeddersParams, built: dict[str, dict], part: data.Partition, run_path: Path) -> pd.DataFrame:
    rng = np.random.default_rng(cfg.embedder_data_seed)
    titles = part.test["wikispeedia"]
    titles = [titles[i] for i in rng.permutation(len(titles))[: cfg.embedder_speed_titles]]
    table = evaluate.speed_table({k: e["folder"] for k, e in built.items()}, titles, cfg.embedder_speed_repeats)
    write_csv(folder(run_path) / "speed.csv", table)
    return table


def results(lp: pd.DataFrame, speed_rows: pd.DataFrame, built: dict[str, dict], run_path: Path) -> dict:
    """The paired table, the goal rows and their sentences; written beside the rows (paired.csv, goals.csv,
    summary.json)."""
    paired = evaluate.paired_to_reference(lp)
    goals = evaluate.goal_rows(
        paired, speed_rows, {k: e["layers"] for k, e in built.items() if k != encoders.REFERENCE}
    )
    sentences = [evaluate.goal_sentence(r, goal_of(int(r.layers))) for _, r in goals.iterrows()]
    write_csv(folder(run_path) / "paired.csv", paired)
    write_csv(folder(run_path) / "goals.csv", goals)
    atomic_write_text(folder(run_path) / "summary.json", json.dumps({"goals": sentences}, indent=1) + "\n")
    return {"paired": paired, "goals": goals, "sentences": sentences}


def plot_frontier(paired: pd.DataFrame, speed_rows: pd.DataFrame, path: Path | None = None):
    """AUC minus all-MiniLM-L6-v2 (95% interval, paired by seed) against titles/s ratio on one thread, one panel per
    (model, source), one point per encoder and protocol; the goals' margins drawn as dashed lines."""
    auc = paired[paired.metric == "auc"]
    panels = list(auc.groupby(["model", "source"], sort=True).groups)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    ratio = speed_rows.set_index("encoder")["ratio"]
    top = max(float(ratio.max()), 2.0) * 1.6
    ticks = [t for t in (1, 2, 5, 10, 30, 100, 300, 1000) if t <= top]
    protocols = sorted(auc.protocol.unique())
    for ax, (model, source) in zip(axes[0], panels):
        g = auc[(auc.model == model) & (auc.source == source)]
        for i, ((enc, protocol), r) in enumerate(g.groupby(["encoder", "protocol"], sort=False)):
            r = r.iloc[0]
            x = float(ratio.get(enc, np.nan)) * 1.04 ** protocols.index(protocol)  # protocols side by side
            ax.errorbar(
                [x],
                [r["diff"]],
                yerr=[[r["diff"] - r.ci_low], [r.ci_high - r["diff"]]],
                fmt="o",
                capsize=3,
                color=f"C{list(g.encoder.unique()).index(enc)}",
                mfc="white" if protocols.index(protocol) else None,
                label=f"{enc} ({protocol})",
            )
        for goal in GOALS:
            ax.axvline(goal.speedup, ls=":", lw=0.8, color="grey")
            for m, v in goal.margins:
                if m == model:
                    ax.axhline(-v, ls="--", lw=0.8, color="grey")
        ax.axhline(0, lw=0.8, color="black")
        ax.set_xscale("log")
        ax.set_xlim(0.8, top)
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(f"{model} on {source}")
        ax.set_xlabel("titles/s ÷ all-MiniLM-L6-v2's (1 thread)")
        ax.set_ylabel("AUC − all-MiniLM-L6-v2's")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=min(len(labels), 4))
    return saved(fig, path, rect=(0, 0.08 + 0.03 * (len(labels) // 4), 1, 1))
