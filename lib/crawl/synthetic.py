"""A seeded synthetic link list at Wikipedia's scale, in the snapshot format (lib.crawl.sources.read_snapshot): what
scripts/synthetic_snapshot.py writes so the seed's campaign (389 roots x 20,000 nodes) can run without a dump.

Shape of the links (numpy, vectorised; 1,000,000 articles and 40,000,000 links take about a minute):
  - out-degrees: a power law (Pareto tail of exponent `out_exponent`), capped, scaled to the requested link count;
  - targets: popular ones (Zipf ranks whose in-degrees follow a power law of exponent `in_exponent`), a `local_share`
    of them inside the source's community of `community_size` consecutive articles (so BFS balls from nearby roots
    overlap and are clustered, as topics make them on Wikipedia), the rest over the whole snapshot;
  - reciprocity: the reverse of a share of the links is added, so that about `reciprocity` of all links have their
    reverse (a minority of Wikipedia's links are reciprocated; 0.2 by default), spread over the articles rather than
    given to the hubs (whose out-degree would otherwise follow their in-degree);
  - no self-link, no repeated link; links grouped by source, targets in title order (as the MediaWiki API lists them).
Titles are "Article 0000000" ... (written "Article_0000000", underscores read as spaces).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from lib.common.paths import atomic_write_text, atomic_writer

WRITE_CHUNK = 1 << 20  # links formatted per write: ~30 MiB of text


@dataclass(frozen=True)
class SyntheticSpec:
    """What a synthetic snapshot is made of (every field is written in its header)."""

    articles: int = 1_000_000
    links: int = 40_000_000
    seed: int = 0
    reciprocity: float = 0.2
    out_exponent: float = 2.5
    in_exponent: float = 2.1
    community_size: int = 1000
    local_share: float = 0.5
    max_out: int = 5000

    def __post_init__(self):
        checks = [
            ("articles", self.articles >= 10, "use at least 10 articles"),
            (
                "links",
                self.articles <= self.links <= self.articles * (self.articles - 1) // 4,
                "use between one link per article and a quarter of all ordered pairs",
            ),
            ("reciprocity", 0 <= self.reciprocity < 1, "use a share in [0, 1) such as 0.2"),
            ("out_exponent", self.out_exponent > 2, "use an exponent above 2 (a finite mean) such as 2.5"),
            ("in_exponent", self.in_exponent > 2, "use an exponent above 2 such as 2.1"),
            ("community_size", self.community_size >= 2, "use at least 2 articles"),
            ("local_share", 0 <= self.local_share <= 1, "use a share in [0, 1]"),
            ("max_out", self.max_out >= 1, "use at least 1"),
        ]
        for key, ok, fix in checks:
            if not ok:
                raise ValueError(f"synthetic snapshot: {key}={getattr(self, key)!r} is invalid: {fix}")


def title_width(articles: int) -> int:
    return len(str(articles - 1))


def article_title(i: int, articles: int) -> str:
    """The title of article `i` of a synthetic snapshot of `articles` articles ("Article 0000123")."""
    return f"Article {i:0{title_width(articles)}d}"


def zipf_ranks(rng: np.random.Generator, size: np.ndarray | int, exponent: float, count: int) -> np.ndarray:
    """`count` ranks in [0, size) (size: one number or one per draw) with P(rank r) ~ (r + 1)^-b, b = 1 / (exponent -
    1), so the in-degrees of the ranked articles follow a power law of `exponent`: inverse CDF of the continuous law on
    [1, size + 1), floored."""
    one_minus_b = 1 - 1 / (exponent - 1)
    top = (np.asarray(size, dtype=np.float64) + 1) ** one_minus_b
    x = (1 + rng.random(count) * (top - 1)) ** (1 / one_minus_b)
    return np.minimum(x.astype(np.int64) - 1, np.asarray(size) - 1)


def out_degrees(rng: np.random.Generator, spec: SyntheticSpec, total: int) -> np.ndarray:
    """Out-degree per article [articles] int64, a capped Pareto tail scaled to sum about `total`."""
    raw = (1 - rng.random(spec.articles)) ** (-1 / (spec.out_exponent - 1))
    cap = min(spec.max_out, spec.articles // 2)
    return np.clip(np.rint(raw * total / raw.sum()), 1, cap).astype(np.int64)


def draw_targets(rng: np.random.Generator, spec: SyntheticSpec, src: np.ndarray, popular: np.ndarray) -> np.ndarray:
    """A target per source [L] int64: inside the source's community (local Zipf rank) with `local_share`, else a
    popular article of the whole snapshot (`popular`: article of each global popularity rank)."""
    n, cs = spec.articles, spec.community_size
    local = rng.random(len(src)) < spec.local_share
    start = (src[local] // cs) * cs
    size = np.minimum(cs, n - start)
    dst = np.empty(len(src), dtype=np.int64)
    dst[local] = start + zipf_ranks(rng, size, spec.in_exponent, int(local.sum()))
    dst[~local] = popular[zipf_ranks(rng, n, spec.in_exponent, int((~local).sum()))]
    return dst


def sorted_unique(keys: np.ndarray) -> np.ndarray:
    """The distinct values of `keys`, sorted (in place: `keys` is reordered). By hand because numpy 2's np.unique
    hashes int64 arrays first, which is ten times slower than sorting them at tens of millions of values."""
    keys.sort()
    return keys[np.concatenate([[True], keys[1:] != keys[:-1]])] if len(keys) else keys


def is_reciprocated(keys: np.ndarray, articles: int) -> np.ndarray:
    """Per link of `keys` (source * articles + target, sorted, distinct) [L] bool: its reverse is among them (then it
    is the reverse of one of them: the reverses are sorted and searched in order, which is far faster than searching
    each link's reverse at random places of `keys`)."""
    rev = np.sort((keys % articles) * articles + keys // articles)
    at = np.minimum(np.searchsorted(rev, keys), len(rev) - 1)
    return rev[at] == keys


def synthetic_links(spec: SyntheticSpec) -> tuple[np.ndarray, np.ndarray]:
    """(source ids [links] int32, target ids [links] int32) of `spec`: exactly spec.links distinct links, no
    self-link, sorted by (source, target). Deterministic for a spec (its seed included).

    Base links are drawn until, with the reverses still to add, they reach spec.links; then the reverse of enough
    unreciprocated base links is added to reach spec.reciprocity (communities already reciprocate some by chance),
    and as many other unreciprocated ones as are over spec.links are dropped."""
    rng = np.random.default_rng(spec.seed)
    n, target = spec.articles, spec.reciprocity
    popular = rng.permutation(n)  # popularity rank -> article, so popular articles spread over the communities
    deg = out_degrees(rng, spec, math.ceil(spec.links / (1 + target / (2 - target))))
    src = np.repeat(np.arange(n, dtype=np.int64), deg)
    keys = np.empty(0, dtype=np.int64)
    while True:
        dst = draw_targets(rng, spec, src, popular)
        keep = src != dst
        keys = sorted_unique(np.concatenate([keys, src[keep] * n + dst[keep]]))
        paired = is_reciprocated(keys, n)
        # reversing k unreciprocated links: (paired + 2k) / (links + k) = target
        flips = max(0, math.ceil((target * spec.links - paired.sum()) / 2))
        short = spec.links - len(keys) - flips
        if short <= 0:
            break
        # repeated and self links fell out: draw more from sources weighted by their out-degree
        src = rng.choice(n, size=int(short * 1.2) + 16, p=deg / deg.sum())
    # reversed links are drawn with weight 1 / in-degree of their target, so each article gets a few reverse links
    # instead of hubs getting tens of thousands of out-links (weighted sampling without replacement: Efraimidis and
    # Spirakis' exponential keys)
    lone = np.flatnonzero(~paired)
    indeg = np.bincount(keys % n, minlength=n)
    lone = lone[np.argsort(rng.exponential(size=len(lone)) * indeg[keys[lone] % n], kind="stable")]
    if len(lone) < flips - short:
        raise ValueError(f"synthetic snapshot: reciprocity={target} cannot be reached with these links; ask for less")
    flip, drop = keys[lone[:flips]], lone[flips : flips - short]
    keys = sorted_unique(np.concatenate([np.delete(keys, drop), (flip % n) * n + flip // n]))
    return (keys // n).astype(np.int32), (keys % n).astype(np.int32)


def reciprocity(src: np.ndarray, dst: np.ndarray, articles: int) -> float:
    """Share of the links (sorted by source, then target, no repeats) whose reverse link is also there."""
    return float(is_reciprocated(src.astype(np.int64) * articles + dst, articles).mean())


def header(spec: SyntheticSpec) -> str:
    fields = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(spec).items())
    return (
        f"# A synthetic link list (lib.crawl.synthetic), made by scripts/synthetic_snapshot.py {fields}\n"
        f"# source<TAB>target; titles with underscores for spaces\n"
    )


def write_link_list(
    path: str | Path, spec: SyntheticSpec, src: np.ndarray, dst: np.ndarray, progress: bool = True
) -> Path:
    """Write the links as a TSV link list at `path` (atomically: a kill leaves no half file), showing progress."""
    width = len("Article_") + title_width(spec.articles)
    names = np.frombuffer(
        "".join(f"Article_{i:0{width - 8}d}" for i in range(spec.articles)).encode("ascii"), dtype=np.uint8
    ).reshape(spec.articles, width)
    with (
        atomic_writer(path) as f,
        tqdm(
            total=len(src), unit="link", unit_scale=True, desc=f"write {Path(path).name}", disable=not progress
        ) as bar,
    ):
        f.write(header(spec).encode("utf-8"))
        for lo in range(0, len(src), WRITE_CHUNK):
            s, d = src[lo : lo + WRITE_CHUNK], dst[lo : lo + WRITE_CHUNK]
            rows = np.empty((len(s), 2 * width + 2), dtype=np.uint8)
            rows[:, :width] = names[s]
            rows[:, width] = ord("\t")
            rows[:, width + 1 : -1] = names[d]
            rows[:, -1] = ord("\n")
            f.write(rows.tobytes())
            bar.update(len(s))
    return Path(path)


def draw_roots(spec: SyntheticSpec, src: np.ndarray, count: int, min_links: int = 5) -> list[str]:
    """`count` distinct root titles with at least `min_links` links each, drawn with the spec's seed."""
    deg = np.bincount(src, minlength=spec.articles)
    eligible = np.flatnonzero(deg >= min_links)
    if count > len(eligible):
        raise ValueError(
            f"{count} roots asked for but only {len(eligible)} articles have {min_links}+ links; ask "
            f"for at most {len(eligible)}"
        )
    rng = np.random.default_rng([spec.seed, 1])
    return [article_title(int(i), spec.articles) for i in rng.choice(eligible, size=count, replace=False)]


def write_roots(path: str | Path, roots: list[str], spec: SyntheticSpec) -> Path:
    return atomic_write_text(
        path,
        f"# {len(roots)} roots of the synthetic link list (lib.crawl.synthetic.draw_roots, "
        f"seed {spec.seed})\n" + "".join(r + "\n" for r in roots),
    )


def make_synthetic_snapshot(folder: str | Path, spec: SyntheticSpec, roots: int = 389, progress: bool = True) -> dict:
    """Write `folder`/links.tsv (the link list of `spec`) and `folder`/roots.txt (`roots` roots drawn from it);
    returns what was made: files, articles, links, reciprocity, largest out- and in-degree, seconds."""
    t0 = time.perf_counter()
    src, dst = synthetic_links(spec)
    folder = Path(folder)
    links = write_link_list(folder / "links.tsv", spec, src, dst, progress)
    roots_path = write_roots(folder / "roots.txt", draw_roots(spec, src, roots), spec)
    return {
        "links_file": str(links),
        "roots_file": str(roots_path),
        "articles": spec.articles,
        "links": len(src),
        "reciprocity": round(reciprocity(src, dst, spec.articles), 4),
        "max_out_degree": int(np.bincount(src).max()),
        "max_in_degree": int(np.bincount(dst).max()),
        "bytes": links.stat().st_size,
        "seconds": round(time.perf_counter() - t0, 1),
    }
