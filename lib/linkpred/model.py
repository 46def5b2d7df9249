"""Stage 3 model: the seed report's transformer-like GAT encoder with a dot-product decoder (seed §4.1–4.2).

GatModel:      X [N, F_in] -> Dropout -> L_in -> DeepGATBlock -> L_out -> Z [N, F_out];  logit_ij = z_i · z_j.
DeepGATBlock:  L levels of  X1 = LayerNorm(X + Dropout(GAT(X, E)));  X = LayerNorm(X1 + Dropout(L2(ReLU(L1(X1)))))
               followed by a final Dropout.  GAT = K-head graph attention, heads averaged (PyG GATConv concat=False).

Two interchangeable implementations of the attention layer share parameter names and shapes (so one state_dict
loads into both and they give the same outputs for the same weights):
  impl="pyg":   torch_geometric.nn.GATConv in every level (it removes and re-adds self-loops at every level);
  impl="fused": lib.linkpred.fused_gat.FusedGATConv — same maths, but self-loops are added and edges sorted once
                per forward pass for all L levels, the attention logits of all heads are one thin matmul, and the
                softmax and the neighbour aggregation over all heads are one autograd function around one sparse CSR
                product (no [E, K, C] temporaries); its dropouts draw their masks about five times faster than
                nn.Dropout (MaskDropout: other random numbers, the same distribution) and keep them as bits, and on
                the CPU each LayerNorm(X + Dropout(.)) is one C++ pass each way (lib.linkpred.kernels).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import GATConv

from lib.common.config import StageParams, param
from lib.common.params import ParamError
from lib.linkpred.decoders import DECODERS, MLP_DECODERS, PairDecoder
from lib.linkpred.fused_gat import FusedGATConv, MaskDropout, PreparedEdges, prepare_edges, residual_norm
from lib.linkpred.heuristics import STACK, check_heuristics
from lib.linkpred.kernels import cpu_kernels


@dataclass(frozen=True)
class GatModelParams(StageParams):
    """GatModel's settings, declared once: ModelConfig (what the model reads) and GatTrainingParams (the GatModel and
    its training, lib.linkpred.config, which every notebook training a GatModel inherits: 03, 03b, 05, 05b) both
    inherit them, so a setting added here is a parameter of the same name of each of those notebooks that reaches
    their models. Defaults are the seed's §4.2 values."""

    gat_hidden: int = param(128, "GatModel width H, seed §4.2", ge=1)
    gat_out: int = param(64, "GatModel output width F_out, seed §4.2", ge=1)
    gat_levels: int = param(4, "GatModel levels L, seed §4.2", ge=1)
    gat_heads: int = param(2, "GatModel attention heads K (averaged), seed §4.2", ge=1)
    gat_dropout: float = param(0.75, "GatModel dropout p, seed §4.2", ge=0, lt=1)
    gat_impl: str = param(
        "fused", '"fused" (faster, same weights and outputs) or "pyg" (GATConv per level)', choices=("fused", "pyg")
    )
    baseline_dropout: float = param(0.5, "dropout of the two trained baselines", ge=0, lt=1)


@dataclass(frozen=True)
class ModelConfig(GatModelParams):
    """What a stage-3 model is built from: notebook 03's GatModel settings (GatModelParams; 325,312 parameters with
    F_in=384 at their defaults), the input width, and the decoder settings notebook 03b's variants set
    (lib.linkpred.decoders.VARIANTS)."""

    in_channels: int = param(384, "F_in: all-MiniLM-L6-v2 output width", ge=1)
    negative_slope: float = param(0.2, "GATConv's LeakyReLU slope (PyG default; the seed did not change it)")
    input_dropout_after_lin: bool = param(
        False, "seed §4.1 list: dropout on X then L_in; §4.1.1 formula: Dropout(L_in(X))"
    )
    decoder: str = param(
        "dot",
        "; ".join(f'"{d.name}": {d.about}' for d in DECODERS.values()) + " (lib.linkpred.decoders)",
        choices=tuple(DECODERS),
    )
    decoder_hidden: int = param(64, "width of an MLP decoder", ge=1)
    decoder_dropout: float = param(0.0, "dropout inside an MLP decoder", ge=0, lt=1)
    decoder_features: bool = param(False, "MLP decoder also reads the pair's heuristic features (stack_features)")
    decoder_init: str = param(
        "random",
        '"stack": the feature part starts as the heuristic stack of the training graphs',
        choices=("random", "stack"),
    )
    decoder_rescale: bool = param(
        False, "MLP decoder's counts rescaled to the training graphs' mean degree (lib.linkpred.heuristics)"
    )
    stack_features: list[str] = param(
        list(STACK),
        "registered heuristics (lib.linkpred.heuristics.REGISTRY) whose "
        "stack features the decoder reads and its stack is fitted on (a checkpoint "
        "without it: lib.common.published.STACK_FEATURES)",
    )

    def check(self) -> None:
        if not self.stack_features:
            raise ParamError("model parameter stack_features=[] is invalid: list at least one", key="stack_features")
        try:  # not `choices`: a heuristic registered after this module was imported is a valid feature too
            check_heuristics(self.stack_features)
        except ValueError as e:
            raise ParamError(
                f"model parameter stack_features={self.stack_features!r} is invalid: {e}", key="stack_features"
            ) from None
        mlp = self.decoder in MLP_DECODERS
        rules = [
            (
                "decoder_features",
                self.decoder_features and not mlp,
                f"decoder_features=True needs an MLP decoder (one of {MLP_DECODERS})",
            ),
            (
                "decoder_rescale",
                self.decoder_rescale and not mlp,
                f"decoder_rescale=True needs an MLP decoder (one of {MLP_DECODERS})",
            ),
            (
                "decoder_init",
                self.decoder_init == "stack" and not self.decoder_features,
                "decoder_init='stack' needs decoder_features=True (the stack reads them)",
            ),
        ]
        for key, bad, why in rules:
            if bad:
                raise ParamError(f"model parameter {why}", key=key)


def dropout_layer(cfg: ModelConfig) -> nn.Dropout:
    """GatModel's dropout: MaskDropout in the fused implementation (a faster mask of its own, kept as one byte per
    element instead of a float32 or bf16 one), nn.Dropout in the PyG reference. In eval mode, or with p = 0, the two
    implementations give the same outputs for the same weights; in training their masks differ."""
    return (MaskDropout if cfg.gat_impl == "fused" else nn.Dropout)(cfg.gat_dropout)


class DeepGATLevel(nn.Module):
    """One level: X1 = LN(X + Drop(GAT(X))); out = LN(X1 + Drop(L2(ReLU(L1(X1))))). x: [N, H] -> [N, H]."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        h = cfg.gat_hidden
        if cfg.gat_impl == "pyg":
            self.gat = GATConv(h, h, heads=cfg.gat_heads, concat=False, negative_slope=cfg.negative_slope)
        else:
            self.gat = FusedGATConv(h, h, cfg.gat_heads, cfg.negative_slope)
        self.norm1 = nn.LayerNorm(h)
        self.lin1 = nn.Linear(h, h)
        self.lin2 = nn.Linear(h, h)
        self.norm2 = nn.LayerNorm(h)
        self.dropout = dropout_layer(cfg)

    def forward(self, x: Tensor, edge_index: Tensor, edges: PreparedEdges | None = None) -> Tensor:
        if edges is None:  # PyG: GATConv and nn.Linear add their biases
            x1 = residual_norm(x, self.gat(x, edge_index), self.norm1, self.dropout)
            return residual_norm(x1, self.lin2(F.relu(self.lin1(x1), inplace=True)), self.norm2, self.dropout)
        # fused: the GAT's bias, and L2's outside autocast (which adds it in the low precision), are added inside
        # residual_norm's pass: one pass less each way
        x1 = residual_norm(x, self.gat(x, edges, add_bias=False), self.norm1, self.dropout, self.gat.bias)
        hidden = F.relu(self.lin1(x1), inplace=True)
        if torch.is_autocast_enabled(x.device.type):
            return residual_norm(x1, self.lin2(hidden), self.norm2, self.dropout)
        return residual_norm(x1, F.linear(hidden, self.lin2.weight), self.norm2, self.dropout, self.lin2.bias)


class DeepGATBlock(nn.Module):
    """L DeepGATLevels then a final dropout (seed §4.1.2–4.1.3). x: [N, H], edge_index: [2, E] -> [N, H]."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.impl = cfg.gat_impl
        self.heads = cfg.gat_heads
        self.levels = nn.ModuleList(DeepGATLevel(cfg) for _ in range(cfg.gat_levels))
        self.dropout = dropout_layer(cfg)

    def forward(self, x: Tensor, edge_index: Tensor, edges: PreparedEdges | None = None) -> Tensor:
        """edges: prepare_edges(edge_index, N, K) made ahead (fused only), as a captured CUDA graph needs: preparing
        them has data-dependent sizes, which a capture cannot hold."""
        if self.impl == "fused" and edges is None:
            edges = prepare_edges(edge_index, x.size(0), self.heads)
        for level in self.levels:
            x = level(x, edge_index, edges)
        return self.dropout(x)


class GatModel(nn.Module):
    """The seed's encoder + a pair decoder (the seed's dot product by default; lib.linkpred.decoders for the others).

    encode(x [N, F_in] float, edge_index [2, E] long) -> z [N, F_out]
    decode(z [N, F_out], pairs [2, P] long, mp_edge_index [2, M], x [N, F_in]) -> logits [P]
      (dot: z_i · z_j, which needs neither mp_edge_index nor x; sigmoid gives the edge probability)
    """

    def __init__(self, cfg: ModelConfig | None = None, **overrides):
        super().__init__()
        cfg = cfg or ModelConfig(**overrides)
        self.cfg = cfg
        self.in_dropout = dropout_layer(cfg)
        self.lin_in = nn.Linear(cfg.in_channels, cfg.gat_hidden)
        self.block = DeepGATBlock(cfg)
        self.lin_out = nn.Linear(cfg.gat_hidden, cfg.gat_out)
        if cfg.decoder != "dot":  # the dot decoder adds no module, so the seed's state_dict is unchanged
            self.decoder = PairDecoder(
                cfg.decoder,
                cfg.gat_out,
                cfg.decoder_hidden,
                cfg.decoder_dropout,
                cfg.decoder_features,
                cfg.decoder_init,
                cfg.decoder_rescale,
                cfg.stack_features,
            )

    def encode(self, x: Tensor, edge_index: Tensor, edges: PreparedEdges | None = None) -> Tensor:
        """edges: edge_index prepared ahead (lib.linkpred.fused_gat.prepare_edges), fused implementation only."""
        check_inputs(x, edge_index, self.cfg.in_channels)
        if edges is not None and self.cfg.gat_impl != "fused":
            raise ValueError("prepared edges are for gat_impl='fused'; pass edge_index alone to the PyG model")
        if self.cfg.input_dropout_after_lin:
            h = self.in_dropout(self.lin_in(x))
        else:
            h = self.lin_in(self.in_dropout(x))
        return self.lin_out(self.block(h, edge_index, edges))

    forward = encode

    def decode(self, z: Tensor, pairs: Tensor, mp_edge_index: Tensor | None = None, x: Tensor | None = None) -> Tensor:
        if self.cfg.decoder == "dot":
            return dot_decode(z, pairs)
        return self.decoder(z, pairs, mp_edge_index, x)


def check_inputs(x: Tensor, edge_index: Tensor, in_channels: int) -> None:
    """Clear errors for inputs a model must never silently accept."""
    if x.dim() != 2 or x.size(1) != in_channels:
        raise ValueError(
            f"node features have shape {tuple(x.shape)} but the model expects [N, {in_channels}]; "
            f"embed with the model the checkpoint was trained on or set in_channels"
        )
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index has shape {tuple(edge_index.shape)}; it must be [2, E]")
    # The range check waits for the GPU, which a CUDA-graph capture forbids: GraphedTrainStep checks beforehand.
    if edge_index.is_cuda and torch.cuda.is_current_stream_capturing():
        return
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= x.size(0)):
        raise ValueError(f"edge_index refers to nodes outside 0..{x.size(0) - 1}; rebuild the graph's edge_index")


class _PairDot(torch.autograd.Function):
    """logits [P] = z[src] · z[dst] in C++ (lib.linkpred.kernels): no [P, F_out] rows are gathered, in either
    direction; z [N, F_out] float32 on the CPU."""

    @staticmethod
    def forward(ctx, z: Tensor, src: Tensor, dst: Tensor, kernels) -> Tensor:
        ctx.save_for_backward(z, src, dst)
        ctx.kernels = kernels
        return kernels.pair_dot(z, src, dst)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        z, src, dst = ctx.saved_tensors
        return ctx.kernels.pair_dot_backward(grad_out, z, src, dst), None, None, None


def dot_decode(z: Tensor, pairs: Tensor, mp_edge_index: Tensor | None = None, x: Tensor | None = None) -> Tensor:
    """The seed's decoder: logits [P] = z_i · z_j of pairs [2, P] (mp_edge_index and x are not needed)."""
    kernels = cpu_kernels(z)
    if kernels is not None:
        return _PairDot.apply(z.contiguous(), pairs[0].long(), pairs[1].long(), kernels)
    # index_select, not z[pairs[0]]: the same rows, gathered and (in backward) summed in the same order, at about a
    # third of advanced indexing's time on the CPU.
    return (z.index_select(0, pairs[0]) * z.index_select(0, pairs[1])).sum(-1)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


class PlainGAT(nn.Module):
    """Baseline: a plain 2-layer PyG GAT (K heads averaged, ELU between), same dot-product decoder."""

    def __init__(
        self,
        in_channels: int = 384,
        hidden_channels: int = 128,
        out_channels: int = 64,
        heads: int = 2,
        dropout: float = 0.5,
    ):
        super().__init__()
        self.in_channels = in_channels
        self.conv1 = GATConv(in_channels, hidden_channels, heads=heads, concat=False)
        self.conv2 = GATConv(hidden_channels, out_channels, heads=heads, concat=False)
        self.dropout = nn.Dropout(dropout)

    def encode(self, x: Tensor, edge_index: Tensor) -> Tensor:
        check_inputs(x, edge_index, self.in_channels)
        h = F.elu(self.conv1(self.dropout(x), edge_index))
        return self.conv2(self.dropout(h), edge_index)

    forward = encode
    decode = staticmethod(dot_decode)


class FeatureMLP(nn.Module):
    """Baseline: a 2-layer MLP on node features only (ignores edge_index), same dot-product decoder."""

    def __init__(
        self, in_channels: int = 384, hidden_channels: int = 128, out_channels: int = 64, dropout: float = 0.5
    ):
        super().__init__()
        self.in_channels = in_channels
        self.net = nn.Sequential(
            nn.Dropout(dropout),
            nn.Linear(in_channels, hidden_channels),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden_channels, out_channels),
        )

    def encode(self, x: Tensor, edge_index: Tensor) -> Tensor:
        check_inputs(x, edge_index, self.in_channels)
        return self.net(x)

    forward = encode
    decode = staticmethod(dot_decode)
