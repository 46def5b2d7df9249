"""The fused GAT layer against what it replaces (PyG GATConv), and the fused model's dropout (MaskDropout)."""

import pytest
import torch
from torch_geometric.nn import GATConv

from lib.linkpred import kernels
from lib.linkpred.fused_gat import FusedGATConv, MaskDropout, dropout_bits, keep_mask, prepare_edges


def _graph(n=50, e=300, seed=0):
    """Random directed edges with duplicates, self-loops and nodes without in-edges (GATConv keeps duplicates and
    replaces self-loops by one per node)."""
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n - 5, (2, e), generator=g)  # the last 5 nodes get no in- or out-edges
    return torch.cat([ei, ei[:, :10], torch.tensor([[3, 7], [3, 7]])], 1)


def _layers(heads, c_in=16, c_out=8, seed=0):
    torch.manual_seed(seed)
    pyg = GATConv(c_in, c_out, heads=heads, concat=False)
    with torch.no_grad():
        pyg.bias.normal_()
    fused = FusedGATConv(c_in, c_out, heads)
    fused.load_state_dict(pyg.state_dict())
    return pyg, fused


def _forward_backward(layer, x, edges, grad):
    x = x.clone().requires_grad_(True)
    layer.zero_grad()
    out = layer(x, edges)
    out.backward(grad)
    return out.detach(), x.grad, {n: p.grad.clone() for n, p in layer.named_parameters()}


@pytest.mark.parametrize("switch", ["1", "0"])  # the C++ kernels where they build (edge softmax), the torch ops
@pytest.mark.parametrize("heads", [1, 2, 3])
def test_fused_layer_equals_gatconv_forward_and_backward(monkeypatch, switch, heads):
    monkeypatch.setenv(kernels.SWITCH, switch)
    ei = _graph(seed=heads)
    x = torch.randn(50, 16, generator=torch.Generator().manual_seed(1))
    grad = torch.randn(50, 8, generator=torch.Generator().manual_seed(2))
    pyg, fused = _layers(heads)
    want = _forward_backward(pyg, x, ei, grad)
    got = _forward_backward(fused, x, prepare_edges(ei, 50, heads), grad)
    torch.testing.assert_close(got[0], want[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[1], want[1], atol=1e-5, rtol=1e-5)
    for name, g in want[2].items():
        torch.testing.assert_close(got[2][name], g, atol=1e-5, rtol=1e-5, msg=name)


def test_fused_layer_keeps_nothing_of_size_edges_times_channels():
    """What the layer saves is x, h = x W^T [N, K*C] and [E', K] tensors, never an [E', K, C] message tensor."""
    n, heads, c = 200, 2, 32
    ei = torch.randint(0, n, (2, 2000), generator=torch.Generator().manual_seed(0))
    edges = prepare_edges(ei, n, heads)
    layer = FusedGATConv(c, c, heads)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        layer(torch.randn(n, c, requires_grad=True), edges)
    assert saved and max(saved) <= max(n * heads * c, edges.edge_index.size(1) * heads), saved


@pytest.mark.parametrize("p", [0.75, 0.5])  # the seed's GatModel dropout, the baselines'
def test_keep_mask_keeps_the_exact_share_on_average(p):
    torch.manual_seed(0)
    mask, keep = keep_mask(torch.empty(400, 1000), 1 - p)
    assert mask.dtype == torch.bool and mask.shape == (400, 1000) and keep == 1 - p
    share, sd = mask.float().mean().item(), (keep * (1 - keep) / mask.numel()) ** 0.5
    assert abs(share - keep) < 4 * sd  # a binomial share within four standard deviations
    rows, cols = mask.float().mean(1), mask.float().mean(0)  # no row or column of the packed fields is biased
    assert rows.std() < 2 * (keep * (1 - keep) / 1000) ** 0.5 and cols.std() < 2 * (keep * (1 - keep) / 400) ** 0.5


def test_keep_mask_rounds_the_keep_probability_to_a_65536th():
    _, keep = keep_mask(torch.empty(5), 0.9)
    assert keep == round(0.9 * 65536) / 65536 and abs(keep - 0.9) < 1 / 65536


@pytest.mark.parametrize("switch", ["1", "0"])  # the C++ kernels where they build, the torch ops
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("p", [0.75, 0.1])
def test_mask_dropout_scales_what_it_keeps_and_saves_bits_or_a_one_byte_mask(monkeypatch, switch, dtype, p):
    monkeypatch.setenv(kernels.SWITCH, switch)
    x = torch.randn(64, 32, dtype=dtype)
    grad = torch.randn(64, 32, dtype=dtype)
    xi, saved = x.clone().requires_grad_(True), []
    torch.manual_seed(5)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        out = MaskDropout(p)(xi)
    out.backward(grad)
    _, keep = keep_mask(x, 1 - p)
    kept = out != 0
    torch.testing.assert_close(out[kept], (x[kept] / keep).to(dtype))
    torch.testing.assert_close(xi.grad, (grad * kept / keep).to(dtype))  # the gradient passes where x was kept
    if kernels.cpu_kernels(x) is None:
        assert [t.dtype for t in saved] == [torch.bool]
    else:  # the random bits themselves: 2 bits per element at p = 0.75, 16 at p = 0.1
        b, _ = dropout_bits(1 - p)
        assert [(t.dtype, t.numel()) for t in saved] == [(torch.uint8, x.numel() * b // 8)]
    torch.manual_seed(5)
    assert torch.equal(MaskDropout(p)(x), out.detach())  # the same seed, the same mask
    torch.manual_seed(5)
    mask, keep = keep_mask(x, 1 - p)  # the mask read as uint8 gives the bool product's values, bit for bit
    assert torch.equal(out.detach(), x.mul(mask).mul_(1 / keep))
    assert torch.equal(xi.grad, grad.mul(mask).mul_(1 / keep))
    layer = MaskDropout(p).eval()
    assert layer(x) is x
