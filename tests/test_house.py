"""The shape of `lib`: packages without import cycles, modules and functions a reader can hold in mind, and files
that speak to a user (no work-log numbering, no paths outside the clone)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from lib.common.paths import ROOT

LIB = ROOT / "lib"
# Sizes are counted in statements, which the formatter's line breaks do not change ("about 400 lines" and "about 80
# lines" of the style guide, measured before the code was formatted: the largest module then held 266 statements in
# 423 lines, the largest function 58 in 79)
MAX_MODULE_STATEMENTS = 280
MAX_FUNCTION_STATEMENTS = 60


def modules() -> dict[str, Path]:
    return {
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
        for p in sorted(LIB.rglob("*.py"))
    }


def import_graph(mods: dict[str, Path]) -> nx.DiGraph:
    """Module -> module it imports from, counting imports inside functions too (a lazy import hides a cycle, it does
    not remove it)."""
    g = nx.DiGraph()
    for name, path in mods.items():
        g.add_node(name)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            g.add_edges_from((name, t) for t in targets if t in mods and t not in (name, "lib"))
    return g


def test_the_import_graph_of_lib_has_no_cycle():
    cycles = list(nx.simple_cycles(import_graph(modules())))
    assert not cycles, f"import cycles in lib: {cycles}"


def test_the_import_graph_finds_a_planted_cycle(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("def f():\n    from lib.b import g\n")
    b.write_text("from lib.a import f\n")
    assert list(nx.simple_cycles(import_graph({"lib.a": a, "lib.b": b}))) in (
        [["lib.a", "lib.b"]],
        [["lib.b", "lib.a"]],
    )


@pytest.mark.slow
def test_every_module_imports_in_a_fresh_interpreter():
    names = sorted(n for n in modules() if n != "lib")
    code = "import importlib, sys\nfor n in sys.argv[1:]:\n    importlib.import_module(n)\n"
    out = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]


def test_packages_re_export_nothing():
    """A name is imported from the module that defines it: package __init__ files hold a docstring only."""
    for init in LIB.rglob("__init__.py"):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        code = [
            n
            for n in tree.body
            if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
            and not (isinstance(n, ast.Assign) and [t.id for t in n.targets] == ["__version__"])
        ]
        assert not code, f"{init.relative_to(ROOT)} does more than describe its package"


def private_imports(tree: ast.Module) -> list[str]:
    """Names starting with one underscore imported from a lib module (`from lib.x import _helper`)."""
    return [
        a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("lib")
        for a in n.names
        if a.name.startswith("_") and not a.name.startswith("__")
    ]


def test_no_private_helper_is_imported_across_modules():
    """A helper another module needs is public: its name says it is part of its module's interface."""
    found = [
        f"{name}: {h}"
        for name, path in modules().items()
        for h in private_imports(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not found, f"private helpers imported from another module: {found}"
    assert private_imports(ast.parse("from lib.a import _b, c\nfrom os import _x\n")) == ["_b"]


MAX_FUNCTION_IMPORTS = 20  # imports stay at the top; a heavy optional package on a rarely used path may wait


def function_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement inside a function body (at any depth), once."""
    found = {
        id(n): n
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        for n in ast.walk(f)
        if isinstance(n, (ast.Import, ast.ImportFrom))
    }
    return sorted(found.values(), key=lambda n: n.lineno)


def test_imports_inside_functions_are_few_and_say_why():
    """Fewer than 20 imports inside functions in lib, each with `# lazy: <why>` on its lines."""
    found, silent = [], []
    for name, path in modules().items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in function_imports(ast.parse(text)):
            found.append((name, node.lineno))
            if not any("# lazy:" in ln for ln in lines[node.lineno - 1 : node.end_lineno]):
                silent.append(f"{name}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    assert len(found) < MAX_FUNCTION_IMPORTS, f"{len(found)} imports inside functions in lib: move them to the top"
    assert not silent, f"imports inside functions without a `# lazy: <why>` comment: {silent}"


def test_function_imports_are_found_at_any_depth():
    tree = ast.parse(
        "import os\ndef f():\n    if x:\n        import a\n    def g():\n        from b import c\n"
        "class K:\n    import d\n    def m(self):\n        import e\n"
    )
    assert sorted(n.lineno for n in function_imports(tree)) == [4, 6, 10]


def statements(node: ast.AST) -> int:
    """Statements inside `node` (a module, or a function without its own `def`)."""
    return sum(isinstance(n, ast.stmt) for n in ast.walk(node)) - (not isinstance(node, ast.Module))


def test_modules_and_functions_stay_small():
    too_long = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if (n := statements(tree)) > MAX_MODULE_STATEMENTS:
            too_long.append(f"module {name}: {n} statements")
        for node in ast.walk(tree):
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and (n := statements(node)) > MAX_FUNCTION_STATEMENTS
            ):
                too_long.append(f"function {name}.{node.name}: {n} statements")
    assert not too_long, too_long


MAX_PARAMETERS = 9  # a function taking more groups what travels together into a small frozen dataclass
MANY_PARAMETERS = {  # function -> why it may take more; `self` and `cls` not counted, *args and **kwargs one each
    "lib.crawl.live.LiveSource.__init__": "the MediaWiki client's network settings, each a keyword with a default",
    "lib.kd.augment.augment": "Tang et al.'s augmentation hyper-parameters, each a keyword with the paper's default",
    "lib.kd.train.BiLSTMStudent.__init__": "an architecture's hyper-parameters, each a keyword with the thesis default",
    "lib.kd.train.BertStudent.__init__": "an architecture's hyper-parameters, each a keyword with the thesis default",
}


def many_parameter_functions(mods: dict[str, Path]) -> dict[str, int]:
    """module.Class.function -> parameter count, for every function of `mods` above MAX_PARAMETERS."""
    out = {}
    for name, path in mods.items():

        def visit(node, prefix):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.")
                elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    a = child.args
                    n = sum(x.arg not in ("self", "cls") for x in a.posonlyargs + a.args + a.kwonlyargs)
                    n += (a.vararg is not None) + (a.kwarg is not None)
                    if n > MAX_PARAMETERS:
                        out[f"{prefix}{child.name}"] = n
                    visit(child, f"{prefix}{child.name}.")

        visit(ast.parse(path.read_text(encoding="utf-8")), f"{name}.")
    return out


def test_functions_take_few_parameters():
    found = many_parameter_functions(modules())
    assert set(found) <= set(MANY_PARAMETERS), {f: n for f, n in found.items() if f not in MANY_PARAMETERS}


INSIDER = re.compile(r"\b(session[ -]\d+|issue #?\d+|the issue\b)|\.\./shared|\bthe brief\b", re.IGNORECASE)


def tracked_text_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [
        ROOT / f
        for f in out.splitlines()
        if Path(f).suffix in {".py", ".md", ".yaml", ".yml", ".toml", ".ipynb", ".txt", ".sh", ".cfg", ".tsv", ""}
        and (ROOT / f).is_file()
        and f != "tests/test_house.py"
    ]


def test_no_work_log_words_in_files_a_user_reads():
    """Users have no work log: say what was done with a date, a commit or a paper's name instead."""
    hits = []
    for path in tracked_text_files():
        for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            m = INSIDER.search(line)
            if m:
                hits.append(f"{path.relative_to(ROOT)}:{i}: {m.group(0)!r}")
    assert not hits, "\n".join(hits[:30])


def test_the_insider_pattern_catches_what_it_should():
    for s in [
        "Session 4",
        "re-run in session-8",
        "see issue 13",
        "Issue #27",
        "../shared/seeds/x.md",
        "per the brief",
        "not one of the issue's heuristics",
    ]:
        assert INSIDER.search(s), s
    for s in ["a brief summary", "issues of the API", "session cookie", "the sessions table"]:
        assert not INSIDER.search(s), s


def test_the_readme_layout_lists_every_notebook_once_and_no_other():
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = readme[readme.index("## Layout") : readme.index("\n## ", readme.index("## Layout") + 1)]
    listed = re.findall(r"`notebooks/([0-9a-z_]+\.ipynb)`", layout)
    on_disk = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))
    assert sorted(listed) == on_disk, f"README Layout lists {listed}; notebooks/ holds {on_disk}"
    for pkg in sorted(p.parent.name for p in LIB.glob("*/__init__.py")):
        assert f"lib/{pkg}/" in layout, f"README Layout does not name the package lib/{pkg}/"


MAX_CELL_LINES = 17  # "about 15": a cell a reader takes in at a glance


def test_notebook_cells_only_tell():
    """Past its imports and parameters, every code cell of a numbered notebook is short and defines no function:
    what a cell would compute at length lives in lib, where a test checks it."""
    import json

    from lib.common.params import numbered_notebooks

    long, defs = [], []
    for nb in numbered_notebooks():
        code = [c for c in json.loads(nb.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
        for i, cell in enumerate(code[1:], 1):  # the first code cell holds the imports
            if {"parameters", "injected-parameters"} & set(cell.get("metadata", {}).get("tags", [])):
                continue
            lines = [
                ln for ln in "".join(cell["source"]).splitlines() if ln.strip() and not ln.lstrip().startswith("#")
            ]
            if len(lines) > MAX_CELL_LINES:
                long.append(f"{nb.name} code cell {i}: {len(lines)} lines")
            defs += [
                f"{nb.name} code cell {i}: {ln.strip()}"
                for ln in lines
                if re.match(r"\s*(async\s+)?def |\s*class ", ln)
            ]
    assert not long and not defs, long + defs


MACHINE_PATH = re.compile(r"(?<![\w.~])/(?:work|tmp|home|root|Users|check)/[\w.-]")


def test_demo_notebooks_print_no_path_of_the_machine_that_ran_them():
    """A clone lives elsewhere: the executed copies in notebooks/ print paths relative to the repository."""
    import json

    from lib.common.params import numbered_notebooks

    hits = []
    for nb in numbered_notebooks():
        for i, cell in enumerate(json.loads(nb.read_text(encoding="utf-8"))["cells"]):
            for out in cell.get("outputs", []):
                text = "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
                hits += [f"{nb.name} cell {i}: {m.group(0)}" for m in MACHINE_PATH.finditer(text)]
    assert not hits, hits[:10]
    assert MACHINE_PATH.search("wrote /work/main/outputs/demo/metrics.json") and not MACHINE_PATH.search(
        "wrote outputs/demo/metrics.json; 2/work/step"
    )
