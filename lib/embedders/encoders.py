"""The node-embedder registry: every kind of encoder notebook 05b can build and score, one entry each.

An encoder is named by a spec `kind:argument` (notebook 05b's `embedder_encoders`), e.g. `student:0,2,5/1024` (layers
0, 2 and 5 of all-MiniLM-L6-v2 with 1,024 of its 1,536 feed-forward neurons, trained on the transfer texts),
`control:0,2,5` (the same layers untrained), `static-pca:256` (model2vec's PCA distillation) or `static-trained:256`
(that table trained on the transfer texts) or `folder:<path>` (a sentence-transformers or model2vec folder of your own,
scored as it is). all-MiniLM-L6-v2 itself, the reference, is always scored. An entry builds the encoder's folder (a
sentence-transformers or model2vec folder stage 2 loads as `model_dir`) from a `Recipe`, or names the folder it already
is, and says how many transformer layers it runs. Adding a kind is one `register(EncoderKind(...))` here plus its test;
the notebook, its tables and its figure read the registry.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lib.common.hashing import config_digest
from lib.common.params import ParamError
from lib.common.paths import NOTEBOOKS, append_csv_rows, atomic_write_text
from lib.common.registry import Registry
from lib.common.runinfo import load_json, read_record
from lib.distill import embedding
from lib.distill.models import save_sentence_transformer
from lib.embed.encoder import EmbedError, check_model_dir, default_model_dir
from lib.embed.static import distil
from lib.embed.static_train import StaticTrainConfig, train_static

REFERENCE = "all-MiniLM-L6-v2"
MAX_SEQ_LEN = 64  # titles are < 20 wordpieces; transfer sentences are cut here, as the targets were computed


@dataclass(frozen=True)
class Recipe:
    """What a trained encoder learns from: the transfer texts (every kind concatenated in `sizes`' order), their
    all-MiniLM-L6-v2 targets [N, 384], the share of each kind in a batch, and the optimisation settings."""

    texts: list[str]
    targets: np.ndarray
    sizes: dict[str, int]
    weights: dict[str, float]
    steps: int
    static_steps: int
    batch_size: int
    lr: float
    static_lr: float
    seed: int
    checkpoint_every: int = 100

    def identity(self) -> dict:
        """What the built folder depends on (the texts through their count and digest)."""
        return {
            "texts": len(self.texts),
            "texts_digest": config_digest(self.texts),
            "weights": self.weights,
            "steps": self.steps,
            "static_steps": self.static_steps,
            "batch_size": self.batch_size,
            "lr": self.lr,
            "static_lr": self.static_lr,
            "seed": self.seed,
        }


@dataclass(frozen=True)
class EncoderKind:
    """One registry entry. build(argument, recipe, folder, work) writes the encoder into `folder` (work: a folder
    for its checkpoints and intermediate models); layers(argument): transformer layers it runs (0: static);
    uses_recipe: whether the folder depends on the recipe (trained) or only on the argument; located(argument): the
    folder of an encoder that is not built (build is then never called)."""

    name: str
    describe: str
    build: Callable[[str, Recipe, Path, Path], None]
    layers: Callable[[str], int]
    label: Callable[[str], str]
    uses_recipe: bool
    located: Callable[[str], Path] | None = None


ENCODERS: Registry[EncoderKind] = Registry("encoder kind", "lib.embedders.encoders")
register = ENCODERS.add


@dataclass(frozen=True)
class Spec:
    """A parsed `kind:argument`."""

    kind: str
    argument: str

    @property
    def entry(self) -> EncoderKind:
        return ENCODERS[self.kind]

    @property
    def label(self) -> str:
        return self.entry.label(self.argument)

    @property
    def slug(self) -> str:
        return f"{self.kind}_{self.argument.replace(',', '').replace('/', '_f')}"

    @property
    def layers(self) -> int:
        return self.entry.layers(self.argument)


def parse(spec: str) -> Spec:
    """`kind:argument` -> Spec, checked: ParamError naming the spec and the kinds."""
    kind, _, argument = spec.partition(":")
    if kind not in ENCODERS:
        raise ParamError(
            f"embedder_encoders has {spec!r}: kind {kind!r} is unknown; use one of {sorted(ENCODERS)} as kind:argument",
            key="embedder_encoders",
        )
    try:
        ENCODERS[kind].layers(argument)
    except EmbedError as e:  # what the folder lacks says more than the kind's description
        raise ParamError(f"embedder_encoders has {spec!r}: {e}", key="embedder_encoders") from None
    except (ValueError, IndexError):
        raise ParamError(
            f"embedder_encoders has {spec!r}: {ENCODERS[kind].describe}", key="embedder_encoders"
        ) from None
    return Spec(kind, argument)


def build(spec: Spec, recipe: Recipe, root: Path) -> Path:
    """The encoder's folder root/models/<slug>, built unless it exists with the same settings (made.json); each build's
    wall time and training steps are appended to root/builds.csv. An encoder that is a folder already is that folder."""
    if spec.entry.located is not None:
        return spec.entry.located(spec.argument)
    folder = root / "models" / spec.slug
    made = {"spec": f"{spec.kind}:{spec.argument}", **(recipe.identity() if spec.entry.uses_recipe else {})}
    record = folder / "made.json"
    kept = read_record(record, "encoder record", "its folder is deleted and the encoder built again")
    if kept == json.loads(json.dumps(made)):
        return folder
    if folder.exists():
        shutil.rmtree(folder)
    t0 = time.perf_counter()
    spec.entry.build(spec.argument, recipe, folder, root / "work")
    # beside the folder, not in it: the folder's content is the encoder's identity
    append_csv_rows(
        root / "builds.csv",
        [
            {
                "encoder": spec.label,
                "spec": made["spec"],
                "seconds": round(time.perf_counter() - t0, 1),
                "steps": recipe.steps
                if spec.kind == "student"
                else recipe.static_steps
                if spec.entry.uses_recipe
                else 0,
            }
        ],
        what="build times",
        lost="their encoders are kept, their times are not measured again",
    )
    atomic_write_text(record, json.dumps(made, indent=1) + "\n")
    return folder


# ------------------------------------------------------------------------------------------------ transformers
def student_shape(argument: str) -> tuple[list[int], int | None]:
    """`0,2,5` or `0,2,5/1024` -> (layers, feed-forward width or None for all 1,536)."""
    layers, _, ffn = argument.partition("/")
    out = [int(i) for i in layers.split(",")]
    if not out or any(not 0 <= i < 6 for i in out):
        raise ValueError(argument)
    return out, (int(ffn) if ffn else None)


def _transformer_label(prefix: str, argument: str) -> str:
    layers, ffn = student_shape(argument)
    return f"{prefix} {','.join(map(str, layers))}" + (f" ffn{ffn}" if ffn else "")


def _build_student(argument: str, recipe: Recipe, folder: Path, work: Path) -> None:
    layers, ffn = student_shape(argument)
    enc = embedding.assistant_student(layers, ffn=ffn)
    cfg = embedding.EmbedDistillConfig(
        steps=recipe.steps, batch_size=recipe.batch_size, lr=recipe.lr, seed=recipe.seed, max_seq_len=MAX_SEQ_LEN
    )
    plan = embedding.mixture_plan(recipe.sizes, recipe.weights, cfg.steps, cfg.batch_size, recipe.seed)
    ckpt = work / f"{folder.name}.pt"
    embedding.train_embedding_student(enc, recipe.texts, recipe.targets, plan, cfg, ckpt, recipe.checkpoint_every)
    save_sentence_transformer(enc, folder, max_seq_len=MAX_SEQ_LEN, normalize=True)
    ckpt.unlink(missing_ok=True)


def _build_control(argument: str, recipe: Recipe, folder: Path, work: Path) -> None:
    layers, ffn = student_shape(argument)
    save_sentence_transformer(
        embedding.assistant_student(layers, ffn=ffn), folder, max_seq_len=MAX_SEQ_LEN, normalize=True
    )


register(
    EncoderKind(
        "student",
        "a student is `student:<layers of 0..5>[/<feed-forward width>]`, e.g. student:0,2,5/1024",
        _build_student,
        lambda a: len(student_shape(a)[0]),
        lambda a: _transformer_label("student", a),
        uses_recipe=True,
    )
)
register(
    EncoderKind(
        "control",
        "a control is `control:<layers of 0..5>[/<feed-forward width>]`, e.g. control:0,2,5",
        _build_control,
        lambda a: len(student_shape(a)[0]),
        lambda a: _transformer_label("control", a),
        uses_recipe=False,
    )
)


def _build_rounded(argument: str, recipe: Recipe, folder: Path, work: Path) -> None:
    enc = embedding.assistant_student(list(range(6)))
    embedding.round_weights(enc.model, argument)
    save_sentence_transformer(enc, folder, max_seq_len=MAX_SEQ_LEN, normalize=True)


def _rounding(argument: str) -> int:
    if argument not in embedding.ROUNDINGS:
        raise ValueError(argument)
    return 6


register(
    EncoderKind(
        "rounded",
        f"a rounded copy is `rounded:<one of {', '.join(embedding.ROUNDINGS)}>`, e.g. rounded:bf16 "
        "(all-MiniLM-L6-v2 with every weight rounded: how far seeds alone move the scores)",
        _build_rounded,
        _rounding,
        lambda a: f"{REFERENCE} {a}",
        uses_recipe=False,
    )
)


# ------------------------------------------------------------------------------------------------------ static
def pca_width(argument: str) -> int:
    """`256` -> 256 (PCA to 256 dims); `0` -> 0 (no PCA: all-MiniLM-L6-v2's 384)."""
    width = int(argument)
    if width < 0:
        raise ValueError(argument)
    return width


def _static_label(prefix: str, argument: str) -> str:
    width = pca_width(argument)
    return f"{prefix} pca{width}" if width else f"{prefix} nopca"


def _build_static_pca(argument: str, recipe: Recipe, folder: Path, work: Path) -> None:
    distil(default_model_dir(), folder, pca_dims=pca_width(argument) or None, seed=0, source_name=REFERENCE)


def _build_static_trained(argument: str, recipe: Recipe, folder: Path, work: Path) -> None:
    init = build(Spec("static-pca", argument), recipe, work.parent)
    cfg = StaticTrainConfig(
        steps=recipe.static_steps, batch_size=recipe.batch_size * 4, lr=recipe.static_lr, seed=recipe.seed
    )
    plan = embedding.mixture_plan(recipe.sizes, recipe.weights, cfg.steps, cfg.batch_size, recipe.seed)
    ckpt = work / f"{folder.name}.pt"
    train_static(
        init, folder, recipe.texts, recipe.targets, plan, cfg, checkpoint=ckpt, checkpoint_every=recipe.checkpoint_every
    )
    ckpt.unlink(missing_ok=True)


register(
    EncoderKind(
        "static-pca",
        "a static model is `static-pca:<PCA width, 0 for none>`, e.g. static-pca:256",
        _build_static_pca,
        lambda a: 0 * pca_width(a),
        lambda a: _static_label("static", a),
        uses_recipe=False,
    )
)
register(
    EncoderKind(
        "static-trained",
        "a trained static model is `static-trained:<PCA width of its start, 0 for none>`, e.g. static-trained:0",
        _build_static_trained,
        lambda a: 0 * pca_width(a),
        lambda a: _static_label("static trained", a),
        uses_recipe=True,
    )
)


# ------------------------------------------------------------------------------------------------- your own
def located_folder(argument: str) -> Path:
    """The folder `argument` names; a relative path is read from notebooks/, where the notebooks run (as model_dir)."""
    return NOTEBOOKS / Path(argument).expanduser()


def folder_layers(argument: str) -> int:
    """Transformer layers of the model folder `argument` from its files, without loading it (0: a model2vec table);
    EmbedError naming the folder and what it lacks when it is not a model folder."""
    path = located_folder(argument)
    check_model_dir(path, what="the folder")
    configs = [load_json(c) for c in sorted(path.rglob("config.json"), key=lambda c: len(c.parts))]
    if any(c.get("model_type") == "model2vec" for c in configs if isinstance(c, dict)):
        return 0
    layers = [c["num_hidden_layers"] for c in configs if isinstance(c, dict) and "num_hidden_layers" in c]
    if not layers:
        raise EmbedError(
            f"the folder {argument!r} is not a model folder this study can place: no config.json in it "
            "names num_hidden_layers; pass a sentence-transformers folder of a transformer encoder or a "
            "model2vec folder"
        )
    return int(layers[0])


def _no_build(argument: str, recipe: Recipe, folder: Path, work: Path) -> None:
    raise AssertionError("a folder encoder is located, never built")


register(
    EncoderKind(
        "folder",
        "your own encoder is `folder:<path of a sentence-transformers or model2vec folder>`, "
        "scored as it is (its titles are unseen only if its training data held none of them)",
        _no_build,
        folder_layers,
        lambda a: f"folder {Path(a).name}",
        uses_recipe=False,
        located=located_folder,
    )
)


def encoder_kind_rows() -> list[dict]:
    """One row per registered kind (name, what its argument is, trained on the transfer texts or not)."""
    return [{"kind": k.name, "spec": k.describe, "trained": k.uses_recipe} for k in ENCODERS.values()]
