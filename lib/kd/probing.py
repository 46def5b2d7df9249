"""Stage 6 probing: SentEval-style tasks (Conneau et al. 2018; thesis §3.3) built from this repository's own sentences,
and a linear probe on frozen sentence representations.

Surface tasks (length, word content, bigram shift) need only a regex tokenizer; the syntactic and semantic ones read a
spaCy dependency parse, so they are dependency-based stand-ins for SentEval's constituency-based labels:
- tree depth: tokens on the longest root-to-leaf path of the dependency tree (SentEval: constituency depth 5-12);
- top constituents: the dependency labels of the root's children in order, the root marked "ROOT" (SentEval: the
  constituents under S), the most common sequences and "OTHER";
- tense: the main clause's first finite verb, PAST (VBD) or PRES (VBZ / VBP); modal or non-finite clauses are left out;
- subject / object number: NN or NNS of the main verb's noun subject (nsubj, nsubjpass) / direct object (dobj).
Each task function returns (sentences, labels), shuffled and optionally balanced with a seed.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pandas as pd

from lib.distill.data import split_ids
from lib.distill.eval import linear_probe
from lib.kd.augment import load_spacy
from lib.kd.config import KdError

_WORD = re.compile(r"\w+(?:[-'’]\w+)*|[^\w\s]")


def words(sentence: str) -> list[str]:
    """Word and punctuation tokens (regex; no model needed)."""
    return _WORD.findall(sentence)


def _finish(sentences: list[str], labels: list, seed: int, max_per_class: int | None) -> tuple[list[str], list]:
    """Seeded shuffle, then at most `max_per_class` sentences per label."""
    order = np.random.default_rng(seed).permutation(len(sentences))
    taken: Counter = Counter()
    s_out, y_out = [], []
    for i in order:
        if max_per_class is None or taken[labels[i]] < max_per_class:
            taken[labels[i]] += 1
            s_out.append(sentences[i])
            y_out.append(labels[i])
    return s_out, y_out


# -------------------------------------------------------------------------------------------------- surface tasks
def sentence_length_task(
    sentences: list[str], n_bins: int = 6, lo: int = 5, hi: int = 28, seed: int = 0, max_per_class: int | None = None
) -> tuple[list[str], list[int]]:
    """Length in tokens cut into `n_bins` equal-width bins over [lo, hi] (SentEval: 6 bins); others left out.

    With the defaults the bins are 5-8, 9-12, 13-16, 17-20, 21-24, 25-28 tokens -> labels 0..5.
    """
    s_out, y = [], []
    for s in sentences:
        n = len(words(s))
        if lo <= n <= hi:
            s_out.append(s)
            y.append(int((n - lo) * n_bins // (hi - lo + 1)))
    return _finish(s_out, y, seed, max_per_class)


def word_content_task(
    sentences: list[str], n_words: int = 1000, skip_top: int = 2000, seed: int = 0, max_per_class: int | None = None
) -> tuple[list[str], list[str]]:
    """Which of `n_words` mid-frequency words a sentence holds (SentEval: words ranked 2,000-3,000, sentences with
    exactly one of them). Words are lower-cased alphabetic tokens ranked by corpus frequency (ties alphabetically)."""
    toks = [{w.lower() for w in words(s) if w.isalpha()} for s in sentences]
    freq = Counter(w for ts in toks for w in ts)
    ranked = sorted(freq, key=lambda w: (-freq[w], w))
    targets = set(ranked[skip_top : skip_top + n_words])
    s_out, y = [], []
    for s, ts in zip(sentences, toks):
        hit = ts & targets
        if len(hit) == 1:
            s_out.append(s)
            y.append(hit.pop())
    return _finish(s_out, y, seed, max_per_class)


def bigram_shift_task(
    sentences: list[str], p_shift: float = 0.5, seed: int = 0, max_per_class: int | None = None
) -> tuple[list[str], list[str]]:
    """With probability p_shift swap two adjacent, different word tokens (label "I"), else keep the order ("O").

    Every output sentence is its tokens joined by spaces, so spacing tells nothing. Sentences with no swappable pair
    are left out.
    """
    rng = np.random.default_rng(seed)
    s_out, y = [], []
    for s in sentences:
        ws = words(s)
        pairs = [
            i
            for i in range(len(ws) - 1)
            if ws[i][0].isalnum() and ws[i + 1][0].isalnum() and ws[i].lower() != ws[i + 1].lower()
        ]
        if not pairs:
            continue
        if rng.random() < p_shift:
            i = pairs[rng.integers(len(pairs))]
            ws[i], ws[i + 1] = ws[i + 1], ws[i]
            y.append("I")
        else:
            y.append("O")
        s_out.append(" ".join(ws))
    return _finish(s_out, y, seed, max_per_class)


# ------------------------------------------------------------------------------------------------- parse labels
def parse(sentences: list[str], batch_size: int = 256) -> list:
    """spaCy Docs (tagger + dependency parser of en_core_web_sm)."""
    return list(load_spacy(("ner", "lemmatizer")).pipe(list(sentences), batch_size=batch_size))


def _root(doc):
    return next(t for t in doc if t.dep_ == "ROOT" or t.head.i == t.i)


def tree_depth(doc) -> int:
    """Tokens on the longest path from the (first) root down to a leaf; a one-word sentence has depth 1."""
    root = _root(doc)
    return 1 + max(len(list(t.ancestors)) for t in root.subtree)


def top_constituents(doc) -> str:
    """The root's children's dependency labels in sentence order, the root itself as "ROOT": "nsubj ROOT dobj punct"."""
    root = _root(doc)
    return " ".join("ROOT" if t.i == root.i else t.dep_ for t in sorted([root, *root.children], key=lambda t: t.i))


def main_tense(doc) -> str | None:
    """PAST or PRES from the main clause's first finite verb (its auxiliaries before the verb itself);
    None otherwise."""
    root = _root(doc)
    for t in [c for c in root.children if c.dep_ in ("aux", "auxpass") and c.i < root.i] + [root]:
        if t.tag_ == "VBD":
            return "PAST"
        if t.tag_ in ("VBZ", "VBP"):
            return "PRES"
        if t.tag_ == "MD":
            return None
    return None


def _noun_number(doc, deps: tuple[str, ...]) -> str | None:
    for t in _root(doc).children:
        if t.dep_ in deps:
            return {"NN": "NN", "NNP": "NN", "NNS": "NNS", "NNPS": "NNS"}.get(t.tag_)
    return None


def subject_number(doc) -> str | None:
    """NN (singular) or NNS (plural) of the main verb's noun subject; None for pronouns or no subject."""
    return _noun_number(doc, ("nsubj", "nsubjpass"))


def object_number(doc) -> str | None:
    """NN or NNS of the main verb's noun direct object; None when there is none."""
    return _noun_number(doc, ("dobj",))


LABELLERS = {
    "tree_depth": tree_depth,
    "top_constituents": top_constituents,
    "tense": main_tense,
    "subj_number": subject_number,
    "obj_number": object_number,
}


def parse_task(
    sentences: list[str],
    task: str,
    docs: list | None = None,
    seed: int = 0,
    max_per_class: int | None = None,
    depth_range: tuple[int, int] = (3, 10),
    top_classes: int = 20,
) -> tuple[list[str], list]:
    """One parse-based task: (sentences, labels) for sentences with a label. docs: their parses (default: `parse`).

    tree_depth labels are clipped to depth_range (8 classes by default, like SentEval's 5-12); top_constituents keeps
    the top_classes - 1 most common sequences and calls the rest "OTHER" (SentEval: 19 + other).
    """
    if task not in LABELLERS:
        raise KdError(f"probing task {task!r} is not parse-based; use one of {sorted(LABELLERS)}")
    docs = parse(sentences) if docs is None else docs
    if len(docs) != len(sentences):
        raise KdError(f"{len(docs)} parses for {len(sentences)} sentences; parse the same sentences")
    labels = [LABELLERS[task](d) for d in docs]
    if task == "tree_depth":
        labels = [min(max(y, depth_range[0]), depth_range[1]) for y in labels]
    if task == "top_constituents":
        common = {k for k, _ in Counter(labels).most_common(top_classes - 1)}
        labels = [y if y in common else "OTHER" for y in labels]
    keep = [i for i, y in enumerate(labels) if y is not None]
    return _finish([sentences[i] for i in keep], [labels[i] for i in keep], seed, max_per_class)


def probing_tasks(
    sentences: list[str],
    seed: int = 0,
    max_per_class: int | None = None,
    docs: list | None = None,
    word_content_words: int = 1000,
    word_content_skip: int = 2000,
) -> dict[str, tuple[list[str], list]]:
    """All eight tasks from one pool of sentences (parsed once): name -> (sentences, labels)."""
    docs = parse(sentences) if docs is None else docs
    out = {
        "length": sentence_length_task(sentences, seed=seed, max_per_class=max_per_class),
        "word_content": word_content_task(sentences, word_content_words, word_content_skip, seed, max_per_class),
        "bigram_shift": bigram_shift_task(sentences, seed=seed, max_per_class=max_per_class),
    }
    for task in LABELLERS:
        out[task] = parse_task(sentences, task, docs, seed, max_per_class)
    return out


# --------------------------------------------------------------------------------------------------------- probe
def probe(
    representations: np.ndarray, labels, seed: int = 0, fractions=(0.8, 0.1, 0.1), Cs=(0.01, 0.1, 1.0, 10.0)
) -> dict:
    """Linear probe (lib.distill.eval.linear_probe: standardised features, logistic regression) on a seeded
    train/val/test split; the L2 strength is chosen on val, as SentEval does.

    representations [N, D]; labels [N] -> {"test", "val", "C", "majority" (test share of the train majority
    class), "n"}.
    """
    x, y = np.asarray(representations), np.asarray(labels)
    if len(x) != len(y) or len(set(y.tolist())) < 2:
        raise KdError(
            f"probe needs one label per representation and at least 2 classes; got {len(x)} "
            f"representations, {len(y)} labels, {len(set(y.tolist()))} classes"
        )
    split = split_ids(len(y), fractions, seed)
    tr, va, te = (split == s for s in ("train", "val", "test"))
    best = max(
        (linear_probe(x[tr], y[tr], {"val": (x[va], y[va]), "test": (x[te], y[te])}, seed, C) | {"C": C} for C in Cs),
        key=lambda r: r["val"],
    )
    vals, counts = np.unique(y[tr], return_counts=True)
    return {**best, "majority": float((y[te] == vals[counts.argmax()]).mean()), "n": int(len(y))}


def probe_table(
    representations: dict[str, dict[str, np.ndarray]], tasks: dict[str, tuple[list[str], list]], seed: int = 0
) -> pd.DataFrame:
    """Test accuracy of a probe per model (rows) and task (columns), plus a "majority" row.

    representations: model -> task -> [N_task, D], rows in the order of tasks[task][0].
    """
    rows, majority = {}, {}
    for model, reps in representations.items():
        rows[model] = {}
        for task, (_, labels) in tasks.items():
            r = probe(reps[task], labels, seed)
            rows[model][task], majority[task] = r["test"], r["majority"]
    return pd.DataFrame({**rows, "majority": majority}).T[list(tasks)]
