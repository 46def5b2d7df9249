"""Notebook 02's parameters (embedding the titles and splitting the graphs), one typed declaration; see
lib.common.config."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lib.common.compute import PRECISIONS
from lib.common.config import DEVICE_WHY, RUN_DIR_WHY, THREADS_WHY, StageParams, param

EMBEDDING_LOSSES = ("cosine", "mse", "cosine+mse")
"""The kinds of lib.embed.losses.embedding_loss, here without torch so the configs check a kind before any work."""


@dataclass(frozen=True)
class EmbedParams(StageParams):
    NOTEBOOK: ClassVar[str] = "02_embed.ipynb"

    run_dir: str = param("outputs/demo", RUN_DIR_WHY)
    model_dir: str = param(
        "",
        "sentence-transformers or model2vec static folder (lib.embed.static); empty means "
        "all-MiniLM-L6-v2; stage 5 passes its student here",
    )
    device: str = param("cpu", DEVICE_WHY)
    threads: int = param(0, THREADS_WHY, ge=0, record=False)
    embed_batch_size: int = param(
        32,
        "titles per forward pass, all of one token length (no padding); a short batch "
        "is filled up to it, so a title's vector does not depend on the others (CPU: "
        "32 is as fast as 256)",
        ge=1,
    )
    precision: str = param(
        "fp32",
        "compute precision: fp32, bf16, fp16 or auto (bf16 where the CPU/GPU has it natively); own store per precision",
        choices=PRECISIONS,
    )
    dataset_precision: str = param(
        "float32",
        "feature storage in the dataset: float32 (seed) or float16 (half the disk)",
        choices=("float32", "float16"),
    )
    first_seed: int = param(
        0,
        "first seed: seeds the graph split (one per seed, first_seed .. first_seed+n_seeds-1) and the PCA subsample",
        ge=0,
    )
    n_seeds: int = param(2, "splits written, one per stage-3 seed", ge=1)
    n_train_graphs: int = param(0, "training graphs incl. validation ones; 0 means every graph not in test", ge=0)
    n_test_graphs: int = param(2, "test graphs per seed (seed experiments: 10 / 20 / 35)", ge=1)
    val_fraction: float = param(
        0.1, "share of the training graphs used only for validation (epoch selection)", ge=0, lt=1
    )
    hold_out_roots: bool = param(False, "True also drops training graphs that contain a test graph's root title")
    nn_queries: list[str] = param(
        ["Climate change", "Water", "Education", "Energy"], "titles for the nearest-neighbour table"
    )
    nn_k: int = param(5, "neighbours shown per query", ge=1)
    pca_max_points: int = param(4000, "titles drawn in the PCA figure (seeded subsample; all when fewer)", ge=2)
