"""One name per concept: a module is imported under its own name (torch.nn.functional as F is PyTorch's own
convention), in lib, tests, scripts, benchmarks and the notebooks' code cells alike."""

from __future__ import annotations

import ast
import json

from lib.common.params import numbered_notebooks
from lib.common.paths import ROOT

SCANNED = ("lib", "tests", "scripts", "benchmarks")
CONVENTIONS = {("torch.nn.functional", "F")}


def one_letter_aliases(code: str, where: str) -> list[str]:
    """'where: import X as Y' for every import of `code` under a one-letter name other than a convention."""
    hits = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for a in node.names:
                full = f"{node.module}.{a.name}" if isinstance(node, ast.ImportFrom) else a.name
                if a.asname and len(a.asname) == 1 and (full, a.asname) not in CONVENTIONS:
                    hits.append(f"{where}: {full} as {a.asname}")
    return hits


def sources() -> dict[str, str]:
    """Where -> code: every Python file of SCANNED and every code cell of the numbered notebooks."""
    out = {
        str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
        for folder in SCANNED
        for p in sorted((ROOT / folder).rglob("*.py"))
    }
    for nb in numbered_notebooks():
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(c for c in cells if c["cell_type"] == "code"):
            out[f"{nb.relative_to(ROOT)} code cell {i}"] = "".join(cell["source"])
    return out


def test_no_module_is_imported_under_a_one_letter_name():
    hits = [h for where, code in sources().items() for h in one_letter_aliases(code, where)]
    assert not hits, "import the module under its own name: " + "; ".join(hits)


def test_the_alias_scan_finds_a_planted_alias_and_spares_the_convention():
    code = "import torch.nn.functional as F\nfrom lib.linkpred import beyond as B\nimport numpy.linalg as L\n"
    assert one_letter_aliases(code, "x.py") == ["x.py: lib.linkpred.beyond as B", "x.py: numpy.linalg as L"]
    assert one_letter_aliases("from torch.nn import functional as F\nimport numpy as np\n", "y.py") == []
