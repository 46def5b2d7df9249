"""Graph files in the seed's JSON format, plus a metadata block.

Format (node 0 is the root)::

    {"nodes": [{"id": 0, "label": "Sustainability", "topic": "Society and social sciences"}, ...],
     "edges": [{"source": 0, "target": 1}, ...],
     "metadata": {...}}

The seed's own files have no "metadata" and no "topic"; `read_graph` accepts them unchanged. A graph file is the
user's own input, so a label that cannot be a title (lib.common.titles.check_title: empty, a control character, over
255 bytes) refuses the file, naming it and the node; labels are read with surrounding whitespace stripped and in NFC.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

from lib.common.errors import WikigatError
from lib.common.paths import atomic_write_bytes
from lib.common.titles import TitleError, check_title


class GraphFormatError(WikigatError, ValueError):
    pass


@dataclass
class Graph:
    """An undirected graph of article titles.

    titles: [N] node labels, index = node id, titles[0] = root.
    edges:  [E] pairs (u, v) of node ids, u != v, each undirected edge once.
    topics: [N] topic label per node or None where unknown.
    """

    titles: list[str]
    edges: list[tuple[int, int]]
    topics: list[str | None] | None = None
    metadata: dict = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return len(self.titles)

    @property
    def num_edges(self) -> int:
        return len(self.edges)

    @property
    def root(self) -> str:
        return self.titles[0]

    def to_json_bytes(self) -> bytes:
        """Canonical bytes: the same graph always serialises to the same bytes."""
        nodes = []
        for i, t in enumerate(self.titles):
            node = {"id": i, "label": t}
            if self.topics is not None and self.topics[i] is not None:
                node["topic"] = self.topics[i]
            nodes.append(node)
        obj = {
            "nodes": nodes,
            "edges": [{"source": int(u), "target": int(v)} for u, v in self.edges],
            "metadata": self.metadata,
        }
        return (json.dumps(obj, ensure_ascii=False, sort_keys=False, indent=None, separators=(",", ":")) + "\n").encode(
            "utf-8"
        )

    def to_networkx(self):
        g = nx.Graph()
        g.add_nodes_from(range(self.num_nodes))
        g.add_edges_from(self.edges)
        return g


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_graph(path: str | Path, graph: Graph) -> str:
    """Atomically write `graph` to `path`; return the file's sha256."""
    data = graph.to_json_bytes()
    atomic_write_bytes(path, data)
    return sha256_bytes(data)


def read_graph(path: str | Path) -> Graph:
    """Read a project graph file or one of the seed's own files (ids remapped to 0..N-1 in file order); a label that
    is not a title is a GraphFormatError naming the file and the node."""
    path = Path(path)
    try:
        obj = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise GraphFormatError(f"graph file {path} does not exist") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise GraphFormatError(f"graph file {path} is not valid UTF-8 JSON ({e}); re-export it as JSON") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("nodes"), list) or not isinstance(obj.get("edges"), list):
        raise GraphFormatError(f'graph file {path} must be an object with "nodes" and "edges" lists (seed format)')
    index: dict = {}
    titles: list[str] = []
    topics: list[str | None] = []
    for k, n in enumerate(obj["nodes"]):
        if not isinstance(n, dict) or "id" not in n or "label" not in n:
            raise GraphFormatError(f'graph file {path}: node #{k} needs "id" and "label", got {n!r:.80}')
        if n["id"] in index:
            raise GraphFormatError(f"graph file {path}: node id {n['id']!r} appears twice")
        try:
            title = check_title(str(n["label"]))
        except TitleError as e:
            raise GraphFormatError(f"graph file {path}: node #{k} (id {n['id']!r}): {e}") from None
        index[n["id"]] = len(titles)
        titles.append(title)
        topics.append(n.get("topic"))
    edges: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    for k, e in enumerate(obj["edges"]):
        try:
            u, v = index[e["source"]], index[e["target"]]
        except (KeyError, TypeError):
            raise GraphFormatError(
                f'graph file {path}: edge #{k} {e!r:.80} refers to a node id that is not in "nodes"'
            ) from None
        key = (min(u, v), max(u, v))
        if u == v or key in seen:  # the seed's files may hold self-loops or both directions
            continue
        seen.add(key)
        edges.append((u, v))
    return Graph(
        titles=titles,
        edges=edges,
        topics=topics if any(t is not None for t in topics) else None,
        metadata=obj.get("metadata", {}) or {},
    )
