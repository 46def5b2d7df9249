"""The one judging rule of the project, and the paired interval it reads.

A claim "A beats B by at least m" is judged on the differences A − B paired by seed: their 95% t-interval of the mean
is **met** when it lies above m (its lower bound > m), **missed** when it lies below m (its upper bound < m) and
**undecided** when it holds m; with fewer than two seeds there is no interval and every claim is undecided. A claim
made of several parts (a goal with an AUC and an MRR margin) is met when every part is met, missed when one part is
missed, and undecided otherwise. Every verdict the notebooks, the results page and the README print comes from
`verdict` and is printed with its interval (`judged_text`).

Where A and B come from two independent runs (no seed of one is the seed of the other), there is nothing to pair: the
interval is Welch's 95% t-interval of the difference of the two runs' means over all their seeds (`judge_independent`),
read by the same `verdict`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.stats import t as student_t
from scipy.stats import ttest_ind

VERDICTS = ("met", "undecided", "missed")


def mean_interval(diffs) -> dict:
    """{seeds, diff, std, ci_low, ci_high} of paired differences `diffs` [n]: the mean, its sample std and the 95%
    t-interval of the mean (NaN std and interval with fewer than two seeds)."""
    d = np.asarray(diffs, dtype=float)
    n = len(d)
    mean = float(d.mean()) if n else float("nan")
    sd = float(d.std(ddof=1)) if n > 1 else float("nan")
    half = float(student_t.ppf(0.975, n - 1) * sd / np.sqrt(n)) if n > 1 else float("nan")
    return {"seeds": n, "diff": mean, "std": sd, "ci_low": mean - half, "ci_high": mean + half}


def _no_interval(ci_low: float | None, ci_high: float | None) -> bool:
    """True where a bound is missing or NaN (fewer than two seeds or repeats)."""
    return ci_low is None or ci_high is None or math.isnan(ci_low) or math.isnan(ci_high)


def verdict(ci_low: float, ci_high: float, margin: float = 0.0) -> str:
    """The rule: "met" when the interval [ci_low, ci_high] lies above `margin`, "missed" when below it, "undecided"
    when it holds it or is undefined (NaN: fewer than two seeds)."""
    if _no_interval(ci_low, ci_high):
        return "undecided"
    if ci_low > margin:
        return "met"
    return "missed" if ci_high < margin else "undecided"


def judge(diffs, margin: float = 0.0) -> dict:
    """`mean_interval(diffs)` with the claim's `margin` and its `verdict`."""
    r = mean_interval(diffs)
    return {**r, "margin": margin, "verdict": verdict(r["ci_low"], r["ci_high"], margin)}


def judge_independent(first, last, margin: float = 0.0) -> dict:
    """The rule for the change from one run to another, independent one: {seeds (the fewer of the two), seeds_first,
    seeds_last, diff, ci_low, ci_high, margin, verdict}, where diff = mean(last) - mean(first) over every seed of each
    run [n_first], [n_last] and the interval is Welch's (unequal variances); NaN with fewer than two seeds in either."""
    a, b = np.asarray(first, dtype=float), np.asarray(last, dtype=float)
    diff = float(b.mean() - a.mean()) if len(a) and len(b) else float("nan")
    low = high = float("nan")
    if len(a) > 1 and len(b) > 1:
        ci = ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
        low, high = float(ci.low), float(ci.high)
    return {
        "seeds": min(len(a), len(b)),
        "seeds_first": len(a),
        "seeds_last": len(b),
        "diff": diff,
        "ci_low": low,
        "ci_high": high,
        "margin": margin,
        "verdict": verdict(low, high, margin),
    }


def judge_ratio(times, reference_times, target: float) -> dict:
    """The speed claim "a step takes at most `target` times the reference's", judged by the same rule on repeats
    measured back to back: times[i] and reference_times[i] [n] ran one after the other under the same machine load,
    so their ratios are paired like seeds. {repeats, ratio (the mean of the paired ratios), ci_low, ci_high (its 95%
    t-interval), target, verdict}: met when the interval lies below the target, missed when it lies above it,
    undecided when it holds it (or with fewer than two repeats)."""
    a, b = np.asarray(times, dtype=float), np.asarray(reference_times, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"times {a.shape} and reference times {b.shape} must be paired lists of equal length")
    r = mean_interval(a / b)
    return {
        "repeats": r["seeds"],
        "ratio": r["diff"],
        "ci_low": r["ci_low"],
        "ci_high": r["ci_high"],
        "target": target,
        "verdict": verdict(target - r["ci_high"], target - r["ci_low"]),  # the margins target - ratio lie above 0
    }


def ratio_text(judged: dict) -> str:
    """A judge_ratio result in one phrase: 'missed: 0.400 [0.391, 0.409] (15 paired repeats) against <= 0.30'."""
    lo, hi = judged["ci_low"], judged["ci_high"]
    interval = "(no interval)" if _no_interval(lo, hi) else f"[{lo:.3f}, {hi:.3f}]"
    n, plural = judged["repeats"], "s" * (judged["repeats"] != 1)
    repeats = f"({n} paired repeat{plural})"
    return f"{judged['verdict']}: {judged['ratio']:.3f} {interval} {repeats} against <= {judged['target']}"


def verdicts(rows: pd.DataFrame, margin: float = 0.0) -> pd.Series:
    """`verdict` of each row of a table of intervals (columns ci_low, ci_high), against `margin`."""
    return pd.Series(
        [verdict(lo, hi, margin) for lo, hi in zip(rows["ci_low"], rows["ci_high"])], index=rows.index, dtype=object
    )


def all_of(verdicts) -> str:
    """The verdict of a claim made of parts: met when every part is met, missed when one is missed, else undecided."""
    verdicts = list(verdicts)
    if "missed" in verdicts:
        return "missed"
    return "met" if verdicts and all(v == "met" for v in verdicts) else "undecided"


def interval_text(diff: float, ci_low: float, ci_high: float) -> str:
    """'+0.043 [+0.031, +0.055]', or '+0.043 (no interval)' with fewer than two seeds."""
    if _no_interval(ci_low, ci_high):
        return f"{diff:+.3f} (no interval)"
    return f"{diff:+.3f} [{ci_low:+.3f}, {ci_high:+.3f}]"


def judged_text(diff: float, ci_low: float, ci_high: float, margin: float = 0.0) -> str:
    """A verdict beside its interval and margin: 'met: +0.043 [+0.031, +0.055] > +0.020'."""
    v = verdict(ci_low, ci_high, margin)
    sign = {"met": ">", "missed": "<", "undecided": "holds"}[v]
    return f"{v}: {interval_text(diff, ci_low, ci_high)} {sign} {margin:+.3f}"
