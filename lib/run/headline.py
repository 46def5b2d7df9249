"""The README's headline: one line per finding, each printed from a committed reference run's numbers (never typed)
and linked to that run. A finding whose runs are not committed is left out, so the list shrinks rather than lies."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from lib.common.paths import OUTPUTS
from lib.distill.config import read_params_05
from lib.distill.eval import paired_differences
from lib.distill.stage import ABLATIONS
from lib.linkpred.beyond import goal_met
from lib.linkpred.heuristics import HEURISTICS
from lib.metrics.link import SEED_REPORTED
from lib.run.tables import PROBES, _n_train, diff_cell, links_of, minilm_minus

REFERENCE = OUTPUTS / "reference"
CLEAN = ("leak_free", "new_nodes", "pair_split")


def _link(run: str) -> str:
    return f"[{run}](outputs/reference/{run}/)"


def _links(runs) -> str:
    return ", ".join(_link(r) for r in runs)


def _gat_rows(runs: dict[str, dict]) -> pd.DataFrame:
    """Every run's mean rows of notebook 03 (train_gat) with the run's name and number of training graphs."""
    out = [pd.DataFrame(m["train_gat"]["mean"]).assign(run=name, n_train=_n_train(m))
           for name, m in runs.items() if m.get("train_gat")]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def _seed_model(rows: pd.DataFrame, protocol: str) -> pd.DataFrame:
    """GatModel as the seed trains it (mp supervision), uniform negatives, one protocol, sorted by training graphs."""
    sel = (rows["model"] == "gat_model") & (rows["supervision"] == "mp") & (rows["negatives"] == "uniform") & (
        rows["protocol"] == protocol)
    return rows[sel].sort_values("n_train")


def _per_source(runs: dict[str, dict], part) -> list[tuple[str, str]]:
    """[(link source, part(its runs))] for every link source whose runs give a part, the embedded proxy first."""
    groups: dict[str, dict[str, dict]] = {}
    for name, m in sorted(runs.items(), key=lambda kv: kv[1].get("link_source", "embedded") != "embedded"):
        groups.setdefault(links_of(m), {})[name] = m
    return [(links, text) for links, g in groups.items() if (text := part(g))]


def _sides(parts: list[tuple[str, str]]) -> str:
    return "; ".join(f"on {links}, {text}" for links, text in parts)


def reproduction(runs: dict[str, dict]) -> str | None:
    ref = {r["train_graphs"]: r for r in SEED_REPORTED}

    def part(g: dict[str, dict]) -> str | None:
        rows = _gat_rows(g)
        t = _seed_model(rows, "seed") if len(rows) else rows
        t = t[t["n_train"].isin(ref)] if len(t) else t
        if t.empty:
            return None
        return (f"test AUC {' / '.join(f'{a:.3f}' for a in t['auc'])} with {' / '.join(str(n) for n in t['n_train'])} "
                f"training graphs ({_links(t['run'])})")

    parts = _per_source(runs, part)
    if not parts:
        return None
    seed = " / ".join(f"{r['auc']:.3f}" for r in sorted(SEED_REPORTED, key=lambda r: r["train_graphs"]))
    return (f"**Reproduction.** Under the seed's own protocol its GatModel scores {_sides(parts)}; the seed report "
            f"gives {seed} with 40 / 180 / 315 graphs of its live crawl.")


def aauc_trend(runs: dict[str, dict]) -> str | None:
    def part(g: dict[str, dict]) -> str | None:
        rows = _gat_rows(g)
        t = _seed_model(rows, "seed").dropna(subset=["aauc"]) if len(rows) else rows
        if len(t) < 2:
            return None
        a0, a1, n0, n1 = t["aauc"].iloc[0], t["aauc"].iloc[-1], t["n_train"].iloc[0], t["n_train"].iloc[-1]
        return f"it {'rises' if a1 > a0 else 'falls'}, {a0:.3f} → {a1:.3f} from {n0} to {n1} graphs ({_links(t['run'])})"

    parts = _per_source(runs, part)
    if not parts:
        return None
    s = sorted(SEED_REPORTED, key=lambda r: r["train_graphs"])
    seed_way = "rose" if s[-1]["aauc"] > s[0]["aauc"] else "fell"
    return (f"**A-AUC and size.** The GatModel's A-AUC with training-set size, seed protocol: {_sides(parts)}; in the "
            f"seed report it {seed_way}, {s[0]['aauc']:.3f} → {s[-1]['aauc']:.3f}.")


def leakage(runs: dict[str, dict]) -> str | None:
    def part(g: dict[str, dict]) -> str | None:
        rows = _gat_rows(g)
        if rows.empty:
            return None
        ours, theirs, sizes, used = [], [], [], []
        for run, r in rows.groupby("run", sort=False):
            gat = _seed_model(r, "leak_free")
            h = r[(r["protocol"] == "leak_free") & (r["negatives"] == "uniform") & r["model"].isin(HEURISTICS)]
            if gat.empty or h.empty:
                continue
            best = h.loc[h["auc"].idxmax()]
            ours.append(f"{gat['auc'].iloc[0]:.3f}")
            theirs.append((best["model"], f"{best['auc']:.3f}"))
            sizes.append(str(r["n_train"].iloc[0]))
            used.append(run)
        if not ours:
            return None
        names = {n for n, _ in theirs}
        bar = (f"{names.pop()} {' / '.join(a for _, a in theirs)}" if len(names) == 1
               else " / ".join(f"{n} {a}" for n, a in theirs))
        return f"{' / '.join(ours)} with {' / '.join(sizes)} training graphs against {bar} ({_links(used)})"

    parts = _per_source(runs, part)
    if not parts:
        return None
    return ("**Unseen links.** Keep every test link out of training (`leak_free`): the seed's GatModel scores test AUC "
            f"{_sides(parts)}, the second number being the best single heuristic, which learns nothing.")


def beyond(runs: dict[str, dict]) -> str | None:
    def part(g: dict[str, dict]) -> str | None:
        for run, m in g.items():
            gaps = (m.get("beyond") or {}).get("gaps") or []
            if not gaps:
                continue
            met = [x for x in gaps if goal_met(x)]
            uni = [x for x in gaps if x["negatives"] == "uniform"]
            margins = " / ".join(f"{x['auc_margin']:+.3f}" for x in uni)
            protocols = " / ".join(x["protocol"] for x in uni)
            return (f"{len(met)} of {len(gaps)} cells, uniform AUC margin {margins} under {protocols} "
                    f"({_link(run)})")
        return None

    parts = _per_source(runs, part)
    if not parts:
        return None
    return ("**Beyond the seed.** Notebook 03b's best graph model, chosen on validation, meets its goal (≥ 0.02 AUC and "
            "MRR over every heuristic scorer, and over the no-common-neighbour shortcut on the harder sets) in "
            f"protocol × negative-set cells: {_sides(parts)} over the strongest heuristic scorer.")


def harder_negatives(runs: dict[str, dict]) -> str | None:
    def part(g: dict[str, dict]) -> str | None:
        for run, m in g.items():
            gaps = pd.DataFrame((m.get("beyond") or {}).get("gaps") or [])
            if gaps.empty or "auc_margin_shortcut" not in gaps:
                continue
            sets = [n for n in gaps["negatives"].unique() if n != "uniform"]
            if not sets:
                continue
            cells = []
            for n in sets:
                x = gaps[gaps["negatives"] == n]
                cells.append(f"{n} {x['auc_margin'].mean():+.3f} / {x['auc_margin_shortcut'].mean():+.3f}")
            return f"{', '.join(cells)} across {gaps['protocol'].nunique()} protocols ({_link(run)})"
        return None

    parts = _per_source(runs, part)
    if not parts:
        return None
    return ("**Harder negatives.** Mean AUC margin of that model over the strongest heuristic scorer / over the "
            f"no-common-neighbour shortcut: {_sides(parts)}.")


def _steps(run: str, ref: Path) -> int | None:
    """Optimiser steps per student of a run's notebook 05, from its parameters (published at the top of the run or in
    its distill/ folder); None when the run holds no params_05.json."""
    for p in (ref / run / "params_05.json", ref / run / "distill" / "params_05.json"):
        if p.is_file():
            return read_params_05(p).distill_steps
    return None


RESULT_STEPS = 1000
"""Below this many optimiser steps per student a distillation run checks the pipeline; it measures nothing."""


def _lp_parts(lp: pd.DataFrame) -> list[str]:
    """Per protocol: GatModel test AUC of each MiniLM-student embedder minus its undistilled control's."""
    parts = []
    if lp.empty or "embedder" not in lp:
        return parts
    for protocol, g in lp[lp["model"] == "gat_model"].groupby("protocol", sort=False):
        auc = g.groupby("embedder")["auc"].mean()
        diffs = [f"{e.split()[0]} {auc[e] - auc[e.replace(' MiniLM', ' no distillation')]:+.3f}" for e in auc.index
                 if e.endswith(" MiniLM") and e.replace(" MiniLM", " no distillation") in auc.index]
        if diffs:
            parts.append(f"{', '.join(diffs)} under {protocol}")
    return parts


def _probe_parts(results: pd.DataFrame) -> list[str]:
    """Per student and init: MiniLM minus its undistilled control on the probes, paired by seed, 95% interval."""
    if results.empty or "stage" not in results:
        return []

    d = paired_differences(results, methods=("MiniLM",), metrics=tuple(PROBES))
    out = []
    for (student, init), g in d.groupby(["student", "init"], sort=False):
        cells = [f"{PROBES[r.metric]} {diff_cell(r)}" for _, r in g.iterrows()]
        out.append(f"{student} {init} init, {int(g.seeds.max())} seed(s): {', '.join(cells)}")
    return out


def distill_runs(runs: dict[str, dict], ref: Path = REFERENCE) -> tuple[dict, list[str], list[str]]:
    """The runs that hold notebook-05 rows, each set of rows once: ({run: (steps, _lp_parts, _probe_parts)}, the
    runs with at least RESULT_STEPS steps and probe rows (results), the others (pipeline checks))."""
    seen, found, steps_of = set(), {}, {r: _steps(r, ref) for r in runs}
    # a run that holds its own notebook-05 parameters first: it made the rows others may only repeat
    for run in sorted(runs, key=lambda r: steps_of[r] is None):
        d = runs[run].get("distill") or {}
        lp, res = pd.DataFrame(d.get("link_prediction") or []), pd.DataFrame(d.get("results") or [])
        key = json.dumps([d.get("link_prediction"), d.get("results")], sort_keys=True, default=str)
        if (lp.empty and res.empty) or key in seen:  # nothing, or the same rows published under another run name
            continue
        seen.add(key)
        found[run] = (steps_of[run], _lp_parts(lp), _probe_parts(res))
    results = [r for r, (steps, _, probes) in found.items() if steps is not None and steps >= RESULT_STEPS and probes]
    return found, results, [r for r in found if r not in results]


def distillation(runs: dict[str, dict], ref: Path = REFERENCE) -> str | None:
    """The stage-5 finding: from the committed run with the most optimiser steps per student, if it has at least
    RESULT_STEPS; runs below that are named as pipeline checks (and carry the line only when nothing else exists)."""
    found, results, checks = distill_runs(runs, ref)
    if results:
        run = max(results, key=lambda r: (found[r][0], bool(found[r][1])))  # at equal steps, the run with link rows
        steps, lp_parts, probes = found[run]
        line = (f"**Distillation.** At {steps:,} optimiser steps per student, MiniLM-distilled minus the same student "
                f"undistilled (test; paired by seed, 95% interval): {'; '.join(probes)}")
        if lp_parts:
            line += f"; as stage 3's node embedder, GatModel test AUC {'; '.join(lp_parts)}"
        line += f" ({_link(run)})"
        if checks:
            line += f". The shorter runs ({_links(checks)}) are pipeline checks"
        return line + "."
    lp_runs = [r for r in checks if found[r][1]]
    if not lp_runs:
        return None
    steps = next((found[r][0] for r in lp_runs if found[r][0] is not None), None)
    budget = f"at {steps} optimiser steps per student" if steps else "at the committed budget"
    check = ", a pipeline check rather than a result" if steps is not None and steps < RESULT_STEPS else ""
    parts = [p for r in lp_runs for p in found[r][1]]
    return (f"**Distillation.** As stage 3's node embedder, each MiniLM-distilled student minus its undistilled control, "
            f"GatModel test AUC: {'; '.join(parts)} — {budget}{check} ({_links(lp_runs)}).")


def ablation_differences(runs: dict[str, dict], ref: Path = REFERENCE) -> tuple[str, pd.DataFrame] | None:
    """Among the runs at a result budget (distill_runs), the one whose MiniLM rows are paired with the paper's
    ablations over the most seeds (at least 2; a tie goes to the first run), and its differences: MiniLM minus each
    ablation on the same student, init and seed, every probe (tables.minilm_minus); None when no such run has an
    ablation at 2 seeds."""
    best = None
    for run in distill_runs(runs, ref)[1]:
        d = minilm_minus(pd.DataFrame(runs[run]["distill"]["results"]), ABLATIONS)
        if len(d) and d["seeds"].min() >= 2 and (best is None or d["seeds"].min() > best[1]["seeds"].min()):
            best = (run, d)
    return best


def ablation_counts(d: pd.DataFrame) -> tuple[int, int]:
    """Of the differences `d` (ablation_differences): how many intervals lie above 0 and how many below 0."""
    return int((d["ci_low"] > 0).sum()), int((d["ci_high"] < 0).sum())


def ablation_verdict(d: pd.DataFrame) -> str:
    """How the ablation differences `d` stand against the paper, which puts MiniLM above every ablation: how many
    (ablation, probe) intervals lie above 0, below 0, or hold it."""
    above, below = ablation_counts(d)
    return (f"MiniLM is above the ablation in {above} of {len(d)} (ablation, probe) cells, below it in {below}, and "
            f"the other {len(d) - above - below} intervals hold 0")


def ablations(runs: dict[str, dict], ref: Path = REFERENCE) -> str | None:
    """The paper's ablations (Tables 5-7): MiniLM minus each, paired by seed, 95% interval, from the result run with
    the most seeds (ablation_differences)."""
    found = ablation_differences(runs, ref)
    if found is None:
        return None
    run, d = found
    parts = []
    for (student, init, versus), g in d.groupby(["student", "init", "versus"], sort=False):
        cells = [f"{PROBES[r.metric]} {diff_cell(r)}" for _, r in g.iterrows()]
        parts.append(f"{versus} ({student} {init} init, {int(g.seeds.min())} seeds): {', '.join(cells)}")
    return (f"**Ablations.** MiniLM minus each of the paper's ablations on the same student and seed (test; 95% "
            f"interval): {'; '.join(parts)}. The paper puts MiniLM above every ablation; here "
            f"{ablation_verdict(d)} ({_link(run)}).")


def knowledge_distillation(runs: dict[str, dict]) -> str | None:
    for run, m in runs.items():
        res = pd.DataFrame((m.get("kd") or {}).get("rows") or [])
        if res.empty:
            continue
        acc = res.groupby(["student", "task", "method"])["test"].mean()
        parts = []
        for student in res["student"].unique():
            diffs = [f"{acc[(student, t, 'kd')] - acc[(student, t, 'control')]:+.3f} {t}"
                     for t in res["task"].unique() if (student, t, "kd") in acc and (student, t, "control") in acc]
            parts.append(f"{student} {', '.join(diffs)}")
        return ("**Classic KD.** A student distilled from the fine-tuned teacher's logits minus the same student trained "
                f"with cross-entropy alone, test accuracy: {'; '.join(parts)} ({_link(run)}).")
    return None


FINDINGS = (reproduction, aauc_trend, leakage, beyond, harder_negatives, distillation, ablations,
            knowledge_distillation)


def headline(runs: dict[str, dict], ref: Path = REFERENCE) -> list[str]:
    """The findings that the committed runs support, one Markdown line each."""
    out = []
    for f in FINDINGS:
        line = f(runs, ref) if f in (distillation, ablations) else f(runs)
        if line:
            out.append(line)
    return out
