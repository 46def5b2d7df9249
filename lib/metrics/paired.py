"""The one paired-interval routine: differences paired by seed, their mean and 95% t-interval."""
from __future__ import annotations

import numpy as np
from scipy.stats import t as student_t


def mean_interval(diffs) -> dict:
    """{seeds, diff, std, ci_low, ci_high} of paired differences `diffs` [n]: the mean, its sample std and the 95%
    t-interval of the mean (NaN std and interval with fewer than two seeds)."""
    d = np.asarray(diffs, dtype=float)
    n = len(d)
    mean = float(d.mean()) if n else float("nan")
    sd = float(d.std(ddof=1)) if n > 1 else float("nan")
    half = float(student_t.ppf(0.975, n - 1) * sd / np.sqrt(n)) if n > 1 else float("nan")
    return {"seeds": n, "diff": mean, "std": sd, "ci_low": mean - half, "ci_high": mean + half}
