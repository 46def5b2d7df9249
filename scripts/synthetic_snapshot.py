"""Write a seeded synthetic link list at the seed's scale and roots for it (lib.crawl.synthetic), for
params/seed_scale.yaml: by default 1,000,000 articles, 40,000,000 links and 389 roots in data/seed_scale/.

    python scripts/synthetic_snapshot.py [--out data/seed_scale --articles 1000000 --links 40000000 --seed 0
                                          --reciprocity 0.2 --roots 389]

The same arguments write the same files. About 2 minutes and 2-3 GB of memory at the default size; the link list is
about 1.2 GB. Its first read by notebook 01 parses it once and caches the parsed table (lib.crawl.sources).
"""

import argparse
import json
from dataclasses import fields

from lib.common.paths import resolve
from lib.crawl.synthetic import SyntheticSpec, make_synthetic_snapshot

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--out",
        default="data/seed_scale",
        help="folder of links.tsv and roots.txt (relative to the repository, or absolute)",
    )
    for f in fields(SyntheticSpec):
        ap.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    ap.add_argument("--roots", type=int, default=389, help="roots drawn (the seed's campaign: 389)")
    a = ap.parse_args()
    spec = SyntheticSpec(**{f.name: getattr(a, f.name) for f in fields(SyntheticSpec)})
    print(json.dumps(make_synthetic_snapshot(resolve(a.out), spec, a.roots), indent=1))
