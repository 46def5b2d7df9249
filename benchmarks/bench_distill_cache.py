"""Stage 5 benchmark: teacher forward passes and wall time of a 3-seed distillation grid with the disk cache of teacher
targets (TeacherTargetStore) vs the first build's per-seed in-memory TeacherCache, and a warm re-run.

Targets: one teacher pass per sentence for the whole grid; >= 2x less wall time; a warm re-run does no
teacher pass. Every seed draws its own batch order, so the in-memory cache shares the teacher only within a seed.
Each of `--repeats` rounds runs the in-memory grid, then the cold disk-cache grid in a new folder, back to back; the
wall-time target is judged by the project's rule on the paired ratios cold / in-memory (lib.metrics.paired.judge_ratio:
met when their 95% interval lies below 0.5). The warm re-run follows the last round, on its folder.

    .venv/bin/python benchmarks/bench_distill_cache.py [--sentences 256] [--steps 16] [--seeds 3] [--max-seq-len 64]
        [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from lib.distill.cache import TeacherCache, TeacherTargetStore
from lib.distill.data import build_datasets
from lib.distill.models import StudentShape, encoder_identity, ensure_teacher, load_encoder, make_student
from lib.distill.train import DistillConfig, batch_plan, distill  # noqa: E402
from lib.metrics.paired import judge_ratio, ratio_text

VARIANTS = ("minilm", "no_value_relation", "value_mse")  # the runs of one seed that share its teacher targets


def grid(source_for_seed, teacher, texts, args) -> tuple[int, float]:
    """Run every variant on a 3x384 student for every seed; (teacher sentences, seconds)."""
    t0, sources = time.perf_counter(), {}
    for seed in range(args.seeds):
        src = source_for_seed(seed)
        sources[id(src)] = src
        for variant in VARIANTS:
            st = make_student(teacher.tokenizer, StudentShape(3), seed=seed)
            cfg = DistillConfig(
                variant=variant, steps=args.steps, batch_size=args.batch_size, max_seq_len=args.max_seq_len, seed=seed
            )
            distill(src, st, texts, cfg, progress=False)
    return sum(s.teacher_sentences for s in sources.values()), time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sentences", type=int, default=256, help="transfer sentences (steps x batch = one epoch by default)"
    )
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-seq-len", type=int, default=64)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3, help="paired rounds of the in-memory and the cold grid")
    args = ap.parse_args(argv)

    texts = build_datasets(0, args.sentences, task_train=24, task_eval=12, fidelity_sentences=4)["transfer"]
    teacher = load_encoder(ensure_teacher(), "teacher")
    tid = encoder_identity(teacher)
    print(
        f"{args.seeds} seeds x {len(VARIANTS)} runs (3x384), {args.steps} steps of {args.batch_size}, "
        f"max_seq_len {args.max_seq_len}, {len(texts)} transfer sentences"
    )
    mem_s, cold_s = [], []
    with tempfile.TemporaryDirectory() as root:
        for r in range(args.repeats):
            mem_n, seconds = grid(lambda seed: TeacherCache(teacher, texts, args.max_seq_len), teacher, texts, args)
            mem_s.append(seconds)
            store = TeacherTargetStore(teacher, tid, args.max_seq_len, root=os.path.join(root, str(r)))
            cold_n, seconds = grid(lambda seed, s=store: s, teacher, texts, args)
            cold_s.append(seconds)
            print(
                f"  round {r + 1}/{args.repeats}: in-memory {mem_s[-1]:.1f} s, disk cold {cold_s[-1]:.1f} s", flush=True
            )
        warm = TeacherTargetStore(teacher, tid, args.max_seq_len, root=os.path.join(root, str(args.repeats - 1)))
        warm_n, warm_s = grid(lambda seed, s=warm: s, teacher, texts, args)
    distinct = len(
        {
            t
            for seed in range(args.seeds)
            for idx in batch_plan(len(texts), args.steps, args.batch_size, seed)
            for t in (texts[i] for i in idx)
        }
    )
    print(f"{'mode':<28}{'teacher sentences':>18}{'wall s (median)':>16}")
    for name, n, sec in (
        ("in-memory, per seed", mem_n, statistics.median(mem_s)),
        ("disk cache, cold", cold_n, statistics.median(cold_s)),
        ("disk cache, warm re-run", warm_n, warm_s),
    ):
        print(f"{name:<28}{n:>18}{sec:>16.1f}")
    print(
        f"distinct sentences used by the grid: {distinct}; "
        f"cold disk cache passes per sentence: {cold_n / distinct:.2f} "
        f"(target 1) -> {'OK' if cold_n == distinct else 'ABOVE TARGET'}"
    )
    judged = judge_ratio(cold_s, mem_s, 0.5)
    print(
        f"wall time disk cold / in-memory (target <= 0.5, i.e. >= 2x faster): {ratio_text(judged)}; "
        f"warm / in-memory: {warm_s / statistics.median(mem_s):.2f}"
    )
    print(f"warm re-run teacher passes: {warm_n} (target 0) -> {'OK' if warm_n == 0 else 'NOT ZERO'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
