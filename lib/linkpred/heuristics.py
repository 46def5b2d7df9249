"""Pair heuristics for link prediction and the heuristic stack — the bar a graph model has to clear.

Single heuristics (no training), computed on a message-passing graph only, are entries of one registry (`REGISTRY`):
a name, a label, a scorer and the transform that makes it a stack feature. Registered: feature cosine, preferential
attachment, common neighbours, Adamic–Adar, resource allocation, and the exact structural counts of
lib.linkpred.structural_counts (distance pairs #(1, 2), #(2, 1), #(2, 2) and walks of length 3). Adding one is one
`register(Heuristic(...))` call here plus its test; notebook 03 scores the `HEURISTICS` selection, the stack reads
the `STACK` selection unless told otherwise (notebook 03b's `stack_features`), and the stack's width, the
decoders' feature width and every table follow
from the selection.

The stack (`heuristic_stack`) is a logistic regression on a selection of them — by default cos(x_u, x_v), log(1+CN),
log(1+AA), log(1+PA) — standardised, fitted on the training graphs' own supervision pairs (a seeded share of each
training graph's edges held out of its message passing against as many sampled non-edges) under the same protocol,
and evaluated like every other scorer.

Density rescaling (`ref_degree`): the counts CN, AA and PA grow with the square of a graph's mean degree when edges are
kept at random (a heuristic's `density_power`: 2 for them, 1 for resource allocation, 0 for the cosine), so a scorer
fitted on sparse graphs reads a denser graph's counts as stronger evidence than they are. Under `leak_free` that shift
is large — every pair linked in a test graph is stripped from the training and validation graphs, which keep ≈ 40% of
their edges (seed40: 3,480 message-passing edges per training graph against 8,127 per test graph). With a reference mean
degree d_ref (the fitted graphs'), the counts of a graph of mean degree d are multiplied by (d_ref / d)^density_power
before the log: what they would be expected to be at the reference density.
"""

from __future__ import annotations

import hashlib
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from torch import Tensor
from torch_geometric.data import Data

from lib.common.registry import Registry
from lib.common.seeding import derive_seed
from lib.linkpred.sampling import sample_negatives, split_edges, training_exclusions
from lib.linkpred.structural_counts import PairCounts, pair_counts, two_hop


class _LRU:
    """A small least-recently-used dict (functools.lru_cache cannot key on tensors)."""

    def __init__(self, size: int):
        self.size, self.items = size, OrderedDict()

    def get(self, key, make):
        if key in self.items:
            self.items.move_to_end(key)
            return self.items[key]
        value = self.items[key] = make()
        if len(self.items) > self.size:
            self.items.popitem(last=False)
        return value


# Evaluation scores the same (graph, pair set) many times: every epoch's validation, every heuristic, decoder variant
# and seed of notebook 03b. Keyed by content, so a changed graph or pair set can never hit a stale entry.
_ADJACENCY, _STRUCTURE = _LRU(64), _LRU(256)
_TWO_HOP, _COUNTS = _LRU(16), _LRU(256)


def _digest(*parts) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        if isinstance(p, Tensor):
            t = p.detach().cpu().contiguous()
            h.update(repr((t.dtype, tuple(t.shape))).encode())
            h.update(t.numpy().tobytes())
        else:
            h.update(repr(p).encode())
    return h.digest()


def _build_adjacency(mp_edge_index: Tensor, n: int) -> sp.csr_matrix:
    ei = mp_edge_index.cpu().numpy()
    a = sp.csr_matrix((np.ones(ei.shape[1], dtype=np.float64), (ei[0], ei[1])), shape=(n, n))
    a.data[:] = 1.0  # duplicate edges count once
    return a


def adjacency(mp_edge_index: Tensor, n: int, cache: bool = True) -> sp.csr_matrix:
    """Binary CSR adjacency [n, n] of a both-directions edge_index (cached by content; treat it as read-only)."""
    if not cache:
        return _build_adjacency(mp_edge_index, n)
    return _ADJACENCY.get(_digest(mp_edge_index, n), lambda: _build_adjacency(mp_edge_index, n))


@dataclass(frozen=True)
class PairStructure:
    """The message-passing structure of P node pairs, from one sparse product (read-only).

    common: CSR [P, N], common[p, k] = 1 iff k ∈ N(u_p) ∩ N(v_p); cn, aa, pa: [P] common neighbours, Adamic–Adar,
    preferential attachment; deg: [N] the nodes' degrees."""

    common: sp.csr_matrix
    cn: np.ndarray
    aa: np.ndarray
    pa: np.ndarray
    deg: np.ndarray


def _build_structure(a: sp.csr_matrix, pairs: Tensor) -> PairStructure:
    u, v = pairs[0].cpu().numpy(), pairs[1].cpu().numpy()
    deg = np.asarray(a.sum(1)).ravel()
    with np.errstate(divide="ignore"):
        w = np.where(deg > 1, 1.0 / np.log(np.maximum(deg, 2)), 0.0)  # a common neighbour has degree >= 2
    common = a[u].multiply(a[v]).tocsr()
    return PairStructure(common, np.asarray(common.sum(1)).ravel(), common @ w, deg[u] * deg[v], deg)


def pair_structure(
    mp_edge_index: Tensor, num_nodes: int, pairs: Tensor, a: sp.csr_matrix | None = None, cache: bool = True
) -> PairStructure:
    """PairStructure of pairs [2, P] on the message-passing graph mp_edge_index [2, M]: CN and AA from the one product
    of the pairs' adjacency rows that the NCN decoder's common-neighbour sum reads too. cache=False for pairs drawn
    once (a training step's), so they do not push the evaluation pairs out of the cache."""

    def make():
        return _build_structure(adjacency(mp_edge_index, num_nodes, cache) if a is None else a, pairs)

    return _STRUCTURE.get(_digest(mp_edge_index, num_nodes, pairs), make) if cache else make()


def structural_counts(
    mp_edge_index: Tensor, num_nodes: int, pairs: Tensor, a: sp.csr_matrix | None = None, cache: bool = True
) -> PairCounts:
    """Exact distance-pair and 3-walk counts (lib.linkpred.structural_counts.PairCounts) of pairs [2, P] on the
    message-passing graph mp_edge_index [2, M]; the graph's two-hop structure and the pairs' counts are cached by
    content as pair_structure's are (cache=False: neither)."""

    def make():
        adj = adjacency(mp_edge_index, num_nodes, cache) if a is None else a
        hop = _TWO_HOP.get(_digest(mp_edge_index, num_nodes), lambda: two_hop(adj)) if cache else two_hop(adj)
        return pair_counts(adj, hop, pairs[0].cpu().numpy(), pairs[1].cpu().numpy())

    return _COUNTS.get(_digest(mp_edge_index, num_nodes, pairs), make) if cache else make()


_COSINE = _LRU(256)


def _cosine(x: Tensor, pairs: Tensor) -> np.ndarray:
    # Products of float32 (or float16) numbers are exact in float64, so einsum(..., dtype=float64) on the stored
    # features equals normalising a float64 copy first (to ~1e-16) at half the cost and without that copy.
    xn = x.detach().cpu().numpy()
    u, v = pairs[0].cpu().numpy(), pairs[1].cpu().numpy()
    xu, xv = xn[u], xn[v]
    if 2 * len(u) < len(xn):  # the norms of the rows used only
        nu = np.sqrt(np.einsum("ij,ij->i", xu, xu, dtype=np.float64))
        nv = np.sqrt(np.einsum("ij,ij->i", xv, xv, dtype=np.float64))
    else:
        norm = np.sqrt(np.einsum("ij,ij->i", xn, xn, dtype=np.float64))
        nu, nv = norm[u], norm[v]
    eps = 1e-12  # as torch.nn.functional.normalize: a zero vector has cosine 0 with everything
    return np.einsum("ij,ij->i", xu, xv, dtype=np.float64) / (np.maximum(nu, eps) * np.maximum(nv, eps))


def cosine_scores(x: Tensor, pairs: Tensor, cache: bool = True) -> np.ndarray:
    """cos(x_u, x_v) [P] in float64 of pairs [2, P]. In float64 the normalisation of a seed-sized x (20,000 × 384)
    costs more than every count together, so with cache=True the result is kept per (feature tensor, pair set): x by
    identity and version (hashing its contents would cost as much as the cosine), checked through a weak reference."""
    if not cache:
        return _cosine(x, pairs)
    key = (id(x), x._version, tuple(x.shape), _digest(pairs))
    ref, out = _COSINE.get(key, lambda: (weakref.ref(x), _cosine(x, pairs)))
    if ref() is not x:  # another tensor now lives at that id: recompute and replace
        out = _cosine(x, pairs)
        _COSINE.items[key] = (weakref.ref(x), out)
    return out


def mean_degree(a: sp.csr_matrix) -> float:
    """Mean degree (stored entries per node) of a binary adjacency."""
    return a.nnz / max(a.shape[0], 1)


def density_factor(a: sp.csr_matrix, ref_degree: float | None, power: int = 2) -> float:
    """(ref_degree / mean degree of a)^power, the factor that brings a graph's counts to the reference density (power 2:
    CN, AA and PA; 1.0 without a reference or for a graph without edges)."""
    d = mean_degree(a)
    return 1.0 if ref_degree is None or d == 0 else (ref_degree / d) ** power


class PairView:
    """What a heuristic scores: pairs [2, P] on the message-passing graph mp_edge_index [2, M] of num_nodes nodes with
    features x [N, F]. Its adjacency and PairStructure are built on first use (and cached by content unless
    cache=False, see pair_structure), so a scorer that reads neither, like the cosine, costs no sparse product."""

    def __init__(
        self,
        x: Tensor,
        mp_edge_index: Tensor,
        num_nodes: int,
        pairs: Tensor,
        a: sp.csr_matrix | None = None,
        cache: bool = True,
    ):
        self.x, self.mp_edge_index, self.num_nodes, self.pairs, self.cache = x, mp_edge_index, num_nodes, pairs, cache
        if a is not None:
            self.__dict__["adjacency"] = a

    @cached_property
    def adjacency(self) -> sp.csr_matrix:
        return adjacency(self.mp_edge_index, self.num_nodes, self.cache)

    @cached_property
    def structure(self) -> PairStructure:
        # the adjacency only where it is built already: a cached structure needs none
        return pair_structure(
            self.mp_edge_index, self.num_nodes, self.pairs, self.__dict__.get("adjacency"), self.cache
        )

    @cached_property
    def counts(self) -> PairCounts:
        return structural_counts(
            self.mp_edge_index, self.num_nodes, self.pairs, self.__dict__.get("adjacency"), self.cache
        )


@dataclass(frozen=True)
class Heuristic:
    """One pair heuristic: `score(view) -> [P]` float64 for a PairView's pairs, no training.

    name: its model name in every table; label: how a figure or a sentence names it; feature: its column name in the
    heuristic stack, whose value is `transform(scores)` after density rescaling (`density_power`: the power of the mean
    degree its scores grow with when edges are kept at random; 0 = not rescaled)."""

    name: str
    label: str
    score: Callable[[PairView], np.ndarray]
    feature: str
    density_power: int = 0
    transform: Callable[[np.ndarray], np.ndarray] | None = None

    def stack_feature(self, view: PairView, ref_degree: float | None) -> np.ndarray:
        """The stack's feature [P] of the view's pairs, its scores rescaled to ref_degree (density_factor) first."""
        s = self.score(view)
        if self.density_power:
            s = density_factor(view.adjacency, ref_degree, self.density_power) * s
        return s if self.transform is None else self.transform(s)


REGISTRY: Registry[Heuristic] = Registry("heuristic", "lib.linkpred.heuristics")
register = REGISTRY.add
"""Add a heuristic to REGISTRY (its name must be new)."""


def _resource_allocation(v: PairView) -> np.ndarray:
    # Zhou et al. 2009, the rule lib.linkpred.negatives samples "heart" negatives by, read per pair from the one
    # common-neighbour product every count shares (a common neighbour has degree >= 2, so 1/deg is finite).
    st = v.structure
    return st.common @ np.divide(1.0, st.deg, out=np.zeros_like(st.deg, dtype=np.float64), where=st.deg > 0)


register(Heuristic("cosine", "cos(x_u, x_v)", lambda v: cosine_scores(v.x, v.pairs, v.cache), "cosine"))
register(
    Heuristic("pref_attach", "preferential attachment deg(u)·deg(v)", lambda v: v.structure.pa, "log1p_pa", 2, np.log1p)
)
register(
    Heuristic("common_neighbours", "common neighbours |N(u) ∩ N(v)|", lambda v: v.structure.cn, "log1p_cn", 2, np.log1p)
)
register(
    Heuristic(
        "adamic_adar",
        "Adamic–Adar Σ_{w ∈ N(u) ∩ N(v)} 1 / log deg(w)",
        lambda v: v.structure.aa,
        "log1p_aa",
        2,
        np.log1p,
    )
)
register(
    Heuristic(
        "resource_allocation",
        "resource allocation Σ_{w ∈ N(u) ∩ N(v)} 1 / deg(w)",
        _resource_allocation,
        "log1p_ra",
        1,
        np.log1p,
    )
)
# BUDDY's distance-pair counts #(d_u, d_v) beyond #(1, 1) = CN, and walks of length 3 (lib.linkpred.structural_counts);
# a count over paths of k edges grows with the k-th power of the mean degree.
register(
    Heuristic(
        "dist_1_2", "#(1, 2): nodes at distance 1 from u and 2 from v", lambda v: v.counts.d12, "log1p_d12", 3, np.log1p
    )
)
register(
    Heuristic(
        "dist_2_1", "#(2, 1): nodes at distance 2 from u and 1 from v", lambda v: v.counts.d21, "log1p_d21", 3, np.log1p
    )
)
register(
    Heuristic(
        "dist_2_2", "#(2, 2): nodes at distance 2 from u and from v", lambda v: v.counts.d22, "log1p_d22", 4, np.log1p
    )
)
register(
    Heuristic(
        "walks_3", "walks of length 3 between u and v, (A³)_uv", lambda v: v.counts.walks3, "log1p_w3", 3, np.log1p
    )
)

HEURISTICS = ("cosine", "pref_attach", "common_neighbours", "adamic_adar")
"""The heuristics notebook 03 scores on their own (the names of REGISTRY that its tables and findings show)."""
STACK = ("cosine", "common_neighbours", "adamic_adar", "pref_attach")
"""The heuristic stack's default features, in column order (HeuristicStack(features=...) takes any registered ones)."""


def check_heuristics(names) -> tuple[str, ...]:
    """names as a tuple; an unregistered name stops here naming the registered ones."""
    return tuple(REGISTRY.check(n) for n in names)


def stack_features(names=STACK) -> tuple[str, ...]:
    """The stack's column names of heuristics `names` (cosine, log1p_cn, ...)."""
    return tuple(REGISTRY[n].feature for n in check_heuristics(names))


def heuristic_scores(
    name: str,
    x: Tensor,
    mp_edge_index: Tensor,
    num_nodes: int,
    pairs: Tensor,
    a: sp.csr_matrix | None = None,
    cache: bool = True,
) -> np.ndarray:
    """Scores [P] of node pairs [2, P] by the registered heuristic `name` (no training). Degrees and neighbourhoods
    come from mp_edge_index only. Hand-written with scipy.sparse: PyG has no pair heuristics and networkx's are pure
    Python (too slow at 20k nodes)."""
    return REGISTRY[check_heuristics([name])[0]].score(PairView(x, mp_edge_index, num_nodes, pairs, a, cache))


def pair_features(
    x: Tensor,
    mp_edge_index: Tensor,
    num_nodes: int,
    pairs: Tensor,
    ref_degree: float | None = None,
    a: sp.csr_matrix | None = None,
    cache: bool = True,
    features=STACK,
) -> np.ndarray:
    """[P, len(features)] float64: the stack features of heuristics `features` (by default cos(x_u, x_v), log(1+CN),
    log(1+AA), log(1+PA)) of pairs [2, P] on the message-passing graph; with ref_degree the counts are first rescaled
    to that mean degree (density_factor). a: the adjacency of mp_edge_index when the caller already has it; cache: see
    pair_structure."""
    view = PairView(x, mp_edge_index, num_nodes, pairs, a, cache)
    return np.stack([REGISTRY[n].stack_feature(view, ref_degree) for n in check_heuristics(features)], axis=1)


def reference_degree(graphs: list[Data], held_out: float) -> float:
    """Mean degree of the message passing a scorer is fitted on: the graphs' mean degree with a `held_out` share of
    their edges removed (the stack's fit pairs, a training step's disjoint supervision)."""
    if not graphs:
        raise ValueError("a reference degree needs at least one graph")
    return float(np.mean([mean_degree(adjacency(g.edge_index, g.num_nodes)) for g in graphs])) * (1 - held_out)


def stack_training_pairs(
    graphs: list[Data], ratio: float, seed: int, ref_degree: float | None = None, features=STACK
) -> tuple[np.ndarray, np.ndarray]:
    """(features [P+Q, len(features)], labels [P+Q]) from training graphs: per graph a seeded `ratio` of its edges held
    out of message passing (positives) against as many sampled non-edges of the graph (negatives); the stack features
    of heuristics `features`, counts rescaled to ref_degree when given."""
    feats, labels = [], []
    for g in graphs:
        mp, pos = split_edges(g.edge_index, g.num_nodes, ratio, derive_seed(seed, "stack", str(g.graph_id)))
        neg = sample_negatives(
            training_exclusions(g), g.num_nodes, pos.size(1), derive_seed(seed, "stack-neg", str(g.graph_id))
        )
        pairs = torch.cat([pos, neg], 1)
        feats.append(pair_features(g.x, mp, g.num_nodes, pairs, ref_degree, features=features))
        labels.append(np.r_[np.ones(pos.size(1)), np.zeros(neg.size(1))])
    return np.concatenate(feats), np.concatenate(labels)


class HeuristicStack:
    """Logistic regression on the standardised stack features of registered heuristics `features` (sklearn; by
    default STACK), fitted on training graphs; with rescale=True the counts are rescaled to the fitted graphs' mean
    degree (`ref_degree`, set by fit) in fitting and scoring alike."""

    def __init__(self, ratio: float = 0.3, seed: int = 0, rescale: bool = False, features=STACK):
        self.ratio, self.seed, self.rescale, self.features = ratio, seed, rescale, check_heuristics(features)
        self.model, self.ref_degree = None, None

    def fit(self, graphs: list[Data]) -> HeuristicStack:
        if not graphs:
            raise ValueError("heuristic_stack needs at least one training graph with edges to fit on")
        self.ref_degree = reference_degree(graphs, self.ratio) if self.rescale else None
        X, y = stack_training_pairs(graphs, self.ratio, self.seed, self.ref_degree, self.features)
        self.model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(X, y)
        return self

    @property
    def coefficients(self) -> dict:
        """Weight per standardised feature (how the stack combines its inputs)."""
        return dict(zip(stack_features(self.features), self.model[-1].coef_[0].round(4).tolist()))

    def scores(self, x: Tensor, mp_edge_index: Tensor, num_nodes: int, pairs: Tensor) -> np.ndarray:
        """Decision values [P] (monotone in the fitted probability) of pairs [2, P]."""
        if self.model is None:
            raise RuntimeError("HeuristicStack.scores called before fit(training graphs)")
        return self.model.decision_function(
            pair_features(x, mp_edge_index, num_nodes, pairs, self.ref_degree, features=self.features)
        )
