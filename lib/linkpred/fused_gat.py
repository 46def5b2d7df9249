"""The fused GAT layer of GatModel: PyG GATConv(in, out, heads=K, concat=False) in fewer, larger operations.

Per forward pass (prepare_edges): self-loops are added once for all L levels and the edges sorted by target, with
both sparse patterns the layer needs for all K heads at once.  Per level (FusedGATConv):

  h = x W^T [N, K*C];  a = h M^T [N, 2K]  (the attention logits of all heads: one thin matmul)
  out[i] = 1/K sum_k sum_{j->i} softmax_i(LeakyReLU(a_src[j, k] + a_dst[i, k])) h[j, k]  + bias

The aggregation over heads is ONE sparse CSR product with an [N, N*K] matrix whose column j*K+k holds head k of node
j, so h [N, K*C] is read as [N*K, C] without a copy; its backward is one sparse product with the transpose and one
sampled dense-dense product (torch.sparse.sampled_addmm), and the softmax's backward is recomputed on the [E, K]
attention weights — no [E, K, C] message tensor exists at any point.

MaskDropout draws its mask about five times faster than nn.Dropout (draw_bits: 2 random bits per element at p = 0.75)
and keeps it as bits or bytes for backward where nn.Dropout keeps a float noise tensor; on the CPU, the dropouts and
the levels' LayerNorm(x + dropout(y)) run as C++ kernels, one pass each way (lib.linkpred.kernels, residual_norm).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.utils import add_self_loops, remove_self_loops, softmax

from lib.linkpred.kernels import cpu_kernels


@dataclass(frozen=True)
class PreparedEdges:
    """Edges with self-loops sorted by target, and two CSR patterns over the heads (E' = E + N edges, K heads):

    crow_heads / col_heads: [N, N*K], row i, column j*K+k for each edge j->i and head k — its values in
        alpha.view(-1) order ([E', K] row-major), so an [E', K] tensor is its values without a copy;
    crow_t / col_t / perm_t: the transpose [N*K, N], row j*K+k holding edge j->i at column i; value q is element
        perm_t[q] of alpha.view(-1).
    """

    edge_index: Tensor  # [2, E'] long, sorted by target then source
    ptr: Tensor  # [N + 1]: edges into node i are ptr[i]:ptr[i+1]
    heads: int
    crow_heads: Tensor  # [N + 1]
    col_heads: Tensor  # [E' * K]
    crow_t: Tensor  # [N * K + 1]
    col_t: Tensor  # [E' * K]
    perm_t: Tensor  # [E' * K]


def _ptr(sorted_index: Tensor, num_nodes: int) -> Tensor:
    ptr = torch.zeros(num_nodes + 1, dtype=torch.long, device=sorted_index.device)
    ptr[1:] = torch.cumsum(torch.bincount(sorted_index, minlength=num_nodes), 0)
    return ptr


def prepare_edges(edge_index: Tensor, num_nodes: int, heads: int) -> PreparedEdges:
    """Self-loops added once (as GATConv does at every level) and the CSR patterns of PreparedEdges: on the CPU by
    the C++ kernels' counting sorts where they are built (lib.linkpred.kernels), the same tensors."""
    kernels = cpu_kernels() if edge_index.device.type == "cpu" else None
    if kernels is not None:
        ei, ptr, *patterns = kernels.prepare_edges(edge_index.long(), num_nodes, heads)
        return PreparedEdges(ei, ptr, heads, *patterns)
    ei, _ = remove_self_loops(edge_index)
    ei, _ = add_self_loops(ei, num_nodes=num_nodes)
    ei = ei[:, torch.argsort(ei[1] * num_nodes + ei[0])]
    src, dst = ei[0], ei[1]
    ptr = _ptr(dst, num_nodes)
    head = torch.arange(heads, device=ei.device)
    col_heads = (src.unsqueeze(1) * heads + head).reshape(-1)
    # The transpose: edges grouped by source (stable, so targets stay ascending within a row), each group once per head.
    by_src = torch.sort(src, stable=True).indices
    ptr_src = _ptr(src.index_select(0, by_src), num_nodes)
    row_len = ptr_src.diff().repeat_interleave(heads)  # [N*K]
    crow_t = torch.zeros(num_nodes * heads + 1, dtype=torch.long, device=ei.device)
    crow_t[1:] = torch.cumsum(row_len, 0)
    row = torch.repeat_interleave(torch.arange(num_nodes * heads, device=ei.device), row_len)  # [E'*K]
    edge = by_src.index_select(
        0,
        ptr_src.index_select(0, row // heads)
        + torch.arange(row.numel(), device=ei.device)
        - crow_t.index_select(0, row),
    )
    return PreparedEdges(
        ei, ptr, heads, ptr * heads, col_heads, crow_t, dst.index_select(0, edge), edge * heads + row % heads
    )


def _csr(crow: Tensor, col: Tensor, values: Tensor, size: tuple[int, int]) -> Tensor:
    """A sparse CSR matrix on a prepared pattern; torch's one-time "CSR support is beta" warning is silenced (the
    layout is what the layer is built on, and tests compare it with GATConv)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, values, size, check_invariants=False)


def _spmm(sparse: Tensor, dense: Tensor) -> Tensor:
    """sparse [R, M] CSR @ dense [M, C] -> [R, C], written straight into a new tensor: `sparse @ dense` fills a zero
    tensor and copies it into the result first (addmm ignores its input when beta is 0)."""
    out = torch.empty(sparse.size(0), dense.size(1), dtype=dense.dtype, device=dense.device)
    return out.addmm_(sparse, dense, beta=0.0)


def _project(x: Tensor, weight: Tensor, dtype: torch.dtype) -> Tensor:
    """h = x W^T as autocast's linear computes it (in `dtype`), returned in float32: [N, C_in] -> [N, K*C]."""
    return F.linear(x.to(dtype), weight.to(dtype)).float()


class _GatLayer(torch.autograd.Function):
    """out [N, C] = 1/K sum_k A_k h_k + bias for h = x W^T [N, K*C] (the matmul in `dtype`, everything after in
    float32) and A_k[i, j] = softmax over i's in-edges of LeakyReLU(a[j, k] + a[i, K + k]), a = h M^T [N, 2K]
    (M: att_weight).

    Hand-written because autograd through gather -> multiply -> scatter materialises [E, K, C] tensors, and
    torch.sparse.mm's own backward sends its gradient for the sparse values through a dense [N, N] matrix.  Saved for
    backward: x, h [N, K*C] (recomputing it cost a tenth of a seed-sized step) and the [E', K] logits and weights.
    The sparse kernels have no bf16/fp16 implementation ("addmm_out_sparse_csr_impl_mkl not implemented for
    'BFloat16'"), so under autocast only the matmuls with W run in the low precision, as autocast would run them.
    """

    @staticmethod
    def forward(
        ctx,
        x: Tensor,
        weight: Tensor,
        att_weight: Tensor,
        bias: Tensor,
        edges: PreparedEdges,
        negative_slope: float,
        dtype: torch.dtype,
    ) -> Tensor:
        n, k = x.size(0), edges.heads
        src, dst = edges.edge_index[0], edges.edge_index[1]
        x = x.to(dtype)
        with torch.autocast(x.device.type, enabled=False):
            h = _project(x, weight, dtype)
            a = F.linear(h, att_weight.float())  # [N, 2K]
            kernels = cpu_kernels(a)
            if kernels is not None:
                logit, alpha = kernels.edge_softmax(a, src, edges.ptr, negative_slope)
            else:
                logit = a[:, :k].index_select(0, src) + a[:, k:].index_select(0, dst)  # [E', K]
                alpha = softmax(F.leaky_relu(logit, negative_slope), ptr=edges.ptr)
            out = _spmm(_csr(edges.crow_heads, edges.col_heads, alpha.view(-1) / k, (n, n * k)), h.view(n * k, -1))
            if bias is not None:
                out.add_(bias.float())
        ctx.save_for_backward(x, h, weight, att_weight, bias, logit, alpha)
        ctx.edges, ctx.negative_slope, ctx.dtype, ctx.kernels = edges, negative_slope, dtype, kernels
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        x, h, weight, att_weight, bias, logit, alpha = ctx.saved_tensors
        edges = ctx.edges
        n, k = x.size(0), edges.heads
        src, dst = edges.edge_index[0], edges.edge_index[1]
        with torch.autocast(x.device.type, enabled=False):
            g = grad_out.float().contiguous()
            values = (alpha.view(-1) / k).index_select(0, edges.perm_t)
            grad_h = _spmm(_csr(edges.crow_t, edges.col_t, values, (n * k, n)), g).view(n, -1)  # [N, K*C]
            # d out / d alpha[e, k] = g[i] . h[j, k] / K for edge e = j->i: sampled on the pattern of the forward.
            pattern = _csr(edges.crow_heads, edges.col_heads, torch.ones_like(alpha.view(-1)), (n, n * k))
            grad_alpha = torch.sparse.sampled_addmm(pattern, g, h.view(n * k, -1).t(), beta=0.0).values()
            grad_alpha = grad_alpha.view(-1, k) / k
            if ctx.kernels is not None:  # the forward's choice
                grad_a = ctx.kernels.edge_softmax_backward(
                    grad_alpha, alpha, logit, src, edges.ptr, ctx.negative_slope, n
                )
            else:
                # softmax: d logit = alpha (d alpha - sum over the node's in-edges of alpha d alpha); then LeakyReLU.
                weighted = torch.segment_reduce(alpha * grad_alpha, "sum", offsets=edges.ptr)  # [N, K]
                grad_e = alpha * (grad_alpha - weighted.index_select(0, dst))
                grad_e = torch.where(logit > 0, grad_e, grad_e * ctx.negative_slope)
                grad_src = torch.zeros(n, k, dtype=grad_e.dtype, device=grad_e.device).index_add_(0, src, grad_e)
                grad_a = torch.cat([grad_src, torch.segment_reduce(grad_e, "sum", offsets=edges.ptr)], 1)  # [N, 2K]
            grad_att = (grad_a.t() @ h).to(att_weight.dtype)
            grad_h = grad_h.addmm_(grad_a, att_weight.float()).to(ctx.dtype)
            grad_x = grad_h @ weight.to(ctx.dtype) if ctx.needs_input_grad[0] else None
            grad_w = (grad_h.t() @ x).to(weight.dtype)
        grad_bias = g.sum(0).to(bias.dtype) if bias is not None else None
        return grad_x, grad_w, grad_att, grad_bias, None, None, None


def gat_layer(
    x: Tensor, weight: Tensor, att_weight: Tensor, bias: Tensor | None, edges: PreparedEdges, negative_slope: float
) -> Tensor:
    """_GatLayer with autocast's dtype for the matmuls with W where autocast is on: x [N, C_in] -> [N, C] float32
    (bias None: without the bias, which the caller adds)."""
    device = x.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else weight.dtype
    return _GatLayer.apply(x, weight, att_weight, bias, edges, negative_slope, dtype)


class FusedGATConv(nn.Module):
    """GATConv(in, out, heads=K, concat=False) for edges prepared by prepare_edges (self-loops, sorted by target).

    Parameters have GATConv's names and shapes: lin.weight [K*C, C_in], att_src / att_dst [1, K, C], bias [C].
    forward(x [N, C_in], edges: PreparedEdges) -> [N, C].
    """

    def __init__(self, in_channels: int, out_channels: int, heads: int, negative_slope: float = 0.2):
        super().__init__()
        self.heads, self.out_channels, self.negative_slope = heads, out_channels, negative_slope
        self.lin = nn.Linear(in_channels, heads * out_channels, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
        self.bias = nn.Parameter(torch.empty(out_channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # Same initialisation as GATConv (glorot for lin and attention vectors, zero bias).
        nn.init.xavier_uniform_(self.lin.weight)
        nn.init.xavier_uniform_(self.att_src)
        nn.init.xavier_uniform_(self.att_dst)
        nn.init.zeros_(self.bias)

    def attention_weight(self) -> Tensor:
        """[2K, K*C]: a = h M^T gives [N, 2K], a_src for all heads then a_dst (h [N, K*C] = x W^T) — GATConv's
        (h * att).sum(-1) over [N, K, C] as one thin matmul."""
        eye = torch.eye(self.heads, dtype=self.att_src.dtype, device=self.att_src.device).unsqueeze(-1)
        return torch.cat([eye * self.att_src, eye * self.att_dst]).reshape(2 * self.heads, -1)

    def forward(self, x: Tensor, edges: PreparedEdges, add_bias: bool = True) -> Tensor:
        """add_bias=False leaves the bias out, for a caller that adds it in a pass of its own (residual_norm)."""
        bias = self.bias if add_bias else None
        return gat_layer(x, self.lin.weight, self.attention_weight(), bias, edges, self.negative_slope)


FIELD_BITS = (1, 2, 4, 8, 16)


def dropout_bits(keep: float) -> tuple[int, int]:
    """(b, t): an element is kept when its b-bit random field is below t, so with probability q = t / 2^b.

    b is the fewest bits (1, 2, 4, 8 or 16) for which keep · 2^b is a whole number, so q = keep exactly (the seed's
    p = 0.75 keeps a quarter: 2 bits per element); otherwise b = 16 and q = round(keep · 65536) / 65536."""
    for b in FIELD_BITS:
        if (keep * (1 << b)).is_integer():
            return b, int(keep * (1 << b))
    return 16, round(keep * 65536)


def draw_bits(numel: int, b: int, device: torch.device) -> Tensor:
    """numel b-bit random fields, packed little-endian: [ceil(numel · b / 64) · 8] uint8.

    Written by hand because Tensor.bernoulli_ (what F.dropout draws with) costs about 25 ns per element on the CPU,
    a quarter of a seed-sized GatModel step; this draws 64 random bits per 64 / b elements (Tensor.random_ on int64,
    seeded by torch's generator like any other draw): 2 bits per element at the seed's p = 0.75."""
    words = torch.empty((numel * b + 63) // 64, dtype=torch.int64, device=device)
    return words.random_(-(1 << 63), (1 << 63) - 1).view(torch.uint8)


def mask_from_bits(bits: Tensor, shape: torch.Size, b: int, t: int) -> Tensor:
    """The bool keep mask [shape] of draw_bits' fields (field i < t keeps element i, row-major): what the C++
    kernels (lib.linkpred.cpu_kernels.cpp) read from the same bits, in torch ops."""
    n = shape.numel()
    if b == 16:  # the little-endian pairs of bytes as int16: field - 32768 after flipping the top bit
        fields = bits.view(torch.int16)[:n].bitwise_xor(-(1 << 15))
        return (fields < t - (1 << 15)).view(shape)
    if b == 8:
        return (bits[:n] < t).view(shape)
    shifts = torch.arange(0, 8, b, dtype=torch.uint8, device=bits.device)
    fields = bits[: (n * b + 7) // 8].unsqueeze(-1).bitwise_right_shift(shifts).bitwise_and_((1 << b) - 1)
    return (fields.view(-1)[:n] < t).view(shape)


def keep_mask(x: Tensor, keep: float) -> tuple[Tensor, float]:
    """A bool mask like x, each element True with probability q (dropout_bits: keep where keep · 2^b is whole for
    some b <= 16, else keep rounded to a 65536th), and q itself."""
    b, t = dropout_bits(keep)
    return mask_from_bits(draw_bits(x.numel(), b, x.device), x.shape, b, t), t / (1 << b)


def _kernel_draw(numel: int, p: float, device: torch.device) -> tuple[Tensor, tuple[int, int, float]]:
    """draw_bits' fields for dropout p, and the kernels' arguments for them: (b, t, scale = 2^b / t)."""
    b, t = dropout_bits(1 - p)
    return draw_bits(numel, b, device), (b, t, (1 << b) / t)


def _masked(x: Tensor, mask: Tensor, scale: float) -> Tensor:
    """x · mask · scale, the mask read as uint8: on the CPU, multiplying by a bool tensor casts element by element
    (about 2 ns each, twice the multiplication), while uint8 -> float converts vectorised; the same products, bit for
    bit."""
    return mask.view(torch.uint8).to(x.dtype).mul_(x).mul_(scale)


class _ByteMaskDropout(torch.autograd.Function):
    """x · mask / q with keep_mask's mask, kept as one byte per element for backward (torch ops: a GPU, or a CPU
    without the C++ kernels)."""

    @staticmethod
    def forward(ctx, x: Tensor, p: float) -> Tensor:
        mask, keep = keep_mask(x, 1 - p)
        ctx.save_for_backward(mask)
        ctx.scale = 1 / keep
        return _masked(x, mask, ctx.scale)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        (mask,) = ctx.saved_tensors
        return _masked(grad_out, mask, ctx.scale), None


class _BitsDropout(torch.autograd.Function):
    """_ByteMaskDropout in one C++ pass each way (cpu_kernels.cpp: dropout_apply), keeping the random bits (2 bits
    per element at p = 0.75) for backward; the same bits and the same values as _ByteMaskDropout."""

    @staticmethod
    def forward(ctx, x: Tensor, p: float, kernels) -> Tensor:
        bits, ctx.args = _kernel_draw(x.numel(), p, x.device)
        ctx.save_for_backward(bits)
        ctx.kernels = kernels
        return kernels.dropout_apply(x.contiguous(), bits, *ctx.args)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        (bits,) = ctx.saved_tensors
        return ctx.kernels.dropout_apply(grad_out.contiguous(), bits, *ctx.args), None, None


class MaskDropout(nn.Dropout):
    """nn.Dropout whose mask comes from draw_bits (about five times faster on the CPU; other random numbers than
    nn.Dropout's, with the same distribution where keep · 2^b is whole for some b <= 16) and is kept as random bits
    (C++ kernels) or one byte per element (torch ops) for backward instead of a noise tensor of the input's size."""

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0:
            return x
        kernels = cpu_kernels(x)
        if kernels is not None:
            return _BitsDropout.apply(x, self.p, kernels)
        return _ByteMaskDropout.apply(x, self.p)


class _ResidualDropoutNorm(torch.autograd.Function):
    """LayerNorm(x + (y + y_bias) · mask / q) in one C++ pass each way (cpu_kernels.cpp: residual_dropout_norm), with
    MaskDropout's bits: x [N, C] float32, y [N, C] (float32, or bf16 under autocast), y_bias [C] or None, weight and
    bias [C]. Saved for backward: the sum [N, C] (as LayerNorm saves its input), each row's mean and 1/std [N] and the
    bits."""

    @staticmethod
    def forward(ctx, x, y, y_bias, weight, bias, p: float, eps: float, kernels) -> Tensor:
        bits, ctx.args = _kernel_draw(x.numel(), p, x.device)
        ctx.kernels, ctx.y_dtype = kernels, y.dtype
        out, total, mean, rstd = kernels.residual_dropout_norm(
            x.contiguous(), y.float().contiguous(), y_bias, bits, *ctx.args, weight, bias, eps
        )
        ctx.save_for_backward(total, mean, rstd, bits, weight)
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        total, mean, rstd, bits, weight = ctx.saved_tensors
        gx, gy, gw, gb, gyb = ctx.kernels.residual_dropout_norm_backward(
            grad_out, total, mean, rstd, bits, *ctx.args, weight
        )
        return gx, gy.to(ctx.y_dtype), gyb if ctx.needs_input_grad[2] else None, gw, gb, None, None, None


def residual_norm(
    x: Tensor, y: Tensor, norm: nn.LayerNorm, dropout: nn.Dropout, y_bias: Tensor | None = None
) -> Tensor:
    """norm(x + dropout(y + y_bias)) for x, y [N, C] and y_bias [C] (None: no bias) -> [N, C]: in one C++ pass each
    way (lib.linkpred.kernels) when dropout is a MaskDropout in training and x and the norm's weights are float32 on
    the CPU; in torch ops otherwise (eval, nn.Dropout, a GPU, no kernels), which drop the same elements. Passing a
    layer's bias here instead of adding it first saves a pass over [N, C] each way."""
    if isinstance(dropout, MaskDropout) and dropout.training and dropout.p > 0 and y.device.type == "cpu":
        kernels = cpu_kernels(x, norm.weight, norm.bias, *([] if y_bias is None else [y_bias]))
        if kernels is not None:
            return _ResidualDropoutNorm.apply(x, y, y_bias, norm.weight, norm.bias, dropout.p, norm.eps, kernels)
    return norm(x + dropout(y if y_bias is None else y + y_bias))
