"""Stage 3's results tables as notebooks 03 and 03b show them: one column per protocol and negative set (in the
registry's order), optionally split by common-neighbour stratum; each cell is lib.metrics.link's 'mean ± std' over
seeds."""

from __future__ import annotations

import pandas as pd

from lib.linkpred.negative_sets.registry import NEGATIVE_SETS
from lib.metrics.link import STRATA, mean_std


def results_table(
    rows, metric: str = "auc", index=("model", "supervision"), strata: bool = False, order: list | None = None
):
    """Notebook 03/03b results: index × (protocol, negative set[, stratum]) of 'mean ± std' over seeds of `metric`;
    strata=True splits the positives into those with a common neighbour in the message passing ('cn') and without
    ('no_cn') from the per-stratum columns <metric>_cn / <metric>_no_cn. order: the index values to show, in order."""

    df = pd.DataFrame(rows)
    if strata:
        cols = [f"{metric}_{st}" for st in STRATA if f"{metric}_{st}" in df]
        keys = [*index, "protocol", "negatives", "seed"]
        df = (
            df[keys + cols]
            .melt(id_vars=keys, value_vars=cols, var_name="stratum", value_name=metric)
            .dropna(subset=[metric])
        )
        df["stratum"] = df["stratum"].str.removeprefix(f"{metric}_")
    columns = ["protocol", "negatives", "stratum"] if strata else ["protocol", "negatives"]
    df = df.dropna(subset=[metric])
    t = df.pivot_table(index=list(index), columns=columns, values=metric, aggfunc=mean_std, sort=False)
    rank = {
        "protocol": {p: i for i, p in enumerate(dict.fromkeys(df["protocol"]))},
        "negatives": {n: i for i, n in enumerate(NEGATIVE_SETS)},
        "stratum": {s: i for i, s in enumerate(STRATA)},
    }
    t = t[sorted(t.columns, key=lambda c: tuple(rank[k].get(v, 99) for k, v in zip(columns, c)))]
    if order is not None:
        t = t.reindex([o for o in order if o in t.index])
    return t
