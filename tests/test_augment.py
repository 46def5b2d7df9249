"""Stage 6 augmentation (Tang et al. 2019): each rule on a fixed sentence, determinism per seed, the spaCy tagger.

The rule tests use a fake tagger (a fixed word -> tag table), so they need no spaCy model.
"""

from __future__ import annotations

import numpy as np
import pytest

from lib.kd import augment
from lib.kd.config import KdError

TAGS = {
    "the": "DET",
    "a": "DET",
    "cat": "NOUN",
    "dog": "NOUN",
    "mat": "NOUN",
    "rug": "NOUN",
    "sat": "VERB",
    "ran": "VERB",
    "slept": "VERB",
    "on": "ADP",
    "under": "ADP",
    ".": "PUNCT",
}
CORPUS = ["the cat sat on the mat .", "a dog ran under a rug .", "the dog slept ."]


def fake_tagger(sentences):
    return [[(w, TAGS[w]) for w in s.split()] for s in sentences]


SENT = fake_tagger(CORPUS[:1])[0]
VOCAB = augment.pos_vocabulary(fake_tagger(CORPUS))


def test_pos_vocabulary_groups_distinct_words_by_tag():
    assert VOCAB["NOUN"] == ["cat", "dog", "mat", "rug"] and VOCAB["DET"] == ["a", "the"]
    assert VOCAB["VERB"] == ["ran", "sat", "slept"] and VOCAB["PUNCT"] == ["."]


def test_masking_rate_one_masks_every_token_and_zero_rates_change_nothing():
    rng = np.random.default_rng(0)
    assert augment.perturb(SENT, VOCAB, rng, p_mask=1.0, p_pos=0.0, p_ng=0.0, mask_token="<mask>") == ["<mask>"] * 7
    for _ in range(20):
        assert augment.perturb(SENT, VOCAB, rng, p_mask=0.0, p_pos=0.0, p_ng=0.0) == "the cat sat on the mat .".split()
    assert augment.augment(CORPUS, p_mask=0.0, p_pos=0.0, p_ng=0.0, tagger=fake_tagger) == []  # only copies: dropped


def test_pos_replacement_keeps_the_tag():
    rng = np.random.default_rng(1)
    outs = [augment.perturb(SENT, VOCAB, rng, p_mask=0.0, p_pos=1.0, p_ng=0.0) for _ in range(50)]
    for out in outs:
        assert [TAGS[w] for w in out] == [t for _, t in SENT]
    assert {o[1] for o in outs} == set(VOCAB["NOUN"])  # every noun of the corpus turns up in slot 2


def test_ngram_sampling_keeps_a_contiguous_piece_of_1_to_5_tokens():
    words = [w for w, _ in SENT]
    lengths = set()
    for seed in range(200):
        out = augment.perturb(SENT, VOCAB, np.random.default_rng(seed), p_mask=0.0, p_pos=0.0, p_ng=1.0)
        assert 1 <= len(out) <= 5
        assert any(words[i : i + len(out)] == out for i in range(len(words)))
        lengths.add(len(out))
    assert lengths == {1, 2, 3, 4, 5}
    short = fake_tagger(["the cat ."])[0]
    assert all(len(augment.perturb(short, VOCAB, np.random.default_rng(s), 0, 0, 1.0)) <= 3 for s in range(50))


def test_augment_is_deterministic_per_seed_distinct_and_capped():
    a = augment.augment(CORPUS, seed=3, tagger=fake_tagger)
    assert a == augment.augment(CORPUS, seed=3, tagger=fake_tagger)
    assert a != augment.augment(CORPUS, seed=4, tagger=fake_tagger)
    assert len(a) == len(set(a)) and not set(a) & set(CORPUS)
    assert 0 < len(a) <= 20 * len(CORPUS)
    # sentence i has its own generator: its samples do not depend on the sentences around it
    own = augment.augment(CORPUS[:1], seed=3, tagger=fake_tagger, p_pos=0.0)
    assert set(own) <= set(augment.augment(CORPUS, seed=3, tagger=fake_tagger, p_pos=0.0))
    capped = augment.augment(CORPUS, seed=3, tagger=fake_tagger, max_sentences=5)
    assert len(capped) == 5 and set(capped) <= set(a)


def test_bad_rates_are_refused():
    with pytest.raises(KdError, match="p_mask \\+ p_pos <= 1"):
        augment.augment(CORPUS, p_mask=0.7, p_pos=0.5, tagger=fake_tagger)


def test_spacy_tagger_tags_a_fixed_sentence():
    pytest.importorskip("spacy")
    coarse = augment.spacy_tagger()(["The cats sat on the mat."])[0]
    assert coarse == [
        ("The", "DET"),
        ("cats", "NOUN"),
        ("sat", "VERB"),
        ("on", "ADP"),
        ("the", "DET"),
        ("mat", "NOUN"),
        (".", "PUNCT"),
    ]
    fine = augment.spacy_tagger(fine=True)(["The cats sat on the mat."])[0]
    assert [t for _, t in fine] == ["DT", "NNS", "VBD", "IN", "DT", "NN", "."]
    out = augment.augment(["The cats sat on the mat.", "A dog ran under a rug."], n_iter=5, seed=0, mask_token="<mask>")
    assert out and all(isinstance(s, str) for s in out)
