"""Process-group plumbing for torchrun jobs: set-up and tear-down (gloo on CPU, nccl on CUDA), DDP wrapping,
reductions over ranks, and a local multi-process launcher."""

from __future__ import annotations

import os
import resource
import socket
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

from lib.common.device import get_device
from lib.common.runinfo import UNREADABLE, unreadable_reason

TIMEOUT_S = 600  # collectives of a stuck or dead rank fail after this, instead of hanging the job


@dataclass
class Dist:
    """This process's place in the job: rank in 0..world-1, its device, and whether a process group exists."""

    rank: int = 0
    world: int = 1
    device: torch.device = torch.device("cpu")
    group: bool = False

    def barrier(self) -> None:
        if self.group:
            dist.barrier()


def setup(device: str = "cpu", timeout_s: float = TIMEOUT_S) -> Dist:
    """Join the job torchrun (or a test) described in the environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
    MASTER_PORT); without WORLD_SIZE > 1 a single process without a group. Backend: nccl for CUDA, gloo for CPU."""
    dev = get_device(device)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1 and not dist.is_initialized():
        return Dist(0, 1, dev, False)
    if dev.type == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        if local >= torch.cuda.device_count():
            raise RuntimeError(
                f"LOCAL_RANK={local} but only {torch.cuda.device_count()} GPU(s) are visible; start at "
                f"most that many processes per node (torchrun --nproc_per_node)"
            )
        dev = torch.device("cuda", local)
        torch.cuda.set_device(dev)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo", timeout=timedelta(seconds=timeout_s))
    return Dist(dist.get_rank(), dist.get_world_size(), dev, True)


def teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def wrap_for_ranks(module: torch.nn.Module, d: Dist, find_unused: bool = False):
    if not d.group:
        return module
    return DDP(
        module, device_ids=[d.device.index] if d.device.type == "cuda" else None, find_unused_parameters=find_unused
    )


def mean_over_ranks(values: dict[str, float], d: Dist) -> dict[str, float]:
    """Per-rank contributions already weighted by W / G -> their global mean (sum over ranks / W)."""
    if not d.group:
        return values
    t = torch.tensor(list(values.values()), dtype=torch.float64, device=d.device)
    dist.all_reduce(t)
    return dict(zip(values, (t / d.world).tolist()))


def peak_memory_mb(device) -> float:
    """Peak resident memory of this process (CPU, from the kernel) or peak allocated CUDA memory, in MB."""
    if torch.device(device).type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _local_worker(rank: int, world: int, port: int, job, args: tuple, device: str, timeout_s: float, out: str) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank)
    )
    torch.set_num_threads(1)
    d = setup(device, timeout_s)
    try:
        torch.save(job(d, *args), Path(out) / f"rank{rank}.pt")
    finally:
        teardown()


def run_local(job, args: tuple = (), world: int = 2, device: str = "cpu", timeout_s: float = 120) -> list:
    """job(Dist, *args) on `world` processes of this machine (torch.multiprocessing.spawn, a free port), for tests and
    benchmarks; returns each rank's result: tensors and plain values (numbers, strings, lists and dicts of them), read
    back with torch.load(weights_only=True), so a result holding any other object, which unpickling would run as code,
    is refused. A rank's exception is raised here, naming that rank, after the others were stopped. `job` must be
    importable (a module-level function)."""

    with tempfile.TemporaryDirectory() as out:
        mp.spawn(_local_worker, args=(world, free_port(), job, args, device, timeout_s, out), nprocs=world, join=True)
        return [rank_result(Path(out) / f"rank{r}.pt", r, job) for r in range(world)]


def rank_result(path: Path, rank: int, job) -> object:
    """What `job` returned on `rank`, saved by its process to `path`: tensors and plain values only (weights_only)."""
    try:
        return torch.load(path, weights_only=True)
    except UNREADABLE as e:
        raise RuntimeError(
            f"the result of {getattr(job, '__name__', job)} on rank {rank} cannot be read back: "
            f"{unreadable_reason(e)}; return tensors and plain values (numbers, strings, lists and "
            f"dicts of them) from the job"
        ) from None
