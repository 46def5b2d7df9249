"""One registry helper for every extension point (heuristics, decoders, negative sets, encoder kinds, link sources):
a read-only mapping name -> entry that refuses a second entry of the same name, names its entries in one clear error
line and lists them for the docs (`rows`), so the docs' lists are generated from the code and cannot drift.

    HEURISTICS = Registry("heuristic", "lib.linkpred.heuristics")
    HEURISTICS.add(Heuristic("cosine", ...))   # an entry has a `name`
    HEURISTICS["cosine"]; HEURISTICS.check("cosin")   # ValueError: heuristic 'cosin' is unknown; use one of ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

Entry = TypeVar("Entry")


class Registry(Mapping[str, Entry], Generic[Entry]):
    """Entries by name, in the order they were added. what: what one entry is ("heuristic"); where: the module a user
    adds one in (named by the errors); about(entry): its one line for the docs (default: entry.about, else the
    entry's label or describe field)."""

    def __init__(self, what: str, where: str, about: Callable[[Entry], str] | None = None):
        self.what, self.where = what, where
        self._about = about
        self._entries: dict[str, Entry] = {}

    def add(self, entry: Entry) -> Entry:
        """Add `entry` under entry.name (which must be new); returns it, so it can decorate or wrap a definition."""
        name = entry.name
        if name in self._entries:
            raise ValueError(
                f"{self.what} {name!r} is registered already ({self.where}); give the new one another name"
            )
        self._entries[name] = entry
        return entry

    def pop(self, name: str, default=None):
        """Remove an entry (a test's temporary one); returns it, or default when absent."""
        return self._entries.pop(name, default)

    def check(self, name: str) -> str:
        """name, when registered; otherwise one line naming the registered ones."""
        if name not in self._entries:
            raise ValueError(f"{self.what} {name!r} is unknown; use one of {tuple(self._entries)} ({self.where})")
        return name

    def about(self, name: str) -> str:
        entry = self._entries[self.check(name)]
        if self._about is not None:
            return self._about(entry)
        for attr in ("about", "label", "describe"):
            if isinstance(getattr(entry, attr, None), str):
                return getattr(entry, attr)
        return ""

    def rows(self) -> list[dict[str, str]]:
        """One {"name", "about"} row per entry, in order: the docs' generated lists."""
        return [{"name": n, "about": self.about(n)} for n in self._entries]

    def __getitem__(self, name: str) -> Entry:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self._entries)})"
