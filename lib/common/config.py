"""One typed declaration per stage: a frozen dataclass whose fields are exactly the notebook's parameters.

Each stage package holds one (`lib/<stage>/config.py`): field names are the notebook and YAML names, defaults are the
CPU demo, every field carries one short "why", and types, bounds and choices are checked in one place
(`StageParams.__post_init__`, then the class's own `check` for rules across fields). The notebook's `parameters` cell
is generated from it (`python -m lib.common.config`; `--check` and a test keep the two equal), the runner builds every
planned notebook's config before it touches a run folder, and the stage's drivers take the config object.

Why dataclasses and not pydantic: the checks are a type, a bound or a choice list per field and a few rules across
fields. A standard-library dataclass keeps the repository's one-line error (key, value, what is accepted) without
translating a multi-line `ValidationError`, never coerces "3" into 3 behind the user's back, and adds no dependency.

    @dataclass(frozen=True)
    class CrawlParams(StageParams):
        NOTEBOOK: ClassVar[str] = "01_crawl.ipynb"
        max_nodes: int = param(1000, "nodes per graph", ge=1)
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
import typing
from dataclasses import MISSING, field, fields
from typing import Any, ClassVar

from lib.common.params import ParamError
from lib.common.paths import NOTEBOOKS

THREADS_WHY = "CPU threads for torch: 0 means OMP_NUM_THREADS when set, else every core; use 1 on a shared machine"
DEVICE_WHY = '"cuda" needs a GPU; fails clearly without one'
RUN_DIR_WHY = "run folder shared by the numbered notebooks"

SCALARS: dict[type, tuple[type, ...]] = {int: (int,), float: (float, int), str: (str,), bool: (bool,)}


def param(
    default: Any,
    why: str,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    choices: tuple | None = None,
    record: bool = True,
) -> Any:
    """A stage parameter: its demo default, one line on why it exists, and what values it accepts (bounds apply to a
    number or to every item of a list of numbers; `choices` to a string or to every item of a list). record=False
    keeps it out of the run folder's params record (speed-only settings, an e-mail address)."""
    meta = {"why": why, "ge": ge, "gt": gt, "le": le, "lt": lt, "choices": choices, "record": record}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def _accepted(meta: dict) -> str:
    parts = [
        f"{op} {meta[k]}" for k, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")) if meta[k] is not None
    ]
    if meta["choices"] is not None:
        parts.append(f"one of {', '.join(map(str, meta['choices']))}")
    return " and ".join(parts)


@dataclasses.dataclass(frozen=True)
class StageParams:
    """Base of every stage's parameters; subclasses are frozen dataclasses built with `param(...)` fields."""

    NOTEBOOK: ClassVar[str] = ""

    def __post_init__(self):
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            self._check_field(f, hints[f.name], getattr(self, f.name))
        self.check()

    def check(self) -> None:
        """Rules across fields; a subclass raises ParamError(..., key=...) naming the key and the fix."""

    def _check_field(self, f: dataclasses.Field, hint, value) -> None:
        meta, origin = f.metadata, typing.get_origin(hint)
        item_type = typing.get_args(hint)[0] if origin is list else None
        base = list if origin is list else hint
        if not _is(value, base):
            raise ParamError(
                f"parameter {f.name}={value!r} is a {type(value).__name__}; {self.NOTEBOOK} declares it "
                f"{type_name(hint)} (default {default_text(self.default_of(f.name))}); give "
                f"{article(type_name(hint))} {type_name(hint)}",
                key=f.name,
            )
        items = value if origin is list else [value]
        for v in items:
            if item_type is not None and not _is(v, item_type):
                raise ParamError(
                    f"parameter {f.name}={value!r} holds {v!r}, a {type(v).__name__}; give a list of "
                    f"{item_type.__name__}",
                    key=f.name,
                )
            bad = (meta["choices"] is not None and v not in meta["choices"]) or (
                isinstance(v, (int, float))
                and not isinstance(v, bool)
                and (
                    (meta["ge"] is not None and v < meta["ge"])
                    or (meta["gt"] is not None and v <= meta["gt"])
                    or (meta["le"] is not None and v > meta["le"])
                    or (meta["lt"] is not None and v >= meta["lt"])
                )
            )
            if bad:
                what = "every item " if origin is list else ""
                raise ParamError(
                    f"parameter {f.name}={value!r} is invalid: {what}must be {_accepted(meta)}", key=f.name
                )

    @classmethod
    def default_of(cls, name: str):
        f = next(f for f in fields(cls) if f.name == name)
        return f.default_factory() if f.default is MISSING else f.default

    @classmethod
    def defaults(cls) -> dict:
        """The demo values, name -> value."""
        return {f.name: cls.default_of(f.name) for f in fields(cls)}

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_values(cls, values: dict):
        """The config of the names in `values` that are this stage's (defaults for the rest); other stages' names are
        ignored, so one merged params dict builds every stage's config."""
        return cls(**{k: v for k, v in values.items() if k in cls.names()})

    @classmethod
    def from_namespace(cls, namespace: dict):
        """The config of a notebook's parameters (`Params.from_namespace(globals())` after the parameters cell)."""
        return cls(**{k: namespace[k] for k in cls.names() if k in namespace})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def record(self) -> dict:
        """What the run folder's params record holds: every field but the record=False ones."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.metadata["record"]}

    @classmethod
    def parameters_cell(cls) -> str:
        """The notebook's `parameters` cell: one `name: type = default  # why` line per field, in field order."""
        hints = typing.get_type_hints(cls)
        return "\n".join(
            f"{f.name}: {cell_type(hints[f.name])} = {default_text(cls.default_of(f.name))}  # {f.metadata['why']}"
            for f in fields(cls)
        )

    @classmethod
    def reference(cls) -> list[dict]:
        """One row per parameter for the parameters page: name, type, default, accepted values, why."""
        hints = typing.get_type_hints(cls)
        return [
            {
                "name": f.name,
                "type": type_name(hints[f.name]),
                "default": default_text(cls.default_of(f.name)),
                "accepted": _accepted(f.metadata),
                "why": f.metadata["why"],
            }
            for f in fields(cls)
        ]


@dataclasses.dataclass(frozen=True)
class DeviceStageParams(StageParams):
    """The first three parameters of every notebook that computes on a device (fields come first in a subclass)."""

    run_dir: str = param("outputs/demo", RUN_DIR_WHY)
    device: str = param("cpu", DEVICE_WHY)
    threads: int = param(0, THREADS_WHY, ge=0, record=False)


def _is(value, t) -> bool:
    ok = SCALARS.get(t, (t,))
    return isinstance(value, ok) and isinstance(value, bool) == (bool in ok)  # a bool is an int in Python


def article(word: str) -> str:
    """ "a" or "an" before `word`."""
    return "an" if word[0] in "aeiou" else "a"


def type_name(hint) -> str:
    if typing.get_origin(hint) is list:
        return f"list[{typing.get_args(hint)[0].__name__}]"
    return hint.__name__


def cell_type(hint) -> str:
    """The annotation written in the notebook: papermill reads bare type names."""
    return "list" if typing.get_origin(hint) is list else hint.__name__


def default_text(v) -> str:
    """A default as the notebook writes it: strings in double quotes, lists of literals."""
    if isinstance(v, list):
        return "[" + ", ".join(default_text(x) for x in v) + "]"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    return repr(v)


def stage_params() -> dict[str, type[StageParams]]:
    """notebook file name -> its config class, every stage (imports the stage config modules)."""
    # by its module name: run as `python -m lib.common.config` this file is __main__, whose StageParams is a second
    # class that no stage config subclasses
    base = importlib.import_module("lib.common.config").StageParams
    out = {}
    for module in STAGE_CONFIGS:
        for obj in vars(importlib.import_module(module)).values():
            if isinstance(obj, type) and issubclass(obj, base) and obj is not base and obj.NOTEBOOK:
                out[obj.NOTEBOOK] = obj
    return out


STAGE_CONFIGS = (
    "lib.crawl.config",
    "lib.embed.config",
    "lib.linkpred.config",
    "lib.aauc.config",
    "lib.distill.config",
    "lib.embedders.config",
    "lib.kd.config",
)
"""The modules that declare the stages' parameters (`StageParams` subclasses naming their notebook)."""


def write_cells(notebooks_dir=None, check: bool = False) -> list[str]:
    """Rewrite each notebook's `parameters` cell from its config and drop the `injected-parameters` cell papermill adds
    to an executed copy (a committed notebook's parameters are its defaults, nothing else); check=True: only list the
    notebooks that differ."""
    import nbformat  # lazy: slow to load; only writing the parameters cells uses it

    differ = []
    for name, cls in stage_params().items():
        path = (notebooks_dir or NOTEBOOKS) / name
        nb = nbformat.read(path, as_version=4)
        cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
        kept = [c for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]
        if cell.source != cls.parameters_cell() or len(kept) != len(nb.cells):
            differ.append(name)
            if not check:
                cell.source = cls.parameters_cell()
                nb.cells = kept
                nbformat.write(nb, path)
    return differ


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m lib.common.config",
        description="Write (or --check) every notebook's parameters cell from its config.",
    )
    ap.add_argument("--check", action="store_true", help="only list the notebooks whose cell differs; exit 1 if any")
    args = ap.parse_args(argv)
    differ = write_cells(check=args.check)
    print(("differ: " if args.check else "rewritten: ") + (", ".join(differ) or "none"))
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
