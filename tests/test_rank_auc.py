"""The rank-sum AUC and the average precision equal sklearn's (ties included), and an A-AUC threshold grid ranks once
yet equals one A-AUC per threshold."""

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score, roc_auc_score

from lib.metrics.aauc import aauc_thresholds, sample_nodes
from lib.metrics.ranking import average_precision, rank_aucs, roc_auc


def test_rank_aucs_equal_sklearn_with_ties():
    rng = np.random.default_rng(0)
    scores = np.round(rng.normal(size=5000), 1)  # many ties between positives and negatives
    label_sets = [rng.random(5000) < share for share in (0.01, 0.3, 0.9)]
    for labels, value in zip(label_sets, rank_aucs(scores, label_sets), strict=True):
        assert value == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)


@pytest.mark.parametrize("decimals", [0, 1, 3])  # from many ties to few
def test_roc_auc_and_average_precision_equal_sklearn_on_small_and_large_sets(decimals):
    rng = np.random.default_rng(decimals)
    for n in (2, 3, 7, 40, 400, 4000):
        scores = np.round(rng.normal(size=n), decimals)
        labels = rng.random(n) < rng.uniform(0.05, 0.95)
        labels[0], labels[-1] = True, False  # both classes
        assert roc_auc(labels, scores) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
        assert average_precision(labels, scores) == pytest.approx(average_precision_score(labels, scores), abs=1e-12)


def test_average_precision_of_a_perfect_a_reversed_and_an_all_tied_ranking():
    labels = np.array([1, 1, 0, 0, 0], bool)
    assert average_precision(labels, np.array([5.0, 4, 3, 2, 1])) == 1.0
    assert average_precision(labels, np.array([1.0, 2, 3, 4, 5])) == pytest.approx((1 / 4 + 2 / 5) / 2)
    assert average_precision(labels, np.zeros(5)) == pytest.approx(2 / 5)  # one threshold: precision 2/5 at recall 1
    assert math.isnan(average_precision(np.zeros(5, bool), np.arange(5.0)))


def test_rank_aucs_one_class_is_nan_and_perfect_ranking_is_one():
    scores = np.arange(6.0)
    one_class, perfect = np.zeros(6, bool), scores > 2.5
    no_pos, top = rank_aucs(scores, [one_class, perfect])
    assert math.isnan(no_pos)
    assert top == 1.0


@pytest.mark.parametrize("include_self", [False, True])
@pytest.mark.parametrize("exact_limit", [4_000_000, 0])  # ranked once / the chunked Mann–Whitney count
def test_threshold_grid_equals_sklearn_on_the_sampled_pairs(include_self, exact_limit):
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(300, 16, generator=gen)
    z = x @ torch.randn(16, 8, generator=gen) + torch.randn(300, 8, generator=gen)
    grid = [0.0, 0.3, 0.6]
    together = aauc_thresholds(z, x, 0.5, grid, seed=4, include_self=include_self, exact_limit=exact_limit)
    idx = sample_nodes(300, 0.5, 4)
    zs, xs = z[idx].double(), torch.nn.functional.normalize(x[idx].double(), dim=1)
    rows, cols = torch.triu_indices(len(idx), len(idx), offset=1)
    logit, cosine = (zs @ zs.T)[rows, cols].numpy(), (xs @ xs.T)[rows, cols].numpy()
    if include_self:  # the seed's S x S matrix: each pair twice, each node with itself once (cosine 1)
        diagonal = (zs * zs).sum(1).numpy()
        logit, cosine = np.r_[logit, logit, diagonal], np.r_[cosine, cosine, np.ones(len(idx))]
    for t, result in zip(grid, together, strict=True):
        assert result.n_pos == int((cosine > t).sum())
        assert result.value == pytest.approx(roc_auc_score(cosine > t, logit), abs=1e-12)


def test_threshold_grid_says_why_a_threshold_is_undefined():
    x = torch.randn(40, 4)
    above_every_cosine = aauc_thresholds(x, x, 1.0, [0.0, 1.0])[1]
    assert not above_every_cosine.defined and "AUC is undefined" in above_every_cosine.reason


def test_threshold_grid_refuses_a_bad_threshold():
    x = torch.randn(10, 4)
    with pytest.raises(ValueError, match="t_cos=1.5 must be in"):
        aauc_thresholds(x, x, 0.5, [0.5, 1.5])
