"""Notebook 04's parameters (the A-AUC analysis), one typed declaration; see lib.common.config."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lib.common.config import DeviceStageParams, param


@dataclass(frozen=True)
class AaucParams(DeviceStageParams):
    NOTEBOOK: ClassVar[str] = "04_aauc_analysis.ipynb"

    first_seed: int = param(0, "first stage-3 seed analysed; seeds first_seed .. first_seed+n_seeds-1", ge=0)
    n_seeds: int = param(2, "stage-3 seeds used (each has its own split and checkpoints)", ge=1)
    r_cos: float = param(0.1, "A-AUC node sampling rate, seed §5.4.1", gt=0, le=1)
    t_cos: float = param(0.7, "A-AUC cosine threshold, seed §5.4.1", ge=-1, le=1)
    t_cos_grid: list[float] = param([0.5, 0.6, 0.7, 0.8, 0.9], "thresholds for the sensitivity study", ge=-1, le=1)
    r_cos_grid: list[float] = param([0.05, 0.1, 0.2, 0.5], "sampling rates for the sensitivity study", gt=0, le=1)
    size_grid: list[int] = param([2, 4, 8], "training-set sizes for the trend (the seed: 40, 180, 315)", ge=1)
    size_epochs: int = param(2, "epochs per size-trend run, seed §5.4.1", ge=1)
    analysis_graphs: int = param(
        0,
        "test graphs per seed the studies score: the first N of stage 3's (0: all; notebook 03's own rows "
        "in the trade-off keep every test graph)",
        ge=0,
    )
    r_cos_groups: float = param(0.3, "larger sample for per-topic and per-branch A-AUC (groups need pairs)", gt=0, le=1)
    top_k: int = param(30, "predicted new links drawn in the picture", ge=1)
    picture_root: str = param("Climate change", "root whose graph is drawn")
    picture_view: str = param(
        "focus",
        '"focus": the predicted links, their endpoints and neighbours; "whole": every node',
        choices=("focus", "whole"),
    )

    @property
    def seeds(self) -> list[int]:
        return list(range(self.first_seed, self.first_seed + self.n_seeds))
