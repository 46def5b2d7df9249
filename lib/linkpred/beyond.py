"""Beyond the seed: can a graph model beat the heuristics here at all, and with what? (notebook 03b)

Model variants are GatModel configurations that differ only in the decoder (lib.linkpred.decoders) and in the few
training settings a small sweep chooses on validation graphs (never on test graphs):

  "dot":          the seed's dot decoder, trained with the settings below (disjoint supervision, early stopping, the
                  sweep's dropout / levels / lr) — does training alone close the gap?
  "hadamard_mlp": MLP on z_i ⊙ z_j;
  "ncn":          MLP on [z_i ⊙ z_j ‖ Σ common-neighbour z_k];
  "ncn_feat":     ncn plus the heuristic stack's pair features as decoder inputs (ModelConfig.stack_features: by
                  default cos, CN, AA, PA);
  "ncn_stack":    ncn_feat whose feature part starts as the fitted heuristic stack (lib.linkpred.decoders,
                  init="stack"), so training starts at the bar instead of at random feature weights;
  "ncn_stack_uniform": ncn_stack trained on uniform negatives only and selected on validation MRR with uniform
                  negatives (VARIANT_TRAINING): the model for the uniform negative set.
  "ncn_stack_matched": ncn_stack trained with half of its negatives at a positive's own distance in the step's message
                  passing (lib.linkpred.negatives' "matched" rule) and selected on validation MRR with matched
                  negatives.
  "ncn_stack_rescaled", "ncn_stack_uniform_rescaled": the two above with every count input (common-neighbour sum, CN,
                  AA, PA) rescaled to the training graphs' mean degree (lib.linkpred.heuristics, "Density
                  rescaling"), started from the stack fitted on rescaled features.
  "counts", "mplp" and their "_stack", "_stack_uniform", "_stack_matched" variants: as ncn and its stack variants,
                  with the structural-count decoders (exact distance-pair and 3-walk counts; MPLP's signature estimates)
                  in place of the common-neighbour sum (not in a profile: a run names them in beyond_variants).
  "mplp_stack_dist2": mplp_stack trained with every negative at distance 2 in the step's message passing and selected
                  on validation MRR with distance-2 negatives: the model for the dist2 negative set, whose negatives
                  all share a neighbour with their anchor (so a pair without one is a positive there).

The bar is `heuristic_stack` (lib.linkpred.heuristics.HeuristicStack), fitted on the same protocol's training graphs;
where a rescaled variant runs, `heuristic_stack_rescaled` (the stack on rescaled features) is reported too and counts as
a bar, so a margin measures what the graph model adds over the rescaling itself.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from lib.common.paths import atomic_write_text
from lib.linkpred.checkpoint import data_fingerprint, epoch_checkpoints
from lib.linkpred.config import TrainConfig
from lib.linkpred.decoders import VARIANTS
from lib.linkpred.evaluate import evaluate_model, evaluate_scorer
from lib.linkpred.heuristics import REGISTRY, STACK, HeuristicStack, heuristic_scores
from lib.linkpred.model import ModelConfig
from lib.linkpred.negative_sets.registry import NEGATIVE_SETS, held_sets
from lib.linkpred.protocols import ProtocolSplit
from lib.linkpred.train import LAST, Checkpointing, checkpoint_config, train_model
from lib.metrics.link import STRATA, set_metrics
from lib.metrics.paired import interval_text, judged_text, mean_interval
from lib.metrics.selection import GOAL_PARTS, choose_on_validation, goal_parts, goal_verdict

# Training settings a variant fixes whatever the profile says. ncn_stack_uniform is ncn_stack trained for the uniform
# negative set only: on the seed40 validation graphs (leak_free, seed 0) ncn_stack's validation AUC with uniform
# negatives fell from 0.942 to 0.892 to 0.807 as the distance-2 share of its training negatives rose from 0 to 0.2 to
# 0.5, while its AUC on distance-2 negatives (dist2) rose from 0.51 to 0.91 to 0.94: one training mix does not serve
# both negative sets here.
VARIANT_TRAINING = {
    v: {"negative_mix": {}, "select_metric": "mrr"}
    for v in ("ncn_stack_uniform", "ncn_stack_uniform_rescaled", "counts_stack_uniform", "mplp_stack_uniform")
}
# ncn_stack_matched: on the seed40 validation graphs (leak_free, seed 0, dropout 0.25, up to 8 epochs) ncn_stack trained
# with half its negatives matched instead of at distance 2 rose from 0.773 to 0.887 validation AUC (MRR 0.558 to 0.621)
# on matched negatives and fell from 0.824 to 0.702 on heart ones; a quarter of each scored 0.849 / 0.819. So the
# matched set gets a model of its own, as the uniform one does.
VARIANT_TRAINING.update(
    {
        v: {"negative_mix": {"matched": 0.5}, "select_metric": "mrr_matched"}
        for v in ("ncn_stack_matched", "counts_stack_matched", "mplp_stack_matched")
    }
)
# mplp_stack_dist2: on the seed40 validation graphs (seed 0, the swept dropout) mplp_stack trained with every negative
# at distance 2 instead of half scored validation dist2 MRR 0.754 / 0.638 / 0.595 (leak_free / pair_split / new_nodes)
# against 0.561 / 0.398 / 0.309, and AUC 0.911 / 0.934 / 0.956 against 0.940 / 0.918 / 0.909; the no-common-neighbour
# shortcut scored MRR 0.731 / 0.431 / 0.743 there. Half at distance 2 (0.75 tried under leak_free: MRR 0.675, AUC 0.937)
# serves neither set well, so the dist2 set gets a model of its own, as the uniform and matched ones do.
VARIANT_TRAINING["mplp_stack_dist2"] = {"negative_mix": {"dist2": 1.0}, "select_metric": "mrr_dist2"}
STACKS = ("heuristic_stack", "heuristic_stack_rescaled")
# A diagnostic scorer, not one of the heuristics a model must beat: 1 for a pair without a common neighbour in the
# message passing, 0 otherwise. Every dist2 negative has one (distance 2), so on dist2 this needs no learning to rank
# each such positive first; gap_table reports the best graph model's margin over it beside the goal's.
SHORTCUT = "no_cn_shortcut"
SWEEP_KEYS = ("dropout", "num_levels", "lr")
# the GatModel setting each architecture key of a sweep point sets (the sweep's columns keep the short names)
SWEEP_MODEL_FIELDS = {"dropout": "gat_dropout", "num_levels": "gat_levels"}
VAL_KEYS = tuple(
    f"{m}{s}" for s in ["", *(f"_{n}" for n in NEGATIVE_SETS[1:]), "_both", "_all"] for m in ("auc", "mrr")
)


def check_variants(names) -> list[str]:
    bad = [n for n in names if n not in VARIANTS]
    if bad:
        raise ValueError(f"model variant {bad[0]!r} does not exist; use names from {list(VARIANTS)}")
    return list(names)


def variant_config(name: str, model_cfg: ModelConfig, point: dict | None = None) -> ModelConfig:
    """model_cfg with a variant's decoder settings (VARIANTS) and a sweep point's dropout / num_levels applied."""
    arch = {f: point[k] for k, f in SWEEP_MODEL_FIELDS.items() if point and k in point}
    return replace(model_cfg, **VARIANTS[name], **arch)


def variant_train_config(name: str, cfg: TrainConfig, point: dict | None = None) -> TrainConfig:
    """cfg with a sweep point's lr and the variant's fixed training settings (VARIANT_TRAINING) applied."""
    return replace(cfg, lr=(point or {}).get("lr", cfg.lr), **VARIANT_TRAINING.get(name, {}))


def variant_select_metric(name: str, default: str) -> str:
    """The validation metric that picks a variant's epoch and sweep point."""
    return VARIANT_TRAINING.get(name, {}).get("select_metric", default)


def sweep_grid(dropouts: list, levels: list, lrs: list) -> list[dict]:
    """Every combination, as {dropout, num_levels, lr} points."""
    return [dict(zip(SWEEP_KEYS, p)) for p in itertools.product(dropouts, levels, lrs)]


def sweep(
    split: ProtocolSplit,
    variant: str,
    model_cfg: ModelConfig,
    cfg: TrainConfig,
    grid: list[dict],
    ckpt_root=None,
    progress: bool = True,
) -> pd.DataFrame:
    """Train `variant` at every grid point on the split's training graphs; one row per point with the validation
    metrics of its selected epoch (the split's validation tasks only — test tasks are never looked at) and "seconds",
    the training steps' wall time as logged in the checkpoints, so a point reloaded from a finished run reports the
    time it took to train, not the reload."""
    if not split.val:
        raise ValueError("the sweep needs validation graphs; use val_fraction > 0")
    rows = []
    data_id = data_fingerprint(split.train, split.val)
    for i, point in enumerate(tqdm(grid, desc=f"sweep {variant}", disable=not progress)):
        res = _trained(
            split, variant, model_cfg, cfg, point, ckpt_root / f"sweep-{variant}-{i}" if ckpt_root else None, data_id
        )
        best = next(v for v in res["val"] if v["epoch"] == res["best_epoch"])
        rows.append(
            {
                "variant": variant,
                **point,
                "best_epoch": res["best_epoch"],
                "epochs_run": len(res["val"]),
                **{f"val_{k}": best.get(k) for k in VAL_KEYS if k in best},
                "seconds": res["seconds"],
            }
        )
    return pd.DataFrame(rows)


def best_point(sweep_rows: pd.DataFrame, metric: str = "mrr") -> dict:
    """The grid point with the best validation `metric` (ties: the earlier point)."""
    r = sweep_rows.sort_values(f"val_{metric}", ascending=False, kind="stable").iloc[0]
    return {k: (int(r[k]) if k == "num_levels" else float(r[k])) for k in SWEEP_KEYS}


def rescaled(variants) -> bool:
    """Whether any of the variants rescales its counts (then the rescaled stack is reported beside the stack)."""
    return any(VARIANTS[v].get("decoder_rescale") for v in variants)


def shortcut_scores(task, pairs) -> np.ndarray:
    """SHORTCUT's scores [P] of pairs [2, P] on a task: 1.0 where the pair has no common neighbour in the task's message
    passing, else 0.0."""
    return (
        heuristic_scores("common_neighbours", task.data.x, task.mp_edge_index, task.data.num_nodes, pairs) == 0
    ).astype(np.float64)


def evaluate_shortcut(split: ProtocolSplit, cfg: TrainConfig) -> dict:
    """{negative set: mean metrics} of SHORTCUT on the split's test tasks."""
    return evaluate_scorer(shortcut_scores, split.test, cfg)["mean"]


def evaluate_stack(split: ProtocolSplit, cfg: TrainConfig, rescale: bool = False, features=STACK) -> tuple[dict, dict]:
    """({negative set: mean metrics}, coefficients) of the heuristic stack of the registered heuristics `features`
    fitted on the split's training graphs (rescale: on counts rescaled to their mean degree)."""
    st = HeuristicStack(ratio=cfg.disjoint_ratio, seed=cfg.seed, rescale=rescale, features=features).fit(split.train)
    res = evaluate_scorer(
        lambda t, pairs: st.scores(t.data.x, t.mp_edge_index, t.data.num_nodes, pairs), split.test, cfg
    )
    return res["mean"], st.coefficients


RECORD = "result.json"


def _recorded(folder: Path | None, key: dict, compute) -> dict:
    """compute()'s value (a JSON dict), or the one an earlier call with the same key wrote to folder/RECORD. A
    training's record is a few kB beside megabytes of epoch checkpoints: keeping only the records, a run resumes on
    another machine without retraining what finished (the same numbers: JSON keeps every float64 exactly)."""
    path = Path(folder) / RECORD if folder is not None else None
    key = json.loads(json.dumps(key))  # tuples as lists, as a record reads back
    if path is not None and path.exists():
        record = json.loads(path.read_text())
        if record.get("key") == key:
            return record["value"]
    value = compute()
    if path is not None:
        atomic_write_text(path, json.dumps({"key": key, "value": value}, allow_nan=True))
    return value


def _from_sweep(ckpt_dir: Path | None, train_key: dict) -> None:
    """Give a training that has not started (no record, no checkpoint in ckpt_dir) the checkpoints of a finished sweep
    run beside it (ckpt_dir's parent/sweep-*) whose record holds the same training: same data, model and settings, seed
    included, so the same steps would give the same weights. train_model then resumes the finished run instead of
    training it again; that is the chosen point of every variant on the sweep's split (seed and protocol)."""
    if ckpt_dir is None:
        return
    unit = Path(ckpt_dir)
    if (unit / RECORD).exists() or (unit / LAST).exists():
        return
    train_key = json.loads(json.dumps(train_key))  # as a record reads back
    for sweep_dir in sorted(unit.parent.glob("sweep-*")):
        record = sweep_dir / RECORD
        if not ((sweep_dir / LAST).is_file() and record.is_file()):
            continue
        if json.loads(record.read_text())["key"]["train"] != train_key:
            continue
        unit.mkdir(parents=True, exist_ok=True)
        for f in [sweep_dir / LAST, *epoch_checkpoints(sweep_dir).values()]:
            try:  # checkpoints are replaced, never written in place: a link is safe and takes no space
                os.link(f, unit / f.name)
            except OSError:
                shutil.copy2(f, unit / f.name)
        return


def _trained(split, variant, model_cfg, cfg, point, ckpt_dir, data_id: str, test_id: str | None = None) -> dict:
    """Train `variant` at `point` on the split (checkpoints in ckpt_dir, resumed when they hold this run); returns
    {best_epoch, val (per epoch), seconds (the steps' wall time as logged), checkpoint (the selected epoch's file name
    in ckpt_dir)} and, with a test_id (the split's test tasks' data_fingerprint), "mean": the test metrics per
    negative set. Read back from ckpt_dir's record when it holds the same data, model, settings and test tasks
    (_recorded)."""
    mcfg = variant_config(variant, model_cfg, point)
    tcfg = variant_train_config(variant, cfg, point)
    key = {"train": checkpoint_config("gat_model", mcfg, tcfg, data_id), "test_id": test_id}
    if test_id is not None:
        _from_sweep(ckpt_dir, key["train"])

    def compute():
        model, res = train_model(
            "gat_model", mcfg, split.train, split.val, tcfg, Checkpointing(ckpt_dir, data_id), progress=False
        )
        out = {
            "best_epoch": res.best_epoch,
            "val": res.val,
            "seconds": sum(h["seconds"] for h in res.history),
            "checkpoint": res.checkpoint and Path(res.checkpoint).name,  # ckpt_dir moves with the run folder
        }
        if test_id is not None:
            out["mean"] = evaluate_model(model, split.test, tcfg, progress=False)["mean"]
        return out

    return _recorded(ckpt_dir, key, compute)


def run_variant(
    split: ProtocolSplit, variant: str, model_cfg: ModelConfig, cfg: TrainConfig, point: dict | None, ckpt_dir=None
) -> tuple[dict, dict]:
    """Train one variant on a split and evaluate it on the split's test tasks (every negative set, with A-AUC from the
    model's own pair scores). Returns ({negative set: mean metrics}, {best_epoch, val, seconds, checkpoint}), read
    back from ckpt_dir's record when it holds this training on these test tasks (_recorded)."""
    test_id = data_fingerprint([t.data for t in split.test], split.test)
    res = _trained(split, variant, model_cfg, cfg, point, ckpt_dir, data_fingerprint(split.train, split.val), test_id)
    return res.pop("mean"), res


def validation_of(res: dict, negatives: str) -> dict:
    """{"val_auc", "val_mrr"} of a trained variant's selected epoch (TrainResult as dict) for one negative set — the
    numbers that pick the best graph model in gap_table; None where the variant did not validate on that set."""
    best = next(v for v in res["val"] if v["epoch"] == res["best_epoch"])
    suffix = "" if negatives == "uniform" else f"_{negatives}"
    return {f"val_{m}": best.get(f"{m}{suffix}") for m in ("auc", "mrr")}


def margin_columns(name: str, diffs: pd.Series) -> dict:
    """{name, name_std, name_low, name_high}: the mean of per-seed differences `diffs` [seeds] (NaN ones, a seed
    without that stratum, left out), their std and 95% interval (lib.metrics.paired.mean_interval)."""
    r = mean_interval(diffs.dropna())
    return {name: r["diff"], f"{name}_std": r["std"], f"{name}_low": r["ci_low"], f"{name}_high": r["ci_high"]}


def gap_table(rows: pd.DataFrame, stack: str = "heuristic_stack", metrics=("auc", "mrr")) -> pd.DataFrame:
    """Per protocol × negative set: the best graph model, the heuristic stack, the best single heuristic, and the best
    model's margin (mean, std and 95% interval of per-seed differences; margin_columns) over the *strongest* heuristic
    scorer by mean test AUC ("bar")
    — the stack is fitted on uniform negatives, so on the other sets a single heuristic can beat it; where the rows hold
    a rescaled stack (STACKS), it competes for the bar too.

    The best graph model is chosen by its mean *validation* AUC on that negative set (column val_auc, from
    validation_of) among the models that have one, so no test number picks it; "best on test" names the model with the
    highest mean test AUC beside it. Where no graph model has a val_auc (a run that kept none), the test AUC chooses,
    and "chosen on" says which was used. Where the rows hold SHORTCUT, its metrics and the best model's mean margin over
    it ({metric}_margin_shortcut) are added; it is not part of the bar. A protocol × negative set without a defined AUC
    (its tasks hold no such negative) has no row. Where the rows hold per-stratum metrics (auc_cn, mrr_no_cn, ...),
    {metric}_{stratum}_margin is the best model's mean margin over the bar within that stratum of positives. "goal" is
    the cell's verdict under the project's one rule (lib.metrics.selection.goal_verdict): met, missed or undecided."""
    out = []
    for (p, n), g in rows.groupby(["protocol", "negatives"], sort=False):
        g = g[g["auc"].notna()]  # a negative set with no pairs in these tasks (e.g. no dist2 negative exists) has none
        mean = g.groupby("model")[list(metrics)].mean()
        graph_models = [m for m in mean.index if m not in REGISTRY and m not in STACKS and m != SHORTCUT]
        if not graph_models or not any(m in REGISTRY for m in mean.index):
            continue
        best, chosen_on, on_test = choose_on_validation(g, graph_models)
        single = mean.loc[[m for m in mean.index if m in REGISTRY], "auc"].idxmax()
        bars = [stack] + [m for m in STACKS if m != stack and m in mean.index] + [single]
        bar = max(bars, key=lambda m: mean.loc[m, "auc"])  # the first of equals: the stack before a single one
        per_seed = g.pivot_table(index="seed", columns="model", values=list(metrics))
        rec = {
            "protocol": p,
            "negatives": n,
            "best graph model": best,
            "bar": bar,
            "chosen on": chosen_on,
            "best on test": on_test,
        }
        for m in metrics:
            for label, who in (("best model", best), *((b, b) for b in bars[:-1]), ("best single " + single, single)):
                v = per_seed[m][who]
                rec[f"{best_label(m)} {label}"] = f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0:.3f}"
            rec |= margin_columns(f"{m}_margin", per_seed[m][best] - per_seed[m][bar])
            if SHORTCUT in mean.index:
                v = per_seed[m][SHORTCUT]
                rec[f"{best_label(m)} {SHORTCUT}"] = f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0:.3f}"
                rec |= margin_columns(f"{m}_margin_shortcut", per_seed[m][best] - v)
            for st in STRATA:  # where the best model wins: positives with / without a common neighbour
                col = f"{m}_{st}"
                if col in g and g[col].notna().any():
                    ps = g.pivot_table(index="seed", columns="model", values=col)
                    if best in ps and bar in ps:
                        rec |= margin_columns(f"{col}_margin", ps[best] - ps[bar])
        rec["seeds"] = int(per_seed.index.size)
        rec["goal"] = goal_verdict(rec)
        out.append(rec)
    return pd.DataFrame(out)


def structure_profile(tasks: list, hits_k: int = 50) -> dict:
    """What the held-out pairs of a set of tasks (validation or test, lib.linkpred.protocols.EvalTask) look like in
    their message passing: mean degree, positives, share of positives with no common neighbour (pos_no_cn), mean common
    neighbours of positives, and per negative set the share of its negatives without one (<set>_no_cn) and the AUC and
    MRR of the shortcut that scores a pair 1 when it has no common neighbour and 0 otherwise (shortcut_<set>_auc /
    _mrr; per-task means, as every scorer's; per-positive sets ranked per positive). A dist2 negative always has a
    common neighbour, so there the shortcut's MRR is about the share of positives without one; a matched negative has
    one exactly when its positive has, so there the shortcut's AUC is 0.5. Where validation and test differ in
    pos_no_cn, validation measures another task than test. Reads the tasks' pairs, never a model."""

    def cn(t, pairs):
        return heuristic_scores("common_neighbours", t.data.x, t.mp_edge_index, t.data.num_nodes, pairs)

    sets = held_sets(tasks)
    pos_cn, degree, neg_no_cn = [], [], {n: [] for n in sets}
    shortcut = {n: [] for n in sets}
    for t in tasks:
        degree.append(t.mp_edge_index.size(1) / t.data.num_nodes)
        p = cn(t, t.pos)
        pos_cn.append(p)
        for n in sets:
            pairs = t.negatives(n)
            if pairs.size(1) == 0 or p.size == 0:
                continue
            q = cn(t, pairs)
            neg_no_cn[n].append(q == 0)
            shortcut[n].append(set_metrics((p == 0).astype(float), (q == 0).astype(float), t.owners(n), None, hits_k))
    pos_cn = np.concatenate(pos_cn) if pos_cn else np.empty(0)
    mean = lambda c: float(np.mean(c)) if len(c) else float("nan")  # noqa: E731
    out = {
        "tasks": len(tasks),
        "mp_degree": mean(degree),
        "positives": int(pos_cn.size),
        "pos_no_cn": float((pos_cn == 0).mean()) if pos_cn.size else float("nan"),
        "pos_cn": mean(pos_cn),
    }
    for n in sets:
        out[f"{n}_no_cn"] = float(np.concatenate(neg_no_cn[n]).mean()) if neg_no_cn[n] else float("nan")
        for m in ("auc", "mrr"):
            out[f"shortcut_{n}_{m}"] = mean([r[m] for r in shortcut[n] if r[m] is not None])
    return out


def best_label(metric: str) -> str:
    return {"auc": "AUC", "mrr": "MRR"}.get(metric, metric)


def gap_sentences(gaps: pd.DataFrame) -> list[str]:
    """One sentence per protocol × negative set of `gap_table`: the best graph model (chosen on validation), the goal's
    verdict under the project's one rule (lib.metrics.paired) and each of its parts with its 95% interval — the AUC and
    MRR margins over the bar and, on the harder sets, over SHORTCUT — and within each stratum of positives (with /
    without a common neighbour) the AUC margin over the bar with its interval; printed by notebook 03b."""
    out = []
    for r in gaps.to_dict("records"):
        labels = {
            "auc": f"AUC over {r['bar']}",
            "mrr": "MRR",
            "auc_shortcut": f"AUC over {SHORTCUT}",
            "mrr_shortcut": "MRR",
        }
        cells = [
            f"{labels[part]} {judged_text(r[col], r.get(f'{col}_low'), r.get(f'{col}_high'), margin)}"
            for part in goal_parts(r)
            for col, margin in [GOAL_PARTS[part]]
        ]
        txt = (
            f"{r['protocol']} / {r['negatives']}: best graph model {r['best graph model']} (chosen on "
            f"{r['chosen on']} AUC; best on test: {r['best on test']}), {r.get('seeds', '?')} seeds: goal "
            f"{goal_verdict(r)} ({'; '.join(cells)})"
        )
        strata = [
            f"{st} {interval_text(r[c], r.get(f'{c}_low'), r.get(f'{c}_high'))}"
            for st in STRATA
            if pd.notna(r.get(c := f"auc_{st}_margin"))
        ]
        if strata:
            txt += f"; AUC margin over the bar by stratum of positives: {', '.join(strata)}"
        out.append(txt + ".")
    return out


def structure_sentences(
    structure: pd.DataFrame, gaps: pd.DataFrame, rows: pd.DataFrame, protocols: list, sets=None
) -> list[str]:
    """Per protocol: the share of validation and test positives without a common neighbour (and the mean degree),
    then per negative set (`sets`; None: every set but uniform that `structure` profiles) the shortcut's test AUC /
    MRR beside the validation and test numbers of the graph model chosen for that set on validation. structure:
    `structure_profile` rows indexed by (protocol, role)."""
    if sets is None:
        sets = [n for n in NEGATIVE_SETS[1:] if f"shortcut_{n}_auc" in structure]
    chosen = gaps.set_index(["protocol", "negatives"])["best graph model"] if len(gaps) else pd.Series(dtype=object)
    mean = rows.groupby(["protocol", "negatives", "model"])[["val_auc", "auc", "mrr"]].mean()
    out = []
    for p in protocols:
        if (p, "val") not in structure.index or (p, "test") not in structure.index:
            continue
        v, t = structure.loc[(p, "val")], structure.loc[(p, "test")]
        out.append(
            f"{p}: {v.pos_no_cn:.0%} of validation positives have no common neighbour against {t.pos_no_cn:.0%} "
            f"of test positives (mean degree {v.mp_degree:.1f} against {t.mp_degree:.1f})."
        )
        for n in sets:
            if (p, n) not in chosen.index:
                out.append(f"  {n}: the test tasks hold no such negative")
                continue
            m = chosen[(p, n)]
            r = mean.loc[(p, n, m)]
            sa, sm = t[f"shortcut_{n}_auc"], t[f"shortcut_{n}_mrr"]
            out.append(
                f"  {n}: the shortcut scores test AUC {sa:.3f} / MRR {sm:.3f}; the model chosen for this set, {m}, "
                f"validation AUC {r.val_auc:.3f}, test AUC {r.auc:.3f} / MRR {r.mrr:.3f}: "
                f"{'above' if r.auc > sa else 'not above'} the shortcut in AUC, "
                f"{'above' if r.mrr > sm else 'not above'} it in MRR."
            )
    return out
