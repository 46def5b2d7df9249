"""Exact structural counts of node pairs on a message-passing graph: distance-pair counts and walks of length 3.

For a pair (u, v) on the binary adjacency A of the message passing (held-out links are not in it, so never counted):
  #(d_u, d_v)  the nodes at shortest-path distance exactly d_u from u and exactly d_v from v, d_u, d_v ∈ {1, 2} — the
               "subgraph" features of BUDDY (Chamberlain et al., ICLR 2023, "Graph neural networks for link prediction
               with subgraph sketching"), which estimates them with MinHash and HyperLogLog sketches; on graphs of a few
               thousand nodes they are exact from sparse products. #(1, 1) is the common-neighbour count.
  (A³)_uv      walks of length 3 from u to v (paths, for a pair that is not linked); (A²)_uv, the walks of length 2,
               is the common-neighbour count again.
Hand-written with scipy.sparse: PyG and networkx have no pair-wise distance-pair counts (networkx's all-pairs shortest
paths are pure Python), and BUDDY's sketches are estimates where exact counts are cheap here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class TwoHop:
    """The two-hop structure of a graph of N nodes (read-only): walks2 = A² (CSR [N, N] float64, walks of length 2),
    ring2 (CSR [N, N], 1 where the column is at distance exactly 2 from the row)."""

    walks2: sp.csr_matrix
    ring2: sp.csr_matrix


@dataclass(frozen=True)
class PairCounts:
    """Exact counts [P] (float64) of P pairs (u, v): d12 = #(1, 2), d21 = #(2, 1), d22 = #(2, 2) and
    walks3 = (A³)_uv."""

    d12: np.ndarray
    d21: np.ndarray
    d22: np.ndarray
    walks3: np.ndarray


def two_hop(a: sp.csr_matrix) -> TwoHop:
    """TwoHop of a binary adjacency a [N, N] (both directions, no self-loops)."""
    walks2 = (a @ a).tocsr()
    reach = walks2.copy()
    reach.data[:] = 1.0
    near = (a + sp.identity(a.shape[0], format="csr")).tocsr()  # the node itself and its neighbours
    near.data[:] = 1.0
    ring2 = (reach - reach.multiply(near)).tocsr()
    ring2.eliminate_zeros()
    return TwoHop(walks2, ring2)


def pair_counts(a: sp.csr_matrix, hop: TwoHop, u: np.ndarray, v: np.ndarray) -> PairCounts:
    """PairCounts of the pairs (u[p], v[p]) (u, v: [P] node ids) on adjacency a [N, N] with its TwoHop: each count is
    one elementwise product of the pairs' rows, as lib.linkpred.heuristics reads common neighbours."""

    def shared(left: sp.csr_matrix, right: sp.csr_matrix) -> np.ndarray:
        return np.asarray(left[u].multiply(right[v]).sum(1), dtype=np.float64).ravel()

    return PairCounts(shared(a, hop.ring2), shared(hop.ring2, a), shared(hop.ring2, hop.ring2), shared(hop.walks2, a))
