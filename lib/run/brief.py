"""The README's short findings: one or two lines per finding, each number printed from a committed reference run and
linked to it (a Markdown reference link, `[0.751][seed40]`, defined once below the list). docs/results.md holds the
full sentences (lib.run.headline) and every table."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pandas as pd

from lib.distill.eval import paired_differences
from lib.linkpred.beyond import goal_met
from lib.linkpred.heuristics import HEURISTICS
from lib.metrics.link import SEED_REPORTED
from lib.run.headline import (
    REFERENCE,
    _gat_rows,
    _per_source,
    _seed_model,
    ablation_counts,
    ablation_differences,
    distill_runs,
)
from lib.run.tables import PROBES, diff_cell, frontier_rows, links_of

WIDTH = 196
"""Characters per README line a finding is wrapped to."""


def _n(value: float, run: str) -> str:
    return f"[{value:.3f}][{run}]"


SHORT = {"title mentions (proxy)": "title mentions", "Wikispeedia hyperlinks": "Wikispeedia"}
"""Link sources as the short findings name them."""


def _sides(parts: list[tuple[str, str]]) -> str:
    return "; ".join(f"{text} on {SHORT.get(links, links)}" for links, text in parts)


def reproduction(runs: dict[str, dict]) -> str | None:
    ref = {r["train_graphs"]: r for r in SEED_REPORTED}

    def part(g):
        rows = _gat_rows(g)
        t = _seed_model(rows, "seed") if len(rows) else rows
        t = t[t["n_train"].isin(ref)] if len(t) else t
        if t.empty:
            return None
        sizes = "" if list(t["n_train"]) == sorted(ref) else f" with {' / '.join(map(str, t['n_train']))}"
        return " / ".join(_n(a, r) for a, r in zip(t["auc"], t["run"])) + sizes

    parts = _per_source(runs, part)
    if not parts:
        return None
    seed = sorted(SEED_REPORTED, key=lambda r: r["train_graphs"])
    aucs, sizes = " / ".join(f"{r['auc']:.3f}" for r in seed), " / ".join(str(r["train_graphs"]) for r in seed)
    return (f"**Reproduction.** The seed's GatModel and protocol, test AUC with {sizes} training graphs: {_sides(parts)}; "
            f"the seed report (its live crawl): {aucs}.")


def aauc_trend(runs: dict[str, dict]) -> str | None:
    def part(g):
        rows = _gat_rows(g)
        t = _seed_model(rows, "seed").dropna(subset=["aauc"]) if len(rows) else rows
        if len(t) < 2:
            return None
        first, last = t.iloc[0], t.iloc[-1]
        way = "rises" if last["aauc"] > first["aauc"] else "falls"
        return f"{way} {_n(first['aauc'], first['run'])} → {_n(last['aauc'], last['run'])}"

    parts = _per_source(runs, part)
    if not parts:
        return None
    s = sorted(SEED_REPORTED, key=lambda r: r["train_graphs"])
    way = "rose" if s[-1]["aauc"] > s[0]["aauc"] else "fell"
    return (f"**A-AUC and size.** With more training graphs the same GatModel's A-AUC {_sides(parts)}; "
            f"the seed report's {way} {s[0]['aauc']:.3f} → {s[-1]['aauc']:.3f}.")


def leakage(runs: dict[str, dict]) -> str | None:
    def part(g):
        rows = _gat_rows(g)
        if rows.empty:
            return None
        ours, theirs = [], []
        for run, r in rows.groupby("run", sort=False):
            gat = _seed_model(r, "leak_free")
            h = r[(r["protocol"] == "leak_free") & (r["negatives"] == "uniform") & r["model"].isin(HEURISTICS)]
            if gat.empty or h.empty:
                continue
            best = h.loc[h["auc"].idxmax()]
            ours.append(_n(gat["auc"].iloc[0], run))
            theirs.append((best["model"], f"{best['auc']:.3f}"))
        if not ours:
            return None
        names, values = {n for n, _ in theirs}, {a for _, a in theirs}
        bar = (f"{names.pop()} {values.pop() if len(values) == 1 else ' / '.join(a for _, a in theirs)}"
               if len(names) == 1 else " / ".join(f"{n} {a}" for n, a in theirs))
        return f"{' / '.join(ours)} against {bar}"

    parts = _per_source(runs, part)
    if not parts:
        return None
    return ("**Unseen links.** With no test link seen in training (`leak_free`), GatModel test AUC, and the best single "
            f"heuristic's: {_sides(parts)}.")


def beyond(runs: dict[str, dict]) -> str | None:
    def part(g):
        for run, m in g.items():
            gaps = (m.get("beyond") or {}).get("gaps") or []
            if gaps:
                return f"[{sum(goal_met(x) for x in gaps)} of {len(gaps)}][{run}]"
        return None

    parts = _per_source(runs, part)
    if not parts:
        return None
    cells = ", ".join(f"{text} {'protocol × negative-set cells ' * (i == 0)}on {SHORT.get(links, links)}"
                      for i, (links, text) in enumerate(parts))
    return ("**Beyond the seed.** A graph model chosen on validation (notebook 03b) clears every heuristic scorer by "
            f"≥ 0.02 AUC and in MRR (and the no-common-neighbour shortcut beyond uniform negatives) in {cells}.")


def distillation(runs: dict[str, dict], ref: Path = REFERENCE) -> str | None:
    found, results, checks = distill_runs(runs, ref)
    if not results:
        return None
    run = max(results, key=lambda r: (found[r][0], bool(found[r][1])))  # at equal steps, the run with link rows
    res = pd.DataFrame(runs[run]["distill"]["results"])
    d = paired_differences(res, methods=("MiniLM",), metrics=tuple(PROBES))
    cells = [f"{student} {init} init " + ", ".join(f"{PROBES[r.metric].split()[0]} {r.diff:+.3f}" for r in g.itertuples())
             for (student, init), g in d.groupby(["student", "init"], sort=False)]
    lp = pd.DataFrame(runs[run]["distill"].get("link_prediction") or [])
    node = ""
    if not lp.empty:
        auc = lp[lp["model"] == "gat_model"].groupby("embedder")["auc"].mean()
        diffs = [f"{auc[e] - auc[e.replace(' MiniLM', ' no distillation')]:+.3f}" for e in auc.index
                 if e.endswith(" MiniLM") and e.replace(" MiniLM", " no distillation") in auc.index]
        node = f"; as stage 3's node embedder, GatModel AUC {' / '.join(diffs)}" if diffs else ""
    return (f"**Distillation.** After [{found[run][0]:,} steps][{run}] per student, MiniLM-distilled minus the same "
            f"student undistilled, test: {'; '.join(cells)}{node}.")


def ablations(runs: dict[str, dict], ref: Path = REFERENCE) -> str | None:
    """MiniLM minus the paper's ablations in two lines: the count of intervals above and below 0, and the cells whose
    interval excludes 0 (docs/results.md has every cell)."""
    found = ablation_differences(runs, ref)
    if found is None:
        return None
    run, d = found
    clear = d[(d["ci_low"] > 0) | (d["ci_high"] < 0)]
    cells = [f"{versus} " + ", ".join(f"{PROBES[r.metric].split()[0]} {diff_cell(r)}" for _, r in g.iterrows())
             for versus, g in clear.groupby("versus", sort=False)]
    where = ", ".join(f"{s} {i} init" for s, i in d[["student", "init"]].drop_duplicates().itertuples(index=False))
    above, below = ablation_counts(d)
    return (f"**Ablations.** MiniLM minus the paper's ablations, [{int(d.seeds.min())} seeds][{run}] ({where}, test, "
            f"95% interval; the paper has MiniLM above all): above 0 in {above} of {len(d)} cells, below 0 in {below}"
            + (f": {'; '.join(cells)}" if cells else "") + ".")


FRONTIER = "frontier"
"""The folder under outputs/reference/ that scripts/frontier.py publishes."""


def node_embedder(runs: dict[str, dict], ref: Path = REFERENCE) -> str | None:
    """The node-embedder frontier in one line: per encoder, its titles/s against all-MiniLM-L6-v2's at one thread and
    its GatModel test AUC difference paired by seed (leak_free, 95% interval), then who meets the goal."""
    t = frontier_rows(ref / FRONTIER)
    if t is None:
        return None
    chosen = t.attrs.get("static_chosen_on_validation")
    shown = [r for r in t.itertuples() if r.kind == "student" or (r.kind == "static" and r.embedder == chosen)]
    cells = [f"{r.embedder} {r.speedup_1t:.2f}× {r.gat_leak_free_diff:+.3f} [{r.gat_leak_free_low:+.3f}, "
             f"{r.gat_leak_free_high:+.3f}]" for r in shown]
    met = [r.embedder for r in t.itertuples() if r.goal]
    no_loss = [r.embedder for r in t.itertuples() if r.non_inferior and not r.goal]
    seeds = sorted({int(r.paired_seeds) for r in shown})
    return (f"**A smaller node embedder.** Titles/s at one thread relative to all-MiniLM-L6-v2's, and GatModel test "
            f"AUC minus all-MiniLM-L6-v2's paired over {' or '.join(map(str, seeds))} seeds ([{FRONTIER}]; leak_free, 95% interval): "
            f"{'; '.join(cells)}. Goal (≤ 3 layers or static, both AUC intervals inside ±0.01, ≥ 2× titles/s) met "
            f"by: {', '.join(met) if met else 'none'}"
            + (f"; read as no loss beyond 0.01 (intervals above −0.01): {', '.join(no_loss)}" if no_loss else "")
            + ".")


def knowledge_distillation(runs: dict[str, dict]) -> str | None:
    for run, m in runs.items():
        res = pd.DataFrame((m.get("kd") or {}).get("rows") or [])
        if res.empty:
            continue
        acc = res.groupby(["student", "task", "method"])["test"].mean()
        parts = [f"{s} " + ", ".join(f"{t} {acc[(s, t, 'kd')] - acc[(s, t, 'control')]:+.3f}" for t in res["task"].unique()
                                     if (s, t, "kd") in acc and (s, t, "control") in acc)
                 for s in res["student"].unique()]
        return (f"**Classic KD.** A student distilled from the teacher's logits minus its labels-only control "
                f"([{run}]), test accuracy: {'; '.join(parts)}.")
    return None


FINDINGS = (reproduction, aauc_trend, leakage, beyond, distillation, ablations, node_embedder, knowledge_distillation)


def brief(runs: dict[str, dict], ref: Path = REFERENCE, base: str = "") -> list[str]:
    """The README's findings as Markdown lines: a list item per finding wrapped to WIDTH, then one reference-link
    definition per run named (`[seed40]: outputs/reference/seed40/`, under `base`), then a blank line."""
    lines, named = [], []
    for f in FINDINGS:
        text = f(runs, ref) if f in (distillation, ablations, node_embedder) else f(runs)
        if text:
            lines += textwrap.wrap(text, WIDTH, initial_indent="- ", subsequent_indent="  ", break_on_hyphens=False,
                                   break_long_words=False)
            named += [r for r in [*runs, FRONTIER] if f"[{r}]" in text and r not in named]
    return lines + [""] + [f"[{r}]: {base}outputs/reference/{r}/" for r in named] + [""]


def sources(runs: dict[str, dict]) -> list[str]:
    """The link sources the findings cover, in their order."""
    return list(dict.fromkeys(links_of(m) for m in runs.values() if m.get("train_gat")))
