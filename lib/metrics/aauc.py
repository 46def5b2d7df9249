"""Agnostic AUC (A-AUC, seed §5.4): does the embedding space rank semantically similar node pairs above others?

For a seeded sample of round(R_cos · N) nodes: scores = sigmoid(z_i · z_j), labels = [cos(x_i, x_j) > T_cos],
A-AUC = ROC-AUC of scores against labels over the sampled pairs.

Pairs: by default every unordered pair i < j of distinct sampled nodes.  `include_self=True` is the seed code's
variant: the whole sampled S×S matrix, i.e. each off-diagonal pair twice and every node with itself once (a
self-pair always has cosine 1 > T_cos, so it adds positives that a norm-growing encoder ranks first).
Ranking uses the logit z_i · z_j in float64, which orders pairs exactly as the exact sigmoid does (float32 sigmoid
saturates to 1.0 above ~17 and would invent ties).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from torch import Tensor

from lib.metrics.ranking import rank_aucs

DEFAULT_R_COS = 0.1
DEFAULT_T_COS = 0.7


@dataclass(frozen=True)
class AAUCResult:
    """value is NaN exactly when the A-AUC is undefined; `reason` then says why."""

    value: float
    n_nodes: int  # sampled nodes
    n_pos: int  # pairs with cosine > T_cos (counting as the AUC counts them)
    n_neg: int
    include_self: bool
    reason: str = ""

    @property
    def defined(self) -> bool:
        return not math.isnan(self.value)

    @property
    def share_pos(self) -> float:
        """Share of the sampled pairs that count as positives; NaN when no pair was sampled (S < 2)."""
        n = self.n_pos + self.n_neg
        return self.n_pos / n if n else float("nan")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["value"] = None if math.isnan(self.value) else self.value
        return d


def sample_nodes(num_nodes: int, r_cos: float, seed: int) -> Tensor:
    """round(r_cos · num_nodes) distinct node ids [S] (sorted), drawn with a seeded generator."""
    if not (isinstance(r_cos, (int, float)) and 0.0 < r_cos <= 1.0):
        raise ValueError(f"r_cos={r_cos!r} must be in (0, 1]; it is the fraction of nodes sampled")
    k = int(round(r_cos * num_nodes))
    g = torch.Generator().manual_seed(int(seed))
    return torch.randperm(num_nodes, generator=g)[:k].sort().values


def aauc(
    z: Tensor,
    x: Tensor,
    r_cos: float = DEFAULT_R_COS,
    t_cos: float = DEFAULT_T_COS,
    seed: int = 0,
    include_self: bool = False,
    chunk_size: int = 256,
    exact_limit: int = 4_000_000,
) -> AAUCResult:
    """A-AUC of embeddings z [N, F_out] against input features x [N, F_in].

    chunk_size: rows of the S×S pair matrix built at a time (memory O(chunk_size · S)).
    exact_limit: up to this many pairs the scores are collected and ranked once (`rank_aucs`); above it a chunked
    Mann–Whitney count gives the same value with memory O(#minority-class pairs + chunk).
    """
    return aauc_thresholds(z, x, r_cos, [t_cos], seed, include_self, chunk_size, exact_limit)[0]


def aauc_thresholds(
    z: Tensor,
    x: Tensor,
    r_cos: float,
    t_cos_grid: list,
    seed: int = 0,
    include_self: bool = False,
    chunk_size: int = 256,
    exact_limit: int = 4_000_000,
) -> list[AAUCResult]:
    """`aauc` at every threshold of t_cos_grid, one result per threshold, on the same node sample: the pairs' scores
    are ranked once for all thresholds (a sensitivity study of five thresholds costs about one A-AUC)."""
    for t_cos in t_cos_grid:
        _check_t_cos(t_cos)
    if z.dim() != 2 or x.dim() != 2 or z.size(0) != x.size(0):
        raise ValueError(
            f"embeddings z {tuple(z.shape)} and features x {tuple(x.shape)} must be [N, F] with the "
            f"same N; pass the embeddings of the same graph's nodes"
        )
    idx = sample_nodes(x.size(0), r_cos, seed)
    s = idx.numel()
    if s < 2:
        why = f"only {s} node(s) sampled (N={x.size(0)}, r_cos={r_cos}); need at least 2"
        return [AAUCResult(float("nan"), s, 0, 0, include_self, why) for _ in t_cos_grid]
    zs = z.detach().index_select(0, idx).double()
    xs = torch.nn.functional.normalize(x.detach().index_select(0, idx).double(), dim=1)
    if not (torch.isfinite(zs).all() and torch.isfinite(xs).all()):
        why = "embeddings or features contain NaN/inf"
        return [AAUCResult(float("nan"), s, 0, 0, include_self, why) for _ in t_cos_grid]

    n_pairs = s * s if include_self else s * (s - 1) // 2
    if n_pairs > exact_limit:
        return [_chunked_mann_whitney(zs, xs, t, include_self, chunk_size, s) for t in t_cos_grid]
    parts = list(_pair_blocks(zs, xs, include_self, chunk_size))
    scores = torch.cat([p[0] for p in parts]).numpy()
    cosine = torch.cat([p[1] for p in parts]).numpy()
    label_sets = [cosine > t for t in t_cos_grid]
    results = []
    for t_cos, labels, value in zip(t_cos_grid, label_sets, rank_aucs(scores, label_sets), strict=True):
        n_pos = int(labels.sum())
        n_neg = labels.size - n_pos
        if n_pos == 0 or n_neg == 0:
            results.append(_undefined(s, n_pos, n_neg, include_self, t_cos))
        else:
            results.append(AAUCResult(value, s, n_pos, n_neg, include_self))
    return results


def _undefined(s, n_pos, n_neg, include_self, t_cos) -> AAUCResult:
    which = "positive (cosine > T_cos)" if n_pos == 0 else "negative (cosine <= T_cos)"
    return AAUCResult(
        float("nan"),
        s,
        n_pos,
        n_neg,
        include_self,
        f"no {which} pair among {s} sampled nodes at t_cos={t_cos}; AUC is undefined",
    )


def _pair_blocks(zs: Tensor, xs: Tensor, include_self: bool, chunk_size: int):
    """Yield (logits [m], cosines [m]) for the pairs, one block of rows at a time (xs rows unit-normalised)."""
    s = zs.size(0)
    for start in range(0, s, chunk_size):
        stop = min(start + chunk_size, s)
        logit = zs[start:stop] @ zs.T  # [m, S]
        cosine = xs[start:stop] @ xs.T
        if include_self:  # the seed's full matrix: every cell once
            yield logit.reshape(-1), cosine.reshape(-1)
        else:
            keep = torch.arange(s).unsqueeze(0) > torch.arange(start, stop).unsqueeze(1)
            yield logit[keep], cosine[keep]


def _row_blocks(zs: Tensor, xs: Tensor, t_cos: float, include_self: bool, chunk_size: int):
    """Yield (logits [m], labels [m] bool) for the pairs, one block of rows at a time."""
    for logit, cosine in _pair_blocks(zs, xs, include_self, chunk_size):
        yield logit, cosine > t_cos


def _chunked_mann_whitney(zs, xs, t_cos, include_self, chunk_size, s) -> AAUCResult:
    """AUC = P(score_pos > score_neg) + ½ P(tie), counted exactly: keep the sorted scores of the rarer class and
    count the other class against them block by block (no S×S matrix in memory)."""
    n_pos = n_neg = 0
    for _, lab in _row_blocks(zs, xs, t_cos, include_self, chunk_size):
        p = int(lab.sum())
        n_pos, n_neg = n_pos + p, n_neg + lab.numel() - p
    if n_pos == 0 or n_neg == 0:
        return _undefined(s, n_pos, n_neg, include_self, t_cos)
    minority_is_pos = n_pos <= n_neg
    kept = np.sort(
        np.concatenate(
            [
                logit[lab == minority_is_pos].numpy()
                for logit, lab in _row_blocks(zs, xs, t_cos, include_self, chunk_size)
            ]
        )
    )
    greater = 0.0  # sum over majority scores of (#minority below) + ½ (#minority equal)
    for logit, lab in _row_blocks(zs, xs, t_cos, include_self, chunk_size):
        other = logit[lab != minority_is_pos].numpy()
        lo = np.searchsorted(kept, other, side="left")
        hi = np.searchsorted(kept, other, side="right")
        greater += float(lo.sum()) + 0.5 * float((hi - lo).sum())
    frac = greater / (float(n_pos) * float(n_neg))  # P(majority score > minority score)
    value = frac if not minority_is_pos else 1.0 - frac
    return AAUCResult(value, s, n_pos, n_neg, include_self)


def aauc_scored(
    score_pairs,
    x: Tensor,
    r_cos: float = DEFAULT_R_COS,
    t_cos: float = DEFAULT_T_COS,
    seed: int = 0,
    include_self: bool = False,
    chunk_size: int = 65536,
) -> AAUCResult:
    """A-AUC of a model that scores pairs with a decoder of its own rather than z_i · z_j (lib.linkpred.decoders): the
    same seeded node sample and labels as `aauc`, scores from score_pairs(pairs [2, P]) -> [P] (called chunk_size pairs
    at a time). With include_self, off-diagonal pairs weigh 2 and self-pairs 1: exactly the seed's S × S matrix."""
    _check_t_cos(t_cos)
    idx = sample_nodes(x.size(0), r_cos, seed)
    s = idx.numel()
    if s < 2:
        return AAUCResult(
            float("nan"),
            s,
            0,
            0,
            include_self,
            f"only {s} node(s) sampled (N={x.size(0)}, r_cos={r_cos}); need at least 2",
        )
    pairs = idx[torch.triu_indices(s, s, offset=0 if include_self else 1)]
    xn = torch.nn.functional.normalize(x.detach().double(), dim=1)
    labels = ((xn[pairs[0]] * xn[pairs[1]]).sum(1) > t_cos).numpy()
    with torch.no_grad():
        scores = np.concatenate(
            [
                np.asarray(score_pairs(pairs[:, a : a + chunk_size]).detach().double().cpu())
                for a in range(0, pairs.size(1), chunk_size)
            ]
        )
    weight = np.where(pairs[0].numpy() == pairs[1].numpy(), 1.0, 2.0) if include_self else np.ones(labels.size)
    n_pos, n_neg = int(weight[labels].sum()), int(weight[~labels].sum())
    if n_pos == 0 or n_neg == 0:
        return _undefined(s, n_pos, n_neg, include_self, t_cos)
    return AAUCResult(float(roc_auc_score(labels, scores, sample_weight=weight)), s, n_pos, n_neg, include_self)


# ---------------------------------------------------------------- stage 4: analysis helpers (notebook 04)


def _check_t_cos(t_cos) -> None:
    if not (isinstance(t_cos, (int, float)) and -1.0 <= t_cos <= 1.0):
        raise ValueError(f"t_cos={t_cos!r} must be in [-1, 1]; it is a cosine-similarity threshold")


def aauc_on_pairs(
    z: Tensor, x: Tensor, pairs: Tensor, t_cos: float = DEFAULT_T_COS, chunk_size: int = 65536
) -> AAUCResult:
    """A-AUC restricted to given node pairs (e.g. pairs inside one topic, or across BFS branches).

    z: [N, F_out] embeddings, x: [N, F_in] input features, pairs: [2, P] node ids.  Scores are the logits z_i·z_j
    (ranked as sigmoid(z_i·z_j)), labels cos(x_i, x_j) > t_cos, both in float64 as `aauc`.  Pairs are scored
    chunk_size at a time so memory stays O(chunk_size · F).  NaN with a reason when a class or the group is empty.
    """
    _check_t_cos(t_cos)
    if z.dim() != 2 or x.dim() != 2 or z.size(0) != x.size(0):
        raise ValueError(
            f"embeddings z {tuple(z.shape)} and features x {tuple(x.shape)} must be [N, F] with the "
            f"same N; pass the embeddings of the same graph's nodes"
        )
    if pairs.dim() != 2 or pairs.size(0) != 2:
        raise ValueError(f"pairs has shape {tuple(pairs.shape)}; it must be [2, P] node ids")
    if pairs.numel() == 0:
        return AAUCResult(float("nan"), 0, 0, 0, False, "no pairs in this group; A-AUC is undefined")
    zd = z.detach().double()
    xn = torch.nn.functional.normalize(x.detach().double(), dim=1)
    scores, labels = [], []
    for start in range(0, pairs.size(1), chunk_size):
        u, v = pairs[0, start : start + chunk_size], pairs[1, start : start + chunk_size]
        scores.append((zd[u] * zd[v]).sum(1))
        labels.append((xn[u] * xn[v]).sum(1) > t_cos)
    scores, labels = torch.cat(scores).numpy(), torch.cat(labels).numpy()
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    n_nodes = int(torch.unique(pairs).numel())
    if n_pos == 0 or n_neg == 0:
        return _undefined(n_nodes, n_pos, n_neg, False, t_cos)
    return AAUCResult(rank_aucs(scores, [labels])[0], n_nodes, n_pos, n_neg, False)


def sampled_pairs(num_nodes: int, r_cos: float, seed: int) -> Tensor:
    """All unordered pairs i < j [2, S(S-1)/2] of the S nodes `sample_nodes` draws (the pairs `aauc` scores)."""
    idx = sample_nodes(num_nodes, r_cos, seed)
    iu = torch.triu_indices(idx.numel(), idx.numel(), offset=1)
    return idx[iu]


def aauc_by_group(
    z: Tensor, x: Tensor, groups: list, r_cos: float = DEFAULT_R_COS, t_cos: float = DEFAULT_T_COS, seed: int = 0
) -> dict:
    """A-AUC per group label over the sampled pairs whose two nodes share that label (e.g. a topic).

    groups: [N] label per node (None = unknown, left out).  Returns {label: AAUCResult}, labels sorted."""
    if len(groups) != x.size(0):
        raise ValueError(f"groups has {len(groups)} labels but x has {x.size(0)} nodes; pass one label per node")
    pairs = sampled_pairs(x.size(0), r_cos, seed)
    lab = np.array([g if g is not None else "" for g in groups], dtype=object)
    a, b = lab[pairs[0].numpy()], lab[pairs[1].numpy()]
    out = {}
    for g in sorted({v for v in lab if v != ""}):
        keep = torch.from_numpy((a == g) & (b == g))
        out[g] = aauc_on_pairs(z, x, pairs[:, keep], t_cos)
    return out


def aauc_inside_across(
    z: Tensor, x: Tensor, branch, r_cos: float = DEFAULT_R_COS, t_cos: float = DEFAULT_T_COS, seed: int = 0
) -> dict:
    """A-AUC over the sampled pairs inside one BFS branch vs across two branches.

    branch: [N] branch id per node (see lib.crawl.bfs.bfs_branches: root 0, unreached -1); pairs with the root or an
    unreached node are left out of both.  Returns {"inside": AAUCResult, "across": AAUCResult}."""
    branch = torch.as_tensor(branch, dtype=torch.long)
    if branch.numel() != x.size(0):
        raise ValueError(f"branch has {branch.numel()} ids but x has {x.size(0)} nodes; pass one id per node")
    pairs = sampled_pairs(x.size(0), r_cos, seed)
    bu, bv = branch[pairs[0]], branch[pairs[1]]
    known = (bu > 0) & (bv > 0)
    return {
        "inside": aauc_on_pairs(z, x, pairs[:, known & (bu == bv)], t_cos),
        "across": aauc_on_pairs(z, x, pairs[:, known & (bu != bv)], t_cos),
    }


def top_new_links(z: Tensor, edge_index: Tensor, k: int, chunk_size: int = 1024) -> tuple[Tensor, Tensor]:
    """The k node pairs [2, ≤k] (i < j, never an edge of `edge_index` in either direction, never i = j) with the
    highest logits z_i·z_j, best first, and those logits [≤k] (fewer only when fewer non-edges exist).

    Hand-written rather than a dense N×N topk: chunked over rows, memory O(chunk_size · N) at 20,000 nodes."""
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k={k!r} must be an integer >= 1")
    n = z.size(0)
    zd = z.detach().double()
    ei = torch.cat([edge_index, edge_index.flip(0)], dim=1)  # mask both directions whatever the input holds
    src, dst = ei
    best_s = torch.empty(0, dtype=torch.float64)
    best_p = torch.empty((2, 0), dtype=torch.long)
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        s = zd[start:stop] @ zd.T  # [m, N]
        s[torch.arange(n).unsqueeze(0) <= torch.arange(start, stop).unsqueeze(1)] = -math.inf  # i < j only
        here = (src >= start) & (src < stop)
        s[src[here] - start, dst[here]] = -math.inf  # existing links are not "new"
        vals, flat = torch.topk(s.reshape(-1), min(k, s.numel()))
        ok = vals > -math.inf
        pairs = torch.stack([flat[ok] // n + start, flat[ok] % n])
        best_s, best_p = torch.cat([best_s, vals[ok]]), torch.cat([best_p, pairs], dim=1)
        order = torch.argsort(best_s, descending=True, stable=True)[:k]
        best_s, best_p = best_s[order], best_p[:, order]
    return best_p, best_s
