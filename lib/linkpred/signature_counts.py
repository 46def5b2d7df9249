"""Multi-hop count estimates from random node signatures, the MPLP decoder's structural input (Dong et al., 2024,
"Pure message passing can estimate common neighbor for link prediction").

Every node k gets a fixed quasi-orthogonal signature s_k ∈ {±1/√D}^D (D = SIGNATURE_DIM), so <s_k, s_l> is 1 for
k = l and about ±1/√D otherwise. Propagated over the message-passing adjacency A (held-out links are not in it):
  h1 = A s,   h2 = A h1 − deg ⊙ s   (walks of length 2 that do not end where they started),
inner products of a pair's propagated signatures estimate walk counts without any pairwise sparse product:
  <h1_u, h1_v> ≈ (A²)_uv, the common neighbours;  <h1_u, h2_v>, <h2_u, h1_v> ≈ (A³)_uv for a pair that is not linked;
  <h2_u, h2_v> ≈ walks of length 4 through a node two steps from each.
The propagation is two sparse-dense products on the model's device, the same for every pair of a graph, so a step
costs about as much for 10 pairs as for 10,000. MPLP draws new signatures at every call; here they are fixed per model
(its `seed` buffer, saved in the state dict), so a trained model scores deterministically and a saved one reloads
with the signatures it was trained with.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor, nn

from lib.common.seeding import derive_seed

SIGNATURE_DIM = 256
"""D, the signatures' width: an estimate's error over K walks is about √K / √D."""
BLOCK = 1024
"""Signatures are drawn in blocks of this many nodes, each from its own seeded generator, so node k's signature does
not depend on the size of the graph it is in."""
ESTIMATES = ("c11", "c12", "c21", "c22", "deg_u", "deg_v")
"""The columns of SignatureCounts' output: the four hop-pair estimates, then the pair's two degrees."""
DENSITY_POWERS = (2, 3, 3, 4, 1, 1)
"""The power of the mean degree each column grows with when edges are kept at random (density rescaling)."""


def signatures(seed: int, num_nodes: int, dim: int = SIGNATURE_DIM) -> Tensor:
    """[num_nodes, dim] float32 entries ±1/√dim, block by block (BLOCK rows) from generators seeded by (seed, block)."""
    blocks = []
    for b in range(math.ceil(num_nodes / BLOCK)):
        g = torch.Generator().manual_seed(derive_seed(seed, "signatures", b))
        blocks.append(torch.randint(0, 2, (BLOCK, dim), generator=g, dtype=torch.float32))
    rows = torch.cat(blocks)[:num_nodes] if blocks else torch.zeros(0, dim)
    return (2 * rows - 1) / math.sqrt(dim)


def symlog(t: Tensor) -> Tensor:
    """sign(t) · log(1 + |t|): the log scale of a count for an estimate that noise can push below zero."""
    return torch.sign(t) * torch.log1p(t.abs())


class SignatureCounts(nn.Module):
    """forward(pairs [2, P], adjacency: binary CSR [N, N] of the message passing, device) -> [P, len(ESTIMATES)]
    float32: the pairs' hop-pair estimates and degrees, each multiplied by scale ** DENSITY_POWERS (density rescaling;
    1.0: none), on a log scale (symlog). The seed is drawn from torch's global generator when the module is built, so
    a model seeded before building gets its own signatures."""

    def __init__(self, dim: int = SIGNATURE_DIM):
        super().__init__()
        self.dim = dim
        self.register_buffer("seed", torch.randint(0, 2**62, (), dtype=torch.int64))
        self.drawn: dict = {}  # device -> (seed, signatures of the most nodes asked for); not a buffer: sized by graphs

    def signatures(self, num_nodes: int, device) -> Tensor:
        """This model's signatures [num_nodes, dim] on device: the first rows of the most drawn so far (a node's
        signature does not depend on the graph's size), drawn again when more are needed or the seed changed
        (load_state_dict)."""
        seed, (had, rows) = int(self.seed), self.drawn.get(str(device), (None, None))
        if had != seed or rows.size(0) < num_nodes:
            rows = signatures(seed, num_nodes, self.dim).to(device)
            self.drawn[str(device)] = (seed, rows)
        return rows[:num_nodes]

    def forward(self, pairs: Tensor, adjacency: sp.csr_matrix, device, scale: float = 1.0) -> Tensor:
        n = adjacency.shape[0]
        a = adjacency.tocoo()
        a_t = torch.sparse_coo_tensor(
            torch.from_numpy(np.vstack([a.row, a.col]).astype(np.int64)),
            torch.from_numpy(a.data.astype(np.float32)),
            (n, n),
            check_invariants=False,
            is_coalesced=True,
        ).to(device)  # rows of a CSR matrix: sorted, no duplicates
        deg = torch.from_numpy(np.asarray(adjacency.sum(1), dtype=np.float32).ravel()).to(device)
        s = self.signatures(n, device)
        with torch.no_grad(), torch.autocast(torch.device(device).type, enabled=False):
            h1 = torch.sparse.mm(a_t, s)
            h2 = torch.sparse.mm(a_t, h1) - deg[:, None] * s
            u, v = pairs[0].to(device), pairs[1].to(device)
            est = torch.stack(
                [
                    (h1[u] * h1[v]).sum(1),
                    (h1[u] * h2[v]).sum(1),
                    (h2[u] * h1[v]).sum(1),
                    (h2[u] * h2[v]).sum(1),
                    deg[u],
                    deg[v],
                ],
                1,
            )
        powers = torch.tensor(DENSITY_POWERS, dtype=torch.float32, device=est.device)
        return symlog(est * scale**powers)
