"""Stage 6 probing tasks: labels of hand-built parses and hand-checked sentences, and the linear probe on a toy set.

The parse-based labels are checked on spaCy Docs built by hand (words, heads, dependency labels, tags), so they do
not depend on what the statistical parser says; one test runs the real pipeline on a simple sentence.
"""

from __future__ import annotations

import numpy as np
import pytest

from lib.kd import probing
from lib.kd.config import KdError


@pytest.fixture(scope="module")
def trees():
    """Four hand-built dependency trees (spaCy Docs; no model involved)."""
    from spacy.tokens import Doc
    from spacy.vocab import Vocab

    def doc(words, heads, deps, tags):
        return Doc(Vocab(), words=words, heads=heads, deps=deps, tags=tags)

    return {
        # "The cats chased a mouse ."
        "CATS": doc(
            ["The", "cats", "chased", "a", "mouse", "."],
            [1, 2, 2, 4, 2, 2],
            ["det", "nsubj", "ROOT", "det", "dobj", "punct"],
            ["DT", "NNS", "VBD", "DT", "NN", "."],
        ),
        # "The dog has eaten the old bones ."
        "DOG": doc(
            ["The", "dog", "has", "eaten", "the", "old", "bones", "."],
            [1, 3, 3, 3, 6, 6, 3, 3],
            ["det", "nsubj", "aux", "ROOT", "det", "amod", "dobj", "punct"],
            ["DT", "NN", "VBZ", "VBN", "DT", "JJ", "NNS", "."],
        ),
        # "She will sleep ."
        "SHE": doc(
            ["She", "will", "sleep", "."], [2, 2, 2, 2], ["nsubj", "aux", "ROOT", "punct"], ["PRP", "MD", "VB", "."]
        ),
        # "The man in the house near the river smiled ."
        "MAN": doc(
            ["The", "man", "in", "the", "house", "near", "the", "river", "smiled", "."],
            [1, 8, 1, 4, 2, 4, 7, 5, 8, 8],
            ["det", "nsubj", "prep", "det", "pobj", "prep", "det", "pobj", "ROOT", "punct"],
            ["DT", "NN", "IN", "DT", "NN", "IN", "DT", "NN", "VBD", "."],
        ),
    }


def test_parse_labels_of_hand_built_trees(trees):
    CATS, DOG, SHE, MAN = trees["CATS"], trees["DOG"], trees["SHE"], trees["MAN"]
    assert [probing.tree_depth(d) for d in (CATS, DOG, SHE, MAN)] == [
        3,
        3,
        2,
        7,
    ]  # MAN: smiled-man-in-house-near-river-the
    assert probing.top_constituents(CATS) == "nsubj ROOT dobj punct"
    assert probing.top_constituents(DOG) == "nsubj aux ROOT dobj punct"
    assert [probing.main_tense(d) for d in (CATS, DOG, SHE, MAN)] == ["PAST", "PRES", None, "PAST"]  # modal: left out
    assert [probing.subject_number(d) for d in (CATS, DOG, SHE, MAN)] == ["NNS", "NN", None, "NN"]  # pronoun: left out
    assert [probing.object_number(d) for d in (CATS, DOG, SHE, MAN)] == ["NN", "NNS", None, None]


def test_parse_task_drops_unlabelled_sentences_and_clips_depth(trees):
    texts = ["cats", "dog", "she", "man"]
    docs = [trees[k] for k in ("CATS", "DOG", "SHE", "MAN")]
    s, y = probing.parse_task(texts, "obj_number", docs)
    assert sorted(zip(s, y)) == [("cats", "NN"), ("dog", "NNS")]
    s, y = probing.parse_task(texts, "tree_depth", docs, depth_range=(3, 5))
    assert dict(zip(s, y)) == {"cats": 3, "dog": 3, "she": 3, "man": 5}
    s, y = probing.parse_task(texts, "top_constituents", docs, top_classes=2)  # 1 most common sequence + OTHER
    assert sorted(y).count("OTHER") == 3
    with pytest.raises(KdError, match="not parse-based"):
        probing.parse_task(texts, "length", docs)


def test_the_real_parser_on_a_simple_sentence():
    (d,) = probing.parse(["The cats chased a mouse."])
    assert (probing.main_tense(d), probing.subject_number(d), probing.object_number(d)) == ("PAST", "NNS", "NN")
    assert probing.top_constituents(d) == "nsubj ROOT dobj punct" and probing.tree_depth(d) == 3


def test_sentence_length_bins_by_hand():
    sents = [" ".join(["w"] * n) for n in (4, 5, 8, 9, 16, 17, 28, 29)]
    s, y = probing.sentence_length_task(sents, seed=0)
    assert dict(zip((len(x.split()) for x in s), y)) == {5: 0, 8: 0, 9: 1, 16: 2, 17: 3, 28: 5}  # 4 and 29 out
    assert probing.words("It's a well-known fact, isn't it?") == [
        "It's",
        "a",
        "well-known",
        "fact",
        ",",
        "isn't",
        "it",
        "?",
    ]


def test_word_content_picks_sentences_with_exactly_one_mid_frequency_word():
    sents = ["the the the cat", "the dog", "the cat and dog", "a bird", "the fish"]
    # document frequencies: the 4, cat 2, dog 2, a/and/bird/fish 1 -> skip "the", targets "cat", "dog"
    s, y = probing.word_content_task(sents, n_words=2, skip_top=1)
    assert sorted(zip(s, y)) == [("the dog", "dog"), ("the the the cat", "cat")]


def test_bigram_shift_swaps_one_adjacent_pair_or_nothing():
    sents = [f"The quick fox number {i} jumps over the lazy dog ." for i in range(40)]
    s, y = probing.bigram_shift_task(sents, seed=0)
    assert (s, y) == probing.bigram_shift_task(sents, seed=0) and len(s) == 40
    assert {"O", "I"} == set(y)
    for out, lab in zip(s, y):
        a, b = probing.words(sents[int(next(w for w in out.split() if w.isdigit()))]), out.split()
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if lab == "O":
            assert diff == []
        else:
            assert len(diff) == 2 and diff[1] == diff[0] + 1 and (a[diff[0]], a[diff[1]]) == (b[diff[1]], b[diff[0]])
    assert probing.bigram_shift_task(["a a", "."], seed=0) == ([], [])  # nothing to swap


def test_tasks_are_seeded_and_balanced():
    sents = [" ".join(["w"] * n) for n in range(5, 29)] * 3
    a = probing.sentence_length_task(sents, seed=1, max_per_class=2)
    assert a == probing.sentence_length_task(sents, seed=1, max_per_class=2)
    assert a != probing.sentence_length_task(sents, seed=2, max_per_class=2)
    assert sorted(a[1]) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]


def test_probe_on_a_separable_toy_representation_is_near_perfect():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 300)
    x = np.eye(3)[y] * 5 + rng.normal(0, 0.3, (300, 3))
    x = np.c_[x, rng.normal(size=(300, 5))]  # plus noise dimensions
    r = probing.probe(x, y, seed=0)
    assert r["test"] >= 0.99 and r["val"] >= 0.99 and r["n"] == 300 and 0.2 < r["majority"] < 0.5
    noise = probing.probe(rng.normal(size=(300, 8)), y, seed=0)
    assert noise["test"] < 0.6
    with pytest.raises(KdError, match="at least 2 classes"):
        probing.probe(x, np.zeros(300), seed=0)
    t = probing.probe_table(
        {"signal": {"toy": x}, "noise": {"toy": rng.normal(size=(300, 8))}}, {"toy": ([""] * 300, list(y))}
    )
    assert list(t.index) == ["signal", "noise", "majority"] and t.loc["signal", "toy"] >= 0.99
