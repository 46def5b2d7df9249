"""Pair heuristics for link prediction and the heuristic stack — the bar a graph model has to clear.

Single heuristics (no training): feature cosine, preferential attachment, common neighbours, Adamic–Adar, computed on a
message-passing graph only. The stack (`heuristic_stack`) is a logistic regression on four of them — cos(x_u, x_v),
log(1+CN), log(1+AA), log(1+PA) — standardised, fitted on the training graphs' own supervision pairs (a seeded share of
each training graph's edges held out of its message passing against as many sampled non-edges) under the same
protocol, and evaluated like every other scorer.

Density rescaling (`ref_degree`): the counts CN, AA and PA grow with the square of a graph's mean degree when edges are
kept at random, so a scorer fitted on sparse graphs reads a denser graph's counts as stronger evidence than they are.
Under `leak_free` that shift is large — every pair linked in a test graph is stripped from the training and validation
graphs, which keep ≈ 40% of their edges (seed40: 3,480 message-passing edges per training graph against 8,127 per test
graph). With a reference mean degree d_ref (the fitted graphs'), the counts of a graph of mean degree d are multiplied by
(d_ref / d)² before the log: what they would be expected to be at the reference density.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data

HEURISTICS = ("cosine", "pref_attach", "common_neighbours", "adamic_adar")
STACK_FEATURES = ("cosine", "log1p_cn", "log1p_aa", "log1p_pa")


def adjacency(mp_edge_index: Tensor, n: int) -> sp.csr_matrix:
    """Binary CSR adjacency [n, n] of a both-directions edge_index."""
    ei = mp_edge_index.cpu().numpy()
    a = sp.csr_matrix((np.ones(ei.shape[1], dtype=np.float64), (ei[0], ei[1])), shape=(n, n))
    a.data[:] = 1.0  # duplicate edges count once
    return a


def heuristic_scores(name: str, x: Tensor, mp_edge_index: Tensor, num_nodes: int, pairs: Tensor,
                     a: sp.csr_matrix | None = None) -> np.ndarray:
    """Scores [P] of node pairs [2, P] by a graph/feature heuristic (no training).

    cosine: cos(x_u, x_v); pref_attach: deg(u)·deg(v); common_neighbours: |N(u) ∩ N(v)|;
    adamic_adar: Σ_{w ∈ N(u) ∩ N(v)} 1 / log deg(w).  Degrees and neighbourhoods come from mp_edge_index only.
    Hand-written with scipy.sparse: PyG has no pair heuristics and networkx's are pure Python (too slow at 20k nodes).
    """
    u, v = pairs[0].cpu().numpy(), pairs[1].cpu().numpy()
    if name == "cosine":
        xn = F.normalize(x.double(), dim=1).cpu().numpy()
        return np.einsum("ij,ij->i", xn[u], xn[v])
    a = adjacency(mp_edge_index, num_nodes) if a is None else a
    deg = np.asarray(a.sum(1)).ravel()
    if name == "pref_attach":
        return deg[u] * deg[v]
    if name == "common_neighbours":
        return np.asarray(a[u].multiply(a[v]).sum(1)).ravel()
    if name == "adamic_adar":
        with np.errstate(divide="ignore"):
            w = np.where(deg > 1, 1.0 / np.log(np.maximum(deg, 2)), 0.0)  # a common neighbour has degree >= 2
        return np.asarray(a[u].multiply(a[v]).multiply(w[None, :]).sum(1)).ravel()
    raise ValueError(f"heuristic {name!r} is unknown; use one of {HEURISTICS}")


def mean_degree(a: sp.csr_matrix) -> float:
    """Mean degree (stored entries per node) of a binary adjacency."""
    return a.nnz / max(a.shape[0], 1)


def density_factor(a: sp.csr_matrix, ref_degree: float | None) -> float:
    """(ref_degree / mean degree of a)², the factor that brings a graph's CN, AA and PA to the reference density
    (1.0 without a reference or for a graph without edges)."""
    d = mean_degree(a)
    return 1.0 if ref_degree is None or d == 0 else (ref_degree / d) ** 2


def pair_features(x: Tensor, mp_edge_index: Tensor, num_nodes: int, pairs: Tensor,
                  ref_degree: float | None = None, a: sp.csr_matrix | None = None) -> np.ndarray:
    """[P, 4] float64: cos(x_u, x_v), log(1+CN), log(1+AA), log(1+PA) of pairs [2, P] on the message-passing graph;
    with ref_degree the three counts are first rescaled to that mean degree (density_factor). a: the adjacency of
    mp_edge_index when the caller already has it."""
    a = adjacency(mp_edge_index, num_nodes) if a is None else a
    s = density_factor(a, ref_degree)
    cos = heuristic_scores("cosine", x, mp_edge_index, num_nodes, pairs)
    return np.stack([cos] + [np.log1p(s * heuristic_scores(h, x, mp_edge_index, num_nodes, pairs, a))
                             for h in ("common_neighbours", "adamic_adar", "pref_attach")], axis=1)


def reference_degree(graphs: list[Data], held_out: float) -> float:
    """Mean degree of the message passing a scorer is fitted on: the graphs' mean degree with a `held_out` share of
    their edges removed (the stack's fit pairs, a training step's disjoint supervision)."""
    if not graphs:
        raise ValueError("a reference degree needs at least one graph")
    return float(np.mean([mean_degree(adjacency(g.edge_index, g.num_nodes)) for g in graphs])) * (1 - held_out)


def stack_training_pairs(graphs: list[Data], ratio: float, seed: int,
                         ref_degree: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(features [P+Q, 4], labels [P+Q]) from training graphs: per graph a seeded `ratio` of its edges held out of
    message passing (positives) against as many sampled non-edges of the graph (negatives); counts rescaled to
    ref_degree when given."""
    from lib.protocols import derive_seed, sample_negatives, split_edges, training_exclusions

    feats, labels = [], []
    for g in graphs:
        mp, pos = split_edges(g.edge_index, g.num_nodes, ratio, derive_seed(seed, "stack", str(g.graph_id)))
        neg = sample_negatives(training_exclusions(g), g.num_nodes, pos.size(1),
                               derive_seed(seed, "stack-neg", str(g.graph_id)))
        pairs = torch.cat([pos, neg], 1)
        feats.append(pair_features(g.x, mp, g.num_nodes, pairs, ref_degree))
        labels.append(np.r_[np.ones(pos.size(1)), np.zeros(neg.size(1))])
    return np.concatenate(feats), np.concatenate(labels)


class HeuristicStack:
    """Logistic regression on the four standardised STACK_FEATURES (sklearn), fitted on training graphs; with
    rescale=True the counts are rescaled to the fitted graphs' mean degree (`ref_degree`, set by fit) in fitting and
    scoring alike."""

    def __init__(self, ratio: float = 0.3, seed: int = 0, rescale: bool = False):
        self.ratio, self.seed, self.rescale = ratio, seed, rescale
        self.model, self.ref_degree = None, None

    def fit(self, graphs: list[Data]) -> "HeuristicStack":
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        if not graphs:
            raise ValueError("heuristic_stack needs at least one training graph with edges to fit on")
        self.ref_degree = reference_degree(graphs, self.ratio) if self.rescale else None
        X, y = stack_training_pairs(graphs, self.ratio, self.seed, self.ref_degree)
        self.model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(X, y)
        return self

    @property
    def coefficients(self) -> dict:
        """Weight per standardised feature (how the stack combines its inputs)."""
        return dict(zip(STACK_FEATURES, self.model[-1].coef_[0].round(4).tolist()))

    def scores(self, x: Tensor, mp_edge_index: Tensor, num_nodes: int, pairs: Tensor) -> np.ndarray:
        """Decision values [P] (monotone in the fitted probability) of pairs [2, P]."""
        if self.model is None:
            raise RuntimeError("HeuristicStack.scores called before fit(training graphs)")
        return self.model.decision_function(pair_features(x, mp_edge_index, num_nodes, pairs, self.ref_degree))
