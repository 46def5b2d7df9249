"""Data parallelism (lib.run.distributed) on CPU: gloo, 2 processes (torch.multiprocessing.spawn, and torchrun itself
for the failure and command-line tests), tiny GAT models and tiny BERT students.

Equivalence tolerance: TOL = 1e-5 absolute on every parameter after several AdamW steps (2 ranks sum their
gradients in another order than 1 process); a resumed run must match an uninterrupted one bit for bit. One
exception, stated where it is checked: BERT's attention key biases, whose true gradient is 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from lib.linkpred.config import TrainConfig
from lib.linkpred.data import synthetic_graph
from lib.linkpred.model import ModelConfig
from lib.linkpred.train import train_model
from lib.run.distributed import distill as distill_on_ranks
from lib.run.distributed import embed_shard, main, train_gat
from lib.run.ranks import Dist, run_local, setup

TOL = 1e-5
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
MODEL_CFG = ModelConfig(
    in_channels=16, gat_hidden=16, gat_out=8, gat_levels=1, gat_heads=2, gat_dropout=0.5
)  # dropout on: per-example seeds make it rank-independent
CFG = TrainConfig(epochs=2, lr=1e-2, log_aauc=False, log_eval=False)


def graphs(n=5):
    # 5 graphs at a global batch of 4: the second step of each epoch has 1 graph, so rank 1 gets none
    return [synthetic_graph(30, 80, 16, seed=i, graph_id=f"g{i}") for i in range(n)]


def max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def _gat(d, ckpt, per_rank_dir, max_steps=None, ckpt_every=1):
    out = Path(ckpt) / f"rank{d.rank}" if per_rank_dir else Path(ckpt)
    model, res = train_gat(
        "gat_model",
        MODEL_CFG,
        graphs(),
        replace(CFG, graphs_per_step=4),
        d,
        out_dir=out,
        ckpt_every=ckpt_every,
        max_steps=max_steps,
    )
    return {"state": model.state_dict(), "steps": res["steps"], "loss": [h["loss"] for h in res["history"]]}


def test_gat_one_process_at_one_graph_is_the_notebook_step():
    model, _ = train_model("gat_model", MODEL_CFG, graphs(), [], CFG, progress=False)
    mine, _ = train_gat("gat_model", MODEL_CFG, graphs(), replace(CFG, graphs_per_step=1), Dist())
    assert max_diff(model.state_dict(), mine.state_dict()) == 0.0


def test_gat_batch_of_one_graph_at_a_time_stopped_mid_epoch_resumes_from_last_pt(tmp_path):
    """One process, a global batch of 2, last.pt every step: killed after 2 steps (mid-epoch 1), resumed to the end
    — the same parameters as an uninterrupted run; each epoch's end also writes its epoch_<e>.pt."""
    two = replace(CFG, graphs_per_step=2)
    full, _ = train_gat("gat_model", MODEL_CFG, graphs(), two, Dist())
    train_gat("gat_model", MODEL_CFG, graphs(), two, Dist(), out_dir=tmp_path, ckpt_every=1, max_steps=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]
    again, res = train_gat("gat_model", MODEL_CFG, graphs(), two, Dist(), out_dir=tmp_path, ckpt_every=1)
    assert res["steps"] == 4 and max_diff(full.state_dict(), again.state_dict()) == 0.0  # 2 epochs x 3 steps - 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch_1.pt", "epoch_2.pt", "last.pt"]


TITLES = [f"Title number {i}" for i in range(30)] + ["Water", "Climate change"]


def _suite(d, tmp):
    """Every 2-rank job of this file in one pair of processes (starting processes is what costs here)."""
    tmp = Path(tmp)
    return {
        "gat": _gat(d, tmp / "ck", True),  # each rank is given its own checkpoint folder
        "gat_part": _gat(d, tmp / "b", False, 3, 2),  # stopped after 3 steps, checkpoints every 2
        "gat_part_ck": _listing(tmp / "b", d),
        "gat_again": _gat(d, tmp / "b", False),  # a fresh model and optimiser, resumed from last.pt
        "distill": _distill(d, tmp, tmp / "dck"),
        "embed": _embed(d, TITLES + TITLES[:5], tmp / "store"),
    }


def _listing(folder, d):
    d.barrier()  # rank 0 wrote it
    return sorted(p.name for p in Path(folder).iterdir())


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    from lib.embed.encoder import load_model
    from lib.embed.store import embed_titles, open_store

    tmp = tmp_path_factory.mktemp("ranks")
    model = load_model()
    # stored before, as the ranks encode (batches of 8): nobody encodes it again
    embed_titles(["Water"], model, open_store(model, tmp / "store"), batch_size=8, progress=False)
    t0 = time.perf_counter()
    res = run_local(_suite, (str(tmp),), timeout_s=60)
    print(f"2-rank jobs: {time.perf_counter() - t0:.1f} s")
    return tmp, res


@pytest.mark.slow
def test_gat_two_ranks_equal_one_rank_at_twice_the_batch_and_only_rank0_writes(two_ranks):
    one, res1 = train_gat("gat_model", MODEL_CFG, graphs(), replace(CFG, graphs_per_step=4), Dist())
    tmp_path, (r0, r1) = two_ranks[0], [r["gat"] for r in two_ranks[1]]
    assert r0["steps"] == r1["steps"] == 4 == res1["steps"]  # 2 epochs x (4 graphs + 1 graph)
    assert max_diff(r0["state"], r1["state"]) == 0.0  # DDP keeps the replicas identical
    assert max_diff(one.state_dict(), r0["state"]) < TOL
    assert r0["loss"] == pytest.approx([h["loss"] for h in res1["history"]], abs=1e-6)
    # each rank was given its own folder: only rank 0's holds anything
    assert sorted(p.name for p in (tmp_path / "ck" / "rank0").iterdir()) == ["epoch_1.pt", "epoch_2.pt", "last.pt"]
    assert not (tmp_path / "ck" / "rank1").exists()


def test_gat_stopped_run_resumes_to_the_same_parameters(two_ranks):
    r0 = two_ranks[1][0]
    full, part, again = r0["gat"], r0["gat_part"], r0["gat_again"]
    assert part["steps"] == 3 and max_diff(part["state"], full["state"]) > 0
    # step 3 (the first of epoch 2) was not saved: last.pt holds epoch 1's end and the resumed run redoes step 3
    assert r0["gat_part_ck"] == ["epoch_1.pt", "last.pt"]
    assert again["steps"] == 2
    assert max_diff(again["state"], full["state"]) == 0.0


# ---------------------------------------------------------------- distillation


def _students(vocab_dir, who="main"):
    from tests.test_distill import make_tokenizer, tiny_encoder

    tok = make_tokenizer(Path(vocab_dir), name=f"vocab_{who}.txt")  # one file per process: no half-written reads
    return tiny_encoder(tok, layers=2, hidden=32, heads=4, seed=1, name="teacher"), tiny_encoder(
        tok, layers=2, hidden=16, heads=2, seed=2, name="student"
    )  # no dropout (see lib.run.distributed)


def _dcfg():
    from lib.distill.train import DistillConfig

    return DistillConfig(steps=4, batch_size=4, max_seq_len=16, lr=1e-3, relation_heads=4, seed=0)


def _distill(d, vocab_dir, ckpt):
    from tests.test_distill import CORPUS

    teacher, student = _students(vocab_dir, f"rank{d.rank}")
    res = distill_on_ranks(teacher, student, CORPUS, _dcfg(), d, out_dir=Path(ckpt) / f"rank{d.rank}", ckpt_every=2)
    return {"state": student.model.state_dict(), "loss": [r["loss"] for r in res["rows"]]}


def test_distill_two_ranks_equal_one_rank_at_twice_the_batch(two_ranks):
    from lib.distill.train import distill
    from tests.test_distill import CORPUS

    tmp_path, (r0, r1) = two_ranks[0], [r["distill"] for r in two_ranks[1]]
    teacher, student = _students(tmp_path)
    init = {k: v.clone() for k, v in student.model.state_dict().items()}
    ref = distill(teacher, student, CORPUS, _dcfg(), progress=False)
    assert max_diff(r0["state"], r1["state"]) == 0.0
    # A key bias adds q·b to every score of a softmax row, so its true gradient is 0 and what backward returns is
    # rounding noise, which AdamW scales up to about lr per step whichever way the noise was summed.
    ref_state, cfg = student.model.state_dict(), _dcfg()
    key_bias = {k for k in ref_state if k.endswith("attention.self.key.bias")}
    assert (
        max_diff(
            {k: v for k, v in ref_state.items() if k not in key_bias},
            {k: v for k, v in r0["state"].items() if k not in key_bias},
        )
        < TOL
    )
    assert max_diff({k: ref_state[k] for k in key_bias}, {k: r0["state"][k] for k in key_bias}) <= cfg.lr * cfg.steps
    assert r0["loss"] == pytest.approx(ref["loss"].tolist(), abs=1e-5)
    # the last layer's attention output and FFN get no gradient from L_AT / L_VR: DDP (find_unused_parameters) must
    # leave their .grad None, as one process does, or AdamW would decay them
    unused = [k for k in init if torch.equal(init[k], ref_state[k])]
    assert len(unused) == 10 and all(torch.equal(r0["state"][k], init[k]) for k in unused)
    assert (tmp_path / "dck" / "rank0" / "last.pt").is_file() and not (tmp_path / "dck" / "rank1").exists()


# ---------------------------------------------------------------- embedding


def _embed(d, titles, store):
    from lib.embed.encoder import load_model

    return embed_shard(titles, load_model(), store, d, batch_size=8, chunk_size=8)


def test_embedding_store_filled_by_two_ranks_encodes_each_title_once(two_ranks):
    from lib.embed.encoder import load_model
    from lib.embed.store import open_store

    tmp_path, (r0, r1) = two_ranks[0], [r["embed"] for r in two_ranks[1]]
    model = load_model()
    assert r0["missing"] == r1["missing"] == 31
    assert r0["newly_encoded"] + r1["newly_encoded"] == 31 and abs(r0["newly_encoded"] - r1["newly_encoded"]) <= 1
    again = open_store(model, tmp_path / "store")
    assert again._rows == len(again) == 32  # no title in two chunks
    assert again.num_chunks == 1 + r0["chunks_written"] + r1["chunks_written"]  # distinct chunk files


# ---------------------------------------------------------------- torchrun: failures and the command line


def _env():
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
    }


@pytest.mark.slow  # torchrun starts two ranks
def test_a_failing_rank_ends_the_job_with_its_error(tmp_path):
    script = tmp_path / "fail.py"
    script.write_text(
        textwrap.dedent("""
        import torch, torch.distributed as dist
        from torch.distributed.elastic.multiprocessing.errors import record
        from lib.run.ranks import setup

        @record
        def main():
            d = setup("cpu", timeout_s=30)
            if d.rank == 1:
                raise RuntimeError("rank 1 fails on purpose")
            dist.all_reduce(torch.zeros(1))  # rank 0 would wait here for ever without torchrun and the timeout

        main()
    """)
    )
    t0 = time.perf_counter()
    r = subprocess.run(
        [TORCHRUN, "--standalone", "--nproc_per_node", "2", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        cwd=tmp_path,
    )
    assert r.returncode != 0
    assert "rank 1 fails on purpose" in r.stderr
    assert time.perf_counter() - t0 < 90


@pytest.mark.slow
def test_command_line_killed_under_torchrun_resumes_to_the_one_process_result(tmp_path):
    """SIGKILL to the whole torchrun job after its first checkpoint, a re-run, and the same command in one process
    (no torchrun) at the same global batch as the reference."""
    import json
    import signal

    args = [
        "gat",
        "--synthetic",
        "3",
        "--params",
        "params/tiny.yaml",
        "params/cpu.yaml",
        "-p",
        "gat_epochs=3",
        "-p",
        "gat_hidden=16",
        "-p",
        "gat_levels=1",
        "--ckpt-every",
        "1",
        "--global-batch",
        "2",
    ]
    cmd = [
        TORCHRUN,
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "lib.run.distributed",
        *args,
        "--out",
        str(tmp_path / "run"),
    ]
    root = Path(__file__).parents[1]
    job = subprocess.Popen(
        cmd, env=_env(), cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        t0 = time.perf_counter()
        while not (tmp_path / "run" / "last.pt").exists() and job.poll() is None and time.perf_counter() - t0 < 120:
            time.sleep(0.02)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)
    assert not (tmp_path / "run" / "metrics.json").exists(), "the job ended before it could be killed"
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=_env(), cwd=root)
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert m["world"] == 2 and m["global_batch"] == 2 and len(m["history"]) == 6 > m["steps"]  # 3 epochs x 2 steps
    assert [v["epoch"] for v in m["val"]] == [1, 2, 3] and m["val"][0]["auc"] is not None  # rank 0 validated
    assert sorted(p.name for p in (tmp_path / "run").iterdir() if not p.name.startswith(".")) == [
        "epoch_1.pt",
        "epoch_2.pt",
        "epoch_3.pt",
        "last.pt",
        "metrics.json",
    ]
    cwd = os.getcwd()
    try:
        os.chdir(root)
        assert main([*args, "--out", str(tmp_path / "one")]) == 0
    finally:
        os.chdir(cwd)
    two, one = (torch.load(tmp_path / f / "epoch_3.pt", weights_only=True)["model"] for f in ("run", "one"))
    assert max_diff(two, one) < TOL


def test_cuda_without_a_gpu_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    with pytest.raises(RuntimeError, match="no CUDA GPU is visible"):
        setup("cuda")
