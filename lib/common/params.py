"""Layered papermill parameter files: `-f params/<size>.yaml -f params/<device>.yaml` (later files win).

Every key must be declared in some notebook's `parameters` cell; an unknown key is an error naming the key.
"""

from __future__ import annotations

import difflib
import functools
from pathlib import Path

import yaml

from lib.common import published
from lib.common.errors import WikigatError
from lib.common.paths import NOTEBOOKS, PARAMS, resolve


class ParamError(WikigatError, ValueError):
    """An impossible parameter value or params file; `key` names the parameter when there is one."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


def load_yaml(path: str | Path) -> dict:
    """One flat params file."""
    p = resolve(path)
    if not p.is_file():
        profiles = ", ".join(sorted(x.name for x in PARAMS.glob("*.yaml")))
        raise ParamError(
            f"params file {path} does not exist; name an existing YAML file of `key: value` lines, or one "
            f"of the profiles in params/: {profiles}"
        )
    try:
        obj = yaml.safe_load(p.read_text(encoding="utf-8-sig")) or {}
    except UnicodeDecodeError as e:
        raise ParamError(f"params file {path} is not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except yaml.YAMLError as e:
        raise ParamError(f"params file {path} is not valid YAML: {e}") from None
    if not isinstance(obj, dict):
        raise ParamError(f"params file {path} must be a flat mapping of key: value")
    for k, v in obj.items():
        if isinstance(v, dict):
            raise ParamError(f"params file {path}: key {k!r} holds a mapping; parameters must be flat literals")
    return obj


def merge(files: list[str | Path], overrides: dict | None = None) -> dict:
    """Merge params files left to right, then `overrides` (like papermill `-f a -f b -p k v`)."""
    out: dict = {}
    for f in files:
        out.update(load_yaml(f))
    out.update(overrides or {})
    return out


def parse_override(text: str) -> tuple[str, object]:
    """'key=value' with value parsed as YAML (so 1, 0.5, true, [a, b] keep their types)."""
    if "=" not in text:
        raise ParamError(f"override {text!r} must look like key=value")
    k, v = text.split("=", 1)
    return k.strip(), yaml.safe_load(v)


def notebook_parameters(nb_path: str | Path) -> dict[str, dict]:
    """The parameters a notebook declares: name -> {default, inferred_type_name, help} (papermill's view)."""
    p = Path(nb_path)
    return dict(_inspected(str(p.resolve()), p.stat().st_mtime_ns))


@functools.lru_cache(maxsize=64)
def _inspected(path: str, mtime_ns: int) -> dict[str, dict]:  # papermill parses the whole notebook: once per version
    import papermill as pm  # lazy: slow to load; only reading a notebook's parameters uses it

    return pm.inspect_notebook(path)


def numbered_notebooks(folder: str | Path = NOTEBOOKS) -> list[Path]:
    """The stage notebooks in run order: 01_*, 02_*, 03_*, 03b_*, 04_*, ... ('_' sorts before letters)."""
    return sorted(p for p in Path(folder).glob("[0-9][0-9]*_*.ipynb") if notebook_number(p)[:2].isdigit())


def notebook_number(nb: str | Path) -> str:
    """'03b' of notebooks/03b_beyond_seed.ipynb: what --notebooks selects."""
    return Path(nb).name.split("_", 1)[0]


def check_known(params: dict, known: set[str], where: str = "params") -> None:
    """Every key of `params` is declared by some notebook; an unknown one is one line naming it, the name it has now
    (lib.common.published.OLDER_PARAMETER_NAMES) or else the closest known names, and the page that lists them all."""
    unknown = sorted(set(params) - known)
    if unknown:
        renamed = published.OLDER_PARAMETER_NAMES.get(unknown[0])
        close = [renamed] if renamed in known else difflib.get_close_matches(unknown[0], sorted(known), n=3, cutoff=0.6)
        hint = f"Did you mean {' or '.join(close)}? " if close else ""
        raise ParamError(
            f"unknown parameter {unknown[0]!r} in {where}; no notebook declares it. {hint}Every parameter "
            f"is listed in docs/parameters.md"
        )


def require(cond: bool, key: str, value, fix: str) -> None:
    """Stage-level validation helper: one sentence naming the key, its value and the fix."""
    if not cond:
        raise ParamError(f"parameter {key}={value!r} is invalid: {fix}", key=key)
