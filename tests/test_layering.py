"""How lib is layered: packages import one another without a cycle (a package uses the ones it builds on, never one
that builds on it), and what every stage shares lives in lib/common: the project's error type, seed derivation and
the one timing estimator."""

from __future__ import annotations

import ast
import builtins
import re
import time

import networkx as nx
import pytest
import torch

from lib.common.errors import WikigatError
from lib.common.params import ParamError
from lib.common.seeding import derive_seed
from lib.common.timing import median_seconds, median_seconds_each, seconds_each
from lib.distill import eval as distill_eval
from lib.kd.config import KdError
from lib.kd.stage import speed as kd_speed
from lib.kd.train import kd_loss
from tests.test_house import import_graph, modules


def package_graph(mods: dict) -> nx.DiGraph:
    """Package -> package it imports from (lib.<package>, lib itself left out), from every import in the source,
    module level and inside functions alike; imports within a package are no edge."""
    g = nx.DiGraph()
    g.add_nodes_from({n.split(".")[1] for n in mods if n.count(".") >= 1})
    for a, b in import_graph(mods).edges:
        pa, pb = a.split(".")[1], b.split(".")[1]
        if pa != pb:
            g.add_edge(pa, pb)
    return g


def test_lib_packages_import_one_another_without_a_cycle():
    g = package_graph(modules())
    cycle = next(iter(nx.simple_cycles(g)), None)
    assert cycle is None, (
        f"package import cycle in lib: {' -> '.join([*cycle, cycle[0]])}; move what both need "
        f"into the lower package (or lib/common)"
    )
    assert {"common", "linkpred", "metrics", "viz", "embed", "distill"} <= set(g)


def test_the_package_graph_finds_a_cycle_through_a_function_import(tmp_path):
    files = {
        "lib.a.x": "from lib.b.y import f\n",
        "lib.b.y": "def f():\n    from lib.a.x import g\n",
        "lib.b.z": "from lib.b.y import f\n",
    }
    mods = {}
    for name, text in files.items():
        mods[name] = tmp_path / f"{name}.py"
        mods[name].write_text(text)
    assert sorted(map(sorted, nx.simple_cycles(package_graph(mods)))) == [["a", "b"]]


# ------------------------------------------------------------------------------------------------- errors
SIGNALS = {  # exception classes that are control flow inside one module, never shown to a user
    "ChunkCorrupt": "lib.common.chunks: a damaged chunk, moved aside and rebuilt by the store that reads it",
    "RootSkipped": "lib.crawl.pages: a missing or disambiguation root, recorded by the campaign, which goes on",
    "_Transient": "lib.crawl.live: an answer worth retrying, caught by the retry loop",
}


def error_classes() -> dict[str, list[str]]:
    """Every class of lib that derives (by name, through lib's own classes) from a built-in exception ->
    the names of its ancestors defined in lib."""
    bases = {}
    for path in modules().values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]

    def ancestors(name, seen=()):
        return [a for b in bases.get(name, []) if b not in seen for a in (b, *ancestors(b, (*seen, b)))]

    builtin = {n for n in dir(builtins) if n.endswith(("Error", "Exception"))}
    return {n: ancestors(n) for n in bases if builtin & {n, *ancestors(n)} and not n.endswith("Warning")}


def test_every_error_lib_raises_is_a_wikigat_error():
    found = error_classes()
    assert {"DistillError", "EmbedError", "ParamError", "KdError", "WikigatError"} <= set(found)
    outside = sorted(
        n for n, up in found.items() if n != "WikigatError" and n not in SIGNALS and "WikigatError" not in up
    )
    assert not outside, f"errors that do not derive from lib.common.errors.WikigatError: {outside}"


def test_stage_6_raises_its_own_error_which_callers_catch_as_the_project_error():
    with pytest.raises(KdError, match="temperature=0") as caught:
        kd_loss(torch.zeros(2, 3), torch.zeros(2, 3), soft="kl", temperature=0)
    assert isinstance(caught.value, WikigatError) and isinstance(caught.value, ValueError)
    assert "lib.distill" not in type(caught.value).__module__


# ------------------------------------------------------------------------------------------------- seeds
def test_seeds_derive_in_lib_common_as_before():
    assert derive_seed.__module__ == "lib.common.seeding"
    # the values every published run drew with
    assert derive_seed(0, "eval-aauc", "b") == 5888783541813743704
    assert derive_seed(7, "train-neg", 3, 12) == 1537233044079515045
    defined = [
        n
        for n, p in modules().items()
        for f in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(f, ast.FunctionDef) and f.name == "derive_seed"
    ]
    assert defined == ["lib.common.seeding"]


# ------------------------------------------------------------------------------------------------- timing
SPEED = re.compile(r"speed|per_s(econd)?\b|seconds_per|time_inference")


class FakeClock:
    """time.perf_counter that only moves when a timed call says how long it took."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def takes(self, seconds: float):
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    c = FakeClock()
    monkeypatch.setattr(time, "perf_counter", c)
    return c


def test_the_estimator_is_the_median_of_timed_calls_after_an_untimed_warm_up(clock):
    took = iter([100.0, 1.0, 5.0, 2.0])  # the first call is the warm-up: not timed
    assert median_seconds(lambda: clock.takes(next(took)), repeats=3) == 2.0
    order = []
    got = median_seconds_each(
        {"a": lambda: (order.append("a"), clock.takes(1)), "b": lambda: (order.append("b"), clock.takes(4))},
        repeats=2,
        warm_ups={"a": lambda: order.append("warm a")},
    )
    assert got == {"a": 1.0, "b": 4.0}
    assert order == ["warm a", "b", "a", "b", "a", "b"]  # b warms up with its own call; rounds alternate
    took = iter([9.0, 9.0, 1.0, 3.0, 2.0, 8.0])  # two warm-ups, then round 1 (a, b) and round 2 (a, b)
    rounds = seconds_each({"a": lambda: clock.takes(next(took)), "b": lambda: clock.takes(next(took))}, repeats=2)
    assert rounds == {"a": [1.0, 2.0], "b": [3.0, 8.0]}  # each round's times, paired by position, not sorted
    with pytest.raises(ParamError, match="repeats=0 must be >= 1"):
        median_seconds(lambda: None, repeats=0)


def test_stage_speed_tables_time_with_the_one_estimator(clock, monkeypatch):
    texts = [f"t{i}" for i in range(100)]
    took = iter([0.0, 1.0, 5.0, 2.0])
    assert kd_speed(lambda x: clock.takes(next(took)), texts, repeats=3) == 100 / 2.0  # median, not best of

    took = iter([0.0, 1.0, 5.0, 2.0])
    monkeypatch.setattr(distill_eval, "encode", lambda *a, **k: clock.takes(next(took)))
    assert distill_eval.time_inference(None, texts, 16, repeats=3) == 2.0 * 1000 / 100

    estimators = [
        f"{n}.{f.name}"
        for n, p in modules().items()
        if n != "lib.common.timing"
        for f in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(f, ast.FunctionDef) and SPEED.search(f.name) and "perf_counter" in ast.unparse(f)
    ]
    assert not estimators, f"speed measured outside lib.common.timing: {estimators}"
