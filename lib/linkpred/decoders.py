"""Pair decoders for GatModel beyond the seed's dot product, one registry (`DECODERS`) that GatModel, ModelConfig's
choices and notebook 03b's variants (`VARIANTS`, one plain variant per decoder and the settings built on them) read:

  "dot":          logit_ij = z_i · z_j (the seed; no parameters).
  "hadamard_mlp": logit_ij = MLP(z_i ⊙ z_j).
  "ncn":          logit_ij = MLP([z_i ⊙ z_j ‖ Σ_{k ∈ N(i) ∩ N(j)} z_k]) — Neural Common Neighbour (Wang et al., ICLR
                  2024): a dot product cannot count common neighbours (Chamberlain et al., ICLR 2023), so their
                  embeddings are summed into the decoder's input. N(·) comes from the message-passing graph only.
  "counts":       logit_ij = MLP([z_i ⊙ z_j ‖ log(1 + c)]) with c the pair's exact structural counts COUNT_FEATURES:
                  CN, BUDDY's distance pairs #(1, 2), #(2, 1), #(2, 2) and walks of length 3
                  (lib.linkpred.structural_counts), so the decoder sees the pair's neighbourhood beyond one hop.
  "mplp":         logit_ij = MLP([z_i ⊙ z_j ‖ signature estimates]) — MPLP (Dong et al., 2024): walk counts of
                  length 2 to 4 and the degrees, estimated from fixed random node signatures propagated two hops
                  (lib.linkpred.signature_counts), on the model's device.
Adding a decoder is one `Decoder` entry here (its MLP input from z and the pair) plus its test.
With `features=True` the MLP also reads the pair's heuristic features on the message-passing graph: the stack features
of the registered heuristics `stack_features` (ModelConfig.stack_features, by default lib.linkpred.heuristics.STACK),
so a learned combination can use everything the heuristic stack uses; the MLP's width follows that list.
With `init="stack"` the feature part starts as the heuristic stack itself (its standardisation as fixed buffers, its
logistic-regression weights in the linear term, the MLP's output layer at zero): before the first step the decoder
scores exactly as the stack does, and training moves it from there instead of from random feature weights, which a
few hundred steps at a GAT's learning rate do not undo.
With `rescale=True` the decoder's count inputs (the common-neighbour sum and the CN, AA, PA features) are brought to a
reference mean degree (lib.linkpred.heuristics, "Density rescaling"): the training graphs' message passing,
or the stack's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor, nn

from lib.common.registry import Registry
from lib.linkpred.heuristics import STACK, adjacency, check_heuristics, density_factor, pair_features, pair_structure
from lib.linkpred.signature_counts import ESTIMATES, SignatureCounts


@dataclass(frozen=True)
class PairGraph:
    """The message passing a decoder reads for a call's pairs: mp_edge_index [2, M], its CSR adjacency, the reference
    mean degree counts are rescaled to (None: not rescaled), and whether the pairs' structure is cached."""

    mp_edge_index: Tensor
    adjacency: sp.csr_matrix
    ref_degree: float | None
    cache: bool


@dataclass(frozen=True)
class Decoder:
    """One pair decoder of GatModel. width(F): the MLP's input width from embeddings z [N, F] (None: no module, the
    dot product); pair_input(z, pairs [2, P], graph) -> [P, width(F)] the MLP's input (graph: PairGraph, or None when
    reads_graph is False); about: one line for ModelConfig's help. module: a factory of the decoder's own nn.Module
    (fixed signatures, say), built with each PairDecoder and saved in its state dict; pair_input then takes it as a
    fourth argument."""

    name: str
    about: str
    width: Callable[[int], int] | None = None
    pair_input: Callable[..., Tensor] | None = None
    reads_graph: bool = False
    module: Callable[[], nn.Module] | None = None


def _hadamard(z: Tensor, pairs: Tensor, graph: PairGraph | None) -> Tensor:
    return z[pairs[0]] * z[pairs[1]]


def _ncn(z: Tensor, pairs: Tensor, graph: PairGraph) -> Tensor:
    cn = common_neighbour_sum(z, graph.mp_edge_index, pairs, graph.adjacency, graph.cache)
    return torch.cat([_hadamard(z, pairs, graph), cn * density_factor(graph.adjacency, graph.ref_degree)], -1)


COUNT_FEATURES = ("common_neighbours", "dist_1_2", "dist_2_1", "dist_2_2", "walks_3")
"""The heuristics (lib.linkpred.heuristics.REGISTRY) whose stack features the counts decoder reads."""


def _counts(z: Tensor, pairs: Tensor, graph: PairGraph) -> Tensor:
    f = pair_features(
        None,
        graph.mp_edge_index.cpu(),
        z.size(0),
        pairs.cpu(),
        graph.ref_degree,
        graph.adjacency,
        graph.cache,
        COUNT_FEATURES,
    )
    return torch.cat([_hadamard(z, pairs, graph), torch.as_tensor(f, dtype=z.dtype, device=z.device)], -1)


def _mplp(z: Tensor, pairs: Tensor, graph: PairGraph, counts: SignatureCounts) -> Tensor:
    est = counts(pairs, graph.adjacency, z.device, density_factor(graph.adjacency, graph.ref_degree, 1))
    return torch.cat([_hadamard(z, pairs, graph), est.to(z.dtype)], -1)


DECODERS: Registry[Decoder] = Registry("decoder", "lib.linkpred.decoders")
DECODERS.add(Decoder("dot", "the seed's z_i · z_j, no parameters"))
DECODERS.add(Decoder("hadamard_mlp", "MLP(z_i ⊙ z_j)", lambda f: f, _hadamard))
DECODERS.add(Decoder("ncn", "MLP([z_i ⊙ z_j ‖ Σ common-neighbour z_k])", lambda f: 2 * f, _ncn, reads_graph=True))
DECODERS.add(
    Decoder(
        "counts",
        "MLP([z_i ⊙ z_j ‖ log(1 + exact distance-pair and 3-walk counts)])",
        lambda f: f + len(COUNT_FEATURES),
        _counts,
        reads_graph=True,
    )
)
DECODERS.add(
    Decoder(
        "mplp",
        "MLP([z_i ⊙ z_j ‖ walk counts estimated from random node signatures])",
        lambda f: f + len(ESTIMATES),
        _mplp,
        reads_graph=True,
        module=SignatureCounts,
    )
)
MLP_DECODERS = tuple(n for n, d in DECODERS.items() if d.width is not None)
"""The decoders with a module (an MLP), the ones decoder features, rescaling and stack initialisation apply to."""

# The decoder variants notebook 03b compares, by name: the GatModel settings each one sets (lib.linkpred.beyond trains
# them; BeyondParams checks a profile's names against these). Every decoder is a variant of its own name.
VARIANTS = {
    **{n: {"decoder": n, "decoder_features": False} for n in DECODERS},
    "ncn_feat": {"decoder": "ncn", "decoder_features": True},
    "ncn_stack": {"decoder": "ncn", "decoder_features": True, "decoder_init": "stack"},
    "ncn_stack_uniform": {"decoder": "ncn", "decoder_features": True, "decoder_init": "stack"},
    "ncn_stack_matched": {"decoder": "ncn", "decoder_features": True, "decoder_init": "stack"},
}
VARIANTS.update({f"{v}_rescaled": {**VARIANTS[v], "decoder_rescale": True} for v in ("ncn_stack", "ncn_stack_uniform")})
# The structural-count decoders as ncn_stack and its two negative-set models (lib.linkpred.beyond's VARIANT_TRAINING)
VARIANTS.update(
    {
        f"{d}_stack{mix}": {"decoder": d, "decoder_features": True, "decoder_init": "stack"}
        for d in ("counts", "mplp")
        for mix in ("", "_uniform", "_matched")
    }
)
VARIANTS["mplp_stack_dist2"] = VARIANTS["mplp_stack"]  # the dist2 negative set's model (lib.linkpred.beyond)


def common_neighbours_matrix(mp_edge_index: Tensor, num_nodes: int, pairs: Tensor, a=None, cache: bool = True):
    """Sparse indicator S [P, N] (torch COO, float32) with S[p, k] = 1 iff k ∈ N(i_p) ∩ N(j_p) in mp_edge_index.

    Built with scipy (lib.linkpred.heuristics.pair_structure: row slices of the CSR adjacency, elementwise product, the
    same product CN and AA are read from): torch has no sparse row gather with elementwise product on CPU, and the P × N
    matrix is never dense. a: the CSR adjacency of mp_edge_index when the caller already has it; cache: see
    pair_structure."""
    s = pair_structure(mp_edge_index, num_nodes, pairs, a, cache).common.tocoo()
    idx = torch.from_numpy(np.vstack([s.row, s.col]).astype(np.int64))
    return torch.sparse_coo_tensor(
        idx, torch.ones(idx.size(1)), (pairs.size(1), num_nodes), check_invariants=False
    ).coalesce()  # indices come from scipy, valid by construction


def common_neighbour_sum(z: Tensor, mp_edge_index: Tensor, pairs: Tensor, a=None, cache: bool = True) -> Tensor:
    """Σ_{k ∈ N(i) ∩ N(j)} z_k for each pair: [P, F] from z [N, F], mp_edge_index [2, M], pairs [2, P];
    differentiable in z (sparse-dense matmul)."""
    s = common_neighbours_matrix(mp_edge_index, z.size(0), pairs, a, cache).to(z.device)
    with torch.autocast(z.device.type, enabled=False):  # CUDA autocast would cast to bf16, which sparse mm lacks there
        total = torch.sparse.mm(s, z.float())
    return total.to(z.dtype)


class Standardise(nn.Module):
    """(f - mean) / scale with fixed buffers [F] (a fitted StandardScaler; identity until set)."""

    def __init__(self, n: int):
        super().__init__()
        self.register_buffer("mean", torch.zeros(n))
        self.register_buffer("scale", torch.ones(n))

    def forward(self, f: Tensor) -> Tensor:
        return (f - self.mean) / self.scale


class PairDecoder(nn.Module):
    """MLP decoder: forward(z [N, F], pairs [2, P], mp_edge_index [2, M], x [N, F_in]) -> logits [P].

    With features, the MLP reads len(stack_features) more inputs [P, len(stack_features)]: the stack features of those
    registered heuristics (lib.linkpred.heuristics.pair_features). Batch normalisation sees the pairs of one call
    together: score a training step's positives and negatives in one call (lib.linkpred.train does)."""

    def __init__(
        self,
        kind: str,
        out_channels: int,
        hidden: int = 64,
        dropout: float = 0.0,
        features: bool = False,
        init: str = "random",
        rescale: bool = False,
        stack_features=STACK,
    ):
        super().__init__()
        if kind not in MLP_DECODERS:
            raise ValueError(f"PairDecoder kind={kind!r}; use one of {MLP_DECODERS} ('dot' needs no module)")
        if init == "stack" and not features:
            raise ValueError("PairDecoder init='stack' needs features=True")
        self.kind, self.features, self.init, self.rescale = kind, features, init, rescale
        self.stack_features = check_heuristics(stack_features)
        self.spec = DECODERS[kind]
        if rescale:  # only then, so the state_dict of the other decoders is what earlier checkpoints hold
            # reference mean degree of the rescaling; 0 = not set yet (set_reference_degree or init_from_stack)
            self.register_buffer("ref_degree", torch.zeros(()))
        n_feat = len(self.stack_features)
        in_dim = self.spec.width(out_channels) + (n_feat if features else 0)
        self.mlp = nn.Sequential(
            nn.Linear(in_dim, hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 1),
        )
        if self.spec.module is not None:  # only then, as ref_degree: every other decoder's state_dict keeps its keys
            self.pair_module = self.spec.module()
        if features:
            # The features live on different scales (a cosine, log counts up to ~10): batch-normalised, and also fed
            # straight to the logit through a linear term, so the decoder contains the heuristic stack's logistic
            # regression as a special case and cannot have to learn it through the MLP alone.
            self.feat_norm = Standardise(n_feat) if init == "stack" else nn.BatchNorm1d(n_feat)
            self.feat_linear = nn.Linear(n_feat, 1)

    def set_reference_degree(self, d: float) -> None:
        """The mean degree counts are rescaled to (rescale=True only)."""
        if not self.rescale:
            raise ValueError("set_reference_degree needs a decoder built with rescale=True")
        if not d > 0:
            raise ValueError(f"reference degree {d!r} must be positive")
        self.ref_degree.fill_(float(d))

    def _ref(self) -> float | None:
        if not self.rescale:
            return None
        if self.ref_degree.item() == 0:
            raise RuntimeError(
                "decoder with rescale=True has no reference degree: call set_reference_degree "
                "(lib.linkpred.train.init_model does) or init_from_stack"
            )
        return float(self.ref_degree)

    def init_from_stack(self, stack) -> None:
        """Start as `stack` (a fitted lib.linkpred.heuristics.HeuristicStack): its scaler's mean/scale, its weights and
        intercept in the linear term, the MLP's last layer zeroed, so logits equal stack.scores(...) until trained."""
        if self.init != "stack":
            raise ValueError("init_from_stack needs a decoder built with init='stack'")
        if stack.features != self.stack_features:
            raise ValueError(
                f"the stack was fitted on {stack.features} but the decoder reads {self.stack_features}; "
                f"fit HeuristicStack(features={list(self.stack_features)})"
            )
        if self.rescale != (stack.ref_degree is not None):
            raise ValueError(
                f"decoder rescale={self.rescale} but the stack was fitted with "
                f"rescale={stack.ref_degree is not None}; fit HeuristicStack(rescale={self.rescale})"
            )
        scaler, lr = stack.model[0], stack.model[-1]
        if self.rescale:
            self.set_reference_degree(stack.ref_degree)
        with torch.no_grad():
            self.feat_norm.mean.copy_(torch.as_tensor(scaler.mean_, dtype=torch.float32))
            self.feat_norm.scale.copy_(torch.as_tensor(scaler.scale_, dtype=torch.float32))
            self.feat_linear.weight.copy_(torch.as_tensor(lr.coef_, dtype=torch.float32))
            self.feat_linear.bias.copy_(torch.as_tensor(lr.intercept_, dtype=torch.float32))
            self.mlp[-1].weight.zero_()
            self.mlp[-1].bias.zero_()

    def forward(self, z: Tensor, pairs: Tensor, mp_edge_index: Tensor | None = None, x: Tensor | None = None) -> Tensor:
        reads_graph = self.spec.reads_graph or self.features
        if reads_graph and mp_edge_index is None:
            raise ValueError(
                f"the {self.kind} decoder{' with features' if self.features else ''} needs the "
                f"message-passing edges: call decode(z, pairs, mp_edge_index, x)"
            )
        ref, graph = self._ref(), None
        if reads_graph:
            # In eval mode the pairs are a fixed validation or test set, scored again every epoch and by every
            # variant: their structure is cached (lib.linkpred.heuristics.pair_structure). A training step's fresh
            # pairs are not. The adjacency is built once per call: the decoder's input and the features both read it.
            cache = not self.training
            graph = PairGraph(mp_edge_index, adjacency(mp_edge_index, z.size(0), cache), ref, cache)
        h = self.spec.pair_input(z, pairs, graph, *([self.pair_module] if self.spec.module is not None else []))
        if self.features:
            if x is None:
                raise ValueError("the decoder with features needs the node features x: call decode(z, pairs, mp, x)")
            f = pair_features(
                x.cpu(),
                mp_edge_index.cpu(),
                z.size(0),
                pairs.cpu(),
                graph.ref_degree,
                graph.adjacency,
                graph.cache,
                self.stack_features,
            )
            f = self.feat_norm(torch.as_tensor(f, dtype=torch.float32, device=z.device)).to(z.dtype)
            return (self.mlp(torch.cat([h, f], -1)) + self.feat_linear(f)).squeeze(-1)
        return self.mlp(h).squeeze(-1)
