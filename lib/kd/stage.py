"""Stage 6 orchestration (notebook 06): a fine-tuned task teacher saved once, its logits cached on disk, the augmented
transfer set, the BiLSTM / small-BERT students each beside its undistilled control, and the probing table.

lib.kd.config holds the notebook's parameters (KdParams); lib.kd.train the losses, students and training loop;
lib.kd.augment the transfer-set rules; lib.kd.probing the tasks and the probe. Everything here is resumable: a finished
(task, student, method, seed) row is kept in `rows.csv` with the student's probing representations beside it, and is
not trained again.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import time
from collections.abc import Collection
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from lib.common import published
from lib.common.hashing import config_digest, text_key
from lib.common.paths import atomic_write_bytes, atomic_write_text, move_aside, read_rows
from lib.common.runinfo import load_json, refuse_other_settings, unreadable_reason
from lib.common.tensorfiles import read_checkpoint
from lib.common.timing import REPEATS, median_seconds
from lib.distill.data import load_vital_articles, split_ids, split_sentences
from lib.distill.eval import encode, linear_probe
from lib.distill.models import Encoder, encoder_identity
from lib.distill.stage import FOLDER_KINDS, folder_method
from lib.distill.train import (
    FinetuneConfig,
    TaskTargets,
    finetune_teacher,
    predict_logits,
)
from lib.kd import train
from lib.kd.augment import augment
from lib.kd.config import STUDENT_KINDS, KdError, KdParams

METHODS = ("kd", "control")  # control: same student, init and steps, hard-label CE on the labelled texts only


# ------------------------------------------------------------------------------------------------------ the teacher
def _trainable_keys(teacher: Encoder, layers: int) -> list[str]:
    n = teacher.num_layers
    return [
        k for k in teacher.model.state_dict() if any(k.startswith(f"encoder.layer.{i}.") for i in range(n - layers, n))
    ]


def teacher_task(d: dict, cfg: KdParams) -> tuple[TaskTargets, FinetuneConfig]:
    """The task teacher's labelled texts (one task's {"train", "val", "test"} frames) and fine-tuning settings."""
    n_classes = int(pd.concat([d[s].label for s in d]).max()) + 1
    return (
        TaskTargets(d["train"].text.tolist(), d["train"].label.to_numpy(), n_classes),
        FinetuneConfig(
            steps=cfg.kd_teacher_ft_steps,
            batch_size=cfg.kd_teacher_ft_batch_size,
            max_seq_len=cfg.kd_max_seq_len,
            lr=cfg.kd_teacher_ft_lr,
            layers=cfg.kd_teacher_ft_layers,
            seed=cfg.kd_seeds[0],
        ),
    )


def task_teacher(
    teacher: Encoder, task: TaskTargets, cfg: FinetuneConfig, folder: str | Path, progress: bool = True
) -> tuple[Encoder, bool]:
    """The teacher fine-tuned on `task` (lib.distill.train.finetune_teacher), saved once in `folder` and reloaded after.

    Only the fine-tuned top layers and the head are stored (about 57 MB for 2 of mpnet's layers, not 420 MB); the file
    is keyed by the teacher's weights, the task texts and labels and `cfg`, so another setting never reloads it.
    Returns (encoder with `.head`, whether it was reloaded).
    """
    key = config_digest(
        {
            "teacher": encoder_identity(teacher),
            "cfg": cfg.__dict__,
            "n_classes": task.n_classes,
            "texts": hashlib.sha256("\n".join(task.texts).encode()).hexdigest(),
            "labels": task.labels.tolist(),
        }
    )
    path = Path(folder) / f"teacher_ft_{key}.pt"
    saved = read_checkpoint(path, "cpu", "fine-tuned teacher", "the teacher is fine-tuned again")
    if saved is not None:
        model = copy.deepcopy(teacher.model)
        missing, unexpected = model.load_state_dict(saved["model"], strict=False)
        if unexpected or set(saved["model"]) != set(_trainable_keys(teacher, cfg.layers)):
            raise KdError(f"{path} does not hold this teacher's top {cfg.layers} layers; delete it to fine-tune again")
        ft = Encoder(model, teacher.tokenizer, teacher.kind, f"{teacher.name} fine-tuned", None)
        ft.head = nn.Linear(ft.hidden, task.n_classes).to(model.device)
        ft.head.load_state_dict(saved["head"])
        model.eval()
        ft.head.eval()
        return ft, True
    ft = finetune_teacher(teacher, task, cfg, progress)
    sd = ft.model.state_dict()
    buf = io.BytesIO()
    torch.save(
        {
            "model": {k: sd[k].cpu() for k in _trainable_keys(teacher, cfg.layers)},
            "head": {k: v.cpu() for k, v in ft.head.state_dict().items()},
        },
        buf,
    )
    atomic_write_bytes(path, buf.getvalue())
    return ft, False


class LogitCache:
    """Teacher logits per text on disk (one .npz of sha256 text keys [N] and float32 logits [N, C], rewritten
    atomically), so every student, seed and re-run reads the teacher's labels instead of running the teacher.

    `passes` counts the texts this object sent through the teacher.
    """

    def __init__(self, path: str | Path, n_classes: int):
        self.path, self.n_classes, self.passes = Path(path), n_classes, 0
        self.table: dict[str, np.ndarray] = {}
        if self.path.is_file():
            try:
                z = np.load(self.path)
                self.table = dict(zip(z["keys"].tolist(), z["logits"]))
            except (OSError, ValueError, KeyError, EOFError) as e:  # a damaged file is recomputed, not trusted
                move_aside(self.path, "teacher logits", unreadable_reason(e), "they are computed again")
                self.table = {}

    def logits(
        self, texts: list[str], teacher: Encoder, max_seq_len: int, batch_size: int = 64, progress: bool = False
    ) -> np.ndarray:
        """Logits [N, C] of `teacher.head` for `texts`, computing only the texts not cached yet."""
        keys = [text_key(t) for t in texts]
        todo = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in self.table))
        for i in tqdm(range(0, len(todo), 512), desc="teacher logits", disable=not progress or not todo, leave=False):
            chunk = todo[i : i + 512]
            with torch.no_grad():
                z = predict_logits(teacher, chunk, max_seq_len, batch_size)
            self.table.update(zip((text_key(t) for t in chunk), z.astype(np.float32)))
            self.passes += len(chunk)
            self._save()
        out = np.stack([self.table[k] for k in keys]) if keys else np.zeros((0, self.n_classes), np.float32)
        if out.shape[1:] != (self.n_classes,):
            raise KdError(f"{self.path} holds logits of {out.shape[1:]} classes, not {self.n_classes}; delete it")
        return out

    def _save(self) -> None:
        buf = io.BytesIO()
        np.savez(buf, keys=np.array(list(self.table), dtype="U64"), logits=np.stack(list(self.table.values())))
        atomic_write_bytes(self.path, buf.getvalue())


# ------------------------------------------------------------------------------------------------------------- data
def transfer_set(
    labelled: pd.DataFrame, cfg: KdParams, seed: int, mask_token: str, tagger=None
) -> tuple[list[str], np.ndarray]:
    """The labelled training texts followed by up to `augment_max` augmented ones (label NO_LABEL): texts [N],
    labels [N]."""
    texts, labels = labelled.text.tolist(), labelled.label.to_numpy(np.int64)
    if cfg.augment_max == 0:
        return texts, labels
    extra = augment(
        texts,
        cfg.augment_n_iter,
        cfg.augment_p_mask,
        cfg.augment_p_pos,
        cfg.augment_p_ng,
        seed=seed,
        tagger=tagger,
        mask_token=mask_token,
        max_sentences=cfg.augment_max,
    )
    return texts + extra, np.concatenate([labels, np.full(len(extra), train.NO_LABEL, np.int64)])


def probing_pool(n: int, seed: int = 0) -> list[str]:
    """`n` distinct vital-article lead sentences of the val and test articles (stage 5's split with `seed`), shuffled
    with `seed`: no student or teacher was trained on them."""
    arts = load_vital_articles()
    arts = arts[split_ids(len(arts), seed=seed) != "train"]
    pool = list(dict.fromkeys(s for t in arts.extract for s in split_sentences(t)))
    return [pool[i] for i in np.random.default_rng(seed).permutation(len(pool))[:n]]


# --------------------------------------------------------------------------------------------------------- students
def build_student(kind: str, teacher: Encoder, n_classes: int, cfg: KdParams, seed: int) -> train.Student:
    """A BiLSTM or small-BERT student on the teacher's wordpieces, embeddings started from the teacher's."""
    emb = train.teacher_wordpiece_embeddings(teacher)
    if kind == "bilstm":
        return train.BiLSTMStudent(
            emb,
            teacher.tokenizer,
            n_classes,
            embed_dim=cfg.bilstm_embed_dim,
            hidden=cfg.bilstm_hidden,
            fc=cfg.bilstm_fc,
            multichannel=cfg.bilstm_multichannel,
            seed=seed,
        )
    if kind == "bert":
        return train.BertStudent(
            teacher.tokenizer,
            n_classes,
            cfg.bert_layers,
            cfg.bert_hidden,
            cfg.bert_heads,
            cfg.bert_intermediate,
            teacher_embeddings=emb,
            seed=seed,
        )
    raise KdError(f"student kind {kind!r} is unknown; use one of {STUDENT_KINDS}")


def kd_config(kind: str, method: str, cfg: KdParams, seed: int, n_transfer: int, n_labelled: int) -> train.KDConfig:
    """The run's KDConfig. The control trains on the labelled texts only with CE, for as many steps as its KD twin."""
    soft = getattr(cfg, f"{kind}_soft")
    if method == "kd":
        return train.KDConfig(
            soft=soft,
            temperature=cfg.kd_soft_temperature,
            ce_weight=cfg.kd_ce_weight,
            epochs=cfg.kd_epochs,
            batch_size=cfg.kd_batch_size,
            lr=cfg.kd_lr,
            max_seq_len=cfg.kd_max_seq_len,
            seed=seed,
        )
    return train.KDConfig(
        soft="none",
        ce_weight=1.0,
        epochs=cfg.kd_epochs * n_transfer / n_labelled,
        batch_size=cfg.kd_batch_size,
        lr=cfg.kd_lr,
        max_seq_len=cfg.kd_max_seq_len,
        seed=seed,
    )


def _accuracy(logits: np.ndarray, labels) -> float:
    return float((logits.argmax(1) == np.asarray(labels)).mean())


def speed(fn, texts: list[str], repeats: int = REPEATS) -> float:
    """Sentences per second of `fn(texts)`: lib.common.timing's median of `repeats` calls after a warm-up call on a
    few texts."""
    return len(texts) / median_seconds(lambda: fn(texts), repeats, warm_up=lambda: fn(texts[:8]))


NOT_IN_ROWS = (
    "run_dir",
    "device",
    "threads",
    "kd_seeds",
    "kd_tasks",
    "kd_students",
    "kd_controls",
    "minilm_dir",
    "kd_speed_sentences",
)
"""Parameters of notebook 06 that change no finished (task, student, method, seed) row: where and how fast it runs,
the lists a row is one of, and what is compared after the rows."""


def check_resume(folder: str | Path, cfg: KdParams, probe_texts: list[str]) -> None:
    """Refuse to resume `folder/rows.csv` under other settings: a finished row is reused only if the settings it was
    trained with (and the probing sentences its representations are for) are this run's. The first run writes
    `folder/settings.json`; a later one with other settings gets one error naming the keys that differ."""
    path = Path(folder) / "settings.json"
    now = {k: v for k, v in cfg.to_dict().items() if k not in NOT_IN_ROWS} | {"probe_texts": config_digest(probe_texts)}
    if path.is_file():
        refuse_other_settings(
            f"{path.parent / 'rows.csv'}",
            load_json(path),
            now,
            "use another run_dir, or delete its rows.csv and reps/ to start afresh",
        )
    else:
        atomic_write_text(path, json.dumps(now, indent=1, sort_keys=True, default=str) + "\n")


def run_students(
    cfg: KdParams,
    teacher: Encoder,
    data: dict,
    folder: str | Path,
    probe_texts: list[str],
    progress: bool = True,
    tagger=None,
    only: Collection[str] | None = None,
) -> tuple[pd.DataFrame, dict]:
    """Every task x student kind x method x seed, or only the rows named in `only` (row ids, e.g.
    "polarity_bilstm_kd_s0": a prefix of the grid, each row as the whole grid trains it); returns (rows, info).

    Per task: the fine-tuned teacher (saved once), the augmented transfer set, teacher logits from the LogitCache, then
    each student trained by lib.kd.train.train_student and scored on val/test (accuracy and agreement with the teacher's
    argmax), its probing representations [len(probe_texts), D] saved as reps/<row>.npy (float16). Finished rows are
    read back from rows.csv. info: teacher rows, teacher passes, transfer-set sizes, wall time.
    """
    folder = Path(folder)
    rows_path, reps_dir = folder / "rows.csv", folder / "reps"
    check_resume(folder, cfg, probe_texts)
    done = read_rows(rows_path, "finished student rows", "their students are trained again", columns=["row_id"])
    rows = done.to_dict("records")
    info = {"teacher": [], "teacher_passes": 0, "transfer": {}, "augmented": {}}
    t0 = time.perf_counter()
    for task in cfg.kd_tasks:
        d = data[task]
        tt, ft_cfg = teacher_task(d, cfg)
        ft, reloaded = task_teacher(teacher, tt, ft_cfg, folder / "teachers", progress)
        cache = LogitCache(
            folder / "teachers" / f"logits_{task}_{config_digest(ft_cfg.__dict__ | {'n': len(tt.texts)})}.npz",
            tt.n_classes,
        )
        texts, labels = transfer_set(d["train"], cfg, cfg.kd_seeds[0], teacher.tokenizer.mask_token, tagger)
        info["transfer"][task], info["augmented"][task] = len(texts), int((labels == train.NO_LABEL).sum())
        z = {s: cache.logits(d[s].text.tolist(), ft, cfg.kd_max_seq_len, progress=progress) for s in ("val", "test")}
        z_tr = cache.logits(texts, ft, cfg.kd_max_seq_len, progress=progress)
        info["teacher"].append(
            {
                "task": task,
                "reloaded": reloaded,
                "val": _accuracy(z["val"], d["val"].label),
                "test": _accuracy(z["test"], d["test"].label),
                "train_labelled": _accuracy(z_tr[labels != train.NO_LABEL], labels[labels != train.NO_LABEL]),
            }
        )
        info["teacher_passes"] += cache.passes
        n_lab = int((labels != train.NO_LABEL).sum())
        for kind in cfg.kd_students:
            for method in METHODS if cfg.kd_controls else ("kd",):
                for seed in cfg.kd_seeds:
                    row_id = f"{task}_{kind}_{method}_s{seed}"
                    if only is not None and row_id not in only:
                        continue
                    if row_id in set(done.row_id) and (reps_dir / f"{row_id}.npy").is_file():
                        continue
                    student = build_student(kind, teacher, tt.n_classes, cfg, seed)
                    run_cfg = kd_config(kind, method, cfg, seed, len(texts), n_lab)
                    keep = slice(None) if method == "kd" else labels != train.NO_LABEL
                    t = time.perf_counter()
                    hist = train.train_student(
                        student, list(np.asarray(texts, object)[keep]), z_tr[keep], labels[keep], run_cfg, progress
                    )["losses"]
                    wall = time.perf_counter() - t
                    pred = {s: student.predict_logits(d[s].text.tolist(), cfg.kd_max_seq_len) for s in ("val", "test")}
                    reps = student.sentence_representations(probe_texts, cfg.kd_max_seq_len)
                    reps_dir.mkdir(parents=True, exist_ok=True)
                    buf = io.BytesIO()
                    np.save(buf, reps.astype(np.float16))
                    atomic_write_bytes(reps_dir / f"{row_id}.npy", buf.getvalue())
                    rows = [r for r in rows if r["row_id"] != row_id] + [
                        {
                            "row_id": row_id,
                            "task": task,
                            "student": kind,
                            "method": method,
                            "seed": seed,
                            "loss": "CE (labels only)"
                            if method == "control"
                            else run_cfg.soft
                            + (f" T={run_cfg.temperature:g}" if run_cfg.soft == "kl" else "")
                            + (f" + {run_cfg.ce_weight:g} CE" if run_cfg.ce_weight else ""),
                            "texts": len(texts) if method == "kd" else n_lab,
                            "steps": len(hist),
                            "final_loss": float(hist.loss.iloc[-20:].mean()),
                            "train_s": wall,
                            "val": _accuracy(pred["val"], d["val"].label),
                            "test": _accuracy(pred["test"], d["test"].label),
                            "agree_test": float((pred["test"].argmax(1) == z["test"].argmax(1)).mean()),
                            **student.param_counts(),
                        }
                    ]
                    atomic_write_text(rows_path, pd.DataFrame(rows).to_csv(index=False))
                    done = pd.DataFrame(rows)
    info["wall_s"] = time.perf_counter() - t0
    return pd.DataFrame(rows), info


def kd_table(rows: pd.DataFrame, teacher: list[dict]) -> pd.DataFrame:
    """Mean ± std over seeds of test accuracy and teacher agreement per task, student and method, teacher rows first."""
    g = rows.groupby(["task", "student", "method"], sort=False)
    t = g.agg(
        test=("test", "mean"),
        test_std=("test", "std"),
        agree=("agree_test", "mean"),
        seeds=("seed", "nunique"),
        params_m=("params_total", lambda x: x.iloc[0] / 1e6),
        loss=("loss", "first"),
    ).reset_index()
    teach = pd.DataFrame(
        [
            {
                "task": r["task"],
                "student": "teacher (fine-tuned)",
                "method": "-",
                "test": r["test"],
                "test_std": np.nan,
                "agree": 1.0,
                "seeds": 1,
                "params_m": np.nan,
                "loss": "CE",
            }
            for r in teacher
        ]
    )
    return pd.concat([teach, t], ignore_index=True).sort_values(["task"], kind="stable").reset_index(drop=True)


def kd_verdicts(rows: pd.DataFrame) -> list[str]:
    """One sentence per (task, student): KD against its control on test accuracy, mean ± std of the
    paired difference."""
    out = []
    for (task, kind), r in rows.groupby(["task", "student"], sort=False):
        piv = r.pivot_table(index="seed", columns="method", values="test")
        if not {"kd", "control"} <= set(piv.columns):
            continue
        diff = (piv["kd"] - piv["control"]).dropna()
        sd = f" ± {diff.std():.3f}" if len(diff) > 1 else ""
        word = (
            "beats"
            if diff.mean() - (diff.std() if len(diff) > 1 else 0) > 0
            else "loses to"
            if diff.mean() + (diff.std() if len(diff) > 1 else 0) < 0
            else "ties with"
        )
        out.append(
            f"{task}: the distilled {kind} {word} its control by {diff.mean():+.3f}{sd} test accuracy "
            f"({piv['kd'].mean():.3f} vs {piv['control'].mean():.3f}, {len(diff)} seed{'s' * (len(diff) > 1)})"
        )
    return out


# ---------------------------------------------------------------------------------------------------------- probing
def encoder_representations(enc: Encoder, texts: list[str], max_seq_len: int) -> np.ndarray:
    """Mean-pooled last-layer representations [N, D] of a transformer encoder (teacher, MiniLM students)."""
    with torch.no_grad():
        return encode(enc, texts, max_seq_len)


def minilm_folders(minilm_dir: str | Path | None, seed: int = 0) -> dict[str, Path]:
    """Stage-5 students saved by notebook 05 (`student_{L}x{H}_{init}_s{seed}`, `control_{L}x{H}_{init}_s{seed}` and
    those of an embedding method, `at_vr_emb_{L}x{H}_{init}_s{seed}`; names read by
    lib.common.published.parse_student_folder) -> label ("MiniLM 3x384", "3x384 no distillation", "AT+VR+EMB 3x384")
    -> folder. Labels name the init only where a shape has several."""
    if not minilm_dir or not Path(minilm_dir).is_dir():
        return {}
    found = [(*published.parse_student_folder(f.name), f) for f in sorted(Path(minilm_dir).glob(f"*_s{seed}"))]
    inits = {}
    for _, shape, init, _ in found:
        inits.setdefault(shape, set()).add(init)
    out = {}
    for kind, shape, init, f in found:
        tag = f" ({init} init)" if len(inits[shape]) > 1 else ""
        method = folder_method(kind)
        out[(f"{shape} {method}" if kind == FOLDER_KINDS["no distillation"] else f"{method} {shape}") + tag] = f
    return out


def probe_inputs(tasks: dict[str, tuple[list[str], list]]) -> list[str]:
    """Every distinct sentence of the probing tasks (bigram shift adds perturbed ones), in first-seen order."""
    return list(dict.fromkeys(s for ss, _ in tasks.values() for s in ss))


def by_task(reps: np.ndarray, texts: list[str], tasks: dict[str, tuple[list[str], list]]) -> dict[str, np.ndarray]:
    """Representations [len(texts), D] of probe_inputs(tasks) -> task -> [N_task, D] in each task's sentence order."""
    if len(reps) != len(texts):
        raise KdError(f"{len(reps)} representations for {len(texts)} probing sentences; encode probe_inputs(tasks)")
    pos = {t: i for i, t in enumerate(texts)}
    return {name: np.asarray(reps[[pos[s] for s in ss]], np.float32) for name, (ss, _) in tasks.items()}


def frozen_task_accuracy(reps: dict[str, np.ndarray], data_task: dict, seed: int = 0) -> float:
    """Test accuracy of a logistic-regression head on frozen representations {split: [N, D]} (stage 5's probe)."""
    return linear_probe(
        reps["train"],
        data_task["train"].label.to_numpy(),
        {"test": (reps["test"], data_task["test"].label.to_numpy())},
        seed,
    )["test"]
