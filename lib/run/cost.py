"""What a run cost: wall time and peak memory per notebook, and the size of what it crawled, embedded and trained on.

A cost-only reference run (`python -m lib.run.report --publish-cost RUN`) keeps this record, `cost.json`, beside its
parameters and status, and no metrics.json or executed notebook: its results never enter the README's findings. The
seed-scale campaign on a synthetic link list is such a run; its AUCs would describe titles that carry no meaning.
"""

from __future__ import annotations

import os
from pathlib import Path

from lib.common.device import cpuinfo
from lib.common.runinfo import read_json

COST_FILE = "cost.json"
# the cost facts of notebooks 01 and 02 (sizes and throughput), never a model's score
CRAWL_FACTS = ("graphs", "total_nodes", "total_edges", "unique_titles", "shared_node_share")
EMBED_FACTS = ("unique_titles", "titles_per_s", "dataset_bytes", "dataset_precision")


def _total_memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        return None


def cost_record(run_dir: Path) -> dict:
    """The cost of the run in `run_dir` from its status.json (the runner's per-notebook seconds and peak RSS),
    params.json (commit, platform) and the crawl and embed sections of its metrics.json, plus the machine reading it
    (the runner's own: publish on the machine that ran it)."""
    status = read_json(run_dir / "status.json")
    if not status.get("notebooks"):
        raise ValueError(f"{run_dir / 'status.json'} lists no notebooks; run the profile with python -m lib.run.runner")
    failed = [nb for nb, s in status["notebooks"].items() if s.get("status") != "ok"]
    if failed or not status.get("complete"):
        raise ValueError(
            f"{run_dir.name} is not complete (failed or not run: {', '.join(failed) or 'see status.json'}); a cost "
            "record is of a whole run: finish it with python -m lib.run.runner"
        )
    params = read_json(run_dir / "params.json")
    metrics = read_json(run_dir / "metrics.json") if (run_dir / "metrics.json").is_file() else {}
    stages = [
        {
            "notebook": nb,
            "seconds": s["seconds"],
            "peak_rss_mib": s.get("peak_rss_mb"),
            "threads": s.get("threads"),
        }
        for nb, s in status["notebooks"].items()
    ]
    peaks = [s["peak_rss_mib"] for s in stages if s["peak_rss_mib"] is not None]
    return {
        "run": run_dir.name,
        "git_commit": params.get("git_commit"),
        "platform": params.get("platform"),
        "machine": {"cpus": os.cpu_count(), "cpu": cpuinfo("model name"), "memory_gib": _total_memory_gib()},
        "stages": stages,
        "total_seconds": round(sum(s["seconds"] for s in stages), 1),
        "peak_rss_mib": max(peaks) if peaks else None,
        "peak_rss_measures": status.get("peak_rss_mb_measures"),
        "crawl": {k: metrics.get("crawl", {}).get(k) for k in CRAWL_FACTS},
        "embed": {k: metrics.get("embed", {}).get(k) for k in EMBED_FACTS},
    }


def cost_table(cost: dict) -> str:
    """cost.json as a markdown table: one row per notebook and a total."""
    rows = ["| notebook | wall time | peak RSS | threads |", "|---|---|---|---|"]
    for s in cost["stages"]:
        rss = "n/a" if s["peak_rss_mib"] is None else f"{s['peak_rss_mib'] / 1024:.2f} GiB"
        rows.append(f"| {s['notebook']} | {s['seconds'] / 60:.1f} min | {rss} | {s['threads']} |")
    peak = "n/a" if cost["peak_rss_mib"] is None else f"{cost['peak_rss_mib'] / 1024:.2f} GiB"
    rows.append(f"| **all** | **{cost['total_seconds'] / 60:.1f} min** | **{peak}** (largest) | |")
    return "\n".join(rows)


def cost_sentence(cost: dict) -> str:
    """The run's cost in one sentence: its notebooks' wall time together and the largest peak resident memory."""
    peak = "not measured" if cost["peak_rss_mib"] is None else f"{cost['peak_rss_mib'] / 1024:.2f} GiB"
    cores = cost["machine"]["cpus"]
    return (
        f"Notebooks {', '.join(s['notebook'].split('_', 1)[0] for s in cost['stages'])} took "
        f"{cost['total_seconds'] / 60:.1f} min together on a {cores}-core machine (commit "
        f"{(cost['git_commit'] or 'unknown')[:7]}); the largest peak resident memory of one notebook's kernel: {peak}."
        + _sizes(cost)
    )


def _sizes(cost: dict) -> str:
    """What the run crawled and embedded, where its metrics recorded it: ' It crawled …' or ''."""
    crawl, embed = cost.get("crawl", {}), cost.get("embed", {})
    parts = []
    if crawl.get("graphs") and crawl.get("total_nodes"):
        distinct = f" ({crawl['unique_titles']:,} distinct titles)" if crawl.get("unique_titles") else ""
        edges = f" and {crawl['total_edges']:,} edges" if crawl.get("total_edges") else ""
        parts.append(f"crawled {crawl['graphs']:,} graphs: {crawl['total_nodes']:,} nodes{distinct}{edges} in all")
    if embed.get("unique_titles") and embed.get("titles_per_s"):
        parts.append(f"encoded {embed['unique_titles']:,} titles at {embed['titles_per_s']:,.0f} titles/s")
    return f" It {'; '.join(parts)}." if parts else ""
