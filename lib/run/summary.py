"""The run summary of a batch of runs: its main numbers, read from each run's metrics.json and status.json.

Pure functions from already-loaded JSON to pandas tables, so the batch summary (`summarize`) shows the
numbers a reader looks for first (AUC / A-AUC per protocol, best model against best heuristic, the distillation
table, time and memory per notebook), rounded, while the CSV keeps every scalar. Every section may be missing (a run
that stopped early, a stage not run) and the link-prediction rows may carry any of the grouping keys
`protocol`, `negatives`, `supervision` (new protocols and negative sets need no change here).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lib.common import published
from lib.common.paths import OUTPUTS, atomic_write_text, locked
from lib.common.runinfo import flatten, read_json
from lib.metrics.selection import choose_on_validation
from lib.run.facts import best_heuristic, gat_model_rows, is_heuristic

GROUP_KEYS = ("protocol", "negatives", "supervision")  # link-prediction row keys, in display order
LINK_METRICS = ("auc", "aauc")
DISTILL_METRICS = ("polarity_test", "topic_test", "fid_cosine", "fid_spearman")
DIGITS = 3
COLUMN_DIGITS = {"seconds": 1, "peak_rss_mb": 0}  # resource columns; every other number gets DIGITS


def link_rows(metrics: dict) -> pd.DataFrame:
    """metrics.json["train_gat"]["mean"] as a table (one row per protocol group and model); empty when absent."""
    rows = (metrics.get("train_gat") or {}).get("mean") or []
    return pd.DataFrame(published.link_rows([r for r in rows if isinstance(r, dict) and "model" in r]))


def _groups(df: pd.DataFrame) -> list[str]:
    return [k for k in GROUP_KEYS if k in df.columns]


def gat_auc_table(runs: dict[str, dict]) -> pd.DataFrame:
    """AUC and A-AUC of the GatModel per run and protocol group. runs: run name -> metrics.json content.

    Columns: run, the grouping keys present (protocol, negatives, supervision), auc, aauc (absent metrics: NaN)."""
    out = []
    for name, metrics in runs.items():
        df = link_rows(metrics)
        if df.empty:
            continue
        df = gat_model_rows(df, supervision=None, negatives=None)
        for _, r in df.iterrows():
            rec = {"run": name, **{k: r[k] for k in _groups(df)}}
            rec.update({m: r.get(m) for m in LINK_METRICS})
            out.append(rec)
    return pd.DataFrame(out)


def best_vs_heuristic(runs: dict[str, dict], metric: str = "auc") -> pd.DataFrame:
    """Per run and (protocol, negatives) group: the trained model chosen on validation (choose_on_validation; where
    no candidate has a validation score, on test, said in `chosen_on`) and the heuristic with the highest `metric`.

    Heuristics are trained on nothing, so their `supervision` ("none") is not a grouping key here: every trained
    model of a group, whatever its supervision, is compared with the best heuristic of that group."""
    out = []
    for name, metrics in runs.items():
        df = link_rows(metrics)
        if df.empty or metric not in df.columns:
            continue
        keys = [k for k in _groups(df) if k != "supervision"]
        grouped = df.groupby(keys, sort=False, dropna=False) if keys else [((), df)]
        for key, g in grouped:
            key = key if isinstance(key, tuple) else (key,)
            g = g.dropna(subset=[metric])
            models, heur = g[~is_heuristic(g)], best_heuristic(g, metric)
            if models.empty and heur is None:
                continue
            rec = {"run": name, **dict(zip(keys, key))}
            if not models.empty:
                models = models.assign(
                    candidate=models["model"]
                    + (
                        " (" + models["supervision"] + ")"
                        if "supervision" in models and models["supervision"].nunique() > 1
                        else ""
                    )
                )
                best, chosen_on, _ = choose_on_validation(
                    models, list(dict.fromkeys(models["candidate"])), metric, key="candidate"
                )
                rec["best_model"] = best
                rec[f"best_model_{metric}"] = models.loc[models["candidate"] == best, metric].mean()
            if heur is not None:
                rec["best_heuristic"], rec[f"best_heuristic_{metric}"] = heur["model"], heur[metric]
            if not models.empty and heur is not None:
                rec["model_minus_heuristic"] = rec[f"best_model_{metric}"] - rec[f"best_heuristic_{metric}"]
            if not models.empty:
                rec["model_chosen_on"] = chosen_on
            out.append(rec)
    return pd.DataFrame(out)


def distill_means_table(runs: dict[str, dict]) -> pd.DataFrame:
    """Stage 5's results (metrics.json["distill"]["results"]) averaged over seeds per run, student and method."""
    out = []
    for name, metrics in runs.items():
        rows = (metrics.get("distill") or {}).get("results") or []
        df = pd.DataFrame([r for r in rows if isinstance(r, dict)])
        if df.empty or not {"student", "method"} <= set(df.columns):
            continue
        cols = [c for c in DISTILL_METRICS if c in df.columns]
        t = df.groupby(["student", "method"], sort=False)[cols].mean().reset_index()
        out.append(t.assign(run=name)[["run", "student", "method", *cols]])
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def notebook_table(statuses: dict[str, dict]) -> pd.DataFrame:
    """Per run and notebook: status, wall seconds, peak RSS of the kernel (MB) and the error, from status.json."""
    out = []
    for name, status in statuses.items():
        if not status.get("notebooks"):
            out.append({"run": name, "notebook": "", "status": "not run"})
        for nb, s in (status.get("notebooks") or {}).items():
            rec = {
                "run": name,
                "notebook": nb,
                "status": s.get("status"),
                "seconds": s.get("seconds"),
                "peak_rss_mb": s.get("peak_rss_mb"),
            }
            if s.get("error_name") or s.get("error"):
                rec["error"] = f"{s.get('error_name', '')}: {s.get('error_message', s.get('error', ''))}"[:200]
            out.append(rec)
    return pd.DataFrame(out)


def summary_sections(runs: dict[str, dict], statuses: dict[str, dict]) -> list[tuple[str, pd.DataFrame]]:
    """(title, table) pairs in reading order; sections without data are left out. Numbers are not rounded here."""
    sections = [
        ("Link prediction: gat_model AUC / A-AUC per protocol", gat_auc_table(runs)),
        ("Best trained model vs best heuristic (AUC)", best_vs_heuristic(runs)),
        ("Distillation (mean over seeds)", distill_means_table(runs)),
        ("Notebooks: wall time and peak memory of the kernel", notebook_table(statuses)),
    ]
    return [(t, df) for t, df in sections if not df.empty]


def render_markdown(sections: list[tuple[str, pd.DataFrame]], csv_name: str) -> str:
    parts = ["# wikigat runs: summary\n"]
    for title, df in sections:
        cells = df.astype(object).where(df.notna(), None)  # a missing key or metric shows as an empty cell
        fmt = tuple(f".{COLUMN_DIGITS.get(c, DIGITS)}f" for c in df.columns)
        parts.append(f"## {title}\n\n{cells.to_markdown(index=False, floatfmt=fmt, missingval='')}\n")
    parts.append(f"Every scalar metric of every run, unrounded: `{csv_name}`.\n")
    return "\n".join(parts)


def render_html(sections: list[tuple[str, pd.DataFrame]], csv_name: str) -> str:
    parts = ["<meta charset='utf-8'><title>wikigat runs</title>", "<h1>wikigat runs: summary</h1>"]
    for title, df in sections:
        parts.append(f"<h2>{title}</h2>")
        fmt = {
            c: (lambda d: lambda x: f"{x:.{d}f}")(COLUMN_DIGITS.get(c, DIGITS))
            for c in df.columns
            if df[c].dtype.kind == "f"
        }
        parts.append(df.to_html(index=False, border=0, na_rep="", formatters=fmt))
    parts.append(f"<p>Every scalar metric of every run, unrounded: <code>{csv_name}</code>.</p>")
    return "\n".join(parts) + "\n"


def run_folders(outputs: Path = OUTPUTS) -> list[str]:
    """The names of the run folders in `outputs` (those holding a status.json), sorted."""
    outputs = Path(outputs)
    return sorted(d.name for d in outputs.iterdir() if (d / "status.json").is_file()) if outputs.is_dir() else []


def record_or_empty(path: Path) -> dict:
    """A run's JSON record for the summary; {} when absent or unreadable (that run's own runner moves it aside)."""
    try:
        record = read_json(path)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def summarize(run_names: list[str], out_stem: Path | None = None, outputs: Path = OUTPUTS) -> pd.DataFrame:
    """Compare runs: `<stem>.md` and `<stem>.html` show the main numbers (GatModel AUC / A-AUC per
    protocol, best model vs best heuristic, distillation, time and memory per notebook) rounded to 3 decimals;
    `<stem>.csv` holds every scalar of every run's metrics.json and status.json, unrounded. Missing runs, sections
    and metrics stay empty. Each file is written atomically. Returns the full table (one row per run)."""

    rows, runs, statuses = [], {}, {}
    for name in run_names:
        run_dir = outputs / name
        statuses[name] = status = record_or_empty(run_dir / "status.json")
        runs[name] = metrics = record_or_empty(run_dir / "metrics.json")
        row = {"run": name, "complete": bool(status.get("complete"))}
        for nb, s in (status.get("notebooks") or {}).items():
            row.update({f"notebooks.{nb}.{k}": s.get(k) for k in ("status", "seconds", "peak_rss_mb")})
        row.update({k: v for k, v in flatten(metrics).items() if isinstance(v, (int, float, str, bool)) or v is None})
        rows.append(row)
    table = pd.DataFrame(rows).set_index("run")
    out_stem = out_stem or outputs / "summary"
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    sections = summary_sections(runs, statuses)
    csv_name = out_stem.with_suffix(".csv").name
    atomic_write_text(out_stem.with_suffix(".csv"), table.to_csv())
    atomic_write_text(out_stem.with_suffix(".md"), render_markdown(sections, csv_name))
    atomic_write_text(out_stem.with_suffix(".html"), render_html(sections, csv_name))
    return table


def summarize_outputs(out_stem: Path, outputs: Path = OUTPUTS, also: list[str] = ()) -> pd.DataFrame:
    """The summary of every run folder of `outputs` (run_folders) and of the runs `also` names (a run refused before
    its folder was made shows as not run), written under a lock on `out_stem`, so runners sharing an outputs folder
    each write the whole list and none drops another's runs."""
    with locked(out_stem):
        return summarize(sorted({*run_folders(outputs), *also}), out_stem, outputs)
