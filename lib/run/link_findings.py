"""The link-prediction findings (notebooks 03 and 03b), each a typed record computed once from the committed runs
with a README renderer (`readme()`) and a results-page renderer (`page()`): the reproduction of the seed, A-AUC against
training-set size, unseen links against the best single heuristic, notebook 03b's goal, and the harder negative sets.
Every finding shows each link source side by side, the embedded proxy first."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lib.metrics.link import SEED_REPORTED
from lib.metrics.paired import interval_text, judge, judge_independent, verdict
from lib.metrics.selection import STRATA
from lib.run.facts import best_heuristic, gat_model_rows, goal_cells, links_of
from lib.run.markup import SHORT, page_link, page_links, page_sides, readme_number, readme_sides, slash
from lib.run.tables import seed_rows

SEED = sorted(SEED_REPORTED, key=lambda r: r["train_graphs"])
"""The seed report's numbers, by training graphs."""


def per_source(runs: dict[str, dict], part) -> tuple:
    """((link source, part(its runs)), ...) for every link source whose runs give a part, the embedded proxy first."""
    groups: dict[str, dict[str, dict]] = {}
    for name, m in sorted(runs.items(), key=lambda kv: kv[1].get("link_source", "embedded") != "embedded"):
        groups.setdefault(links_of(m), {})[name] = m
    return tuple((links, p) for links, g in groups.items() if (p := part(g)))


@dataclass(frozen=True)
class Point:
    """One run's number: the run, its training graphs, the value."""

    run: str
    n_train: int
    value: float


def _seed_way_points(g: dict[str, dict], protocol: str, metric: str) -> tuple[Point, ...]:
    """GatModel as the seed trains it (tables.seed_rows) under `protocol`: a Point of `metric` per run of `g`, by
    training graphs."""
    t = seed_rows(g)
    t = t[t["protocol"] == protocol].dropna(subset=[metric]).sort_values("n_train", kind="stable") if len(t) else t
    return tuple(Point(r.run, int(r.n_train), float(getattr(r, metric))) for r in t.itertuples())


@dataclass(frozen=True)
class Reproduction:
    """GatModel as the seed trains it, seed protocol, test AUC per link source at the seed report's sizes."""

    sides: tuple[tuple[str, tuple[Point, ...]], ...]

    def readme(self) -> str:
        sizes = sorted(r["train_graphs"] for r in SEED)
        parts = [
            (
                links,
                " / ".join(readme_number(p.value, p.run) for p in pts)
                + ("" if [p.n_train for p in pts] == sizes else f" with {slash([p.n_train for p in pts], '{}')}"),
            )
            for links, pts in self.sides
        ]
        return (
            f"**Reproduction.** The seed's GatModel and protocol, test AUC with {slash(sizes, '{}')} training "
            f"graphs: {readme_sides(parts)}; the seed report (its live crawl): {slash(r['auc'] for r in SEED)}."
        )

    def page(self) -> str:
        parts = [
            (
                links,
                f"test AUC {slash(p.value for p in pts)} with {slash([p.n_train for p in pts], '{}')} "
                f"training graphs ({page_links(p.run for p in pts)})",
            )
            for links, pts in self.sides
        ]
        return (
            f"**Reproduction.** Under the seed's own protocol its GatModel scores {page_sides(parts)}; the seed "
            f"report gives {slash(r['auc'] for r in SEED)} with {slash([r['train_graphs'] for r in SEED], '{}')} "
            f"graphs of its live crawl."
        )


def reproduction(runs: dict[str, dict], ref: Path) -> Reproduction | None:
    sizes = {r["train_graphs"] for r in SEED}
    sides = per_source(runs, lambda g: tuple(p for p in _seed_way_points(g, "seed", "auc") if p.n_train in sizes))
    return Reproduction(sides) if sides else None


def _way(first: float, last: float, present: bool = True) -> str:
    return ("rises" if present else "rose") if last > first else ("falls" if present else "fell")


def _per_seed_rows(ref: Path, run: str) -> pd.DataFrame | None:
    """Notebook 03's per-seed rows of a reference run (its train_gat_rows.csv), or None without that file."""
    path = ref / run / "train_gat_rows.csv"
    return pd.read_csv(path) if path.is_file() else None


def _seed_way_per_seed(ref: Path, run: str, protocol: str, metric: str) -> list[float]:
    """Per seed, in seed order, `metric` of GatModel as the seed trains it (mp supervision, uniform negatives) under
    `protocol`, from the run's train_gat_rows.csv; empty without that file."""
    rows = _per_seed_rows(ref, run)
    if rows is None:
        return []
    t = gat_model_rows(rows, protocol).dropna(subset=[metric]).sort_values("seed")
    return [float(v) for v in t[metric]]


def judged_change(ref: Path, first: Point, last: Point, protocol: str, metric: str) -> dict | None:
    """The change from `first` to `last`, two independent runs, judged by the one rule on Welch's interval over every
    seed of each (`judge_independent`): its diff is the difference of the means the README prints beside it."""
    a = _seed_way_per_seed(ref, first.run, protocol, metric)
    b = _seed_way_per_seed(ref, last.run, protocol, metric)
    return judge_independent(a, b) if len(a) and len(b) else None


def trend_word(change: dict | None, first: float, last: float) -> str:
    """'rises' / 'falls' when the change's 95% interval lies above / below 0, else 'moves' (or, without per-seed
    rows, the direction of the means)."""
    if change is None:
        return _way(first, last)
    return {"met": "rises", "missed": "falls"}.get(change["verdict"], "moves")


def _interval(change: dict | None) -> str:
    if change is None:
        return ""
    undecided = ", undecided" if change["verdict"] == "undecided" else ""
    return f" ({interval_text(change['diff'], change['ci_low'], change['ci_high'])}{undecided})"


@dataclass(frozen=True)
class AaucTrend:
    """The same GatModel's A-AUC from the fewest to the most training graphs, per link source, and the change
    between them judged by the one rule (`changes`, one per side: judge_independent of the two runs' seeds, or None)."""

    sides: tuple[tuple[str, tuple[Point, ...]], ...]
    changes: tuple[dict | None, ...]

    def readme(self) -> str:
        parts = [
            (
                links,
                f"{trend_word(c, pts[0].value, pts[-1].value)} {readme_number(pts[0].value, pts[0].run)} → "
                f"{readme_number(pts[-1].value, pts[-1].run)}{_interval(c)}",
            )
            for (links, pts), c in zip(self.sides, self.changes)
        ]
        s0, s1 = SEED[0]["aauc"], SEED[-1]["aauc"]
        return (
            f"**A-AUC and size.** With more training graphs the same GatModel's A-AUC {readme_sides(parts)}; "
            f"the seed report's {_way(s0, s1, False)} {s0:.3f} → {s1:.3f} (one run)."
        )

    def page(self) -> str:
        parts = [
            (
                links,
                f"it {trend_word(c, pts[0].value, pts[-1].value)}, {pts[0].value:.3f} → {pts[-1].value:.3f} from "
                f"{pts[0].n_train} to {pts[-1].n_train} graphs{_interval(c)} ({page_links(p.run for p in pts)})",
            )
            for (links, pts), c in zip(self.sides, self.changes)
        ]
        s0, s1 = SEED[0]["aauc"], SEED[-1]["aauc"]
        return (
            f"**A-AUC and size.** The GatModel's A-AUC with training-set size, seed protocol (the change from the "
            f"fewest to the most graphs with its 95% interval; it rises or falls only when that lies above or below "
            f"0): {page_sides(parts)}; in the seed report (one run) it {_way(s0, s1, False)}, {s0:.3f} → {s1:.3f}."
        )


def aauc_trend(runs: dict[str, dict], ref: Path) -> AaucTrend | None:
    sides = per_source(runs, lambda g: p if len(p := _seed_way_points(g, "seed", "aauc")) >= 2 else None)
    changes = tuple(judged_change(ref, pts[0], pts[-1], "seed", "aauc") for _, pts in sides)
    return AaucTrend(sides, changes) if sides else None


@dataclass(frozen=True)
class Unseen:
    """One run under leak_free: GatModel's test AUC beside the best single heuristic's."""

    run: str
    n_train: int
    gat_auc: float
    heuristic: str
    heuristic_auc: float
    versus: dict | None = None  # judge(GatModel - the heuristic) paired by seed, None without per-seed rows


@dataclass(frozen=True)
class Leakage:
    """With no test link seen in training (leak_free): GatModel against the best single heuristic, per link source."""

    sides: tuple[tuple[str, tuple[Unseen, ...]], ...]

    def readme(self) -> str:
        parts = []
        for links, rows in self.sides:
            names, values = {r.heuristic for r in rows}, {f"{r.heuristic_auc:.3f}" for r in rows}
            bar = (
                f"{names.pop()} {values.pop() if len(values) == 1 else slash(r.heuristic_auc for r in rows)}"
                if len(names) == 1
                else " / ".join(f"{r.heuristic} {r.heuristic_auc:.3f}" for r in rows)
            )
            # the paired verdicts (_below) are on the results page: with them this line would not fit two lines
            parts.append((links, f"{' / '.join(readme_number(r.gat_auc, r.run) for r in rows)} against {bar}"))
        return (
            "**Unseen links.** With no test link seen in training (`leak_free`), GatModel test AUC, and the best "
            f"single heuristic's: {readme_sides(parts)}."
        )

    def page(self) -> str:
        parts = []
        for links, rows in self.sides:
            names = {r.heuristic for r in rows}
            bar = (
                f"{names.pop()} {slash(r.heuristic_auc for r in rows)}"
                if len(names) == 1
                else " / ".join(f"{r.heuristic} {r.heuristic_auc:.3f}" for r in rows)
            )
            parts.append(
                (
                    links,
                    f"{slash(r.gat_auc for r in rows)} with {slash([r.n_train for r in rows], '{}')} "
                    f"training graphs against {bar}{_below(rows)} ({page_links(r.run for r in rows)})",
                )
            )
        return (
            "**Unseen links.** Keep every test link out of training (`leak_free`): the seed's GatModel scores test "
            f"AUC {page_sides(parts)}, the second number being the best single heuristic, which learns nothing."
        )


def _below(rows: tuple[Unseen, ...]) -> str:
    """' (95% interval below in 3/3 runs, above in 0)' from the rows' paired verdicts, '' without them."""
    v = [r.versus["verdict"] for r in rows if r.versus]
    return f" (95% interval below in {v.count('missed')}/{len(v)} runs, above in {v.count('met')})" if v else ""


def _versus_heuristic(ref: Path, run: str, heuristic: str) -> dict | None:
    """judge(GatModel - `heuristic`) under leak_free with uniform negatives, paired by seed, from the run's
    train_gat_rows.csv; None without it."""
    t = _per_seed_rows(ref, run)
    if t is None:
        return None
    t = t[(t["protocol"] == "leak_free") & (t["negatives"] == "uniform")]
    gat = gat_model_rows(t).set_index("seed")["auc"]
    other = t[t["model"] == heuristic].drop_duplicates("seed").set_index("seed")["auc"]
    seeds = sorted(set(gat.index) & set(other.index))
    return judge([gat[s] - other[s] for s in seeds]) if seeds else None


def leakage(runs: dict[str, dict], ref: Path) -> Leakage | None:
    def part(g: dict[str, dict]) -> tuple[Unseen, ...]:
        out = []
        for p in _seed_way_points(g, "leak_free", "auc"):
            mean = pd.DataFrame(g[p.run]["train_gat"]["mean"])
            best = best_heuristic(mean[(mean["protocol"] == "leak_free") & (mean["negatives"] == "uniform")])
            if best is not None:
                versus = _versus_heuristic(ref, p.run, best["model"])
                out.append(Unseen(p.run, p.n_train, p.value, best["model"], float(best["auc"]), versus))
        return tuple(out)

    sides = per_source(runs, part)
    return Leakage(sides) if sides else None


@dataclass(frozen=True)
class GoalCount:
    """Notebook 03b on one run, judged by the project's one rule (lib.metrics.paired): cells where its model's goal is
    met, missed and undecided, of all cells, over how many seeds, and its uniform AUC margins with their intervals."""

    run: str
    met: int
    missed: int
    cells: int
    seeds: int
    uniform_margins: tuple[tuple[str, float, float, float], ...]  # (protocol, AUC margin over the bar, 95% interval)
    strata: tuple[tuple[str, int, int], ...] = ()  # (stratum, cells whose AUC margin over the bar lies above / below 0)

    def strata_text(self) -> str:
        """'with a common neighbour 3 above / 1 below, without one 12 / 0' (cells)."""
        names = {"cn": "with a common neighbour", "no_cn": "without one"}
        return ", ".join(
            f"{names.get(st, st)} {up}{' above' * (i == 0)} / {down}{' below' * (i == 0)}"
            for i, (st, up, down) in enumerate(self.strata)
        )

    @property
    def undecided(self) -> int:
        return self.cells - self.met - self.missed


@dataclass(frozen=True)
class Beyond:
    """Notebook 03b's graph model chosen on validation against every heuristic scorer, per link source."""

    sides: tuple[tuple[str, GoalCount], ...]

    def readme(self) -> str:
        cells = ", ".join(
            f"[{c.met} of {c.cells}][{c.run}] {'cells ' * (i == 0)}on {SHORT.get(links, links)} "
            f"({c.missed} missed, {c.undecided} undecided, {c.seeds} seeds)"
            for i, (links, c) in enumerate(self.sides)
        )
        return (
            "**Beyond the seed.** A graph model chosen on validation (notebook 03b) beats every heuristic scorer by "
            "≥ 0.02 AUC and in MRR (and the no-common-neighbour shortcut on harder negatives), 95% interval above, "
            f"in {cells}."
        )

    def page(self) -> str:
        parts = [
            (
                links,
                f"met in {c.met}, missed in {c.missed} and undecided in {c.undecided} of {c.cells} cells "
                f"over {c.seeds} seeds; uniform AUC margin "
                + " / ".join(interval_text(m, lo, hi) for _, m, lo, hi in c.uniform_margins)
                + f" under {' / '.join(p for p, *_ in c.uniform_margins)} ({page_link(c.run)})",
            )
            for links, c in self.sides
        ]
        return (
            "**Beyond the seed.** Notebook 03b's best graph model, chosen on validation, against its goal (≥ 0.02 AUC "
            "and MRR over every heuristic scorer, and over the no-common-neighbour shortcut on the harder sets; met "
            "when the 95% interval of the per-seed margins lies above each, missed when one lies below) in "
            f"protocol × negative-set cells: {page_sides(parts)} over the strongest heuristic scorer."
        )


def beyond(runs: dict[str, dict], ref: Path) -> Beyond | None:
    def part(g: dict[str, dict]) -> GoalCount | None:
        for run, m in g.items():
            if cells := goal_cells(m):
                gaps = m["beyond"]["gaps"]
                # a run written before intervals were kept, with no rows to judge again (judge_gaps), has none
                uniform = tuple(
                    (
                        x["protocol"],
                        float(x["auc_margin"]),
                        float(x.get("auc_margin_low", "nan")),
                        float(x.get("auc_margin_high", "nan")),
                    )
                    for x in gaps
                    if x["negatives"] == "uniform"
                )
                verdicts = list(cells.values())
                strata = tuple(
                    (st, *stratum_counts(gaps, st))
                    for st in STRATA
                    if any(pd.notna(x.get(f"auc_{st}_margin_low")) for x in gaps)
                )
                return GoalCount(
                    run,
                    verdicts.count("met"),
                    verdicts.count("missed"),
                    len(verdicts),
                    int(gaps[0].get("seeds") or 0),
                    uniform,
                    strata,
                )
        return None

    sides = per_source(runs, part)
    return Beyond(sides) if sides else None


@dataclass(frozen=True)
class GainStrata:
    """Where notebook 03b's chosen model gains over the bar, per link source: cells whose AUC margin over the bar on
    test positives with / without a common neighbour lies above / below 0 (GoalCount.strata)."""

    sides: tuple[tuple[str, GoalCount], ...]
    TITLE = (
        "**Where the gain is.** Cells where notebook 03b's chosen model's AUC margin over the bar on test positives "
        "has its 95% interval above / below 0: "
    )

    def readme(self) -> str:
        return (
            self.TITLE
            + "; ".join(f"[{SHORT.get(links, links)}][{c.run}] {c.strata_text()}" for links, c in self.sides)
            + "."
        )

    def page(self) -> str:
        return (
            self.TITLE
            + "; ".join(
                f"{SHORT.get(links, links)} {c.strata_text()} ({c.cells} cells, {page_link(c.run)})"
                for links, c in self.sides
            )
            + "."
        )


def gain_strata(runs: dict[str, dict], ref: Path) -> GainStrata | None:
    found = beyond(runs, ref)
    sides = tuple((links, c) for links, c in found.sides if c.strata) if found else ()
    return GainStrata(sides) if sides else None


def stratum_counts(gaps: list[dict], stratum: str) -> tuple[int, int]:
    """Cells of notebook 03b's gap rows whose AUC margin over the bar within `stratum` of test positives is judged
    above 0 / below 0 by the project's one rule (lib.metrics.paired.verdict); the rest are undecided."""
    v = [
        verdict(float(x.get(f"auc_{stratum}_margin_low", "nan")), float(x.get(f"auc_{stratum}_margin_high", "nan")))
        for x in gaps
    ]
    return v.count("met"), v.count("missed")


@dataclass(frozen=True)
class HarderMargins:
    """Notebook 03b on one run: per harder negative set, over how many protocols the AUC margin of the chosen model
    over the bar, and over the shortcut, has its 95% interval above 0 and below 0 (the one rule, at m = 0)."""

    run: str
    sets: tuple[tuple[str, int, int, int, int], ...]  # (set, bar above, bar below, shortcut above, shortcut below)
    protocols: int


@dataclass(frozen=True)
class HarderNegatives:
    """Notebook 03b's model on the harder negative sets, per link source (the results page only)."""

    sides: tuple[tuple[str, HarderMargins], ...]

    def readme(self) -> None:
        return None

    def page(self) -> str:
        parts = [
            (
                links,
                f"of {h.protocols} protocols ({page_link(h.run)}), "
                + ", ".join(f"{n} {a} / {b} over the bar and {c} / {d} over the shortcut" for n, a, b, c, d in h.sets),
            )
            for links, h in self.sides
        ]
        return (
            "**Harder negatives.** Protocols where the chosen model's AUC margin over the strongest heuristic scorer, "
            f"and over the no-common-neighbour shortcut, has its 95% interval above / below 0: {page_sides(parts)}."
        )


def _met_missed(gaps: pd.DataFrame, margin: str) -> tuple[int, int]:
    """How many of `gaps`' rows the one rule (lib.metrics.paired.verdict, at 0) calls met and missed for `margin`."""
    v = [verdict(lo, hi) for lo, hi in zip(gaps[f"{margin}_low"], gaps[f"{margin}_high"])]
    return v.count("met"), v.count("missed")


def harder_negatives(runs: dict[str, dict], ref: Path) -> HarderNegatives | None:
    def part(g: dict[str, dict]) -> HarderMargins | None:
        for run, m in g.items():
            gaps = pd.DataFrame((m.get("beyond") or {}).get("gaps") or [])
            if gaps.empty or "auc_margin_shortcut_low" not in gaps:
                continue
            sets = tuple(
                (n, *_met_missed(x, "auc_margin"), *_met_missed(x, "auc_margin_shortcut"))
                for n, x in gaps[gaps["negatives"] != "uniform"].groupby("negatives", sort=False)
            )
            if sets:
                return HarderMargins(run, sets, int(gaps["protocol"].nunique()))
        return None

    sides = per_source(runs, part)
    return HarderNegatives(sides) if sides else None
