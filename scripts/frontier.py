"""The node embedder's speed-quality frontier: all-MiniLM-L6-v2, model2vec static models distilled from it,
all-mpnet-base-v2 and any saved student (scripts/distill_embedding.py's), each as stage 3's node embedder, under stage
5's probes, and timed (lib.distill.frontier).

    OMP_NUM_THREADS=1 python scripts/frontier.py                      # outputs/frontier/ from outputs/wikispeedia_seed40
    OMP_NUM_THREADS=1 python scripts/frontier.py --no-mpnet --pca 256  # a cheaper frontier
    OMP_NUM_THREADS=1 python scripts/frontier.py --student "3-layer student=outputs/distill_embedding/students/L025"
    OMP_NUM_THREADS=1 python scripts/frontier.py --student "3-layer student=..." --static-from "3-layer student"
    python scripts/frontier.py --publish                              # then copy the small results to outputs/reference/frontier/

Needs notebooks 01-02 of the run first (its crawl and split.json):
    python -m lib.run.runner --params params/seed40.yaml params/wikispeedia.yaml params/cpu.yaml -p threads=1 \\
      --run-name wikispeedia_seed40 --notebooks 01 02
Resumable: every finished step is kept in the output folder (speed.csv, probe_rows.csv, lp_rows.csv; static models
in <out>/models/, GatModel checkpoints in the run's distill/lp/ folders), so a re-run does only what is missing.
"""
from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMALL_FILES = ("README.md", "frontier.csv", "paired.csv", "lp.csv", "probe_rows.csv", "speed.csv", "summary.json",
               "frontier.png")


def args_of(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", default="outputs/wikispeedia_seed40", help="run folder with notebooks 01-02 done")
    ap.add_argument("--out", default="outputs/frontier", help="result folder")
    ap.add_argument("--pca", type=int, nargs="*", default=[256, 0], help="static models' PCA widths (0: no PCA; "
                    "none given: no static model)")
    ap.add_argument("--no-mpnet", dest="mpnet", action="store_false", help="leave all-mpnet-base-v2 out")
    ap.add_argument("--student", action="append", default=[], metavar="LABEL=FOLDER",
                    help="a saved sentence-transformers folder to add under LABEL (repeatable)")
    ap.add_argument("--control", action="append", default=[], metavar="LABEL=FOLDER",
                    help="the same for an untrained control of a student (kind `control`)")
    ap.add_argument("--static-from", nargs="*", default=[], metavar="LABEL",
                    help="also distil a static model from these --student encoders (each PCA width of --pca but 0)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="GatModel seeds (the run's split seeds)")
    ap.add_argument("--short", nargs="*", default=[], metavar="LABEL",
                    help="encoders scored on the first 3 of --seeds only (costly, or far from the goal)")
    ap.add_argument("--protocols", nargs="+", default=["leak_free", "new_nodes"])
    ap.add_argument("--epochs", type=int, default=2, help="GatModel epochs (seed §5.4.1: 2)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for training and probes")
    ap.add_argument("--speed-threads", type=int, nargs="+", default=[1, 2], help="thread counts timed")
    ap.add_argument("--speed-reps", type=int, default=3, help="interleaved timing repetitions")
    ap.add_argument("--distil-seed", type=int, default=0, help="seed of the static distillation")
    ap.add_argument("--probe-seed", type=int, default=0, help="data and probe seed (distill_long: 0)")
    ap.add_argument("--task-train", type=int, default=2000, help="probe training texts (distill_long: 2,000)")
    ap.add_argument("--task-eval", type=int, default=1000, help="probe val / test texts (distill_long: 1,000)")
    ap.add_argument("--fidelity-sentences", type=int, default=1000, help="fidelity sentences (distill_long: 1,000)")
    ap.add_argument("--transfer-sentences", type=int, default=20000, help="as distill_long (decides the data draw)")
    ap.add_argument("--max-seq-len", type=int, default=64, help="tokens per probe text (distill_long: 64)")
    ap.add_argument("--reuse-lp", nargs="*", default=[], metavar="CSV",
                    help="link-prediction rows made earlier (a published lp.csv, another lp_rows.csv): a pair whose "
                         "model identity, seed, epochs and protocols match is taken from there under this run's label")
    ap.add_argument("--reuse-probes", nargs="*", default=[], metavar="CSV",
                    help="probe rows made earlier, taken over the same way (model identity, seed, max_seq_len)")
    ap.add_argument("--stop-after", choices=("lp", "probes"), default=None,
                    help="stop after link prediction or the probes (a second process can score other encoders into "
                         "the same --out meanwhile; speed is timed by the final call, best on a quiet machine)")
    ap.add_argument("--publish", action="store_true", help="copy the small results to outputs/reference/frontier/")
    return ap.parse_args(argv)


def step(timings: dict, name: str, path: Path, fn):
    """Run fn, add its wall seconds to timings[name] (summed over resumed calls and over processes sharing the folder)
    and save the timings."""
    from lib.common.paths import atomic_write_text, locked

    t0 = time.perf_counter()
    out = fn()
    with locked(path):  # another process may have saved its own steps meanwhile
        saved = json.loads(path.read_text()) if path.is_file() else {}
        saved[name] = round(saved.get(name, 0.0) + time.perf_counter() - t0, 1)
        atomic_write_text(path, json.dumps(saved, indent=1) + "\n")
    timings.clear()
    timings.update(saved)
    return out


def main(argv=None) -> None:
    sys.stdout.reconfigure(line_buffering=True)
    a = args_of(argv)
    import pandas as pd
    import torch

    from lib.common.graphio import read_graph
    from lib.common.paths import atomic_write_text, resolve
    from lib.crawl import campaign as crawl
    from lib.distill import frontier as fr
    from lib.distill.data import build_datasets
    from lib.distill.eval import encode
    from lib.distill.lp import REFERENCE, link_prediction_eval
    from lib.distill.models import ensure_teacher, load_encoder

    from lib.embed.encoder import EmbedError, check_model_dir

    for flag, spec in [("--student", x) for x in a.student] + [("--control", x) for x in a.control]:
        label, _, folder = spec.partition("=")  # checked before the static models are distilled
        if not label or not folder:
            raise SystemExit(f"{flag} {spec!r}: give LABEL=FOLDER with a saved sentence-transformers folder "
                             "(scripts/distill_embedding.py arm writes them to outputs/distill_embedding/students/)")
        try:
            check_model_dir(resolve(folder), f"{flag} {label}:")
        except EmbedError as e:
            raise SystemExit(str(e)) from None
    torch.set_num_threads(a.threads)
    run_dir, out = resolve(a.run_dir), resolve(a.out)
    out.mkdir(parents=True, exist_ok=True)
    tpath = out / "timings.json"
    timings = json.loads(tpath.read_text()) if tpath.is_file() else {}
    embedders = [fr.Embedder(REFERENCE, None)]
    embedders += step(timings, "distil_static", tpath, lambda: [
        fr.static_embedder(out / "models", p or None, a.distil_seed) for p in a.pca])
    teacher_dir = ensure_teacher()
    if a.mpnet:
        embedders.append(fr.Embedder("all-mpnet-base-v2", teacher_dir))
    for kind, spec in [("student", x) for x in a.student] + [("control", x) for x in a.control]:
        label, _, folder = spec.partition("=")
        embedders.append(fr.Embedder(label, resolve(folder), kind))
    for flag, labels in (("--static-from", a.static_from), ("--short", a.short)):
        unknown = set(labels) - {e.label for e in embedders}
        if unknown:
            raise SystemExit(f"{flag} names no encoder of this run: {sorted(unknown)}; give labels of "
                             f"{[e.label for e in embedders]}")
    sources = [e for e in embedders if e.label in a.static_from]
    embedders += step(timings, "distil_static", tpath, lambda: [
        fr.static_embedder(out / "models", p, a.distil_seed, source=e) for e in sources for p in a.pca if p])
    print("encoders:", ", ".join(e.label for e in embedders))

    from tqdm.auto import tqdm

    if a.reuse_lp or a.reuse_probes:
        from lib.embed.encoder import load_model, model_id_of

        ids = {e.label: model_id_of(load_model(e.folder)) for e in embedders}
        for n, name in ((fr.carry_over(ids, list(map(resolve, a.reuse_lp)), out / "lp_rows.csv",
                                       ["seed", "epochs", "protocols", "model", "protocol"],
                                       {"epochs": a.epochs, "protocols": "+".join(a.protocols)}), "lp_rows.csv"),
                        (fr.carry_over(ids, list(map(resolve, a.reuse_probes)), out / "probe_rows.csv",
                                       ["seed", "max_seq_len"], {"seed": a.probe_seed, "max_seq_len": a.max_seq_len}),
                         "probe_rows.csv")):
            print(f"{n} rows carried over into {name}")
    parts = []  # the costly part first: link prediction, one GatModel per (encoder, seed, protocol's training set)
    for e in tqdm(embedders, desc="node embedders", unit="encoder"):
        seeds = a.seeds[:3] if e.label in a.short else a.seeds
        parts.append(step(timings, f"link_prediction/{e.label}", tpath, lambda e=e, seeds=seeds: link_prediction_eval(
            run_dir, [(e.label, s, e.folder) for s in seeds], epochs=a.epochs, protocols=tuple(a.protocols),
            rows_file=out / "lp_rows.csv", progress=True)))
    lp = pd.concat(parts, ignore_index=True)
    if a.stop_after == "lp":
        return

    def probes():
        data = build_datasets(a.probe_seed, a.transfer_sentences, a.task_train, a.task_eval, a.fidelity_sentences)
        teacher = load_encoder(teacher_dir)
        temb = {f"fid_{s}": encode(teacher, data["fidelity"][s], a.max_seq_len) for s in ("val", "test")}
        return fr.probe_rows(embedders, data, temb, a.max_seq_len, a.probe_seed, out / "probe_rows.csv")

    probe = step(timings, "probes", tpath, probes)
    print(probe.to_string(index=False))
    if a.stop_after == "probes":
        return

    titles = list(dict.fromkeys(t for f in crawl.ok_graph_files(run_dir / "crawl") for t in read_graph(f).titles))
    speed_file = out / "speed.csv"
    speed = pd.read_csv(speed_file) if speed_file.is_file() else pd.DataFrame(columns=["embedder"])
    if set(speed.embedder) != {e.label for e in embedders}:
        speed = step(timings, "speed", tpath, lambda: fr.speed_rows(embedders, titles, a.speed_threads, a.speed_reps))
        atomic_write_text(speed_file, speed.to_csv(index=False))
    print(speed.to_string(index=False))

    summarise(a, out, lp, probe, speed, embedders, timings)
    if a.publish:
        publish(a, out, timings)


def summarise(a, out: Path, lp, probe, speed, embedders, timings: dict) -> None:
    """lp.csv, frontier.csv, paired.csv, summary.json (validation choice, goal sentences) and frontier.png in `out`."""
    from lib.common.paths import atomic_write_text
    from lib.distill import frontier as fr

    statics = [e.label for e in embedders if e.kind == "static"]
    chosen = fr.choose_on_validation(lp, statics) if statics else None
    table = fr.summary_table(lp, probe, speed, embedders)
    diffs = fr.paired_to_reference(lp)
    sentences = fr.goal_sentences(diffs, table)
    first3 = sorted(lp.seed.unique())[:3]  # the goal's own seed count, to show what three seeds can resolve
    sentences3 = fr.goal_sentences(fr.paired_to_reference(lp[lp.seed.isin(first3)]), table) \
        if lp.seed.nunique() > 3 else []
    spread = [x for t in a.speed_threads for x in fr.speed_spread(table, embedders, t)]
    # lp_rows.csv is the resume file and keeps rows of encoders since changed; lp.csv holds this run's rows only
    atomic_write_text(out / "lp.csv", lp.to_csv(index=False))
    atomic_write_text(out / "frontier.csv", table.round(5).to_csv(index=False))
    atomic_write_text(out / "paired.csv", diffs.round(5).to_csv(index=False))
    atomic_write_text(out / "summary.json", json.dumps({
        "static_chosen_on_validation": chosen, "goal": sentences, "goal_first_3_seeds": sentences3,
        "speed_spread": spread,
        "validation_auc": lp[lp.model == "gat_model"].groupby("embedder")["val_auc"].mean().round(4).to_dict(),
        "timings_s": timings}, indent=1) + "\n")
    fr.plot_frontier(table, list(a.protocols), threads=1, path=out / "frontier.png")
    atomic_write_text(out / "README.md", readme(a, table, diffs, sentences, chosen, timings, sentences3, spread))
    print(table.round(4).to_string(index=False))
    print(f"static model chosen on validation AUC: {chosen}")
    print("\n".join(sentences))


def readme(a, table, diffs, sentences: list[str], chosen: str | None, timings: dict,
           sentences3: list[str] = (), spread: list[str] = ()) -> str:
    """The result folder's README: what ran, the table, the paired differences and the goal sentences, all printed
    from the numbers of this run."""
    cols = ["embedder", "kind", "layers", "dim", "seeds"] + [f"{m}_{p}_auc" for p in a.protocols for m in ("gat_model", "cosine")] + \
        [f"gat_model_{p}_mrr" for p in a.protocols] + ["polarity_test", "topic_test", "fid_cosine"] + \
        [c for c in table.columns if c.startswith(("titles_per_s_", "speedup_"))]
    auc = diffs[diffs.metric.isin(["auc", "mrr"])].round(4)
    return "\n".join([
        "# frontier — how small can stage 3's node embedder be (`scripts/frontier.py`)", "",
        f"    python scripts/frontier.py --run-dir {a.run_dir} --pca {' '.join(map(str, a.pca))}"
        f"{'' if a.mpnet else ' --no-mpnet'} --seeds {' '.join(map(str, a.seeds))}"
        + "".join(f" \\\n        --student {shlex.quote(x)}" for x in a.student)
        + "".join(f" \\\n        --control {shlex.quote(x)}" for x in a.control)
        + "".join(f" \\\n        --{flag} {shlex.join(labels)}" for flag, labels in (("static-from", a.static_from),
                                                                                     ("short", a.short)) if labels),
        "",
        f"Each encoder embedded the {a.run_dir} crawl's titles (Wikispeedia, seed40 settings: 1,000-node graphs, the run's "
        f"split of 40 training and 10 test graphs per seed) and was the node embedder of the seed's GatModel "
        f"({a.epochs} epochs, mp supervision, uniform negatives) for seeds {', '.join(map(str, a.seeds))} under "
        f"{' and '.join(a.protocols)}; feature cosine is scored on the same test pairs. Probes: stage 5's polarity and "
        f"topic linear probes ({a.task_train:,} training / {a.task_eval:,} test texts, data seed {a.probe_seed}) and "
        f"fidelity cosine to all-mpnet-base-v2, texts cut at {a.max_seq_len} tokens. Static models: model2vec "
        f"distilled from all-MiniLM-L6-v2 (PCA widths {', '.join(str(p or 'none') for p in a.pca)}, distillation seed "
        f"{a.distil_seed}). Students (kind `student`) and their untrained controls (kind `control`): saved folders of `scripts/distill_embedding.py` "
        f"(`outputs/reference/distill_embedding/` says how each was made and chosen). Speed: titles/s of `lib.embed.encoder.encode` on the crawl's unique titles, median of "
        f"{a.speed_reps} interleaved repetitions, on a 2-core machine shared with other work (absolute numbers are "
        f"low and noisy; the ratios come from the same repetitions). The table gives means over seeds (standard "
        f"deviations in frontier.csv).{slower_sentence(table)}", "",
        f"Static variant chosen on validation GatModel AUC (test unused): **{chosen}**.", "",
        table[cols].round(4).to_markdown(index=False), "",
        *(["How much the timing alone moves a speed-up (read speed-ups within these spreads as equal):", "",
           *[f"- {x}" for x in spread], ""] if spread else []),
        "Paired differences to all-MiniLM-L6-v2 (same seed), mean and 95% t-interval over seeds:", "",
        auc.to_markdown(index=False), "",
        "Goal (at most 3 transformer layers or static; both AUCs within 0.01 of all-MiniLM-L6-v2 with the 95% "
        "interval inside ±0.01; at ≥ 2× its titles/s):", "",
        *[f"- {x}" for x in sentences], "",
        *(["The same goal read on the first three seeds only (the seed count the goal names):", "",
           *[f"- {x}" for x in sentences3], ""] if sentences3 else []),
        f"Wall time per step (seconds on the shared machine, summed over resumed calls, set-up work repeated on "
        f"each resume included): {json.dumps(timings)}.", ""])


def slower_sentence(table) -> str:
    """' X ran slower at N threads than at 1 (...)' for every encoder where more threads measured slower, else ''."""
    cols = sorted((c for c in table.columns if c.startswith("titles_per_s_")), key=lambda c: int(c[13:-1]))
    if len(cols) < 2:
        return ""
    slow = [r.embedder for _, r in table.iterrows() if r[cols[-1]] < r[cols[0]]]
    if not slow:
        return ""
    return (f" {', '.join(slow)} ran slower at {cols[-1][13:-1]} threads than at {cols[0][13:-1]}: with other processes "
            f"on the machine a torch thread waits, spinning, for a peer that was descheduled, so the speed-ups at "
            f"{cols[-1][13:-1]} threads overstate what an idle machine gives; the 1-thread ratios are the ones to read.")


def publish(a, out: Path, timings: dict) -> None:
    """Copy the small result files to outputs/reference/frontier/ with params.json (command, commit, packages, wall
    time)."""
    from lib.common.runinfo import write_params_json

    ref = ROOT / "outputs" / "reference" / "frontier"
    ref.mkdir(parents=True, exist_ok=True)
    params = {**vars(a), "command": "python scripts/frontier.py " + shlex.join(sys.argv[1:]),
              "wall_s": round(sum(timings.values()), 1), "timings_s": timings}
    write_params_json(ref, params)  # first: the copies below would mark the recorded commit dirty
    for name in SMALL_FILES:
        shutil.copy2(out / name, ref / name)
    print("published to", ref)


if __name__ == "__main__":
    main()
