"""Notebook 03b's verdict table of any run folder: a published run's or one made on your own links.

    python -m lib.run.verdicts outputs/mine_beyond            # a run of yours (README, "Use your own link data")
    python -m lib.run.verdicts outputs/reference/seed40 --markdown
    python -m lib.run.verdicts outputs/seed40 --before outputs/reference/seed40   # a re-made run beside the published

Reads the folder's beyond_rows.csv (every model's per-seed test and validation rows), judges each protocol × negative
set by the project's one rule (docs/honesty.md, "How a claim is judged") and prints one row per cell: the model chosen
on validation, the bar, the goal's verdict, each part with its 95% interval, and the margin over the bar on positives
with and without a common neighbour. With `--before`, one row per cell sets an earlier run's (the published one's)
seeds, chosen model, goal and margins beside this run's. Exit status 2 when a folder holds no finished notebook 03b.
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from lib.common.errors import WikigatError
from lib.common.paths import resolve, shown
from lib.linkpred.beyond import gap_table
from lib.metrics.selection import verdict_table

ROWS = "beyond_rows.csv"


class VerdictError(WikigatError, ValueError):
    """A folder without notebook 03b's rows: one line naming it and the fix."""


def run_verdicts(run_dir) -> pd.DataFrame:
    """verdict_table (lib.metrics.selection) of the notebook 03b rows in run folder `run_dir`."""
    rows = resolve(run_dir) / ROWS
    if not rows.is_file():
        raise VerdictError(
            f"{shown(rows)} does not exist: {shown(run_dir)} holds no finished notebook 03b; run it "
            f"with --notebooks 01 02 03 03b and params/beyond.yaml (README, 'Use your own link data')"
        )
    return verdict_table(gap_table(pd.read_csv(rows)))


BESIDE = ("seeds", "chosen model", "goal", "AUC margin, cn positives", "AUC margin, no_cn positives")
"""The columns `--before` sets side by side."""


def before_after(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Two verdict tables' BESIDE columns per protocol × negative set, `before ·` and `after ·` (a cell only one run
    has is shown with the other's side empty), in the after table's order."""
    key = ["protocol", "negatives"]
    sides = [
        t.set_index(key)[list(BESIDE)].add_prefix(f"{name} · ") for name, t in (("before", before), ("after", after))
    ]
    table = sides[0].join(sides[1], how="outer")
    order = list(after.set_index(key).index) + [
        i for i in before.set_index(key).index if i not in set(after.set_index(key).index)
    ]
    return table.reindex(order).reset_index().fillna("")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", help="a run folder notebook 03b finished, e.g. outputs/mine_beyond")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table (for a README)")
    ap.add_argument("--before", metavar="RUN_DIR", help="an earlier run folder to set beside it, cell by cell")
    args = ap.parse_args(argv)
    try:
        table = run_verdicts(args.run_dir)
        earlier = run_verdicts(args.before) if args.before else None
    except VerdictError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    counted = summary(table)
    if earlier is not None:
        print(f"before: {summary(earlier)}\nafter: {counted}")
        table = before_after(earlier, table)
    with pd.option_context("display.max_colwidth", None, "display.width", 250):
        print(table.to_markdown(index=False) if args.markdown else table.to_string(index=False))
    if earlier is None:
        print(counted)
    return 0


def summary(table: pd.DataFrame) -> str:
    """'goal met in 5, missed in 3, undecided in 4 of 12 protocol × negative-set cells (3 seeds)'."""
    counts = table["goal"].value_counts()
    seeds = sorted(set(table["seeds"].dropna().astype(int)))
    return (
        f"goal met in {counts.get('met', 0)}, missed in {counts.get('missed', 0)}, undecided in "
        f"{counts.get('undecided', 0)} of {len(table)} protocol × negative-set cells "
        f"({'/'.join(map(str, seeds)) or '?'} seeds)"
    )


if __name__ == "__main__":
    sys.exit(main())
