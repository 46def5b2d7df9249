"""Notebook 05b's parameters (node embedders judged on titles they never saw), one typed declaration; see
lib.common.config. Its GatModels are notebook 03's, trained with the settings it inherits (GatTrainingParams)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lib.common.config import DeviceStageParams, param
from lib.common.params import ParamError
from lib.embedders.data import BUILT_IN_SOURCES, TEXT_KINDS, check_topics
from lib.embedders.encoders import parse
from lib.embedders.sources import parse_all as parse_sources
from lib.linkpred.config import GatTrainingParams

VITAL_TOPICS = (
    "Arts",
    "Biology and health sciences",
    "Everyday life",
    "Geography",
    "History",
    "Mathematics",
    "People",
    "Philosophy and religion",
    "Physical sciences",
    "Society and social sciences",
    "Technology",
    "Uncategorized",
)


@dataclass(frozen=True)
class EmbeddersParams(GatTrainingParams, DeviceStageParams):
    NOTEBOOK: ClassVar[str] = "05b_node_embedders.ipynb"
    GAT_OVERRIDES: ClassVar[dict[str, str]] = {  # lib.distill.lp.lp_params sets them
        "first_seed": "each seed 0 .. embedder_seeds-1 in turn, one GatModel per (encoder, source, seed)",
        "n_seeds": "1: one GatModel per (encoder, source, seed)",
        "protocols": "embedder_protocols: the study's own",
        "train_supervision": "['mp'], the seed's supervision only: the encoders are compared, not supervisions",
        "negatives_per_positive": "0: only the uniform rows are kept, so the per-positive sets are not drawn",
        "n_test_graphs": "embedder_test_graphs: each link source's own crawl is split",
        "val_fraction": "0.1 of each link source's training graphs",
    }

    embedder_encoders: list[str] = param(
        ["student:0,2,5/1024", "control:0,2,5/1024"],
        "encoders scored beside all-MiniLM-L6-v2, each kind:argument of the "
        "registry (lib.embedders.encoders; folder:<path> scores a model folder of your "
        "own); the first student also chooses the mix",
    )
    embedder_val_topics: list[str] = param(
        ["Biology and health sciences"],
        "vital-article topics held out for choices (validation titles and links)",
        choices=VITAL_TOPICS,
    )
    embedder_test_topics: list[str] = param(
        ["Geography", "Physical sciences"],
        "vital-article topics held out as the vital_heldout link source",
        choices=VITAL_TOPICS,
    )
    embedder_in_domain_fraction: float = param(
        0.05, "share of the training topics' articles held out as in-domain validation titles", gt=0, lt=1
    )
    embedder_text_kinds: list[str] = param(
        list(TEXT_KINDS), "kinds of transfer texts drawn from the training articles", choices=TEXT_KINDS
    )
    embedder_max_texts: int = param(1000, "transfer texts per kind at most (a seeded sample)", ge=10)
    embedder_mixes: list[str] = param(
        ["titles:1,capitalised:1,phrases:1,sentences:0", "titles:1,capitalised:1,phrases:1,sentences:1"],
        "candidate shares of the text kinds in a batch, chosen on validation titles",
    )
    embedder_choice_steps: int = param(10, "training steps of each candidate mix", ge=1)
    embedder_steps: int = param(20, "training steps of every trained student", ge=1)
    embedder_static_steps: int = param(60, "training steps of every trained static model", ge=1)
    embedder_batch_size: int = param(32, "texts per student step (a static step takes 4x as many)", ge=2)
    embedder_lr: float = param(2e-4, "students' peak learning rate (AdamW, 5% warm-up, linear decay)", gt=0)
    embedder_static_lr: float = param(3e-4, "static tables' peak learning rate", gt=0)
    embedder_data_seed: int = param(
        0, "seed of the in-domain hold-out, the text samples, the batches and the students' initialisation", ge=0
    )
    embedder_sources: list[str] = param(
        list(BUILT_IN_SOURCES),
        "link sources of unseen titles the encoders are "
        "scored on, each a name or kind:path of the registry (lib.embedders.sources; "
        "links:<path of a link list> or run:<path of a notebook-01 run folder> "
        "scores links of your own)",
    )
    embedder_graphs: int = param(5, "graphs crawled per link source (roots drawn per topic)", ge=3)
    embedder_graph_nodes: int = param(120, "nodes per crawled graph at most", ge=20)
    embedder_test_graphs: int = param(2, "test graphs per seed of each source", ge=1)
    embedder_seeds: int = param(2, "GatModel seeds 0 .. n-1 per encoder and source (graph split, training)", ge=1)
    embedder_protocols: list[str] = param(
        ["leak_free"], "stage 3 protocols scored", choices=("leak_free", "new_nodes", "pair_split")
    )
    embedder_probe_texts: int = param(
        0, "training texts per stage 5 probe task (polarity, topic; half as many to test, 0: no probes)", ge=0
    )
    embedder_speed_titles: int = param(512, "Wikispeedia titles encoded per speed measurement", ge=64)
    embedder_speed_repeats: int = param(3, "alternating repetitions per speed measurement (median kept)", ge=1)

    def check(self) -> None:
        check_topics(self.embedder_val_topics, self.embedder_test_topics)
        specs = [parse(s) for s in self.embedder_encoders]
        labels = [s.label for s in specs]
        if twice := sorted({x for x in labels if labels.count(x) > 1}):
            raise ParamError(
                f"embedder_encoders names {twice} more than once (their rows would mix); keep one of "
                "each, or rename a folder of your own",
                key="embedder_encoders",
            )
        trained = [s for s in specs if s.entry.uses_recipe]  # without one, the mix is never used
        if trained and not any(s.kind == "student" for s in specs) and len(self.embedder_mixes) > 1:
            raise ParamError(
                "embedder_mixes offers a choice but embedder_encoders has no student to choose it with; "
                "add a student:<layers> or keep one mix",
                key="embedder_mixes",
            )
        if self.embedder_test_graphs >= self.embedder_graphs - 1:
            raise ParamError(
                f"embedder_test_graphs={self.embedder_test_graphs} leaves fewer than two of the "
                f"{self.embedder_graphs} graphs to train and validate on; lower it or raise "
                "embedder_graphs",
                key="embedder_test_graphs",
            )
        for mix in self.embedder_mixes:
            shares(mix, self.embedder_text_kinds)
        parse_sources(self.embedder_sources)


def shares(mix: str, kinds: list[str]) -> dict[str, float]:
    """`titles:1,phrases:0.5` -> {kind: share}; ParamError naming the mix when a kind is unknown or no share is
    positive."""
    try:
        out = {k.strip(): float(v) for k, v in (item.split(":") for item in mix.split(","))}
    except ValueError:
        raise ParamError(
            f"embedder_mixes has {mix!r}; write kind:share pairs, e.g. titles:1,phrases:0.5", key="embedder_mixes"
        ) from None
    unknown = sorted(set(out) - set(kinds))
    if unknown or not any(v > 0 for v in out.values()) or any(v < 0 for v in out.values()):
        raise ParamError(
            f"embedder_mixes has {mix!r}: shares must be >= 0, one positive, over embedder_text_kinds {kinds}",
            key="embedder_mixes",
        )
    return out
