"""The link-source registry of notebook 05b: where the graphs the encoders are scored on come from, one entry each.

A source is named by a spec `kind` or `kind:argument` (notebook 05b's `embedder_sources`): the built-in `wikispeedia`
and `vital_heldout` (lib.embedders.data), `links:<path of a link list>` (a link list of your own in the snapshot
format notebook 01's `source: snapshot` reads, crawled here as the built-in sources are) or `run:<path of a run
folder>` (the graphs notebook 01 crawled into a run folder, as they are). Paths are absolute or relative to the
repository root. A source of your own is made before the partition, which then keeps its titles out of the training
texts as it keeps the built-in sources' titles out (lib.embedders.data.partition), so no trained encoder saw them and
their share inside some training text is reported beside the built-in sources'. Adding a kind is one
`register(SourceKind(...))` here plus its test; the config, the stage and the docs read the registry.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lib.common.graphio import read_graph, sha256_file
from lib.common.hashing import config_digest
from lib.common.params import ParamError
from lib.common.paths import resolve
from lib.common.registry import Registry
from lib.common.runinfo import read_json
from lib.crawl.campaign import draw_offline_roots, ok_graph_files, run_campaign
from lib.crawl.pages import Snapshot
from lib.crawl.sources import SnapshotSource, read_snapshot
from lib.embedders import data

KEY = "embedder_sources"
CRAWL_NOTEBOOK = "01_crawl.ipynb"


@dataclass(frozen=True)
class Crawl:
    """Where and how a source's graphs are made: `graphs` roots drawn per topic (a seeded draw), each crawled
    breadth-first to `nodes` nodes into `folder`; `test_graphs` of them are tested per seed."""

    graphs: int
    nodes: int
    seed: int
    test_graphs: int
    folder: Path


@dataclass(frozen=True)
class SourceKind:
    """One registry entry. graphs(argument, partition, crawl) -> the source's graph files; own: a source of your own,
    made before the partition (which is None then) and whose titles the partition holds out; check(argument): a
    ParamError naming the input and the fix, before any work."""

    name: str
    about: str
    graphs: Callable[[str, data.Partition | None, Crawl], list[Path]]
    own: bool
    check: Callable[[str], None]


SOURCES: Registry[SourceKind] = Registry("link source", "lib.embedders.sources")
register = SOURCES.add


@dataclass(frozen=True)
class Spec:
    """A parsed `kind` or `kind:argument`."""

    kind: str
    argument: str

    @property
    def entry(self) -> SourceKind:
        return SOURCES[self.kind]

    @property
    def label(self) -> str:
        """The source's name in every table: the kind, or kind:<file or folder name> for a source of your own."""
        return f"{self.kind}:{Path(self.argument).name}" if self.argument else self.kind

    @property
    def slug(self) -> str:
        """The source's folder name under the notebook's crawl/ and lp/ folders."""
        return re.sub(r"[^A-Za-z0-9._-]+", "_", self.label)


def parse(spec: str) -> Spec:
    """`kind` or `kind:argument` -> Spec, checked: ParamError naming the spec and the fix."""
    kind, _, argument = spec.partition(":")
    if kind not in SOURCES:
        raise ParamError(
            f"{KEY} has {spec!r}: kind {kind!r} is unknown; use one of {list(SOURCES)} "
            "(links:<path> and run:<path> name your own)",
            key=KEY,
        )
    entry = SOURCES[kind]
    if entry.own and not argument.strip():
        raise ParamError(f"{KEY} has {spec!r} without a path; {entry.about}", key=KEY)
    if not entry.own and argument:
        raise ParamError(f"{KEY} has {spec!r}: {kind} takes no argument; write {kind}", key=KEY)
    try:
        entry.check(argument)
    except ParamError as e:
        raise ParamError(f"{KEY} has {spec!r}: {e}", key=KEY) from None
    return Spec(kind, argument)


def parse_all(specs: list[str]) -> list[Spec]:
    """Every spec parsed; ParamError when none is given or two share a label (their rows would mix)."""
    if not specs:
        raise ParamError(f"{KEY} is empty; name at least one link source, e.g. wikispeedia", key=KEY)
    parsed = [parse(s) for s in specs]
    labels = [s.label for s in parsed]
    if twice := sorted({x for x in labels if labels.count(x) > 1}):
        raise ParamError(
            f"{KEY} names {twice} more than once (their rows would mix); keep one of each, or rename a "
            "file or folder of your own",
            key=KEY,
        )
    return parsed


def graph_titles(files: list[Path]) -> list[str]:
    """The sorted titles of the graph `files`."""
    return sorted({t for f in files for t in read_graph(f).titles})


def graphs_digest(files: list[Path]) -> str:
    """A fingerprint of the graph files' contents: rows scored on other graphs under the same label are not reused."""
    return config_digest([sha256_file(f) for f in files])


def crawled(snap: Snapshot, source_id: str, crawl: Crawl, spec: str) -> list[Path]:
    """crawl.graphs roots of `snap` (lib.crawl.campaign.draw_offline_roots, by topic), each crawled breadth-first
    (Algorithm 1) to crawl.nodes nodes into crawl.folder; the successful roots' graph files."""
    # roots are drawn per topic: a link list without topic labels is one topic
    drawn = snap if snap.topics else Snapshot(links=snap.links, topics=dict.fromkeys(snap.links, "all"))
    try:
        roots = draw_offline_roots(crawl.graphs, seed=crawl.seed, snapshot=drawn)
    except ValueError:
        raise ParamError(
            f"{KEY} has {spec!r}: it has fewer than embedder_graphs={crawl.graphs} titles with 5 links "
            "or more to crawl from; lower embedder_graphs or pass a larger link list",
            key="embedder_graphs",
        ) from None
    run_campaign(roots, SnapshotSource(snap, source_id=source_id), crawl.folder, crawl.nodes, progress=False)
    return ok_graph_files(crawl.folder)


# ------------------------------------------------------------------------------------------------------ built-in
def _builtin(name: str) -> Callable[[str, data.Partition | None, Crawl], list[Path]]:
    def graphs(argument: str, part: data.Partition | None, crawl: Crawl) -> list[Path]:
        snap = data.link_snapshot(name, part)
        return crawled(snap, f"{name}:{snap.digest()}", crawl, name)

    return graphs


def _nothing_to_check(argument: str) -> None:
    return None


register(
    SourceKind(
        "wikispeedia",
        "real hyperlinks of 4,604 articles (lib.crawl.wikispeedia), every title held out",
        _builtin("wikispeedia"),
        own=False,
        check=_nothing_to_check,
    )
)
register(
    SourceKind(
        "vital_heldout",
        "the title-mention links among the vital articles of `embedder_test_topics`, every one held out",
        _builtin("vital_heldout"),
        own=False,
        check=_nothing_to_check,
    )
)


# ------------------------------------------------------------------------------------------------- your own
def _check_link_list(argument: str) -> None:
    path = resolve(argument)
    if not path.is_file():
        raise ParamError(
            f"no link list at {path}; pass a file of source<TAB>target lines, the snapshot format "
            "notebook 01 reads (e.g. params/own_links_example/links.tsv)"
        )


@functools.lru_cache(maxsize=1)  # the partition and the crawl read one link list; a dump can take minutes to read
def _link_list(path: Path, stamp: tuple[int, int]) -> Snapshot:
    return read_snapshot(path, progress=False)


def _link_list_graphs(argument: str, part: data.Partition | None, crawl: Crawl) -> list[Path]:
    path = resolve(argument)
    snap = _link_list(path, (path.stat().st_mtime_ns, path.stat().st_size))
    return crawled(snap, f"links:{path.name}:{snap.digest()}", crawl, f"links:{argument}")


def finished_run_graphs(folder: Path) -> list[Path]:
    """The graph files notebook 01 crawled into the run folder `folder`; ParamError naming the folder and the fix
    when it is not a finished notebook-01 run (no crawl manifest with a graph, or notebook 01 not finished there)."""
    if not folder.is_dir():
        raise ParamError(f"no run folder at {folder}; pass a run folder notebook 01 finished (outputs/<run name>)")
    try:
        status = read_json(folder / "status.json").get("notebooks", {}).get(CRAWL_NOTEBOOK, {}).get("status", "ok")
        files = ok_graph_files(folder / "crawl") if (folder / "crawl" / "manifest.json").is_file() else []
    except ValueError as e:  # a record cut short or edited: its own line names the file and the fix
        raise ParamError(str(e)) from None
    if (
        status != "ok"
        or "crawl" not in read_json(folder / "metrics.json")
        or not all(f.is_file() for f in files)
        or not files
    ):
        raise ParamError(
            f"{folder} is not a finished notebook-01 run (it needs crawl/manifest.json, its graph files "
            "and metrics.json's crawl summary); run notebook 01 into it first (python -m lib.run.runner "
            "--notebooks 01 --run-name <name>) or pass another run folder"
        )
    return files


def _check_run(argument: str) -> None:
    finished_run_graphs(resolve(argument))


def _run_graphs(argument: str, part: data.Partition | None, crawl: Crawl) -> list[Path]:
    files = finished_run_graphs(resolve(argument))
    if len(files) < crawl.test_graphs + 2:
        raise ParamError(
            f"{KEY} has 'run:{argument}': its {len(files)} graphs leave fewer than two to train and "
            f"validate on beside embedder_test_graphs={crawl.test_graphs}; lower embedder_test_graphs or "
            "crawl more roots into that run",
            key=KEY,
        )
    return files


register(
    SourceKind(
        "links",
        "a link list of your own is `links:<path of a link list>` (the snapshot format of "
        "notebook 01's `source: snapshot`, e.g. links:params/own_links_example/links.tsv), crawled as the "
        "built-in sources are, its titles held out",
        _link_list_graphs,
        own=True,
        check=_check_link_list,
    )
)
register(
    SourceKind(
        "run",
        "a run of your own is `run:<path of a run folder notebook 01 finished>` (e.g. "
        "run:outputs/mine), its crawled graphs as they are, their titles held out",
        _run_graphs,
        own=True,
        check=_check_run,
    )
)
