"""The one speed estimator every speed table uses: the median wall-clock seconds of a few timed calls, after one
untimed warm-up call.

The warm-up pays what only the first call pays (lazy imports, allocator and kernel caches, tokenizer set-up); the
median, unlike the best or the mean of the repeats, is neither flattered by one lucky call nor dragged by one call
that a busy machine slowed. When several things are compared, each round times every one of them once, in turn, so a
machine that slows down for a while slows all of them alike. Each table turns the seconds into its own unit (titles
or sentences per second, seconds per 1,000 items).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping

from lib.common.params import ParamError

REPEATS = 3
"""Timed calls per measurement unless a caller asks for more."""


def seconds_each(
    calls: Mapping[str, Callable[[], object]],
    repeats: int = REPEATS,
    warm_ups: Mapping[str, Callable[[], object]] | None = None,
) -> dict[str, list[float]]:
    """{name: the seconds of calls[name]() in each of `repeats` rounds} [repeats], each round calling every function
    once in turn, after one untimed call of each: warm_ups[name]() where given (e.g. the same work on a few inputs),
    else the call itself. The times of one round ran back to back, so their ratios are paired
    (lib.metrics.paired.judge_ratio)."""
    if repeats < 1:
        raise ParamError(f"repeats={repeats} must be >= 1; time at least one call")
    for name, call in calls.items():
        (warm_ups or {}).get(name, call)()
    runs: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            runs[name].append(time.perf_counter() - t0)
    return runs


def median_seconds_each(
    calls: Mapping[str, Callable[[], object]],
    repeats: int = REPEATS,
    warm_ups: Mapping[str, Callable[[], object]] | None = None,
) -> dict[str, float]:
    """{name: median seconds of calls[name]()} over seconds_each's `repeats` rounds."""
    return {name: statistics.median(v) for name, v in seconds_each(calls, repeats, warm_ups).items()}


def median_seconds(
    call: Callable[[], object], repeats: int = REPEATS, warm_up: Callable[[], object] | None = None
) -> float:
    """Median seconds of call() over `repeats` timed calls after one untimed warm_up() (the call itself when None)."""
    return median_seconds_each({"": call}, repeats, None if warm_up is None else {"": warm_up})[""]
