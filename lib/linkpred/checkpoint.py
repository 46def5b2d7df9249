"""Stage 3 checkpoints: state_dicts + plain config + metrics per epoch, and the fingerprint of the data
they were trained on (a checkpoint is reused only for the same data)."""
from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path
from typing import Iterable

import torch
from torch_geometric.data import Data

from lib.common.paths import atomic_write_bytes
from lib.common.runinfo import read_checkpoint
from lib.linkpred.config import build_model
from lib.linkpred.protocols import EvalTask


def save_checkpoint(path: Path, model, optimizer, config: dict, epoch: int, history: list, val: list) -> Path:
    """state_dicts + plain config + metrics (loadable with torch.load(weights_only=True); no pickled objects)."""

    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "config": config,
                "epoch": epoch, "history": history, "val": val}, buf)
    return atomic_write_bytes(path, buf.getvalue())


class CheckpointLost(FileNotFoundError):
    """A selected checkpoint could not be read; it was moved aside and the stage that writes it rebuilds it."""


def load_checkpoint(path: str | Path, device: str = "cpu") -> tuple[torch.nn.Module, dict]:
    """(model with the checkpoint's weights, the checkpoint dict). A file that cannot be read is moved aside
    (lib.common.runinfo.read_checkpoint) and CheckpointLost says how notebook 03 rebuilds it."""
    ck = read_checkpoint(path, device, "checkpoint", "notebook 03 retrains it from the checkpoint before it")
    if ck is None:
        raise CheckpointLost(f"checkpoint {path} is missing or was damaged (moved aside); run notebook 03 on its run "
                             f"folder again (runner: --force --notebooks 03 and the notebooks after it), which "
                             f"retrains that epoch from the checkpoints it keeps")
    model = build_model(ck["config"]["kind"], ck["config"]["model"])
    model.load_state_dict(ck["model"])
    return model.to(device), ck


def best_epoch_weights(ckpt_dir: Path, epoch: int, device="cpu") -> dict | None:
    """The model state_dict of `ckpt_dir`/epoch_<epoch>.pt; None when it is missing or damaged (then moved aside).
    Training resumes from the latest checkpoint, so when the selected epoch's weights are lost the checkpoints after
    it (and last.pt) are deleted as well: the next train_model call resumes from the epoch before it and retrains
    the selected one (the same weights: every step's randomness derives from the seed, epoch and step)."""
    ck = read_checkpoint(Path(ckpt_dir) / f"epoch_{epoch}.pt", device, "best-epoch checkpoint",
                         f"epochs from {epoch} on are trained again from the checkpoint before it")
    if ck is not None:
        return ck["model"]
    for e, path in epoch_checkpoints(ckpt_dir).items():
        if e > epoch:
            path.unlink()
    (Path(ckpt_dir) / "last.pt").unlink(missing_ok=True)
    return None


def epoch_checkpoints(ckpt_dir: Path) -> dict[int, Path]:
    out = {}
    for p in Path(ckpt_dir).glob("epoch_*.pt"):
        m = re.fullmatch(r"epoch_(\d+)\.pt", p.name)
        if m:
            out[int(m.group(1))] = p
    return dict(sorted(out.items()))


def current_train(train: dict) -> dict:
    """The one read-time mapping of a checkpoint's training config to today's TrainConfig fields: a checkpoint from
    before `precision` carries `amp` (True: float16 autocast), one from before `matched_negative_share` trained
    without matched negatives, and one from before the distance-2 negatives were called `dist2` names their share
    `hard_negative_share`."""
    out = {k: v for k, v in train.items() if k not in ("amp", "hard_negative_share")}
    if "hard_negative_share" in train:
        out["dist2_negative_share"] = train["hard_negative_share"]
    out.setdefault("precision", "fp16" if train.get("amp") else "fp32")
    out.setdefault("matched_negative_share", 0.0)
    return out


def _comparable(config: dict) -> dict:
    """A checkpoint's config minus what may change on resume (the number of epochs), in today's fields
    (current_train); checkpoints from before `global_batch` took one graph per step."""
    train = {k: v for k, v in current_train(config["train"]).items() if k != "epochs"}
    return {"global_batch": 1, **config, "train": train}  # checkpoints from before the batch was recorded took one graph


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
        for part in (t.mp_edge_index, t.pos, t.neg, t.neg_dist2, *(p for pair in t.per_positive.values() for p in pair)):
            h.update(part.numpy().tobytes())
    return h.hexdigest()[:16]
