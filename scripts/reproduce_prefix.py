"""Does today's code retrain a published distillation run the same way? Re-trains the first steps of one
task-agnostic run of a published notebook-05 folder, with its recorded settings and the full run's learning-rate
schedule, and compares the learning-curve points with the published ones (lib.distill.train.train_student's
max_steps stops it as a kill would). A grid that takes published runs (notebook 05's reuse_runs) rests on this.

    OMP_NUM_THREADS=1 python scripts/reproduce_prefix.py outputs/reference/distill_long "3x384 MiniLM random s1" \\
        --steps 500

Prints both curves and the largest absolute difference per metric; exit status 1 when a probe accuracy differs.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

import pandas as pd

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("published", help="a run folder notebook 05 finished, e.g. outputs/reference/distill_long")
    ap.add_argument("run", help="a task-agnostic run of its results.csv, e.g. '3x384 MiniLM random s1'")
    ap.add_argument("--steps", type=int, default=500, help="steps to re-train (default 500: the first curve point)")
    args = ap.parse_args(argv)

    from lib.common.device import get_device
    from lib.common.paths import resolve
    from lib.distill.config import read_params_05
    from lib.distill.data import build_datasets
    from lib.distill.eval import encode, evaluate
    from lib.distill.models import StudentShape, assistant_path, ensure_teacher, load_encoder, make_student
    from lib.distill.stage import METHOD_VARIANT, _teacher_source, shared_settings
    from lib.distill.train import DistillConfig, RunHooks, train_student

    folder = resolve(args.published) / "distill"
    cfg = read_params_05(folder / "params_05.json")
    match = re.fullmatch(r"(\d+)x(\d+) (.+) (random|assistant) s(\d+)", args.run)
    if match is None or match[3] not in METHOD_VARIANT:
        print(
            f"error: run {args.run!r} is not a task-agnostic distilled run ('<M>x<H> <method> <init> s<seed>' with "
            f"method one of {sorted(METHOD_VARIANT)})",
            file=sys.stderr,
        )
        return 2
    layers, method, init, seed = int(match[1]), match[3], match[4], int(match[5])
    published = pd.read_csv(folder / "curves.csv")
    published = published[published.run == args.run].drop(columns="run").set_index("step")
    if published.empty:
        print(f"error: {folder / 'curves.csv'} has no curve of {args.run!r}", file=sys.stderr)
        return 2

    dev = get_device(cfg.device)
    teacher = load_encoder(ensure_teacher(), "teacher", dev)
    assistant = load_encoder(assistant_path(), "assistant", dev)
    data = build_datasets(
        cfg.distill_seeds[0], cfg.transfer_sentences, cfg.task_train, cfg.task_eval, cfg.fidelity_sentences
    )
    temb = {f"fid_{s}": encode(teacher, data["fidelity"][s], cfg.distill_max_seq_len) for s in ("val", "test")}
    student = make_student(
        teacher.tokenizer,
        StudentShape(layers, cfg.student_hidden, cfg.student_heads),
        seed=seed,
        init_from=assistant if init == "assistant" else None,
        device=dev,
    )
    train_cfg = DistillConfig(
        variant=METHOD_VARIANT[method], steps=cfg.distill_steps, lr=cfg.distill_lr, seed=seed, **shared_settings(cfg)
    )
    hooks = RunHooks(
        eval_every=cfg.eval_every,
        max_steps=args.steps,
        evaluate=lambda enc: evaluate(enc, data, temb, cfg.distill_max_seq_len, seed),
    )
    res = train_student(_teacher_source(teacher, cfg, None), student, data["transfer"], train_cfg, hooks=hooks)
    now = res["curve"].set_index("step")
    steps = now.index.intersection(published.index)
    diff = (now.loc[steps] - published.loc[steps, now.columns]).abs()
    print(pd.concat({"today": now.loc[steps], "published": published.loc[steps, now.columns]}, axis=1).T.to_string())
    print("largest absolute difference per metric:\n" + diff.max().to_string())
    probes = [c for c in diff.columns if c.startswith(("polarity", "topic"))]
    same = bool((diff[probes] == 0).all().all())
    print(
        f"{args.run} re-trained for {args.steps} steps: the probe accuracies at steps {list(steps)} "
        f"{'equal' if same else 'differ from'} the published ones"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
