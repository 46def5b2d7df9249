"""The findings: one typed record per finding, computed once from the committed reference runs (numbers, the runs
they come from, a verdict; lib.run.link_findings and lib.run.distill_findings), and two renderers of each record —
`readme()`, at most two lines for the README with every number linked to its run, and `page()`, the long sentence of
docs/results.md with every row. A finding whose runs are not committed is left out, so the list shrinks rather than
lies."""

from __future__ import annotations

import textwrap
from pathlib import Path

from lib.run.distill_findings import ablations, distillation, knowledge_distillation
from lib.run.embedder_findings import node_embedders
from lib.run.facts import REFERENCE_RUNS, common_commit, reproduced_line
from lib.run.link_findings import aauc_trend, beyond, gain_strata, harder_negatives, leakage, reproduction

WIDTH = 196
"""Characters per README line a finding is wrapped to."""
MADE_AT = "Made at"
"""How the README's line naming the other commits behind a finding begins (after its list item's indent and `*`)."""
FINDINGS = (
    reproduction,
    aauc_trend,
    leakage,
    beyond,
    gain_strata,
    harder_negatives,
    distillation,
    ablations,
    node_embedders,
    knowledge_distillation,
)
"""The findings in reading order: README and results page show them in this order."""


def fact_table(runs: dict[str, dict], ref: Path = REFERENCE_RUNS) -> list:
    """The record of every finding the committed runs support, in FINDINGS order."""
    return [rec for f in FINDINGS if (rec := f(runs, ref)) is not None]


def readme_lines(
    records: list, runs: dict[str, dict], base: str = "", commits: dict | None = None, checks: dict | None = None
) -> list[str]:
    """The README's findings as Markdown lines: a list item per record wrapped to WIDTH, then one reference-link
    definition per run named (`[seed40]: outputs/reference/seed40/`, under `base`), then a blank line. With `commits`
    (run -> the commits its numbers were made at, lib.run.facts.run_commits) a first line names the commit most runs
    share, and a finding citing a run made at another commit is followed by a line naming it. With `checks` (run -> its
    reproduction record, lib.run.facts.reproduced) a line says which runs later code re-ran and what it found."""
    lines, named = [], []
    common = common_commit(commits) if commits else None
    if common:
        lines += [f"Every number below was made at commit `{common}` unless its finding names another.", ""]
    if line := reproduced_line(checks or {}):
        lines += [*textwrap.wrap(line, WIDTH, break_on_hyphens=False, break_long_words=False), ""]
    for text in filter(None, (rec.readme() for rec in records)):
        cited = [r for r in runs if f"[{r}]" in text]
        other = sorted({c for r in cited for c in (commits or {}).get(r, ()) if c != common})
        lines += textwrap.wrap(
            text, WIDTH, initial_indent="- ", subsequent_indent="  ", break_on_hyphens=False, break_long_words=False
        )
        if common and other:  # on lines of its own, so the finding keeps its length whatever its runs' commits
            lines.append(f"  *{MADE_AT} {', '.join(f'`{c}`' for c in other)}.*")
        named += [r for r in cited if r not in named]
    return lines + [""] + [f"[{r}]: {base}outputs/reference/{r}/" for r in named] + [""]


def page_lines(records: list, base: str = "../") -> list[str]:
    """The results page's findings as Markdown list items, each run linked under `base`."""
    return [f"- {rec.page()}".replace("](outputs/", f"]({base}outputs/") for rec in records]
