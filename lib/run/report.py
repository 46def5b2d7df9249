"""README "Results": tables generated from the committed reference runs in outputs/reference/<run>/metrics.json.

    python -m lib.run.report                  # rewrite the README block between the results markers and the figure
    python -m lib.run.report --publish seed40 # copy outputs/seed40's small result files to outputs/reference/seed40/ first
    python -m lib.run.report --check          # exit 1 when the README block differs from the files (a test runs this)

Nothing here is typed by hand: every number comes from a reference run's metrics.json (written by notebooks 03/03b),
the seed report's numbers from lib.linkpred.metrics.SEED_REPORTED.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lib.common.paths import OUTPUTS, ROOT, atomic_write_text
from lib.run.tables import (
    _n_train,
    distill_lp_table,
    distill_table,
    heuristic_table,
    kd_table,
    overlap_table,
    seed_table,
    structure_table,
)

REFERENCE = OUTPUTS / "reference"
BEGIN, END = "<!-- results:begin (python -m lib.run.report) -->", "<!-- results:end -->"
FIGURE = "auc_aauc_vs_size.png"
# How long the README's two commands take, measured from a fresh clone by scripts/time_loop.py.
TIMINGS = REFERENCE / "loop" / "timings.json"
TBEGIN, TEND = "<!-- timings:begin (python -m lib.run.report) -->", "<!-- timings:end -->"


MAX_BYTES = 2_000_000
KEEP = ("*.ipynb", "metrics.json", "params.json", "status.json", "params_*.json", "*.csv", "figures/*.png", "html/*.html")


def publish(run: str, outputs: Path = OUTPUTS, ref: Path = REFERENCE) -> list[Path]:
    """Copy a run folder's small result files (executed notebooks, metrics, parameters, status, tables, PNG figures,
    pictures under 2 MB) to outputs/reference/<run>/; never checkpoints, datasets, caches or crawled graphs.

    Where the run's status.json lists its notebooks (lib.run.runner), only those executed notebooks are copied, and only
    the figures and pictures whose name starts with one of their numbers ("03b_…") or with none: a run folder another
    profile also wrote into (e.g. notebook 05's node-embedder run in seed40) keeps that run's files out."""
    import re
    import shutil

    src = outputs / run
    if not (src / "metrics.json").is_file():
        raise FileNotFoundError(f"{src} has no metrics.json; run it first (python -m lib.run.runner ...)")
    dst = ref / run
    notes = (dst / "README.md").read_text() if (dst / "README.md").is_file() else None  # how the run was made
    if dst.exists():
        shutil.rmtree(dst)
    status = json.loads((src / "status.json").read_text()) if (src / "status.json").is_file() else {}
    listed = set(status.get("notebooks", {}))
    numbers = {n.split("_", 1)[0] for n in listed}

    def owned(f: Path) -> bool:
        if not listed:
            return True
        if f.suffix == ".ipynb":
            return f.name in listed
        m = re.match(r"(\d+[a-z]?)_", f.name)
        return m is None or m.group(1) in numbers

    copied = []
    if notes is not None:
        dst.mkdir(parents=True)
        (dst / "README.md").write_text(notes)
    for pattern in KEEP:
        for f in sorted(src.glob(pattern)):
            if f.is_file() and f.stat().st_size <= MAX_BYTES and owned(f):
                (dst / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, dst / f.relative_to(src))
                copied.append(dst / f.relative_to(src))
    return copied


def reference_runs(ref: Path = REFERENCE) -> dict[str, dict]:
    """{run name: metrics dict} of every reference run folder with a metrics.json, the seed-experiment runs first by
    number of training graphs, then the others (e.g. distillation) by name."""
    runs = {p.parent.name: json.loads(p.read_text(encoding="utf-8")) for p in ref.glob("*/metrics.json")}
    return dict(sorted(runs.items(), key=lambda kv: (0, _n_train(kv[1]), kv[0]) if "train_gat" in kv[1] else (1, 0, kv[0])))


def plot_size(runs: dict[str, dict], path: Path):
    """Test AUC and A-AUC of GatModel (seed protocol, uniform negatives) against training graphs, with the seed's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lib.linkpred.metrics import SEED_REPORTED

    t = seed_table(runs)
    t = t[t["protocol"].isin(["seed", "leak_free", "pair_split", "new_nodes"])]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot([r["train_graphs"] for r in SEED_REPORTED], [r["auc"] for r in SEED_REPORTED], "k*-", label="seed AUC")
    ax.plot([r["train_graphs"] for r in SEED_REPORTED], [r["aauc"] for r in SEED_REPORTED], "k*:", label="seed A-AUC")
    for i, (p, g) in enumerate(t.groupby("protocol")):
        g = g.sort_values("train graphs")
        x = g["train graphs"]
        ax.plot(x, [float(v.split(" ")[0]) for v in g["AUC"]], "o-", color=f"C{i}", label=f"ours AUC · {p}")
        aa = [float(v) if v != "n/a" else float("nan") for v in g["A-AUC"]]
        ax.plot(x, aa, "s:", color=f"C{i}", label=f"ours A-AUC · {p}")
    ax.set(xscale="log", xlabel="training graphs (incl. validation)", ylabel="score",
           title="GatModel: AUC and A-AUC against training-set size")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render(runs: dict[str, dict]) -> str:
    """The README block (Markdown) for these runs."""
    if not runs:
        return f"{BEGIN}\nNo reference run is committed yet.\n{END}"
    parts = [BEGIN, "",
             "GatModel as the seed trained it (message-passing supervision, 2 epochs), test graphs, uniform negatives, "
             "mean ± std over seeds; the seed report's numbers are its single run on 20,000-node live graphs. The last "
             "column is the share of the training graphs' edges the protocol removed (notebook 03's audit): the offline "
             "graphs share most title pairs, so keeping the test links out of training removes them from every "
             "training graph that holds them, and those graphs are then sparser than the test graphs they are "
             "evaluated against:", "",
             seed_table(runs).to_markdown(index=False, disable_numparse=True), "",
             "Against the heuristics (mean AUC over seeds; notebook 03b's learned decoders and heuristic stack where "
             "that notebook ran, its best graph model chosen by validation AUC; the last column is that model's margin over "
             "the strongest heuristic scorer — the stack, the stack on rescaled counts where it ran, or the best single "
             "heuristic — mean ± std over seeds, and whether 03b's goal of ≥ +0.02 AUC and a higher MRR is met):",
             "", heuristic_table(runs).to_markdown(index=False, disable_numparse=True), "",
             f"![AUC and A-AUC against training-set size](outputs/reference/{FIGURE})", ""]
    stt = structure_table(runs)
    if len(stt):
        parts += ["Can one structural bit solve a negative set, and does validation measure what test measures "
                  "(notebook 03b, pairs and message passing only, mean over seeds)? A `dist2` negative sits at distance "
                  "2 and so always has a common neighbour: the shortcut that scores 1 for no common neighbour ranks "
                  "every positive without one above all of them with no learning. A `matched` negative sits at its "
                  "positive's own distance, so there the shortcut scores AUC 0.5; `heart` negatives are the "
                  "heuristics' own favourite candidates. Where validation and test differ in the share of positives "
                  "without a common neighbour, validation measures another task than test. Runs from before the "
                  "rename call `dist2` `hard`:", "",
                  stt.to_markdown(index=False, disable_numparse=True), ""]
    ov = overlap_table(runs)
    if len(ov):
        parts += ["Offline graphs against `max_nodes` (notebook 01; the seed's live campaign shared 0.92 of a graph's "
                  "nodes over ~620,000 titles):", "", ov.to_markdown(index=False, disable_numparse=True), ""]
    dt = distill_table(runs)
    if len(dt):
        parts += ["Stage 5, task-agnostic distillation (notebook 05): each MiniLM student beside its undistilled control "
                  "(same architecture, initialisation and seeds; an assistant-initialised control is the first layers of "
                  "all-MiniLM-L6-v2, so it does not vary with the seed), linear probes on frozen sentence embeddings, "
                  "test accuracy, and cosine fidelity to the teacher, mean ± std over seeds:", "",
                  dt.to_markdown(index=False, disable_numparse=True), ""]
    lt = distill_lp_table(runs)
    if len(lt):
        parts += ["Stage 5 to stage 3: each embedder as the node embedder of the seed's GatModel (2 epochs), test "
                  "graphs of the run's split per seed, uniform negatives; `cosine` scores the features alone:", "",
                  lt.to_markdown(index=False, disable_numparse=True), ""]
    kt = kd_table(runs)
    if len(kt):
        parts += ["Stage 6, classic knowledge distillation (notebook 06): each student distilled from the fine-tuned "
                  "teacher's logits beside the same student trained on the labelled texts with CE for as many steps "
                  "(`control`); test accuracy and agreement with the teacher's predictions, mean ± std over seeds; "
                  "`probing gain` is the mean probe accuracy above the majority class over the eight probing tasks:",
                  "", kt.to_markdown(index=False, disable_numparse=True), ""]
    parts.append(END)
    return "\n".join(parts)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def render_timings(t: dict) -> str:
    """The README's timing sentences from scripts/time_loop.py's record (timings.json); parts not measured are left
    out."""
    idle = t.get("idle")
    if not idle:
        return f"{TBEGIN}\nNot measured yet (python scripts/time_loop.py).\n{TEND}"
    nb = lambda r: ", ".join(f"{k.split('_')[0]} {v['seconds']:.0f} s" for k, v in r["notebooks"].items())
    done = []
    if "setup_seconds" in idle:
        done.append(f"set-up {_minutes(idle['setup_seconds'])} with a warm pip cache")
    if "demo_seconds" in idle:
        done.append(f"`make demo` {_minutes(idle['demo_seconds'])} (notebooks {nb(idle)})")
    count = f"{idle['tests_collected']} tests" if "tests_collected" in idle else "the tests"
    if "test_seconds" in idle:
        outcome = ", ".join(f"{n} {k}" for k, n in idle["tests"].items())
        done.append(f"`make test` {_minutes(idle['test_seconds'])} for {count} ({outcome})")
    elif "tests_collected" in idle:
        done.append(f"`make test` collects {count}")
    lines = [TBEGIN, f"Measured from a fresh clone on {idle['cores']} idle cores ({idle['machine']}; commit "
                     f"{idle['commit']}, {idle['date']}, `python scripts/time_loop.py`): " + "; ".join(done) + "."]
    shared = t.get("shared")
    if shared and "demo_seconds" in shared:
        lines.append(f"With {shared['condition']} (commit {shared['commit']}, {shared['date']}): `make demo` "
                     f"{_minutes(shared['demo_seconds'])} (notebooks {nb(shared)}).")
    lines.append(TEND)
    return "\n".join(lines)


def load_timings(path: Path = TIMINGS) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def readme_block(text: str, begin: str = BEGIN, end: str = END) -> str:
    if begin not in text or end not in text:
        raise ValueError(f"README.md has no generated-block markers; add a line {begin!r} and a line {end!r}")
    return text[text.index(begin):text.index(end) + len(end)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lib.run.report", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if README.md's results block is out of date")
    ap.add_argument("--readme", default=str(ROOT / "README.md"))
    ap.add_argument("--publish", action="append", default=[], metavar="RUN",
                    help="copy outputs/RUN's small result files to outputs/reference/RUN first")
    a = ap.parse_args(argv)
    for run in a.publish:
        print(f"published {len(publish(run))} files of outputs/{run} to outputs/reference/{run}")
    runs = reference_runs()
    readme = Path(a.readme)
    text = readme.read_text(encoding="utf-8")
    new = render(runs)
    new_t = render_timings(load_timings())
    if a.check:
        if readme_block(text) != new:
            print("README.md's results block differs from outputs/reference/*/metrics.json; run python -m lib.run.report",
                  file=sys.stderr)
            return 1
        if readme_block(text, TBEGIN, TEND) != new_t:
            print(f"README.md's timings differ from {TIMINGS.relative_to(ROOT)}; run python -m lib.run.report",
                  file=sys.stderr)
            return 1
        return 0
    text = text.replace(readme_block(text, TBEGIN, TEND), new_t)
    atomic_write_text(readme, text.replace(readme_block(text), new))
    if runs:
        plot_size(runs, REFERENCE / FIGURE)
    print(f"README results block rewritten from {len(runs)} reference run(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
