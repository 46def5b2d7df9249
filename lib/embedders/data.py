"""Notebook 05b's data: transfer texts a node embedder is trained on, and link sources made only of titles it never saw.

Domains are the vital articles' topic labels (lib.crawl.sources.embedded_snapshot: 12 topics). `partition` holds out
- every Wikispeedia title (link source `wikispeedia`: real hyperlinks of 4,604 articles),
- the vital articles of `test_topics` (link source `vital_heldout`: their title-mention links, the stage 1 proxy),
- every title of a link source of your own (`own`: lib.embedders.sources, e.g. `links:<path>` or `run:<path>`),
- the vital articles of `val_topics` (validation: choices are made there, never on a test source),
- a seeded share of the remaining vital articles (`in_domain` validation titles),
so the training documents are the other vital articles, and `transfer_texts` draws from them only. A text whose
normalised form equals any held-out title is dropped as well, wherever it came from (a noun phrase of a training
article can spell a Wikispeedia title). `mention_share` says how many held-out titles still occur *inside* some
training text (a title spelled as words of a sentence): reported, not hidden.

Text kinds (`TEXT_KINDS`): `titles` (training articles' titles), `capitalised` (runs of capitalised words in their lead
sentences: names, title-like), `phrases` (spaCy noun chunks of the lead sentences, leading determiners cut),
`sentences` (lead sentences of at most 200 characters and Rotten Tomatoes plot lines).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lib.common.params import ParamError
from lib.crawl.pages import Snapshot
from lib.crawl.sources import embedded_snapshot
from lib.crawl.wikispeedia import wikispeedia_snapshot
from lib.distill.data import load_rotten_tomatoes, load_vital_articles, split_sentences
from lib.kd.augment import load_spacy

TEXT_KINDS = ("titles", "capitalised", "phrases", "sentences")
BUILT_IN_SOURCES = ("wikispeedia", "vital_heldout")
MAX_SENTENCE_CHARS = 200  # a student cut at 64 wordpieces sees what the target saw
_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*(?:\s+(?:(?:of|the|and|de|von|van|da|du|la|le)\s+)*[A-Z][\w'’-]*)*")
_EDGE_PUNCTUATION = " \"'“”‘’()[],.;:"
_DETERMINER = re.compile(r"^(?:the|a|an|this|that|these|those|its|his|her|their|our|some|any|each|every)\s+", re.I)


def normalised(text: str) -> str:
    """The form two texts are compared in: case-folded, underscores and runs of spaces as one space."""
    return " ".join(text.replace("_", " ").casefold().split())


@dataclass(frozen=True)
class Partition:
    """Which vital articles train, and the held-out titles by role (each a sorted list of titles as written).

    train_articles: DataFrame [title, extract, topic] of the training documents; val: the `val_topics` titles;
    in_domain: the seeded held-out share of the training topics; test: {link source: its titles}."""

    train_articles: pd.DataFrame
    val: list[str]
    in_domain: list[str]
    test: dict[str, list[str]]

    @property
    def held_out(self) -> set[str]:
        """Every held-out title, normalised."""
        return {normalised(t) for ts in (self.val, self.in_domain, *self.test.values()) for t in ts}


def check_topics(val_topics: list[str], test_topics: list[str]) -> None:
    """ParamError when a topic is both chosen on and tested on."""
    if set(val_topics) & set(test_topics):
        raise ParamError(
            f"embedder_val_topics and embedder_test_topics share {sorted(set(val_topics) & set(test_topics))}"
            "; a topic is either chosen on or tested on",
            key="embedder_val_topics",
        )


def partition(
    val_topics: list[str],
    test_topics: list[str],
    in_domain_fraction: float,
    seed: int,
    own: dict[str, list[str]] | None = None,
) -> Partition:
    """The seeded split of the vital articles and Wikispeedia into training documents and held-out titles; own:
    {label: titles} of link sources of your own, held out of the training and validation articles too (a vital
    article among them is no training document) and listed in `test` under their labels."""
    arts = load_vital_articles()
    topics = sorted(set(arts.topic))
    for key, chosen in (("val_topics", val_topics), ("test_topics", test_topics)):
        unknown = [t for t in chosen if t not in topics]
        if unknown or not chosen:
            raise ParamError(
                f"embedder_{key}={chosen!r} must name vital-article topics among {topics}", key=f"embedder_{key}"
            )
    check_topics(val_topics, test_topics)
    speedia = sorted(wikispeedia_snapshot().links)
    speedia_norm = {normalised(t) for t in speedia}
    in_speedia = arts.title.map(lambda t: normalised(t) in speedia_norm)
    own_norm = {normalised(t) for ts in (own or {}).values() for t in ts}
    kept_out = in_speedia | arts.title.map(lambda t: normalised(t) in own_norm)
    test = sorted(arts.title[arts.topic.isin(test_topics) & ~in_speedia])
    val = sorted(arts.title[arts.topic.isin(val_topics) & ~kept_out])
    rest = arts[~arts.topic.isin([*val_topics, *test_topics]) & ~kept_out].sort_values("title")
    rng = np.random.default_rng(seed)
    held = rng.random(len(rest)) < in_domain_fraction
    return Partition(
        train_articles=rest[~held].reset_index(drop=True),
        val=val,
        in_domain=sorted(rest.title[held]),
        test={"wikispeedia": speedia, "vital_heldout": test, **{k: sorted(v) for k, v in (own or {}).items()}},
    )


def capitalised_spans(sentence: str, max_words: int = 6) -> list[str]:
    """Runs of capitalised words (with of/the/and... inside) of at most `max_words` words; a sentence's first word
    alone is skipped (capitalised by position, not by being a name)."""
    out = []
    for m in _CAPITALISED.finditer(sentence):
        span = m.group(0)
        if m.start() == 0 and " " not in span:
            continue
        if len(span.split()) <= max_words:
            out.append(span)
    return out


def noun_phrases(texts: list[str], batch_size: int = 64) -> list[list[str]]:
    """spaCy noun chunks per text (English pipeline, lib.kd.augment.load_spacy), leading determiners cut; chunks of
    one pronoun or digit are dropped."""
    nlp = load_spacy(("ner", "lemmatizer"))
    out = []
    for doc in nlp.pipe(texts, batch_size=batch_size):
        chunks = [_DETERMINER.sub("", c.text.strip()) for c in doc.noun_chunks if c.root.pos_ not in ("PRON", "NUM")]
        out.append([c for c in chunks if len(c) > 2])
    return out


def transfer_texts(part: Partition, kinds: list[str], max_per_kind: int, seed: int) -> dict[str, list[str]]:
    """{kind: texts} drawn from the training documents only, each kind de-duplicated, at most `max_per_kind` (a
    seeded sample, sorted), no text equal to a held-out title (`normalised`)."""
    unknown = [k for k in kinds if k not in TEXT_KINDS]
    if unknown or not kinds:
        raise ParamError(f"embedder_text_kinds={kinds!r} must be among {TEXT_KINDS}", key="embedder_text_kinds")
    arts = part.train_articles
    rng = np.random.default_rng(seed)
    # documents are visited in a seeded order and parsed only until a kind has enough texts (spaCy is the slow part)
    order = rng.permutation(len(arts))
    sentences = [[s for s in split_sentences(arts.extract.iat[i]) if len(s) <= MAX_SENTENCE_CHARS] for i in order]
    blocked = part.held_out
    out: dict[str, list[str]] = {}

    def keep(texts) -> list[str]:
        seen, kept = set(), []
        for t in texts:
            t = _DETERMINER.sub("", t.strip(_EDGE_PUNCTUATION))
            n = normalised(t)
            if n and n not in blocked and n not in seen:
                seen.add(n)
                kept.append(t.strip())
        return kept

    def sample(texts: list[str]) -> list[str]:
        if len(texts) <= max_per_kind:
            return sorted(texts)
        return sorted(texts[i] for i in rng.permutation(len(texts))[:max_per_kind])

    for kind in kinds:
        if kind == "titles":
            texts = keep(arts.title.iloc[order])
        elif kind == "capitalised":
            texts = keep(span for doc in sentences for s in doc for span in capitalised_spans(s))
        elif kind == "phrases":
            texts, i = [], 0
            while len(texts) < 2 * max_per_kind and i < len(sentences):
                batch = [" ".join(doc) for doc in sentences[i : i + 200]]
                texts = keep([*texts, *(p for doc in noun_phrases(batch) for p in doc)])
                i += 200
        else:
            rt = load_rotten_tomatoes()
            plots = [
                s for t in rt[rt.category == "plot"].text for s in split_sentences(t) if len(s) <= MAX_SENTENCE_CHARS
            ]
            texts = keep([*(s for doc in sentences for s in doc), *plots])
        out[kind] = sample(texts)
    return out


def mention_share(titles: list[str], texts: list[str], max_words: int = 8) -> float:
    """Share of `titles` whose normalised words occur as a contiguous run inside some text of `texts`."""
    grams = set()
    for t in texts:
        w = normalised(t).split()
        grams.update(" ".join(w[i:j]) for i in range(len(w)) for j in range(i + 1, min(len(w), i + max_words) + 1))
    return float(np.mean([normalised(t) in grams for t in titles])) if titles else float("nan")


def link_snapshot(source: str, part: Partition) -> Snapshot:
    """The link table of an unseen-title source: Wikispeedia's hyperlinks, or the title-mention links among the
    held-out vital articles of the test topics (links leaving them dropped, so a crawl stays inside)."""
    if source == "wikispeedia":
        return wikispeedia_snapshot()
    if source != "vital_heldout":
        raise ParamError(f"embedder_sources has {source!r}; use some of {BUILT_IN_SOURCES}", key="embedder_sources")
    snap = embedded_snapshot()
    keep = set(part.test["vital_heldout"])
    return Snapshot(
        links={t: [x for x in snap.links[t] if x in keep] for t in sorted(keep)},
        topics={t: snap.topics[t] for t in keep if t in snap.topics},
    )


def validation_links(titles: list[str], seed: int, negatives_per_positive: int = 5) -> dict:
    """Link pairs among validation `titles` for a feature-cosine AUC that never reads a test source: the vital
    articles' title-mention links with both ends in `titles`, undirected, against seeded uniform non-linked pairs.
    Returns {"titles": [str], "pos": [P, 2], "neg": [P * k, 2]} (indices into titles)."""
    links = embedded_snapshot().links
    index = {t: i for i, t in enumerate(titles)}
    pos = {
        (min(index[a], index[b]), max(index[a], index[b]))
        for a, outs in links.items()
        if a in index
        for b in outs
        if b in index and b != a
    }
    if not pos:
        raise ParamError(
            f"none of the {len(titles)} validation titles link to each other; choose embedder_val_topics "
            "with more articles",
            key="embedder_val_topics",
        )
    rng = np.random.default_rng(seed)
    neg: set[tuple[int, int]] = set()
    while len(neg) < negatives_per_positive * len(pos):
        u, v = rng.integers(0, len(titles), size=2)
        p = (int(min(u, v)), int(max(u, v)))
        if u != v and p not in pos:
            neg.add(p)
    return {"titles": list(titles), "pos": np.array(sorted(pos)), "neg": np.array(sorted(neg))}


def text_counts(texts: dict[str, list[str]], part: Partition) -> pd.DataFrame:
    """Rows [role, what, count, mentioned_inside]: the training texts per kind and the held-out titles per role, with
    the share of held-out titles found inside some training text."""
    every = [t for ts in texts.values() for t in ts]
    rows = [{"role": "train", "what": k, "count": len(v), "mentioned_inside": np.nan} for k, v in texts.items()]
    for role, titles in (("validation", part.val), ("in_domain", part.in_domain), *part.test.items()):
        rows.append(
            {"role": "held out", "what": role, "count": len(titles), "mentioned_inside": mention_share(titles, every)}
        )
    return pd.DataFrame(rows)
