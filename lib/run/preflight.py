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

from lib.common.config import article, stage_params
from lib.common.compute import check_device_name
from lib.common.params import ParamError, load_yaml, notebook_parameters
from lib.common.paths import NOTEBOOKS, resolve
from lib.crawl.campaign import check_campaign, read_roots
from lib.distill.checkpoint import published_runs
from lib.distill.config import DistillParams

TYPES: dict[str, tuple[type, ...]] = {"int": (int,), "float": (float, int), "str": (str,), "bool": (bool,),
                                      "list": (list,)}


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
        raise ParamError(f"parameter {k}={v!r} ({where.get(k, 'notebook default')}) is a {type(v).__name__}; "
                         f"{notebook} declares it {name} (default {example}); give {article(name)} {name}")


def _crawl(p: dict) -> None:  # beyond the config: the roots file must exist and hold titles

    if p["source"] != "graphs" and p["roots_file"]:
        roots = read_roots(resolve(p["roots_file"]))
        if not roots:
            raise ParamError(f"roots_file={p['roots_file']!r} holds no title (blank lines and # comments only); write "
                             f"one title per line (see params/roots_*.txt)", key="roots_file")
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
STAGE_CHECKS: dict[str, Callable[[dict], None]] = {"01_crawl.ipynb": _crawl, "02_embed.ipynb": _embed,
                                                  "05_attention_distillation.ipynb": _distill}


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
        raise ParamError(f"{what} {folder} cannot be written by this user{below}; {fix}, or make it writable (a "
                         f"read-only mount cannot be)")


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
