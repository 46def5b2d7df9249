"""The node-embedder finding (notebook 05b): small students and static models as stage 3's node embedder on link
sources whose titles none of them was trained on, one typed record computed once from the committed run's
embedders/ files, its README and results-page renderers, and the results page's table."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lib.embedders.goals import GOALS, goal_of
from lib.run.markup import page_link

NODE_EMBEDDERS = "node_embedders"
"""The metrics.json section notebook 05b writes; a run that holds it is the finding's run."""


def embedders_run(runs: dict[str, dict]) -> str | None:
    """The committed run of notebook 05b (the first, by name, whose metrics hold its section)."""
    return next((r for r in sorted(runs) if NODE_EMBEDDERS in runs[r]), None)


@dataclass(frozen=True)
class Unseen:
    """One encoder on unseen titles: its kind and layers, titles/s relative to all-MiniLM-L6-v2's on one thread, the
    lowest 95% bound of its paired AUC difference per scorer over every source and protocol, and its goal verdict."""

    name: str
    kind: str
    layers: int
    ratio: float
    worst: tuple[tuple[str, float], ...]  # (scorer, lowest bound)
    met: bool

    def binding(self) -> tuple[str, float, float]:
        """The scorer whose lowest bound stays least above (or falls furthest below) its goal margin: (scorer, lowest
        bound, margin)."""
        margins = dict(goal_of(self.layers).margins)
        m, low = min(self.worst, key=lambda w: w[1] + margins[w[0]])
        return m, low, margins[m]

    def slack(self) -> float:
        """How far the binding scorer's lowest bound stays above its goal margin (negative: below it)."""
        _, low, margin = self.binding()
        return low + margin

    def bounds(self) -> str:
        margins = dict(goal_of(self.layers).margins)
        return ", ".join(
            f"{m.replace('gat_model', 'GatModel')} {low:+.3f} (goal > −{margins[m]:g})" for m, low in self.worst
        )


@dataclass(frozen=True)
class NodeEmbedders:
    """Notebook 05b's run: every encoder on unseen titles, the best student and the best static model (the fastest
    meeting its goal, else the one whose worst interval bound comes closest to its margin), the seeds and the
    held-out share of test titles that occur inside some training text."""

    run: str
    encoders: tuple[Unseen, ...]
    seeds: int
    protocols: tuple[str, ...]
    sources: int
    mentioned: float

    def best(self, static: bool | None = None) -> Unseen | None:
        """The fastest encoder meeting its goal, else the one whose worst bound comes closest to its margin; among the
        static models (static=True), the students (False) or both (None); controls never."""
        pool = [e for e in self.encoders if e.kind != "control" and static in (None, e.layers == 0)]
        met = [e for e in pool if e.met]
        return max(met, key=lambda e: e.ratio) if met else max(pool, key=Unseen.slack, default=None)

    def readme(self) -> str | None:
        """One sentence: the best choice and what it trades, the binding scorer's lowest 95% bound against its goal."""
        e = self.best()
        if e is None:
            return None
        m, low, margin = e.binding()
        scorer = {"gat_model": "GatModel AUC", "cosine": "cosine-scorer AUC"}.get(m, f"{m} AUC")
        head = (
            f"**A smaller node embedder, on unseen titles** ({self.sources} link sources, {self.seeds} seeds, "
            f"lowest 95% bounds against all-MiniLM-L6-v2): "
        )
        trade = f"[{e.ratio:.1f}×][{self.run}] its titles/s for {scorer} {low:+.3f} at worst (goal > −{margin:g})"
        if e.met:
            return head + f"the best choice is {e.name}, {trade}."
        return (
            head + f"none meets its goal, so all-MiniLM-L6-v2 stays the choice; the closest, {e.name}, gives {trade}."
        )

    def page(self) -> str:
        cells = [
            f"{e.name} ({e.layers} layers, {e.ratio:.1f}×): {e.bounds()}, goal {'met' if e.met else 'not met'}"
            for e in self.encoders
        ]
        goals = "; ".join(g.text() for g in GOALS)
        return (
            f"**A smaller node embedder, on titles it never saw.** Every encoder as stage 3's node embedder on "
            f"Wikispeedia and on the held-out vital-article topics, none of whose titles was a training text "
            f"({self.mentioned:.0%} of them occur inside one), paired by seed with all-MiniLM-L6-v2 over "
            f"{self.seeds} seeds and {' and '.join(self.protocols)}; the lowest bound of each 95% interval: "
            + "; ".join(cells)
            + f". Goals: {goals} ({page_link(self.run)})."
        )


def files(ref: Path, run: str) -> Path:
    return ref / run / "embedders"


def node_embedders(runs: dict[str, dict], ref: Path) -> NodeEmbedders | None:
    run = embedders_run(runs)
    if run is None or not (files(ref, run) / "goals.csv").is_file():
        return None
    goals = pd.read_csv(files(ref, run) / "goals.csv")
    lp = pd.read_csv(files(ref, run) / "lp.csv")
    texts = pd.read_csv(files(ref, run) / "texts.csv")
    kinds = {k: v["kind"] for k, v in runs[run][NODE_EMBEDDERS]["encoders"].items()}
    enc = tuple(
        Unseen(
            r.encoder,
            kinds.get(r.encoder, ""),
            int(r.layers),
            float(r.ratio),
            tuple((m, float(getattr(r, f"worst_{m}"))) for m, _ in goal_of(int(r.layers)).margins),
            bool(r.met),
        )
        for r in goals.itertuples()
    )
    held = texts[(texts.role == "held out") & texts.what.isin(["wikispeedia", "vital_heldout"])]
    mentioned = float((held["count"] * held.mentioned_inside).sum() / held["count"].sum())
    return NodeEmbedders(
        run, enc, int(lp.seed.nunique()), tuple(sorted(lp.protocol.unique())), int(lp.source.nunique()), mentioned
    )


def embedders_table(runs: dict[str, dict], ref: Path) -> pd.DataFrame:
    """The results page's table: per encoder its kind, layers, titles/s ratio, mean cosine to all-MiniLM-L6-v2 on the
    validation titles and each source's titles, the paired leak_free AUC difference per source and scorer with its
    95% interval, and the probes (where run); empty when notebook 05b's run is not committed."""
    run = embedders_run(runs)
    if run is None or not (files(ref, run) / "paired.csv").is_file():
        return pd.DataFrame()
    f = files(ref, run)
    val = pd.read_csv(f / "validation.csv").set_index("encoder")
    speed = pd.read_csv(f / "speed.csv").set_index("encoder")
    paired = pd.read_csv(f / "paired.csv")
    auc = paired[(paired.metric == "auc") & (paired.protocol == "leak_free")]
    kinds = {k: v["kind"] for k, v in runs[run][NODE_EMBEDDERS]["encoders"].items()}
    rows = []
    for name in val.index:
        row = {
            "encoder": name,
            "kind": kinds.get(name, ""),
            "× titles/s": f"{speed.loc[name, 'ratio']:.1f}",
            **{
                f"cos {s}": "–" if pd.isna(val.loc[name, c]) else f"{val.loc[name, c]:.3f}"
                for s, c in (
                    ("validation", "cos_validation"),
                    ("wikispeedia", "cos_test_wikispeedia"),
                    ("vital_heldout", "cos_test_vital_heldout"),
                )
            },
        }
        for (source, model), g in auc[auc.encoder == name].groupby(["source", "model"]):
            r = g.iloc[0]
            row[f"{model} Δ {source}"] = f"{r['diff']:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}]"
        rows.append(row)
    out = pd.DataFrame(rows).fillna("")
    if (f / "probe_rows.csv").is_file():
        probes = pd.read_csv(f / "probe_rows.csv").drop_duplicates("encoder", keep="last").set_index("encoder")
        for col, name in (("polarity_test", "polarity"), ("topic_test", "topic"), ("fid_cosine", "fidelity")):
            out[name] = [f"{probes.loc[e, col]:.3f}" if e in probes.index else "" for e in out.encoder]
    return out
