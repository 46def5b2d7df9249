"""Benchmark encoder shapes: titles/s of stage 2's encoder path for all-MiniLM-L6-v2's shape and smaller students'
shapes (fewer layers, a narrower feed-forward block), on the CPU or a GPU, each ratio measured against the reference
shape in the same run.

    .venv/bin/python benchmarks/bench_encoder_shapes.py                       # CPU, 1 thread, 5 alternating rounds
    .venv/bin/python benchmarks/bench_encoder_shapes.py --check-weights       # also the installed all-MiniLM-L6-v2
    python benchmarks/bench_encoder_shapes.py --device cuda --precision fp32 bf16 --batch 256 1024 --repeat-titles 20

Speed depends on an encoder's shape, not its weights, so each shape is a randomly initialised BERT with
all-MiniLM-L6-v2's config and vocabulary (only `num_hidden_layers` and `intermediate_size` change), saved as a
sentence-transformers folder (mean pooling, normalised) and loaded by `lib.embed.encoder.load_model` like any model_dir,
then timed by `lib.embedders.evaluate.titles_per_second` (the encode call notebook 05b times: tokenising included).
This needs only the model's config.json and tokenizer files (`--model-files`, default the installed all-MiniLM-L6-v2),
so it runs where the 88 MB of weights cannot travel. `--check-weights` also times the installed all-MiniLM-L6-v2 itself
beside its random copy: equal rates show that the copy stands for it. Titles: Wikispeedia's 4,604 article titles,
`--repeat-titles` times over (a GPU encodes them in milliseconds). Shapes are `layers/ffn`: `6/1536` is
all-MiniLM-L6-v2's and the reference of every ratio; `3/1024` is notebook 05b's FFN-1024 student.
Rounds alternate the shapes so a noisy machine slows them alike; medians are reported: titles/s of the whole call,
titles/s of the model alone (the call less the time of tokenising the same titles, which can bound a GPU), and peak
memory (GPU: allocated by torch during one encode call; CPU: resident growth).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from bench_embed import PeakRSS  # same folder: the peak-RSS sampler
from sentence_transformers import SentenceTransformer, models
from transformers import BertConfig, BertModel, BertTokenizerFast

from lib.common.device import get_device
from lib.crawl.wikispeedia import wikispeedia_snapshot
from lib.embed.encoder import default_model_dir, load_model, tokenize
from lib.embedders.evaluate import titles_per_second

REFERENCE_SHAPE = "6/1536"
MAX_SEQ_LEN = 64  # as notebook 05b's encoders


def shape_folder(shape: str, files: Path, out: Path, seed: int) -> Path:
    """A sentence-transformers folder of a random BERT of `shape` (`layers/ffn`) with the config and tokenizer in
    `files`: Transformer -> mean pooling -> normalise, as all-MiniLM-L6-v2."""
    layers, ffn = (int(x) for x in shape.split("/"))
    raw = out / f"raw_{layers}_{ffn}"
    cfg = BertConfig.from_json_file(str(files / "config.json"))
    cfg.num_hidden_layers, cfg.intermediate_size = layers, ffn
    torch.manual_seed(seed)
    BertModel(cfg).save_pretrained(raw)
    BertTokenizerFast.from_pretrained(str(files)).save_pretrained(raw)  # its own tokenizer: the same token counts
    word = models.Transformer(str(raw), max_seq_length=MAX_SEQ_LEN)
    st = SentenceTransformer(
        modules=[word, models.Pooling(word.get_embedding_dimension(), "mean"), models.Normalize()], device="cpu"
    )
    folder = out / f"shape_{layers}_{ffn}"
    st.save(str(folder))
    shutil.rmtree(raw)
    return folder


def one_call_rate(model, titles: list[str], threads: int, batch: int) -> float:
    """Titles/s of one timed encode call (after titles_per_second's warm-up batch); the rounds are this script's."""
    return titles_per_second({"model": model}, titles, 1, threads, batch)["model"]


def timed(model, titles: list[str], device: torch.device, threads: int, batch: int) -> tuple[float, float, float]:
    """(titles/s, titles/s of the model alone, peak MiB) of one encode call. The model's share is the call's time
    less that of tokenising the same titles (lib.embed.encoder.tokenize, timed right after), nan where that leaves
    under a tenth of the call: on a GPU the tokenizer and the host can bound the call, and this says how much of it
    the shape decides. Peak: GPU memory torch allocated, or resident growth on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        rate = one_call_rate(model, titles, threads, batch)
        mib = (torch.cuda.max_memory_allocated() - base) / 2**20
    else:
        with PeakRSS() as mem:
            rate = one_call_rate(model, titles, threads, batch)
        mib = mem.mib
    t0 = time.perf_counter()
    tokenize(model, titles)
    call, tokenizing = len(titles) / rate, time.perf_counter() - t0
    model_seconds = call - tokenizing
    # under a tenth of the call, the difference is the tokenizer's own noise: no model rate to give
    return rate, len(titles) / model_seconds if model_seconds > 0.1 * call else float("nan"), mib


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help="cpu or cuda (a clear error when no GPU is visible)")
    ap.add_argument("--precision", nargs="+", default=["fp32"], help="fp32, bf16, fp16 (lib.common.compute)")
    ap.add_argument("--batch", type=int, nargs="+", default=[256], help="encode batch sizes")
    ap.add_argument(
        "--shapes",
        nargs="+",
        default=[REFERENCE_SHAPE, "3/1536", "3/1024", "2/1024", "1/1024"],
        help="layers/ffn; the first must be 6/1536, the reference",
    )
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (the published ratios use 1)")
    ap.add_argument("--reps", type=int, default=5, help="alternating rounds; the median is kept")
    ap.add_argument("--repeat-titles", type=int, default=1, help="times the 4,604 titles are encoded per call")
    ap.add_argument("--model-files", default="", help="folder with all-MiniLM-L6-v2's config.json and tokenizer files")
    ap.add_argument("--check-weights", action="store_true", help="also time the installed all-MiniLM-L6-v2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default="", help="also write the figures to this JSON file")
    args = ap.parse_args()
    if args.shapes[0] != REFERENCE_SHAPE:
        ap.error(f"--shapes must start with {REFERENCE_SHAPE}, the reference every ratio divides by")
    try:
        device = get_device(args.device)
    except RuntimeError as e:  # no GPU visible: one line, not a traceback
        ap.error(str(e))
    files = Path(args.model_files) if args.model_files else default_model_dir()
    titles = sorted(wikispeedia_snapshot().links) * args.repeat_titles
    print(
        f"{len(titles)} titles | {device} | torch {torch.__version__} | threads {args.threads}"
        + (f" | {torch.cuda.get_device_name(device)}" if device.type == "cuda" else "")
    )
    results = {
        "device": str(device),
        "card": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "titles": len(titles),
        "threads": args.threads,
        "reps": args.reps,
        "rows": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        folders = {s: shape_folder(s, files, Path(tmp), args.seed) for s in args.shapes}
        if args.check_weights:
            folders["all-MiniLM-L6-v2 weights"] = None
        for precision in args.precision:
            loaded = {name: load_model(f, device=args.device, precision=precision) for name, f in folders.items()}
            for batch in args.batch:
                rates = {n: [] for n in loaded}
                model_rates = {n: [] for n in loaded}
                peaks = {n: 0.0 for n in loaded}
                for name, m in loaded.items():  # warm-up: kernels chosen, allocator grown
                    one_call_rate(m, titles[:2048], args.threads, batch)
                for r in range(args.reps):
                    for name, m in loaded.items():
                        rate, model_rate, mib = timed(m, titles, device, args.threads, batch)
                        rates[name].append(rate)
                        model_rates[name].append(model_rate)
                        peaks[name] = max(peaks[name], mib)
                    print(
                        f"  {precision} batch {batch} round {r + 1}/{args.reps}: "
                        + ", ".join(f"{n} {v[-1]:.0f}/s" for n, v in rates.items())
                    )
                ref = statistics.median(rates[REFERENCE_SHAPE])
                model_ref = statistics.median(model_rates[REFERENCE_SHAPE])
                for name in loaded:
                    med = statistics.median(rates[name])
                    model_med = float(np.median(model_rates[name]))  # nan when any round had no model rate
                    results["rows"].append(
                        {
                            "encoder": name,
                            "precision": precision,
                            "batch": batch,
                            "titles_per_s": med,
                            "ratio": med / ref,
                            "model_titles_per_s": model_med,
                            "model_ratio": model_med / model_ref,
                            "peak_mib": peaks[name],
                            "rounds": rates[name],
                            "model_rounds": model_rates[name],
                        }
                    )
    print(
        f"\n{'encoder':26s} {'precision':>9s} {'batch':>5s} {'titles/s':>10s} {'x 6/1536':>8s} "
        f"{'model /s':>10s} {'x 6/1536':>8s} {'peak MiB':>9s}"
    )
    for row in results["rows"]:
        print(
            f"{row['encoder']:26s} {row['precision']:>9s} {row['batch']:5d} {row['titles_per_s']:10.0f} "
            f"{row['ratio']:8.2f} {row['model_titles_per_s']:10.0f} {row['model_ratio']:8.2f} {row['peak_mib']:9.1f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
