"""The distillation findings (notebooks 05 and 06), each a typed record computed once from the committed runs with a
README renderer (`readme()`) and a results-page renderer (`page()`): MiniLM against its undistilled control, the
paper's ablations and classic knowledge distillation."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lib.distill.config import read_params_05
from lib.distill.eval import paired_differences
from lib.distill.stage import ABLATIONS
from lib.metrics.paired import interval_text, judge, verdicts
from lib.run.facts import lp_minus_control
from lib.run.markup import page_link, page_links, slash
from lib.run.tables import PROBES, diff_cell, minilm_minus

RESULT_STEPS = 1000
"""Below this many optimiser steps per student a distillation run checks the pipeline; it measures nothing."""


def steps_of(run: str, ref: Path) -> int | None:
    """Optimiser steps per student of a run's notebook 05, from its parameters (published at the top of the run or in
    its distill/ folder); None when the run holds no params_05.json."""
    for p in (ref / run / "params_05.json", ref / run / "distill" / "params_05.json"):
        if p.is_file():
            return read_params_05(p).distill_steps
    return None


@dataclass(frozen=True)
class DistillRun:
    """A run's notebook-05 rows: its steps per student, its probe rows and its link-prediction rows."""

    run: str
    steps: int | None
    results: pd.DataFrame
    lp: pd.DataFrame

    @property
    def is_result(self) -> bool:
        return self.steps is not None and self.steps >= RESULT_STEPS and "stage" in self.results


def distill_runs(runs: dict[str, dict], ref: Path) -> list[DistillRun]:
    """The runs that hold notebook-05 rows, each set of rows once, a run that holds its own notebook-05 parameters
    first (it made the rows others may only repeat)."""
    seen, out, steps = set(), [], {r: steps_of(r, ref) for r in runs}
    for run in sorted(runs, key=lambda r: steps[r] is None):
        d = runs[run].get("distill") or {}
        lp, res = pd.DataFrame(d.get("link_prediction") or []), pd.DataFrame(d.get("results") or [])
        key = json.dumps([d.get("link_prediction"), d.get("results")], sort_keys=True, default=str)
        if (lp.empty and res.empty) or key in seen:  # nothing, or the same rows published under another run name
            continue
        seen.add(key)
        out.append(DistillRun(run, steps[run], res, lp))
    return out


@dataclass(frozen=True)
class Distillation:
    """MiniLM-distilled minus the same student undistilled: on the probes (paired by seed, 95% interval) and as stage
    3's node embedder, from the result run with the most steps; without a result run, the pipeline checks' node-
    embedder differences (the results page only)."""

    runs: tuple[str, ...]  # the result run, or the pipeline checks with link rows
    steps: int | None
    probes: pd.DataFrame  # paired_differences rows: student, init, metric, seeds, diff, ci_low, ci_high
    lp: pd.DataFrame  # lp_minus_control rows with their run: run, protocol, embedder, diff
    checks: tuple[str, ...]  # the shorter runs
    is_result: bool

    def readme(self) -> str | None:
        if not self.is_result:
            return None
        cells = [
            f"{student} {init} init "
            + ", ".join(f"{PROBES[r.metric].split()[0]} {r.diff:+.3f}" for r in g.itertuples())
            for (student, init), g in self.probes.groupby(["student", "init"], sort=False)
        ]
        node = f"; as stage 3's node embedder, GatModel AUC {slash(self.lp['diff'], '{:+.3f}')}" if len(self.lp) else ""
        v = list(verdicts(self.probes))
        seeds = "/".join(map(str, sorted(set(self.probes["seeds"].astype(int)))))
        return (
            f"**Distillation.** After [{self.steps:,} steps][{self.runs[0]}] per student, MiniLM-distilled minus "
            f"the same student undistilled, test (95% interval above 0 in {v.count('met')} of {len(v)}, below in "
            f"{v.count('missed')}, {seeds} seeds): {'; '.join(cells)}{node}."
        )

    def _lp_parts(self) -> list[str]:
        return [
            f"{', '.join(f'{e.split()[0]} {d:+.3f}' for e, d in zip(g['embedder'], g['diff']))} under {protocol}"
            for (_, protocol), g in self.lp.groupby(["run", "protocol"], sort=False)
        ]

    def page(self) -> str:
        if not self.is_result:
            budget = f"at {self.steps} optimiser steps per student" if self.steps else "at the committed budget"
            check = (
                ", a pipeline check rather than a result"
                if self.steps is not None and self.steps < RESULT_STEPS
                else ""
            )
            return (
                f"**Distillation.** As stage 3's node embedder, each MiniLM-distilled student minus its undistilled "
                f"control, GatModel test AUC: {'; '.join(self._lp_parts())} — {budget}{check} "
                f"({page_links(self.runs)})."
            )
        probes = [
            f"{student} {init} init, {int(g.seeds.max())} seed(s): "
            + ", ".join(f"{PROBES[r.metric]} {diff_cell(r)}" for _, r in g.iterrows())
            for (student, init), g in self.probes.groupby(["student", "init"], sort=False)
        ]
        line = (
            f"**Distillation.** At {self.steps:,} optimiser steps per student, MiniLM-distilled minus the same "
            f"student undistilled (test; paired by seed, 95% interval): {'; '.join(probes)}"
        )
        if len(self.lp):
            line += f"; as stage 3's node embedder, GatModel test AUC {'; '.join(self._lp_parts())}"
        line += f" ({page_link(self.runs[0])})"
        return line + (f". The shorter runs ({page_links(self.checks)}) are pipeline checks." if self.checks else ".")


def _lp_of(d: DistillRun) -> pd.DataFrame:
    return lp_minus_control(d.lp).assign(run=d.run)


def distillation(runs: dict[str, dict], ref: Path) -> Distillation | None:
    found = distill_runs(runs, ref)
    results = [d for d in found if d.is_result]
    checks = tuple(d.run for d in found if not d.is_result)
    if results:
        best = max(results, key=lambda d: (d.steps, len(_lp_of(d)) > 0))  # at equal steps, the run with link rows
        probes = paired_differences(best.results, methods=("MiniLM",), metrics=tuple(PROBES))
        return Distillation((best.run,), best.steps, probes, _lp_of(best), checks, True)
    with_lp = [d for d in found if len(_lp_of(d))]
    if not with_lp:
        return None
    steps = next((d.steps for d in with_lp if d.steps is not None), None)
    return Distillation(
        tuple(d.run for d in with_lp),
        steps,
        pd.DataFrame(),
        pd.concat([_lp_of(d) for d in with_lp], ignore_index=True),
        checks,
        False,
    )


@dataclass(frozen=True)
class Ablations:
    """MiniLM minus each of the paper's ablations (Tables 5-7), paired by seed, 95% interval, and how many intervals
    lie above and below 0 (the paper puts MiniLM above every ablation)."""

    run: str
    differences: pd.DataFrame  # minilm_minus rows: student, init, versus, metric, seeds, diff, ci_low, ci_high
    above: int
    below: int

    def readme(self) -> str:
        d = self.differences
        clear = d[verdicts(d) != "undecided"]
        cells = [
            f"{versus} " + ", ".join(f"{PROBES[r.metric].split()[0]} {diff_cell(r)}" for _, r in g.iterrows())
            for versus, g in clear.groupby("versus", sort=False)
        ]
        where = ", ".join(f"{s} {i} init" for s, i in d[["student", "init"]].drop_duplicates().itertuples(index=False))
        return (
            f"**Ablations.** MiniLM minus the paper's ablations, [{int(d.seeds.min())} seeds][{self.run}] ({where}, "
            f"test, 95% interval; the paper has MiniLM above all): above 0 in {self.above} of {len(d)} cells, below 0 "
            f"in {self.below}" + (f": {'; '.join(cells)}" if cells else "") + "."
        )

    def page(self) -> str:
        parts = [
            f"{versus} ({student} {init} init, {int(g.seeds.min())} seeds): "
            + ", ".join(f"{PROBES[r.metric]} {diff_cell(r)}" for _, r in g.iterrows())
            for (student, init, versus), g in self.differences.groupby(["student", "init", "versus"], sort=False)
        ]
        n = len(self.differences)
        return (
            f"**Ablations.** MiniLM minus each of the paper's ablations on the same student and seed (test; 95% "
            f"interval): {'; '.join(parts)}. The paper puts MiniLM above every ablation; here MiniLM is above the "
            f"ablation in {self.above} of {n} (ablation, probe) cells, below it in {self.below}, and the other "
            f"{n - self.above - self.below} intervals hold 0 ({page_link(self.run)})."
        )


def ablations(runs: dict[str, dict], ref: Path) -> Ablations | None:
    """From the result run whose MiniLM rows are paired with the paper's ablations over the most seeds (at least 2; a
    tie goes to the first run)."""
    best = None
    for d in distill_runs(runs, ref):
        diffs = minilm_minus(d.results, ABLATIONS) if d.is_result else pd.DataFrame()
        if len(diffs) and diffs["seeds"].min() >= 2 and (best is None or diffs["seeds"].min() > best[1]["seeds"].min()):
            best = (d.run, diffs)
    if best is None:
        return None
    run, diffs = best
    judged = verdicts(diffs)
    return Ablations(run, diffs, int((judged == "met").sum()), int((judged == "missed").sum()))


@dataclass(frozen=True)
class KdDifferences:
    """Classic KD: a student distilled from the fine-tuned teacher's logits minus its labels-only control, test
    accuracy paired by seed, per student and task, judged by the one rule against 0 (lib.metrics.paired.judge)."""

    run: str
    students: tuple[tuple[str, tuple[tuple[str, dict], ...]], ...]  # (student, ((task, judge(differences)), ...))

    def _cells(self, task_first: bool) -> str:
        def cell(t, j):
            text = interval_text(j["diff"], j["ci_low"], j["ci_high"])
            return f"{t} {text}" if task_first else f"{text} {t}"

        return "; ".join(f"{s} " + ", ".join(cell(t, j) for t, j in diffs) for s, diffs in self.students)

    def _count(self) -> str:
        v = [j["verdict"] for _, diffs in self.students for _, j in diffs]
        seeds = sorted({j["seeds"] for _, diffs in self.students for _, j in diffs})
        return (
            f"95% interval above 0 in {v.count('met')} of {len(v)}, below in {v.count('missed')}, "
            f"{'/'.join(map(str, seeds))} seeds"
        )

    def readme(self) -> str:
        return (
            f"**Classic KD.** A student distilled from the teacher's logits minus its labels-only control "
            f"([{self.run}]), test accuracy ({self._count()}): {self._cells(True)}."
        )

    def page(self) -> str:
        return (
            "**Classic KD.** A student distilled from the fine-tuned teacher's logits minus the same student trained "
            f"with cross-entropy alone, test accuracy paired by seed ({self._count()}): {self._cells(False)} "
            f"({page_link(self.run)})."
        )


def knowledge_distillation(runs: dict[str, dict], ref: Path) -> KdDifferences | None:
    for run, m in runs.items():
        res = pd.DataFrame((m.get("kd") or {}).get("rows") or [])
        if res.empty:
            continue
        acc = res.pivot_table(index=["student", "task", "seed"], columns="method", values="test")
        if not {"kd", "control"} <= set(acc.columns):
            continue
        pairs = acc.dropna(subset=["kd", "control"])
        students = [
            (
                s,
                tuple(
                    (t, judge(g["kd"] - g["control"])) for (_, t), g in pairs.loc[[s]].groupby(level=[0, 1], sort=False)
                ),
            )
            for s in res["student"].unique()
            if s in pairs.index.get_level_values(0)
        ]
        return KdDifferences(run, tuple(students))
    return None
