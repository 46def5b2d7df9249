"""The docs' lists of the extension points (negative sets, heuristics, decoders, encoder kinds, link sources), each
generated from its registry's rows between two markers, so a page cannot list other entries than the code holds.
`python -m lib.run.report` writes them into README.md and docs/*.md, and `--check` compares."""

from __future__ import annotations

from pathlib import Path

from lib.common.paths import ROOT
from lib.common.registry import Registry
from lib.embedders.encoders import ENCODERS
from lib.embedders.sources import SOURCES
from lib.linkpred.decoders import DECODERS
from lib.linkpred.heuristics import REGISTRY as HEURISTICS
from lib.linkpred.negative_sets.registry import REGISTRY as NEGATIVE_SETS

REGISTRIES: dict[str, Registry] = {
    "negative-sets": NEGATIVE_SETS,
    "heuristics": HEURISTICS,
    "decoders": DECODERS,
    "encoder-kinds": ENCODERS,
    "link-sources": SOURCES,
}
"""Marker key -> the registry a page's list is generated from."""


def pages() -> list[Path]:
    """The pages that may hold a generated list: README.md and docs/*.md."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def markers(key: str) -> tuple[str, str]:
    return f"<!-- {key}:begin (python -m lib.run.report) -->", f"<!-- {key}:end -->"


def render(key: str) -> str:
    """The list of registry `key` between its markers: one `- \\`name\\`: about` line per entry, in registry order."""
    begin, end = markers(key)
    return "\n".join([begin, *(f"- `{r['name']}`: {r['about']}" for r in REGISTRIES[key].rows()), end])


def with_lists(text: str) -> str:
    """`text` with every registry list it holds between markers generated again from the registry."""
    for key in REGISTRIES:
        begin, end = markers(key)
        if begin in text and end in text:
            text = text.replace(text[text.index(begin) : text.index(end) + len(end)], render(key))
    return text
