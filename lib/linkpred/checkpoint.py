"""Stage 3 checkpoints: state_dicts + plain config + metrics per epoch, and the fingerprint of the data
they were trained on (a checkpoint is reused only for the same data)."""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterable
from pathlib import Path

import torch
from torch_geometric.data import Data

from lib.common.errors import WikigatError
from lib.common.paths import atomic_write_bytes
from lib.common.tensorfiles import read_checkpoint
from lib.linkpred.config import build_model, stored_settings
from lib.linkpred.protocols import EvalTask


def save_checkpoint(path: Path, model, optimizer, config: dict, epoch: int, history: list, val: list) -> Path:
    """state_dicts + plain config + metrics (loadable with torch.load(weights_only=True); no pickled objects)."""

    buf = io.BytesIO()
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "config": config,
            "epoch": epoch,
            "history": history,
            "val": val,
        },
        buf,
    )
    return atomic_write_bytes(path, buf.getvalue())


class CheckpointLost(WikigatError, FileNotFoundError):
    """A selected checkpoint could not be read; it was moved aside and the stage that writes it rebuilds it."""


def load_checkpoint(path: str | Path, device: str = "cpu") -> tuple[torch.nn.Module, dict]:
    """(model with the checkpoint's weights, the checkpoint dict). A file that cannot be read is moved aside
    (lib.common.tensorfiles.read_checkpoint) and CheckpointLost says how notebook 03 rebuilds it."""
    ck = read_checkpoint(path, device, "checkpoint", "notebook 03 writes it again from the weights kept in last.pt")
    if ck is None:
        raise CheckpointLost(
            f"checkpoint {path} is missing or was damaged (moved aside); run notebook 03 on its run "
            f"folder again (runner: --force --notebooks 03 and the notebooks after it), which "
            f"writes it again from the weights kept in last.pt"
        )
    model = build_model(ck["config"]["kind"], stored_settings(ck["config"], f"checkpoint {path}")[0])
    model.load_state_dict(ck["model"])
    return model.to(device), ck


def epoch_file_readable(
    path: Path,
    what: str = "best-epoch checkpoint",
    consequence: str = "it is written again from the weights kept in last.pt",
) -> bool:
    """Whether the epoch checkpoint `path` (what notebooks 03b and 04 load) can be read; a damaged one is moved aside
    (lib.common.tensorfiles.read_checkpoint) with a warning naming `what` it is and the `consequence`: by default
    train_model writes it again from the weights its last.pt keeps."""
    return read_checkpoint(path, "cpu", what, consequence) is not None


def epoch_checkpoints(ckpt_dir: Path) -> dict[int, Path]:
    out = {}
    for p in Path(ckpt_dir).glob("epoch_*.pt"):
        m = re.fullmatch(r"epoch_(\d+)\.pt", p.name)
        if m:
            out[int(m.group(1))] = p
    return dict(sorted(out.items()))


def resumable_config(config: dict) -> dict:
    """A checkpoint's config minus what may change on resume: the number of epochs and what is logged, which changes
    no weight."""
    return {**config, "train": {k: v for k, v in config["train"].items() if k != "epochs" and not k.startswith("log_")}}


def data_fingerprint(graphs: Iterable[Data], tasks: Iterable[EvalTask] = ()) -> str:
    """sha256 over the graphs' ids, features and edges (and validation tasks' pairs of every negative set): the data a
    checkpoint was trained and selected on."""

    h = hashlib.sha256()
    for g in graphs:
        h.update(str(g.graph_id).encode())
        h.update(g.x.numpy().tobytes())
        h.update(g.edge_index.numpy().tobytes())
        if getattr(g, "held_out_pairs", None) is not None:  # they change the training negatives
            h.update(b"held_out" + g.held_out_pairs.numpy().tobytes())
    for t in tasks:  # every negative set: an epoch may be selected on any of them
        for part in (
            t.mp_edge_index,
            t.pos,
            *(p for d in t.negative_sets.values() for p in (d.pairs, d.owner) if p is not None),
        ):
            h.update(part.numpy().tobytes())
    return h.hexdigest()[:16]
