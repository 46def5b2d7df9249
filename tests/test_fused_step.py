"""The fused GAT layer and the fused model's dropout against what they replace: PyG GATConv and nn.Dropout."""

import pytest
import torch
from torch import nn
from torch_geometric.nn import GATConv

from lib.linkpred.fused_gat import FusedGATConv, MaskDropout, prepare_edges
from lib.linkpred.model import GatModel


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


@pytest.mark.parametrize("heads", [1, 2, 3])
def test_fused_layer_equals_gatconv_forward_and_backward(heads):
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


def test_fused_layer_keeps_nothing_of_size_edges_times_channels_or_heads_times_channels():
    """Backward recomputes h = x W^T: what the layer saves is x and [E', K] tensors, not [N, K*C] or [E', K, C]."""
    n, heads, c = 200, 2, 32
    ei = torch.randint(0, n, (2, 2000), generator=torch.Generator().manual_seed(0))
    edges = prepare_edges(ei, n, heads)
    layer = FusedGATConv(c, c, heads)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        layer(torch.randn(n, c, requires_grad=True), edges)
    assert saved and max(saved) <= max(n * c, edges.edge_index.size(1) * heads), saved


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("p", [0.75, 0.1])
def test_mask_dropout_is_nn_dropout_bit_for_bit_with_a_one_byte_mask(dtype, p):
    x = torch.randn(64, 32, dtype=dtype)
    grad = torch.randn(64, 32, dtype=dtype)
    results = []
    for layer in (nn.Dropout(p), MaskDropout(p)):
        xi = x.clone().requires_grad_(True)
        saved = []
        torch.manual_seed(5)
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
            out = layer(xi)
        out.backward(grad)
        results.append((out, xi.grad, torch.rand(3), saved))
    (out_a, grad_a, rng_a, _), (out_b, grad_b, rng_b, saved_b) = results
    assert torch.equal(out_a, out_b) and torch.equal(grad_a, grad_b)
    assert torch.equal(rng_a, rng_b)  # the same random numbers drawn, so a model's later draws are unchanged
    assert [t.dtype for t in saved_b] == [torch.uint8]
    layer = MaskDropout(p).eval()
    assert layer(x) is x


def test_fused_training_step_equals_pyg_with_dropout_on():
    """With the same seed the fused model draws the same dropout masks as the PyG one, so a training-mode forward and
    its gradients agree as closely as without dropout."""
    g = torch.Generator().manual_seed(3)
    n = 80
    ei = torch.randint(0, n, (2, 400), generator=g)
    x = torch.randn(n, 384, generator=g)
    pyg, fused = GatModel(gat_impl="pyg", gat_dropout=0.5), GatModel(gat_impl="fused", gat_dropout=0.5)
    fused.load_state_dict(pyg.state_dict())
    z = {}
    for m in (pyg, fused):
        torch.manual_seed(11)
        z[m.cfg.gat_impl] = m.train()(x, ei)
        z[m.cfg.gat_impl].square().mean().backward()
    torch.testing.assert_close(z["fused"], z["pyg"], atol=1e-5, rtol=1e-5)
    grads = dict(fused.named_parameters())
    for name, p in pyg.named_parameters():
        torch.testing.assert_close(grads[name].grad, p.grad, atol=1e-5, rtol=1e-5, msg=name)
