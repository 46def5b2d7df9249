"""The results tables of docs/results.md and of each reference run's README, each built from the committed reference
runs' metrics.json files (nothing typed by hand)."""

from __future__ import annotations

import pandas as pd

from lib.distill.eval import paired_differences
from lib.distill.stage import ABLATIONS
from lib.linkpred.negative_sets.registry import NEGATIVE_SETS
from lib.metrics.link import SEED_REPORTED
from lib.metrics.paired import interval_text
from lib.run.facts import best_heuristic, gat_model_rows, goal_cells, links_of, n_train


def seed_rows(runs: dict[str, dict]) -> pd.DataFrame:
    """GatModel as the seed trains it (lib.run.facts.gat_model_rows) per run and protocol, as numbers: run, links,
    n_train, seeds, protocol, auc, auc_std (NaN without a std row), aauc, and the seed report's auc / aauc for the same
    training-set size under the seed protocol (NaN otherwise)."""
    seed_ref = {r["train_graphs"]: r for r in SEED_REPORTED}
    rows = []
    for name, m in runs.items():
        tg = m.get("train_gat")
        if not tg:
            continue
        n = n_train(m)
        std = gat_model_rows(pd.DataFrame(tg.get("std", [])))
        for _, r in gat_model_rows(pd.DataFrame(tg["mean"])).iterrows():
            s = std[std["protocol"] == r["protocol"]]["auc"] if len(std) else pd.Series(dtype=float)
            ref = seed_ref.get(n, {}) if r["protocol"] == "seed" else {}
            rows.append(
                {
                    "run": name,
                    "links": links_of(m),
                    "n_train": n,
                    "seeds": len(tg["seeds"]),
                    "protocol": r["protocol"],
                    "auc": r["auc"],
                    "auc_std": s.iloc[0] if len(s) else float("nan"),
                    "aauc": r.get("aauc", float("nan")),
                    "seed_auc": ref.get("auc", float("nan")),
                    "seed_aauc": ref.get("aauc", float("nan")),
                    "removed": _removed_share(m, r["protocol"]),
                }
            )
    return pd.DataFrame(rows)


def _num(x: float, fmt: str = "{:.3f}", missing: str = "") -> str:
    return fmt.format(x) if pd.notna(x) else missing


def seed_table(runs: dict[str, dict]) -> pd.DataFrame:
    """seed_rows formatted: test AUC mean ± std over seeds and A-AUC mean, uniform negatives, beside the seed report's
    numbers for the same training-set size."""
    t = seed_rows(runs)
    if t.empty:
        return t
    return pd.DataFrame(
        {
            "run": t["run"],
            "links": t["links"],
            "train graphs": t["n_train"],
            "seeds": t["seeds"],
            "protocol": t["protocol"],
            "AUC": [f"{a:.3f} ± {s:.3f}" if pd.notna(s) else f"{a:.3f}" for a, s in zip(t["auc"], t["auc_std"])],
            "A-AUC": [_num(a, missing="n/a") for a in t["aauc"]],
            "seed report AUC": [_num(a) for a in t["seed_auc"]],
            "seed report A-AUC": [_num(a) for a in t["seed_aauc"]],
            "training edges removed": t["removed"],
        }
    )


def _removed_share(m: dict, protocol: str) -> str:
    """Mean share (over seeds) of the training graphs' edges the protocol removed (notebook 03's audit), against the
    dataset's mean edges per graph (notebook 01) times the training graphs kept: approximate, hence '≈'."""
    audit = [a for a in m["train_gat"].get("audit", []) if a["protocol"] == protocol]
    crawl = m.get("crawl", {})
    if not audit or not crawl.get("graphs") or not crawl.get("total_edges"):
        return ""
    per_graph = crawl["total_edges"] / crawl["graphs"]
    share = sum(a.get("train_edges_removed") or 0 for a in audit) / sum(a["train_graphs"] * per_graph for a in audit)
    return f"≈ {share:.0%}"


def margin(gap: dict, column: str) -> str:
    """A gap row's mean margin `column` with its 95% interval (lib.metrics.paired.interval_text)."""
    return interval_text(gap[column], gap.get(f"{column}_low"), gap.get(f"{column}_high"))


def heuristic_table(runs: dict[str, dict]) -> pd.DataFrame:
    """Per run, protocol and negative set: GatModel (mp supervision) beside the best single heuristic (mean AUC) and,
    where notebook 03b ran, the best graph model and the heuristic stack."""
    rows = []
    for name, m in runs.items():
        tg = m.get("train_gat")
        if not tg:
            continue
        mean = pd.DataFrame(tg["mean"])
        gaps = {(g["protocol"], g["negatives"]): g for g in m.get("beyond", {}).get("gaps", [])}
        goal = goal_cells(m)
        for (p, n), g in mean.groupby(["protocol", "negatives"], sort=False):
            g = g[g["auc"].notna()]  # a set a protocol cannot have (matched under seed) has no numbers
            if g.empty:
                continue
            gat = gat_model_rows(g, negatives=None)["auc"]
            h = best_heuristic(g)
            b = gaps.get((p, n), {})
            rows.append(
                {
                    "run": name,
                    "protocol": p,
                    "negatives": n,
                    "GatModel (seed) AUC": f"{gat.iloc[0]:.3f}" if len(gat) else "",
                    "best single heuristic": f"{h['model']} {h['auc']:.3f}",
                    "best graph model (03b)": f"{b['best graph model']} {b['AUC best model']}" if b else "",
                    "heuristic stack (03b)": b.get("AUC heuristic_stack", ""),
                    "03b margin AUC / MRR over the bar": (
                        f"{margin(b, 'auc_margin')} / {margin(b, 'mrr_margin')} ({b['bar']}): goal {goal[(p, n)]}"
                    )
                    if b
                    else "",
                    "03b margin AUC / MRR over no_cn_shortcut": (
                        f"{margin(b, 'auc_margin_shortcut')} / {margin(b, 'mrr_margin_shortcut')}"
                    )
                    if "auc_margin_shortcut" in b
                    else "",
                }
            )
    return pd.DataFrame(rows)


def structure_table(runs: dict[str, dict]) -> pd.DataFrame:
    """Per run, protocol and per-positive-style negative set where notebook 03b stored it (beyond.structure):
    validation against test tasks — share of positives with no common neighbour — the test AUC / MRR of the
    no-common-neighbour shortcut on that set, and the graph model chosen for it on validation with its validation and
    test numbers."""
    rows = []
    for name, m in runs.items():
        b = m.get("beyond", {})
        if not b.get("structure"):
            continue
        st = {(r["protocol"], r["role"]): r for r in b["structure"]}
        gaps = {(g["protocol"], g["negatives"]): g for g in b.get("gaps", [])}
        mean = {(r["protocol"], r["negatives"], r["model"]): r for r in b.get("mean", [])}
        for p in b.get("protocols", []):
            v, t = st.get((p, "val")), st.get((p, "test"))
            if not (v and t):
                continue
            for n in (n for n in NEGATIVE_SETS[1:] if f"shortcut_{n}_auc" in t):
                g = gaps.get((p, n))
                if g is None:
                    continue
                r = mean.get((p, n, g.get("best graph model")), {})
                sa, sm = t.get(f"shortcut_{n}_auc"), t.get(f"shortcut_{n}_mrr")
                rows.append(
                    {
                        "run": name,
                        "protocol": p,
                        "negatives": n,
                        "positives without a common neighbour val / test": (
                            f"{v['pos_no_cn']:.0%} / {t['pos_no_cn']:.0%}"
                        ),
                        "shortcut on test: AUC / MRR": f"{sa:.3f} / {sm:.3f}" if sa is not None else "",
                        "model chosen on validation": g.get("best graph model", ""),
                        "its validation AUC": f"{r['val_auc']:.3f}" if r.get("val_auc") is not None else "",
                        "its test AUC, MRR": (
                            f"{g['AUC best model']}, {g['MRR best model']}" if "MRR best model" in g else ""
                        ),
                    }
                )
    return pd.DataFrame(rows)


def _pm(x: pd.Series) -> str:
    return f"{x.mean():.3f} ± {x.std():.3f}" if len(x) > 1 else f"{x.mean():.3f}"


def distill_table(runs: dict[str, dict]) -> pd.DataFrame:
    """Notebook 05's task-agnostic stage per run: each MiniLM student beside its undistilled control (same
    architecture, init and seeds), polarity and topic test accuracy and fidelity cosine, mean ± std over seeds. Rows a
    grid took from a published run (`reused_from`, notebook 05's reuse_runs) are listed under that run only."""
    rows = []
    for name, m in runs.items():
        res = pd.DataFrame((m.get("distill") or {}).get("results") or [])
        if res.empty or "stage" not in res:
            continue
        if "reused_from" in res:
            res = res[res["reused_from"].isna() | (res["reused_from"] == "")]
        ta = res[(res["stage"] == "task-agnostic") & res["method"].isin(["MiniLM", "no distillation"])]
        for (student, init, method), g in ta.groupby(["student", "init", "method"]):
            rows.append(
                {
                    "run": name,
                    "student": student,
                    "init": init,
                    "method": method,
                    "seeds": g["seed"].nunique(),
                    "polarity": _pm(g["polarity_test"]),
                    "topic": _pm(g["topic_test"]),
                    "fidelity cosine": _pm(g["fid_cosine"]),
                }
            )
    return pd.DataFrame(rows)


PROBES = {"polarity_test": "polarity", "topic_test": "topic", "fid_cosine": "fidelity cosine"}
"""Notebook 05's task-agnostic probes and fidelity as the README names them."""


def diff_cell(r) -> str:
    """A `paired_differences` row as '+0.110 [+0.085, +0.135]' (no interval with one seed)."""
    return f"{r['diff']:+.3f}" + (f" [{r.ci_low:+.3f}, {r.ci_high:+.3f}]" if r.seeds > 1 else "")


def minilm_minus(res: pd.DataFrame, versus: tuple[str, ...]) -> pd.DataFrame:
    """Notebook 05's rows `res`: MiniLM minus each method of `versus` that `res` holds, on the same student, init and
    seed, every probe (lib.distill.eval.paired_differences, one frame in `versus` order)."""
    parts = [
        paired_differences(res, reference=v, methods=("MiniLM",), metrics=tuple(PROBES))
        for v in versus
        if v in set(res["method"])
    ]
    return pd.concat([p for p in parts if len(p)], ignore_index=True) if any(len(p) for p in parts) else pd.DataFrame()


def distill_differences_table(runs: dict[str, dict]) -> pd.DataFrame:
    """Notebook 05's task-agnostic stage per run: MiniLM minus its undistilled control and minus each ablation (the
    paper's Tables 5-7), the same student, init and seed paired; mean difference and 95% t-interval over the seeds."""
    rows = []
    for name, m in runs.items():
        res = pd.DataFrame((m.get("distill") or {}).get("results") or [])
        if res.empty or "stage" not in res or "MiniLM" not in set(res["method"]):
            continue
        d = minilm_minus(res, ("no distillation", *ABLATIONS))
        for (versus, student, init), g in d.groupby(["versus", "student", "init"], sort=False) if len(d) else []:
            row = {
                "run": name,
                "student": student,
                "init": init,
                "MiniLM minus": versus,
                "seeds": int(g["seeds"].max()),
            }
            row.update({PROBES[r.metric]: diff_cell(r) for _, r in g.iterrows()})
            rows.append(row)
    return pd.DataFrame(rows)


def distill_lp_table(runs: dict[str, dict]) -> pd.DataFrame:
    """Notebook 05's link prediction with each embedder as stage 2's node embedder: GatModel and feature-cosine AUC
    per protocol, mean ± std over seeds."""
    rows = []
    for name, m in runs.items():
        lp = pd.DataFrame((m.get("distill") or {}).get("link_prediction") or [])
        if lp.empty or "seed" not in lp:
            continue
        for (protocol, emb), g in lp.groupby(["protocol", "embedder"], sort=False):
            gat, cos = g[g["model"] == "gat_model"], g[g["model"] == "cosine"]
            rows.append(
                {
                    "run": name,
                    "protocol": protocol,
                    "node embedder": emb,
                    "seeds": g["seed"].nunique(),
                    "GatModel AUC": _pm(gat["auc"]),
                    "GatModel MRR": _pm(gat["mrr"]),
                    "cosine AUC": _pm(cos["auc"]),
                }
            )
    return pd.DataFrame(rows)


def kd_table(runs: dict[str, dict]) -> pd.DataFrame:
    """Notebook 06: per task, the fine-tuned teacher and each KD student beside its CE-only control (test accuracy and
    agreement with the teacher, mean ± std over seeds), with parameter counts and the mean probing accuracy above the
    majority class of the first seed's student."""
    rows = []
    for name, m in runs.items():
        kd = m.get("kd") or {}
        res = pd.DataFrame(kd.get("rows") or [])
        if res.empty:
            continue
        probing = pd.DataFrame(kd.get("probing") or []).set_index("model") if kd.get("probing") else pd.DataFrame()
        gain = (probing.drop(index="majority") - probing.loc["majority"]).mean(axis=1) if len(probing) else pd.Series()
        for t in kd.get("teacher") or []:
            key = f"teacher fine-tuned ({t['task']})"
            rows.append(
                {
                    "run": name,
                    "task": t["task"],
                    "model": "teacher (fine-tuned)",
                    "seeds": 1,
                    "test accuracy": f"{t['test']:.3f}",
                    "agreement": "",
                    "params (M)": "",
                    "probing gain": f"{gain[key]:+.3f}" if key in gain else "",
                }
            )
        for (task, student, method), g in res.groupby(["task", "student", "method"], sort=False):
            key = f"{student} {method} ({task})"
            rows.append(
                {
                    "run": name,
                    "task": task,
                    "model": f"{student} {method}",
                    "seeds": g["seed"].nunique(),
                    "test accuracy": _pm(g["test"]),
                    "agreement": _pm(g["agree_test"]),
                    "params (M)": f"{g['params_total'].iloc[0] / 1e6:.1f}",
                    "probing gain": f"{gain[key]:+.3f}" if key in gain else "",
                }
            )
    return pd.DataFrame(rows)


def overlap_table(runs: dict[str, dict]) -> pd.DataFrame:
    """Notebook 01's overlap-versus-max_nodes table, per link source from the reference run that measured the most
    roots."""
    best: dict[str, list] = {}
    for m in runs.values():
        rows = m.get("crawl", {}).get("overlap_by_size") or []
        links = links_of(m)
        if rows and rows[0]["graphs"] > (best.get(links) or [{"graphs": 0}])[0]["graphs"]:
            best[links] = rows
    if not best:
        return pd.DataFrame()
    t = pd.concat([pd.DataFrame(rows).assign(links=links) for links, rows in best.items()], ignore_index=True)
    return pd.DataFrame(
        {
            "links": t["links"],
            "max_nodes": t["max_nodes"].map("{:,}".format),
            "graphs": t["graphs"],
            "mean edges": t["mean_edges"].map("{:,.0f}".format),
            "distinct titles": t["distinct_titles"].map("{:,}".format),
            "shared share": t["shared_share"].map("{:.3f}".format),
        }
    )


def goal_table(runs: dict[str, dict]) -> pd.DataFrame:
    """Notebook 03b's goal per run, protocol and negative set, compactly: the graph model chosen on validation, its
    test AUC / MRR, the bar's (the strongest heuristic scorer by mean test AUC), the no-common-neighbour shortcut's,
    the model's mean margin over the bar with its 95% interval, and the goal's verdict (lib.run.facts.goal_cells)."""
    rows = []
    for name, m in runs.items():
        goal = goal_cells(m)
        for g in (m.get("beyond") or {}).get("gaps") or []:
            bar = g["bar"] if f"AUC {g['bar']}" in g else f"best single {g['bar']}"
            pair = lambda who: (
                f"{g[f'AUC {who}'].split(' ±')[0]} / {g[f'MRR {who}'].split(' ±')[0]}"
                if f"AUC {who}" in g and f"MRR {who}" in g
                else ""
            )
            rows.append(
                {
                    "run": name,
                    "links": links_of(m),
                    "protocol": g["protocol"],
                    "negatives": g["negatives"],
                    "model chosen on validation": g["best graph model"],
                    "its AUC / MRR": pair("best model"),
                    "bar": g["bar"],
                    "bar AUC / MRR": pair(bar),
                    "shortcut AUC / MRR": pair("no_cn_shortcut"),
                    "margin AUC / MRR": f"{margin(g, 'auc_margin')} / {margin(g, 'mrr_margin')}",
                    "goal": goal[(g["protocol"], g["negatives"])],
                }
            )
    return pd.DataFrame(rows)


def strata_table(runs: dict[str, dict]) -> pd.DataFrame:
    """Notebook 03b's goal split by stratum of positives: the chosen model's mean AUC (95% interval) / MRR margin over
    the bar among the positives with a common neighbour in the message passing and among those without one, beside the
    share of test positives without one (where a set holds both strata)."""
    rows = []
    for name, m in runs.items():
        b = m.get("beyond") or {}
        share = {(r["protocol"], r["negatives"]): r.get("pos_no_cn") for r in b.get("mean") or []}
        for g in b.get("gaps") or []:
            if g.get("auc_cn_margin") is None and g.get("auc_no_cn_margin") is None:
                continue
            cell = lambda st: (
                f"{margin(g, f'auc_{st}_margin')} / {g[f'mrr_{st}_margin']:+.3f}"
                if pd.notna(g.get(f"auc_{st}_margin")) and pd.notna(g.get(f"mrr_{st}_margin"))
                else ""
            )
            no_cn = share.get((g["protocol"], g["negatives"]))
            rows.append(
                {
                    "run": name,
                    "links": links_of(m),
                    "protocol": g["protocol"],
                    "negatives": g["negatives"],
                    "model chosen on validation": g["best graph model"],
                    "bar": g["bar"],
                    "test positives without a common neighbour": f"{no_cn:.0%}" if pd.notna(no_cn) else "",
                    "margin AUC / MRR, with a common neighbour": cell("cn"),
                    "margin AUC / MRR, without one": cell("no_cn"),
                }
            )
    return pd.DataFrame(rows)


def once(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with each run's rows listed once: a run whose rows (all but the run name) equal an earlier run's is
    dropped and named beside that run ("distill_cpu (also seed40)") — one result published under several names."""
    if table.empty:
        return table
    first, also = {}, {}
    for run, g in table.groupby("run", sort=False):
        key = g.drop(columns="run").to_json(orient="values")
        if key in first:
            also[first[key]].append(run)
        else:
            first[key], also[run] = run, []
    keep = table[table["run"].isin(also)].copy()
    keep["run"] = keep["run"].map(lambda r: f"{r} (also {', '.join(also[r])})" if also[r] else r)
    return keep.reset_index(drop=True)
