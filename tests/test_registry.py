from dataclasses import dataclass

import pytest

from lib.common.registry import Registry
from lib.embedders.encoders import ENCODERS
from lib.linkpred.decoders import DECODERS
from lib.linkpred.heuristics import REGISTRY as HEURISTICS
from lib.linkpred.negative_sets.registry import REGISTRY as NEGATIVE_SETS


@dataclass(frozen=True)
class Entry:
    name: str
    about: str


def test_a_registry_refuses_a_second_entry_of_a_name_and_names_its_entries_for_an_unknown_one():
    r = Registry("widget", "lib.somewhere")
    r.add(Entry("a", "the first"))
    r.add(Entry("b", "the second"))
    with pytest.raises(ValueError, match=r"widget 'a' is registered already \(lib.somewhere\)"):
        r.add(Entry("a", "again"))
    with pytest.raises(ValueError, match=r"widget 'c' is unknown; use one of \('a', 'b'\) \(lib.somewhere\)"):
        r.check("c")
    assert list(r) == ["a", "b"] and r["b"].about == "the second" and len(r) == 2
    assert r.rows() == [{"name": "a", "about": "the first"}, {"name": "b", "about": "the second"}]
    assert r.pop("a").about == "the first" and "a" not in r


@pytest.mark.parametrize("registry", [HEURISTICS, DECODERS, NEGATIVE_SETS, ENCODERS], ids=lambda r: r.what)
def test_every_extension_point_is_one_registry_that_refuses_duplicates_and_lists_its_entries(registry):
    assert isinstance(registry, Registry)
    first = next(iter(registry.values()))
    with pytest.raises(ValueError, match="registered already"):
        registry.add(first)
    assert all(row["about"] for row in registry.rows())
