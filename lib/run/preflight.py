"""Every value of every notebook a run will execute, checked before the runner creates or changes anything.

A value must have the type its notebook's parameters cell declares (`max_nodes: int = 1000`; an int is accepted for a
float, a bool is never an int), then pass the check its stage runs on its own parameters (bounds, choices, device
availability). The first failure is one `ParamError` naming the key, the value, where the value came from (a params
file or `-p`) and what is accepted. Checks that need data (graph counts, roots present in the snapshot) stay in the
notebooks, where the data is.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from pathlib import Path

from lib.common.compute import check_device_name
from lib.common.config import article, stage_params
from lib.common.params import ParamError, load_yaml, notebook_number, notebook_parameters
from lib.common.paths import NOTEBOOKS, resolve
from lib.crawl.campaign import check_campaign, read_roots
from lib.crawl.sources import OFFLINE_SOURCES
from lib.distill.checkpoint import published_runs
from lib.distill.config import DistillParams

TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (float, int),
    "str": (str,),
    "bool": (bool,),
    "list": (list,),
}


def provenance(files: list[Path], overrides: dict) -> dict[str, str]:
    """key -> where its value comes from: the last params file that sets it, or `-p` for an override."""
    where: dict[str, str] = {}
    for f in files:
        where.update(dict.fromkeys(load_yaml(f), f"params file {f}"))
    where.update(dict.fromkeys(overrides, "-p"))
    return where


def declared_defaults(declared: dict[str, dict]) -> dict:
    """The parameters cell's default values (papermill reports them as source text)."""
    out = {}
    for k, d in declared.items():
        try:
            out[k] = ast.literal_eval(d["default"])
        except (ValueError, SyntaxError):
            out[k] = d["default"]
    return out


def all_defaults(notebooks: list[Path]) -> dict:
    """Every parameter's default over `notebooks` (a name declared twice has one default: a test checks that)."""
    out = {}
    for nb in notebooks:
        out.update(declared_defaults(notebook_parameters(nb)))
    return out


def check_types(values: dict, declared: dict[str, dict], where: dict[str, str], notebook: str) -> None:
    for k, v in values.items():
        name = declared.get(k, {}).get("inferred_type_name")
        ok = TYPES.get(name)
        if ok is None or (isinstance(v, ok) and isinstance(v, bool) == (bool in ok)):  # a bool is an int in Python
            continue
        example = declared[k]["default"]
        raise ParamError(
            f"parameter {k}={v!r} ({where.get(k, 'notebook default')}) is a {type(v).__name__}; "
            f"{notebook} declares it {name} (default {example}); give {article(name)} {name}"
        )


def input_file(p: dict, key: str, what: str, folder: bool = False) -> Path:
    """The file (or, with folder=True, the folder) that parameter `key` names, resolved as the notebook resolves it;
    one ParamError naming the key, the path and `what` to pass when it is not there."""
    path = resolve(p[key])
    read_as = "" if str(path) == p[key] else f" (read as {path})"
    if not path.exists():
        raise ParamError(f"{key}={p[key]!r} does not exist{read_as}; pass {what}", key=key)
    if path.is_dir() != folder:
        raise ParamError(
            f"{key}={p[key]!r} is a {'folder' if path.is_dir() else 'file'}{read_as}; pass {what}", key=key
        )
    return path


def _crawl(p: dict) -> None:  # beyond the config: the files it names must be there, a roots file must hold titles

    if p["source"] == "snapshot" and p["snapshot_path"]:
        input_file(
            p,
            "snapshot_path",
            "a TSV link list (source TAB target) or a graph JSON file (a folder of graph files is source='graphs')",
        )
    if p["source"] == "graphs" and p["snapshot_path"]:
        what = "a folder of graph JSON files (one file is source='snapshot')"
        if not any(input_file(p, "snapshot_path", what, folder=True).glob("*.json")):
            raise ParamError(
                f"snapshot_path={p['snapshot_path']!r} holds no .json graph files; pass {what}", key="snapshot_path"
            )
    if p["source"] == "snapshot" and p["topics_file"]:
        input_file(p, "topics_file", "a TSV of title TAB topic lines, or leave topics_file empty")
    if p["source"] in OFFLINE_SOURCES and p["overlap_roots_file"]:
        input_file(p, "overlap_roots_file", "a file of one title per line (see params/roots_*.txt)")
    if p["source"] != "graphs" and p["roots_file"]:
        input_file(p, "roots_file", "a file of one title per line (see params/roots_*.txt)")
        roots = read_roots(resolve(p["roots_file"]))
        if not roots:
            raise ParamError(
                f"roots_file={p['roots_file']!r} holds no title (blank lines and # comments only); write "
                f"one title per line (see params/roots_*.txt)",
                key="roots_file",
            )
        check_campaign(roots, p["max_nodes"])


def _distill(p: dict) -> None:  # beyond the config: a published grid to extend must be there, with this grid's settings

    if p.get("reuse_runs"):
        published_runs(DistillParams.from_values(p), p["reuse_runs"])


def _embed(p: dict) -> None:  # beyond the config: a model folder must be one (the kernel runs in notebooks/)

    if p["model_dir"]:
        from lib.embed.encoder import EmbedError, check_model_dir  # lazy: torch (about 1 s), only for a named folder

        try:
            check_model_dir(NOTEBOOKS / Path(p["model_dir"]).expanduser())
        except EmbedError as e:
            raise ParamError(str(e), key="model_dir") from None


# What a stage checks beyond its config, imported when its notebook is planned: files its values name.
STAGE_CHECKS: dict[str, Callable[[dict], None]] = {
    "01_crawl.ipynb": _crawl,
    "02_embed.ipynb": _embed,
    "05_attention_distillation.ipynb": _distill,
}


# What a notebook reads from its run folder that an earlier notebook writes there: notebook -> (file, its writer).
RUN_FOLDER_INPUTS: dict[str, tuple[str, str]] = {
    "02_embed.ipynb": ("crawl/manifest.json", "01_crawl.ipynb"),
    "03_train_gat.ipynb": ("dataset/index.json", "02_embed.ipynb"),
    "03b_beyond_seed.ipynb": ("train_gat_rows.csv", "03_train_gat.ipynb"),
    "04_aauc_analysis.ipynb": ("train_gat_rows.csv", "03_train_gat.ipynb"),
}


def check_upstream(run_dir: Path, notebooks: list[Path]) -> None:
    """Every notebook of `notebooks` (those selected, in order) finds what it reads from the run folder: written
    there already, or by a selected notebook before it. Otherwise one ParamError naming the notebook, the file and
    the notebooks to run first (those whose outputs are missing too, back to one whose inputs are there)."""
    selected = {nb.name for nb in notebooks}
    for nb in notebooks:
        first, name = [], nb.name
        while name in RUN_FOLDER_INPUTS:
            file, writer = RUN_FOLDER_INPUTS[name]
            if writer in selected or (run_dir / file).is_file():
                break
            first.insert(0, notebook_number(writer))
            name = writer
        if first:
            file, writer = RUN_FOLDER_INPUTS[nb.name]
            to_run = f"notebook{'s' * (len(first) > 1)} {' '.join(first)}"
            raise ParamError(
                f"{nb.name} reads {file} from the run folder, which notebook {notebook_number(writer)} "
                f"writes and {run_dir} does not hold; run {to_run} first, or drop --notebooks"
            )


def check_writable(folder: Path, what: str, fix: str = "pass --outputs a folder you can write") -> None:
    """`folder`, or the nearest folder above it that exists (where it will be made), can be written by this user: a
    read-only mount or a folder without write permission is one ParamError naming it and the fix, before any work."""
    p = Path(folder).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    if not p.is_dir():
        raise ParamError(f"{what} {folder} cannot be made: {p} is a file; {fix}")
    if not os.access(p, os.W_OK | os.X_OK):
        below = "" if p == Path(folder).absolute() else f" (it would be made in {p})"
        raise ParamError(
            f"{what} {folder} cannot be written by this user{below}; {fix}, or make it writable (a "
            f"read-only mount cannot be)"
        )


def check_device(p: dict) -> None:
    try:
        check_device_name(p["device"])
        if p["device"].startswith("cuda"):
            from lib.common.device import get_device  # lazy: torch (about 1 s), only to see a GPU for a cuda device

            get_device(p["device"])
    except (ValueError, RuntimeError) as e:
        raise ParamError(str(e), key="device") from None


def check_run(merged: dict, files: list[Path], overrides: dict, notebooks: list[Path]) -> None:
    """Type and stage checks of every notebook in `notebooks` on the merged parameters (notebook defaults beneath)."""

    where, configs = provenance(files, overrides), stage_params()
    for nb in notebooks:
        declared = notebook_parameters(nb)
        values = {**declared_defaults(declared), **{k: v for k, v in merged.items() if k in declared}}
        check_types({k: v for k, v in values.items() if k in merged}, declared, where, nb.name)
        try:
            if nb.name in configs:
                configs[nb.name].from_values(values)  # types, bounds, choices and the stage's rules across fields
            if "device" in values:
                check_device(values)
            check = STAGE_CHECKS.get(nb.name)
            if check is not None:
                check(values)
        except ParamError as e:
            key = getattr(e, "key", None)
            origin = f" ({where[key]})" if key in where else f" (the default of {nb.name})" if key else ""
            raise ParamError(f"{nb.name}: {e}{origin}", key=key) from None
        except (ValueError, TypeError, KeyError) as e:  # a stage check's own error class (DistillError, ...)
            raise ParamError(f"{nb.name}: {e}") from None
