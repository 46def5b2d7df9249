"""Embedding-distilled node embedders (lib.distill.embedding, lib.distill.embedding_eval): choices on validation titles, the chosen student, its
speed against all-MiniLM-L6-v2 with stage 2's batching, and link prediction with it as stage 3's node embedder.

    OMP_NUM_THREADS=1 python scripts/distill_embedding.py arm --name L024_titles --layers 0,2,4 --steps 400
    OMP_NUM_THREADS=1 python scripts/distill_embedding.py arm --name L012_untrained --layers 0,1,2 --steps 0
    python scripts/distill_embedding.py speed --students L024_titles L012_untrained
    python -m lib.run.runner --params params/seed40.yaml params/wikispeedia.yaml params/cpu.yaml \\
        --run-name wikispeedia_seed40 --notebooks 01 02
    OMP_NUM_THREADS=1 python scripts/distill_embedding.py lp --students L024_titles --run-dir outputs/wikispeedia_seed40
    OMP_NUM_THREADS=1 python scripts/distill_embedding.py probes --control L012_untrained --students L024_titles \
        L024_titles_seed1 L024_titles_seed2

Everything goes to outputs/distill_embedding/ (git-ignored): validation.csv (one row per arm: settings, validation
cosine to all-MiniLM-L6-v2 on held-out titles, feature-cosine AUC on the validation links), students/<arm>/ (a
sentence-transformers folder, stage 2's `model_dir`), losses/<arm>.csv, steps/<arm>.pt (resumable checkpoints),
sources.csv (text counts), speed.csv, lp_rows.csv, frontier.csv (columns shared with the static-model frontier) and
lp_paired.csv (differences to all-MiniLM-L6-v2 paired by seed, 95% intervals), probe_rows.csv and probe_verdict.csv /
.md (stage 5's probes of students and their untrained control). An arm re-run with the same settings
resumes from its checkpoint or, once finished, is skipped; a finished arm re-run with other settings is refused.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from lib.common.paths import OUTPUTS, atomic_write_text
from lib.distill import embedding as E
from lib.distill import embedding_eval as V

OUT = OUTPUTS / "distill_embedding"
REFERENCE = "all-MiniLM-L6-v2"


def write_csv(path: Path, df: pd.DataFrame) -> None:
    atomic_write_text(path, df.to_csv(index=False))


def context(seed: int, max_sentences: int) -> dict:
    """Sources, the training texts (concatenated in E.SOURCES order), their all-MiniLM-L6-v2 targets, the validation
    titles with their targets and the validation links."""
    sources = E.transfer_sources(seed=seed, max_sentences=max_sentences)
    write_csv(OUT / "sources.csv", E.source_counts(sources))
    texts = [t for s in E.SOURCES for t in sources[s]["train"]]
    val = sorted({t for s in E.SOURCES for t in sources[s]["val"]})
    cache = OUT / "targets"
    links = V.validation_links(sorted(sources["vital_titles"]["val"]), seed=seed)
    targets = np.concatenate([E.target_embeddings(sources[s]["train"], cache_dir=cache) for s in E.SOURCES])
    return {"sources": sources, "texts": texts, "targets": targets,
            "sizes": {s: len(sources[s]["train"]) for s in E.SOURCES}, "val": val,
            "val_targets": E.target_embeddings(val, cache_dir=cache, progress=False),
            "speedia_val": set(sources["wikispeedia_titles"]["val"]), "links": links,
            "link_targets": E.target_embeddings(links["titles"], cache_dir=cache, progress=False)}


def validate(enc, ctx: dict) -> dict:
    """Validation numbers of an in-memory student: cosine to the target on held-out titles (all, and the Wikispeedia
    ones), and the feature-cosine AUC on the validation links with its gap to all-MiniLM-L6-v2's."""
    x = V.embed(enc, ctx["val"])
    cos = (x * ctx["val_targets"] / np.linalg.norm(ctx["val_targets"], axis=1, keepdims=True)).sum(1)
    sp = np.array([t in ctx["speedia_val"] for t in ctx["val"]])
    auc = V.cosine_link_auc(V.embed(enc, ctx["links"]["titles"]), ctx["links"])
    ref = V.cosine_link_auc(ctx["link_targets"], ctx["links"])
    return {"val_cos": float(cos.mean()), "val_cos_p05": float(np.quantile(cos, 0.05)),
            "val_cos_wikispeedia": float(cos[sp].mean()), "val_link_auc": auc, "val_link_auc_reference": ref,
            "val_link_auc_gap": auc - ref, "val_titles": len(cos), "val_links": len(ctx["links"]["pos"])}


def cmd_arm(a) -> None:
    from lib.distill.models import save_sentence_transformer

    layers = [int(i) for i in a.layers.split(",")]
    weights = dict(kv.split("=") for kv in a.weights.split(","))
    weights = {k: float(v) for k, v in weights.items()}
    unknown = set(weights) - set(E.SOURCES)
    if unknown:
        raise SystemExit(f"--weights names unknown sources {sorted(unknown)}; use {E.SOURCES}")
    cfg = E.EmbedDistillConfig(steps=max(a.steps, 1), batch_size=a.batch_size, lr=a.lr, loss=a.loss, w_rel=a.w_rel,
                               train_word_embeddings=a.init == "random" or a.train_word_embeddings, seed=a.seed)
    settings = {"init": a.init, "layers": a.layers, "weights": weights, "steps": a.steps, "data_seed": a.data_seed,
                "max_sentences": a.max_sentences, "dropout": a.dropout, "cfg": {k: v for k, v in vars(cfg).items()}}
    if a.round_weights != "none":
        settings["round_weights"] = a.round_weights
    if a.ffn is not None:
        settings["ffn"] = a.ffn
    table = OUT / "validation.csv"
    done = pd.read_csv(table) if table.is_file() else pd.DataFrame()
    if len(done) and a.name in set(done.arm):
        old = json.loads(done.set_index("arm").loc[a.name, "settings"])
        if old != json.loads(json.dumps(settings)):
            raise SystemExit(f"arm {a.name} was finished with other settings ({old}); pick another --name")
        print(f"arm {a.name} is finished; its row is in {table}")
        return
    ctx = context(a.data_seed, a.max_sentences)
    if a.init == "assistant":
        enc = E.assistant_student(layers, dropout=a.dropout, ffn=a.ffn)
    else:
        enc = E.random_student(len(layers), a.seed, dropout=0.1 if a.dropout is None else a.dropout)
    enc.name = a.name
    if a.round_weights != "none":
        E.round_weights(enc.model, a.round_weights)
    row = {"arm": a.name, "init": a.init, "layers": len(layers), "assistant_layers": a.layers if a.init == "assistant"
           else "", "steps": a.steps, "loss": a.loss, "w_rel": a.w_rel, "lr": a.lr, "batch_size": a.batch_size,
           "seed": a.seed, **{f"w_{k}": weights.get(k, 0.0) for k in E.SOURCES}, "train_seconds": 0.0}
    if a.steps > 0:
        plan = E.mixture_plan(ctx["sizes"], weights, cfg.steps, cfg.batch_size, a.seed)
        res = E.train_embedding_student(enc, ctx["texts"], ctx["targets"], plan, cfg, OUT / "steps" / f"{a.name}.pt",
                                        checkpoint_every=a.checkpoint_every, max_steps=a.max_steps)
        if not res["complete"]:
            print(f"arm {a.name} stopped after {res['steps']} steps of this call; run it again to resume")
            return
        write_csv(OUT / "losses" / f"{a.name}.csv", res["losses"])
        row["train_seconds"] = round(res["seconds"], 1)
        row["final_loss"] = float(res["losses"].loss.tail(50).mean())
    row.update(validate(enc, ctx))
    folder = save_sentence_transformer(enc, OUT / "students" / a.name, max_seq_len=cfg.max_seq_len, normalize=True)
    row["folder"] = str(folder.relative_to(OUTPUTS.parent))
    row["settings"] = json.dumps(settings)
    done = pd.read_csv(table) if table.is_file() else pd.DataFrame()  # another arm may have finished meanwhile
    write_csv(table, pd.concat([done, pd.DataFrame([row])], ignore_index=True))
    ck = OUT / "steps" / f"{a.name}.pt"
    if ck.is_file():
        ck.unlink()
    print(json.dumps({k: row[k] for k in ("arm", "val_cos", "val_cos_wikispeedia", "val_link_auc",
                                          "val_link_auc_gap")}, indent=1))


def student_folder(name: str) -> Path | None:
    return None if name == REFERENCE else OUT / "students" / name


def cmd_speed(a) -> None:
    """titles/s at 1 and 2 threads, each student and all-MiniLM-L6-v2 measured in alternation on the same titles."""
    from lib.crawl.wikispeedia import wikispeedia_snapshot

    titles = sorted(wikispeedia_snapshot().links)
    names = [REFERENCE, *a.students]
    rows = []
    for threads in a.threads:
        for rnd in range(a.rounds):
            for n in names:
                tps = V.titles_per_second(student_folder(n), titles, threads, a.batch_size, repeats=a.repeats)
                rows.append({"encoder": n, "threads": threads, "round": rnd, "titles_per_s": tps})
                print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    best = df.groupby(["encoder", "threads"]).titles_per_s.max().unstack("threads")
    out = pd.DataFrame({"encoder": best.index, "titles": len(titles),
                        **{f"titles_per_s_{t}thread": best[t].values for t in a.threads}})
    for t in a.threads:
        out[f"ratio_{t}thread"] = out[f"titles_per_s_{t}thread"] / float(best.loc[REFERENCE, t])
    write_csv(OUT / "speed_rounds.csv", df)
    write_csv(OUT / "speed.csv", out)
    print(out.to_string(index=False))


def cmd_lp(a) -> None:
    """GatModel and feature-cosine link prediction with each student and all-MiniLM-L6-v2 as node embedder, paired
    by seed (lib.distill.lp.link_prediction_eval on the run's split, mp supervision, uniform negatives)."""
    from lib.distill.lp import link_prediction_eval

    embedders = [(n, s, student_folder(n)) for s in a.seeds for n in [REFERENCE, *a.students]]
    lp = link_prediction_eval(a.run_dir, embedders, epochs=a.epochs, protocols=tuple(a.protocols),
                              rows_file=OUT / "lp_rows.csv", progress=True)
    speed = pd.read_csv(OUT / "speed.csv").set_index("encoder") if (OUT / "speed.csv").is_file() else None
    val = pd.read_csv(OUT / "validation.csv").set_index("arm")
    front = V.frontier_rows(lp, speed, val, REFERENCE)
    write_csv(OUT / "frontier.csv", front)
    paired = V.paired_to_reference(front, REFERENCE, metrics=("gat_auc", "gat_mrr", "cosine_auc"))
    write_csv(OUT / "lp_paired.csv", paired)
    layers = {n: int(val.loc[n, "layers"]) for n in a.students}
    lines = V.goal_sentences(paired, speed, layers)
    atomic_write_text(OUT / "goal.md", "".join(f"- {s}\n" for s in lines))
    print(paired.to_string(index=False))
    print("\n".join(lines))


def cmd_probes(a) -> None:
    """Stage 5's polarity / topic probes and fidelity (lib.distill.frontier.probe_rows, distill_long's settings) for
    the students (one per distillation seed) and their untrained control, and the verdict against the control."""
    from lib.distill import frontier as fr
    from lib.distill.data import build_datasets
    from lib.distill.eval import encode
    from lib.distill.models import ensure_teacher, load_encoder

    names = [a.control, *a.students]
    data = build_datasets(0, 20000, a.task_train, a.task_eval, 1000)
    teacher = load_encoder(ensure_teacher())
    temb = {f"fid_{s}": encode(teacher, data["fidelity"][s], 64) for s in ("val", "test")}
    rows = fr.probe_rows([fr.Embedder(n, student_folder(n), "student") for n in names], data, temb, 64, 0,
                         OUT / "probe_rows.csv")
    table, sentence = V.versus_control(rows, a.students, a.control, a.task_eval,
                                       thresholds={"polarity_test": a.polarity, "topic_test": a.topic})
    write_csv(OUT / "probe_verdict.csv", table)
    atomic_write_text(OUT / "probe_verdict.md", f"- {a.control} and {', '.join(a.students)}: {sentence}\n")
    print(rows.to_string(index=False))
    print(table.round(4).to_string(index=False))
    print(sentence)


TABLE_BEGIN, TABLE_END = "<!-- validation:begin (scripts/distill_embedding.py table) -->", "<!-- validation:end -->"
PROBES_BEGIN, PROBES_END = "<!-- probes:begin (scripts/distill_embedding.py table) -->", "<!-- probes:end -->"


def validation_table(val: pd.DataFrame) -> str:
    """The arms of validation.csv as a Markdown table: init, layers kept, feed-forward width, source shares, steps x
    batch, seed,
    validation cosine to all-MiniLM-L6-v2 (all held-out titles, the Wikispeedia ones), validation link AUC, training
    seconds and steps per second."""
    def ffn(settings: str) -> str:
        st = json.loads(settings)
        return str(st.get("ffn", "")) or ("bf16-rounded" if st.get("round_weights") else "1536")

    t = pd.DataFrame({
        "arm": val.arm, "init": val["init"],
        "layers": [x if isinstance(x, str) and x else str(n) for x, n in zip(val.assistant_layers.fillna(""),
                                                                          val["layers"])],
        "feed-forward": [ffn(x) for x in val.settings],
        "shares vital : Wikispeedia : sentences": [f"{a:g} : {b:g} : {c:g}" for a, b, c in zip(
            val.w_vital_titles, val.w_wikispeedia_titles, val.w_sentences)],
        "steps × batch": [f"{int(a)} × {int(b)}" for a, b in zip(val.steps, val.batch_size)],
        "seed": val.seed.astype(int),
        "val cosine": val.val_cos.round(3), "val cosine, Wikispeedia": val.val_cos_wikispeedia.round(3),
        "val link AUC": val.val_link_auc.round(3),
        "train s": val.train_seconds.round(0).astype(int),
        "steps/s": [f"{a / b:.2f}" if b > 0 else "" for a, b in zip(val.steps, val.train_seconds)]})
    return t.to_markdown(index=False)


def _fill(text: str, begin: str, end: str, block: str, readme: Path) -> str:
    if begin not in text or end not in text:
        raise SystemExit(f"{readme} has no {begin} ... {end} block to fill")
    head, rest = text.split(begin, 1)
    return f"{head}{begin}\n{block}\n{end}{rest.split(end, 1)[1]}"


def cmd_table(a) -> None:
    """Rewrite the validation table and the probe verdict between the markers of a README (default: the published
    one) from validation.csv, probe_rows.csv, probe_verdict.csv and probe_verdict.md beside it."""
    readme = Path(a.readme)
    folder = Path(a.validation).parent
    val = pd.read_csv(a.validation)
    text = _fill(readme.read_text(encoding="utf-8"), TABLE_BEGIN, TABLE_END, validation_table(val), readme)
    if (folder / "probe_verdict.csv").is_file():
        rows = pd.read_csv(folder / "probe_rows.csv")
        cols = ["embedder", "polarity_val", "polarity_test", "topic_val", "topic_test", "fid_cosine"]
        block = "\n".join([rows[cols].round(3).to_markdown(index=False), "",
                           pd.read_csv(folder / "probe_verdict.csv").round(4).to_markdown(index=False), "",
                           (folder / "probe_verdict.md").read_text(encoding="utf-8").strip()])
        text = _fill(text, PROBES_BEGIN, PROBES_END, block, readme)
    atomic_write_text(readme, text)
    print(f"{readme}: validation table of {len(val)} arms written")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    arm = sub.add_parser("arm", help="train (or, with --steps 0, only build) one student and validate it")
    arm.add_argument("--name", required=True)
    arm.add_argument("--init", choices=("assistant", "random"), default="assistant")
    arm.add_argument("--layers", default="0,2,4", help="assistant layers kept (random init: their count)")
    arm.add_argument("--weights", default="vital_titles=1,wikispeedia_titles=1,sentences=0",
                     help="share of each source in a batch")
    arm.add_argument("--steps", type=int, default=400)
    arm.add_argument("--max-steps", type=int, default=None, help="stop after this many steps of this call")
    arm.add_argument("--batch-size", type=int, default=64)
    arm.add_argument("--lr", type=float, default=1e-4)
    arm.add_argument("--loss", choices=E.LOSSES, default="cosine")
    arm.add_argument("--w-rel", type=float, default=0.0)
    arm.add_argument("--dropout", type=float, default=None, help="hidden/attention dropout (default: the model's)")
    arm.add_argument("--train-word-embeddings", action="store_true")
    arm.add_argument("--seed", type=int, default=0)
    arm.add_argument("--data-seed", type=int, default=0, help="seed of the validation titles and sentence sample")
    arm.add_argument("--max-sentences", type=int, default=20000)
    arm.add_argument("--checkpoint-every", type=int, default=100)
    arm.add_argument("--ffn", type=int, default=None,
                     help="feed-forward neurons kept per layer (assistant init; default all 1,536)")
    arm.add_argument("--round-weights", choices=("none", *E.ROUNDINGS), default="none",
                     help="round every weight to this dtype and back before training: with --layers 0,1,2,3,4,5 "
                          "--steps 0, a near-copy of all-MiniLM-L6-v2 that measures the seeds' noise floor")
    sp = sub.add_parser("speed", help="titles/s of students and all-MiniLM-L6-v2 with stage 2's batching")
    sp.add_argument("--students", nargs="+", required=True)
    sp.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    sp.add_argument("--rounds", type=int, default=3)
    sp.add_argument("--repeats", type=int, default=2)
    sp.add_argument("--batch-size", type=int, default=256, help="stage 2's embed_batch_size")
    lp = sub.add_parser("lp", help="students as stage 3's node embedder, paired by seed with all-MiniLM-L6-v2")
    pr = sub.add_parser("probes", help="polarity / topic probes and fidelity of students (one per seed) against their "
                                       "untrained control")
    pr.add_argument("--control", required=True, help="the untrained arm, e.g. L025_untrained")
    pr.add_argument("--students", nargs="+", required=True, help="the same recipe at several --seed values")
    pr.add_argument("--task-train", type=int, default=2000, help="probe training texts (distill_long: 2,000)")
    pr.add_argument("--task-eval", type=int, default=1000, help="probe val / test texts (distill_long: 1,000)")
    pr.add_argument("--polarity", type=float, default=0.70, help="least polarity test accuracy of the goal")
    pr.add_argument("--topic", type=float, default=0.69, help="least topic test accuracy of the goal")
    tb = sub.add_parser("table", help="write validation.csv's table into a README's validation block")
    tb.add_argument("--validation", default="outputs/reference/distill_embedding/validation.csv")
    tb.add_argument("--readme", default="outputs/reference/distill_embedding/README.md")
    lp.add_argument("--students", nargs="*", default=[])
    lp.add_argument("--run-dir", default=str(OUTPUTS / "wikispeedia_seed40"))
    lp.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    lp.add_argument("--epochs", type=int, default=2, help="GatModel epochs (wikispeedia_seed40: gat_epochs 2)")
    lp.add_argument("--protocols", nargs="+", default=["leak_free", "new_nodes"])
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    OUT.mkdir(parents=True, exist_ok=True)
    {"arm": cmd_arm, "speed": cmd_speed, "lp": cmd_lp, "probes": cmd_probes, "table": cmd_table}[a.cmd](a)


if __name__ == "__main__":
    main()
