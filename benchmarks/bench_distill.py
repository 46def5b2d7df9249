"""Stage 5 benchmark: inference sentences/s of teacher, assistant and students on the same sentences in one run
(target: 6x384 >= 5x the teacher, as the paper's Table 4 reports 5.3x), and distillation steps/s with peak memory.

Fused AdamW: 3x384 student steps/s at batch 32 on teacher targets already cached in memory (the long profile's
situation), fused against non-fused AdamW, interleaved in the same run (target: fused faster).

Teacher targets in low precision (`--precision`, default auto; lib.common.device): teacher sentences/s of the target
pass (attention + values of the last layer) under autocast vs float32 on the same batches, interleaved (target >= 1.8x),
with the KL of the low-precision attention rows to the float32 ones. Where auto resolves to float32 (no fast bf16 on
this CPU) that is said and only float32 is reported; `--precision bf16` measures the emulated path anyway.

Each speed target is judged by the project's rule (lib.metrics.paired.judge_ratio) on `--repeats` rounds, each timing
the two sides back to back: the mean of the paired time ratios and its 95% interval against the target written as a
time ratio (>= 5x: <= 0.2; faster: <= 1; >= 1.8x: <= 0.556), met when the interval lies below it, missed when above.

    .venv/bin/python benchmarks/bench_distill.py [--sentences 256] [--max-seq-len 128] [--steps 10] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from lib.common.device import resolve_precision  # noqa: E402
from lib.common.timing import seconds_each
from lib.distill.cache import TeacherCache, target_divergence
from lib.distill.data import build_datasets
from lib.distill.eval import encode, speed_table
from lib.distill.models import StudentShape, assistant_path, ensure_teacher, load_encoder, make_student
from lib.distill.train import DistillConfig, distill  # noqa: E402
from lib.metrics.paired import judge_ratio, ratio_text


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def fused_vs_plain(teacher, corpus: list[str], args) -> None:
    """3x384 MiniLM steps/s with the teacher's targets cached: fused vs non-fused AdamW, `--repeats` rounds of both."""
    n = args.optimizer_steps
    texts = corpus[: n * 32]
    cache = TeacherCache(teacher, texts, 64)
    base = dict(steps=n, batch_size=32, max_seq_len=64, seed=args.seed)

    def run(fused: bool | None = None):
        cfg = DistillConfig(**base) if fused is None else DistillConfig(**base, fused=fused)
        distill(cache, make_student(teacher.tokenizer, StudentShape(3), seed=args.seed), texts, cfg, progress=False)

    run()  # fills the cache: every later run reads targets only
    times = seconds_each({"fused": lambda: run(True), "non-fused": lambda: run(False)}, args.repeats)
    judged = judge_ratio(times["fused"], times["non-fused"], 1.0)
    print(
        f"\nAdamW on cached targets (3x384, batch 32, max_seq_len 64, {n} steps, median of {args.repeats} rounds, "
        f"threads {torch.get_num_threads()}): fused {n / statistics.median(times['fused']):.2f} steps/s, non-fused "
        f"{n / statistics.median(times['non-fused']):.2f} steps/s; fused / non-fused time (target <= 1: faster): "
        f"{ratio_text(judged)}; peak RSS {peak_rss_mib():.0f} MiB"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=128)
    ap.add_argument("--max-seq-len", type=int, default=128, help="the paper's GLUE length; short titles are ~8 tokens")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10, help="distillation steps timed per student")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=5, help="paired rounds behind each speed target's verdict")
    ap.add_argument(
        "--precision", default="auto", help="teacher precision for distillation targets (lib.common.device)"
    )
    ap.add_argument("--skip-steps", action="store_true", help="skip the distillation steps/s part")
    ap.add_argument(
        "--optimizer-steps",
        type=int,
        default=20,
        help="steps per timing of the fused vs non-fused AdamW comparison (0 skips it)",
    )
    args = ap.parse_args(argv)

    data = build_datasets(
        args.seed,
        transfer_sentences=max(args.sentences, args.batch_size * args.steps),
        task_train=24,
        task_eval=12,
        fidelity_sentences=4,
    )
    texts = sorted(data["transfer"], key=len)[-args.sentences :]  # the longest sentences: positions near max_seq_len
    teacher = load_encoder(ensure_teacher(), "teacher")
    assistant = load_encoder(assistant_path(), "assistant")
    print(
        f"torch threads: {torch.get_num_threads()}; {len(texts)} sentences, max_seq_len {args.max_seq_len}, "
        f"batch {args.batch_size}"
    )
    speed = speed_table(teacher, assistant, texts, args.max_seq_len, args.batch_size, repeats=2)
    speed["sentences_per_s"] = 1000 / speed.s_per_1000
    print(speed.round(2).to_string(index=False))
    student6 = make_student(teacher.tokenizer, StudentShape(6), seed=args.seed)
    times = seconds_each(
        {
            "teacher": lambda: encode(teacher, texts, args.max_seq_len, args.batch_size),
            "6x384": lambda: encode(student6, texts, args.max_seq_len, args.batch_size),
        },
        args.repeats,
    )
    judged = judge_ratio(times["6x384"], times["teacher"], 0.2)
    print(
        f"6x384 time / teacher's over {args.repeats} paired rounds (target <= 0.2, i.e. >= 5x; paper Table 4: 5.3x): "
        f"{ratio_text(judged)}"
    )

    prec = resolve_precision(args.precision, "cpu")
    print(f"\nteacher targets: precision {args.precision!r} -> {prec.name}: {prec.reason}")
    if prec.name == "fp32":
        print("  reporting float32 only (teacher sentences/s above)")
    else:
        last = teacher.num_layers - 1
        target_divergence(teacher, texts[:4], [last], 12, args.max_seq_len, precision=prec)  # warm-up, both paths
        before = peak_rss_mib()
        rounds = [
            target_divergence(teacher, texts, [last], 12, args.max_seq_len, precision=prec, batch_size=args.batch_size)
            for _ in range(args.repeats)
        ]
        div = rounds[-1]
        low, fp32 = [d["seconds_low"] for d in rounds], [d["seconds_fp32"] for d in rounds]
        judged = judge_ratio(low, fp32, round(1 / 1.8, 3))
        print(
            f"  fp32 {len(texts) / statistics.median(fp32):.1f} sentences/s, {prec.name} "
            f"{len(texts) / statistics.median(low):.1f} sentences/s; {prec.name} time / fp32 time (target <= "
            f"{judged['target']}, i.e. >= 1.8x): {ratio_text(judged)}"
        )
        print(
            f"  KL(fp32 || {prec.name} attention rows, last layer) {div['kl_att']:.2e}, value relative error "
            f"{div['value_rel_err']:.2e}; process peak RSS {peak_rss_mib():.0f} MiB (before {before:.0f})"
        )
    if args.optimizer_steps:
        fused_vs_plain(teacher, data["transfer"], args)
    if args.skip_steps:
        return 0

    print(
        "\ndistillation steps/s (teacher forward + student forward/backward, batch "
        f"{args.batch_size // 2}, max_seq_len {args.max_seq_len}):"
    )
    ref = None
    for m in (6, 4, 3):
        st = make_student(teacher.tokenizer, StudentShape(m), seed=args.seed)
        cfg = DistillConfig(
            steps=args.steps, batch_size=args.batch_size // 2, max_seq_len=args.max_seq_len, seed=args.seed
        )
        t0 = time.perf_counter()
        distill(teacher, st, texts, cfg, progress=False)
        rate = args.steps / (time.perf_counter() - t0)
        ref = ref or rate
        print(
            f"  {m}x384 MiniLM: {rate:.2f} steps/s ({rate / ref:.2f}x the 6x384 rate); "
            f"peak RSS {peak_rss_mib():.0f} MiB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
