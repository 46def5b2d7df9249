"""The README is a front page and docs/ holds the reference: sizes, links that resolve, pages generated
from the code."""

import io
import json
import re
import tokenize
from pathlib import Path

import pytest

from lib.common.paths import ROOT
from lib.run import parameters_page, report
from lib.run.findings import MADE_AT

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
MAX_README_LINES = 200
MAX_PROSE = 200
MAX_FINDING_LINES = 2  # per finding: read at a glance, the long form is on docs/results.md
MAX_RESULTS_LINES = 60
HISTORY = re.compile(
    r"\bcalled\s+\S.*\bbefore\b|\bpredate|\bno longer\b|\bformerly\b|\bused to be\b|\bwas renamed\b|"
    r"\bbefore the rename\b|\bfirst builds?\b|\bthe old\b|\bold names?\b|\bolder (?:runs?|formats?|"
    r"records?|checkpoints?|folders?|versions?|files?)\b|\bfrom before\b|\bbefore \S+ existed\b|"
    r"\bbefore the term\b|\bwas called\b|\bpreviously\b|\blegacy\b|\bearlier (?:formats?|versions?)\b",
    re.IGNORECASE,
)
# Where the history check reads comments, docstrings, string literals and notebook cells.
HISTORY_CHECKED = [
    "lib/aauc",
    "lib/common",
    "lib/crawl",
    "lib/distill",
    "lib/embed",
    "lib/kd",
    "lib/linkpred",
    "lib/metrics",
    "lib/run",
    "lib/viz",
    "notebooks",
    "docs",
]
# The one module that reads runs published in an older format: it names the older forms it translates.
HISTORY_EXEMPT = "lib/common/published.py"


def _without_code(text: str) -> str:
    """Markdown with fenced blocks blanked (line count kept) and inline code removed."""
    text = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def prose_lines(text: str) -> list[str]:
    """Lines a reader reads as running text: not in a code block, not a table row, a link definition or a comment."""
    return [
        ln
        for ln in _without_code(text).splitlines()
        if ln.strip() and not ln.lstrip().startswith(("|", "<!--")) and not re.match(r"\s*\[[^\]]+\]:\s", ln)
    ]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the text lowercased, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[`*]", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for h in re.findall(r"^#{1,6} +(.+?) *#*$", re.sub(r"```.*?```", "", text, flags=re.S), flags=re.M):
        s = slug(h)
        out.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return out


def broken_links(page: Path) -> list[str]:
    """Every relative link, image and reference definition of a Markdown page whose file or anchor is missing, and
    every reference-style link without a definition."""
    text = _without_code(page.read_text(encoding="utf-8"))
    targets = re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", text) + re.findall(r"^\s*\[[^\]]+\]:\s+(\S+)", text, flags=re.M)
    bad = []
    for t in targets:
        if re.match(r"[a-z]+:", t):  # http:, https:, mailto:
            continue
        path, _, anchor = t.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            bad.append(f"{page.name}: {t} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text(encoding="utf-8")):
            bad.append(f"{page.name}: {t} (no heading with that anchor)")
    defined = set(re.findall(r"^\s*\[([^\]]+)\]:\s", text, flags=re.M))
    bad += [
        f"{page.name}: [{label}] (no definition)"
        for label in re.findall(r"\]\[([^\]]+)\]", text)
        if label not in defined
    ]
    return bad


def section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def test_the_readme_is_a_front_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_README_LINES, f"README.md has {len(text.splitlines())} lines"
    long = [ln[:80] for ln in prose_lines(text) if len(ln) > MAX_PROSE]
    assert not long, f"README prose lines over {MAX_PROSE} characters: {long}"
    results = section(text, "Results")
    assert len(results.splitlines()) <= MAX_RESULTS_LINES
    findings = report.readme_block(text, report.FBEGIN, report.FEND)
    # a finding's lines, without the lines after it that name the other commits behind it (lib.run.findings.MADE_AT)
    items = [ln for ln in findings.splitlines() if ln.startswith(("- ", "  ")) and not ln.startswith(f"  *{MADE_AT}")]
    assert items, "no findings"
    runs = set(re.findall(r"^\[([^\]]+)\]: outputs/reference/\1/$", findings, flags=re.M))
    for item in re.split(r"\n(?=- )", "\n".join(items)):
        assert item.count("\n") < MAX_FINDING_LINES, f"a finding over {MAX_FINDING_LINES} lines: {item[:80]}"
        linked = set(re.findall(r"\[([^\]]+)\](?![(:])", item)) & runs
        assert linked, f"a finding without a link to its run: {item[:80]}"


def test_the_readme_says_what_things_are_now():
    hits = [ln for ln in prose_lines(README.read_text(encoding="utf-8")) if HISTORY.search(ln)]
    assert not hits, hits


def test_the_history_pattern_catches_what_it_should():
    for s in [
        "this set was called hard before",
        "the rows predate that fix",
        "it no longer runs",
        "In the first builds",
        "rows without val_auc (older runs)",
        "the settings it had before the term existed",
        "checkpoints from before `global_batch`",
        "the old name keeps its pairs",
    ]:
        assert HISTORY.search(s), s
    for s in [
        "the seed report",
        "before any work",
        "called by the runner",
        "scores called before fit(graphs)",
        "a run whose rows equal an earlier run's",
        "test is never used to select",
    ]:
        assert not HISTORY.search(s), s


def python_text(source: str) -> list[tuple[int, str]]:
    """(line number, line) of the comments, docstrings and string literals of Python source: what a reader reads."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)):
            out += [(tok.start[0] + k, ln) for k, ln in enumerate(tok.string.splitlines())]
    return out


def history_hits(path: Path, root: Path = ROOT) -> list[str]:
    """`file:line: text` of every line a reader reads in `path` (a module, a notebook's markdown and code cells, a
    Markdown page) that tells history instead of what a thing is now."""
    rel = path.relative_to(root).as_posix()
    if path.suffix == ".py":
        lines = [(f"{n}", ln) for n, ln in python_text(path.read_text(encoding="utf-8"))]
    elif path.suffix == ".ipynb":
        lines = []
        for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            src = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                lines += [(f"cell {i}", ln) for ln in prose_lines(src)]
            elif cell["cell_type"] == "code":
                code = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.splitlines())
                lines += [(f"cell {i}:{n}", ln) for n, ln in python_text(code)]
    else:
        lines = [("", ln) for ln in prose_lines(path.read_text(encoding="utf-8"))]
    return [f"{rel}:{where}: {ln.strip()}" for where, ln in lines if HISTORY.search(ln)]


def history_files() -> list[Path]:
    out = []
    for folder in HISTORY_CHECKED:
        d = ROOT / folder
        out += sorted(d.rglob("*.py")) + sorted(d.glob("*.ipynb")) + sorted(d.glob("*.md"))
    return [p for p in out if p != ROOT / HISTORY_EXEMPT]


def test_code_notebooks_and_docs_say_what_things_are_now():
    hits = [h for p in history_files() for h in history_hits(p)]
    assert not hits, "history wording (say what the thing is now; history belongs in commit messages):\n" + "\n".join(
        hits
    )


def test_the_history_check_reads_comments_strings_and_cells_not_code(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text('legacy = 1  # the count\n"""This was called leak_free before."""\n# older runs keep it\n')
    nb = tmp_path / "n.ipynb"
    nb.write_text(
        json.dumps(
            {
                "cells": [
                    {"cell_type": "markdown", "source": ["it was called *hard* before"]},
                    {
                        "cell_type": "code",
                        "source": ["%matplotlib inline\n", "x = 1  # formerly two\n"],
                        "outputs": [{"output_type": "stream", "text": "no longer"}],
                    },
                ]
            }
        )
    )
    assert [h.split(": ", 1)[0] for h in history_hits(mod, tmp_path)] == ["m.py:2", "m.py:3"]
    assert [h.split(": ", 1)[0] for h in history_hits(nb, tmp_path)] == ["n.ipynb:cell 0", "n.ipynb:cell 1:2"]


def test_prose_lines_leave_code_tables_and_link_definitions_out():
    text = "# t\n```bash\n" + "x" * 300 + "\n```\n| " + "y" * 300 + " |\n[a]: " + "z" * 300 + "\nshort prose\n"
    assert prose_lines(text) == ["# t", "short prose"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    assert not broken_links(page)


def test_a_broken_link_or_anchor_is_found(tmp_path):
    (tmp_path / "a.md").write_text("# Title: one (two)\n\n## Same\n\n## Same\n")
    (tmp_path / "b.md").write_text(
        "[ok](a.md#title-one-two) [ok](a.md#same-1) [no](a.md#nope) [gone](c.md) ![i](x.png)\n"
        "[ref][r] [undefined][u]\n\n[r]: a.md\n```\n[in code](missing.md)\n```\n"
    )
    assert sorted(broken_links(tmp_path / "b.md")) == [
        "b.md: [u] (no definition)",
        "b.md: a.md#nope (no heading with that anchor)",
        "b.md: c.md (no such file)",
        "b.md: x.png (no such file)",
    ]


def test_slugs_follow_github():
    assert slug("Beyond the seed: learned decoders (notebook 03b)") == "beyond-the-seed-learned-decoders-notebook-03b"
    assert slug("Data, weights and licences") == "data-weights-and-licences"
    assert slug("01_crawl.ipynb") == "01_crawlipynb"
    assert slug("Stage 5: MiniLM `L_AT` – distillation") == "stage-5-minilm-l_at--distillation"


def test_the_parameters_page_is_generated_from_the_configs():
    assert parameters_page.PAGE.read_text(encoding="utf-8") == parameters_page.current(), (
        "docs/parameters.md differs from the stage configs; run python -m lib.run.report"
    )


def test_the_parameters_page_lists_every_declaration_its_notebooks_and_profiles():
    from dataclasses import dataclass
    from typing import ClassVar

    from lib.common.config import StageParams, param

    @dataclass(frozen=True)
    class One(StageParams):
        NOTEBOOK: ClassVar[str] = "01_one.ipynb"
        run_dir: str = param("outputs/demo", "run folder")
        size: int = param(3, "how big | really", ge=1)

    @dataclass(frozen=True)
    class Two(StageParams):
        NOTEBOOK: ClassVar[str] = "02_two.ipynb"
        run_dir: str = param("outputs/demo", "run folder")
        seed: int = param(0, "first seed", choices=(0, 1))

    page = parameters_page.render(
        {"01_one.ipynb": One, "02_two.ipynb": Two},
        {"big.yaml": {"size": 9}},
        ["01_one.ipynb", "02_two.ipynb", "03_three.ipynb"],
        {"big.yaml": "A big run"},
    )
    lines = page.splitlines()
    assert '| `run_dir` | `str` | `"outputs/demo"` |  | 01, 02 |  | run folder |' in lines
    assert "| `size` | `int` | `3` | >= 1 | `big`: `9` | how big \\| really |" in lines
    assert "| `seed` | `int` | `0` | one of 0, 1 |  | first seed |" in lines
    assert page.index("## 01_one.ipynb") < page.index("`size`") < page.index("## 02_two.ipynb") < page.index("`seed`")
    assert "papermill --help-notebook notebooks/03_three.ipynb" in page
    assert "| [big.yaml](../params/big.yaml) | A big run | `size` |" in lines
    changed = parameters_page.render({"01_one.ipynb": One}, {}, ["01_one.ipynb"])
    assert changed != page and "Declared by several notebooks" not in changed


def test_a_profile_says_what_it_is_for(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text(
        "# The seed's run (§6; test split: AUC 0.9). Needs\n# more text.\n#   python -m lib.run.runner\nn: 1\n"
    )
    assert parameters_page.profile_summary(p) == "The seed's run (§6; test split: AUC 0.9)"
