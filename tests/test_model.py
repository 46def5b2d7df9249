import math

import numpy as np
import pytest
import torch
from torch_geometric.utils import to_undirected

from lib.linkpred.model import FeatureMLP, GatModel, ModelConfig, PlainGAT, count_parameters


def _graph(n=60, e=200, f=384, seed=0):
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=g)
    ei = to_undirected(ei[:, ei[0] != ei[1]], num_nodes=n)
    return torch.randn(n, f, generator=g), ei


@pytest.mark.parametrize("impl", ["pyg", "fused"])
def test_default_config_parameter_count_and_shapes(impl):
    m = GatModel(gat_impl=impl)
    assert count_parameters(m) == 325_312  # seed §4.2 with PyG GATConv(128, 128, heads=2, concat=False)
    x, ei = _graph()
    m.eval()
    z = m(x, ei)
    assert z.shape == (60, 64)
    assert m.decode(z, ei).shape == (ei.size(1),)


def test_fused_and_pyg_give_same_outputs_and_gradients_for_same_weights():
    x, ei = _graph(seed=1)
    a, b = GatModel(gat_impl="pyg", gat_dropout=0.0), GatModel(gat_impl="fused", gat_dropout=0.0)
    b.load_state_dict(a.state_dict())
    za, zb = a(x, ei), b(x, ei)
    assert torch.allclose(za, zb, atol=1e-4, rtol=1e-4)
    za.square().mean().backward()
    zb.square().mean().backward()
    gb = dict(b.named_parameters())
    for name, p in a.named_parameters():
        assert torch.allclose(p.grad, gb[name].grad, atol=1e-5, rtol=1e-3), name


def _layer_norm(v):
    return (v - v.mean()) / math.sqrt(v.var() + 1e-5)


@pytest.mark.parametrize("impl", ["pyg", "fused"])
def test_forward_matches_hand_computed_tiny_example(impl):
    # 3 nodes, edges 0-1 and 1-2, F_in = H = F_out = 2, one level, two heads, no dropout.
    cfg = ModelConfig(in_channels=2, gat_hidden=2, gat_out=2, gat_levels=1, gat_heads=2, gat_dropout=0.0, gat_impl=impl)
    m = GatModel(cfg)
    torch.manual_seed(3)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    sd = {k: v.detach().numpy().astype(np.float64) for k, v in m.state_dict().items()}
    lvl = "block.levels.0."
    h0 = x.numpy() @ sd["lin_in.weight"].T + sd["lin_in.bias"]
    w = sd[lvl + "gat.lin.weight"]  # [K*C, C_in]
    hh = (h0 @ w.T).reshape(3, 2, 2)  # [N, K, C]
    a_s, a_d = sd[lvl + "gat.att_src"][0], sd[lvl + "gat.att_dst"][0]
    nbrs = {0: [1, 0], 1: [0, 2, 1], 2: [1, 2]}  # in-neighbours incl. the self-loop GATConv adds
    att = np.zeros((3, 2))
    for i in range(3):
        for k in range(2):
            e = np.array([(hh[j, k] @ a_s[k]) + (hh[i, k] @ a_d[k]) for j in nbrs[i]])
            e = np.where(e > 0, e, 0.2 * e)
            alpha = np.exp(e - e.max()) / np.exp(e - e.max()).sum()
            att[i] += sum(a * hh[j, k] for a, j in zip(alpha, nbrs[i])) / 2
    att += sd[lvl + "gat.bias"]
    out = []
    for i in range(3):
        x1 = _layer_norm(h0[i] + att[i]) * sd[lvl + "norm1.weight"] + sd[lvl + "norm1.bias"]
        ff = np.maximum(x1 @ sd[lvl + "lin1.weight"].T + sd[lvl + "lin1.bias"], 0)
        ff = ff @ sd[lvl + "lin2.weight"].T + sd[lvl + "lin2.bias"]
        x2 = _layer_norm(x1 + ff) * sd[lvl + "norm2.weight"] + sd[lvl + "norm2.bias"]
        out.append(x2 @ sd["lin_out.weight"].T + sd["lin_out.bias"])
    expected = np.stack(out)
    m.eval()
    z = m(x, ei).detach().numpy()
    np.testing.assert_allclose(z, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        m.decode(torch.from_numpy(z), torch.tensor([[0], [2]])).numpy(), [expected[0] @ expected[2]], rtol=1e-5
    )


def test_dropout_only_in_training_mode_and_position_option():
    x, ei = _graph(seed=2)
    m = GatModel(gat_impl="fused")
    m.eval()
    assert torch.equal(m(x, ei), m(x, ei))
    m.train()
    torch.manual_seed(0)
    assert not torch.allclose(m(x, ei), m(x, ei))
    after = GatModel(input_dropout_after_lin=True)
    assert count_parameters(after) == 325_312


def test_bad_inputs_are_clear_errors():
    m = GatModel()
    x, ei = _graph(f=100)
    with pytest.raises(ValueError, match="expects \\[N, 384\\]"):
        m(x, ei)
    x, ei = _graph()
    with pytest.raises(ValueError, match="outside"):
        m(x, ei + 1000)
    with pytest.raises(ValueError, match="dropout"):
        ModelConfig(gat_dropout=1.0)
    with pytest.raises(ValueError, match="impl"):
        ModelConfig(gat_impl="dense")


def test_baselines_shapes():
    x, ei = _graph()
    for m in (PlainGAT(), FeatureMLP()):
        m.eval()
        assert m(x, ei).shape == (60, 64)
    # the MLP ignores the graph
    m = FeatureMLP().eval()
    assert torch.equal(m(x, ei), m(x, ei[:, :0]))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fused_under_autocast_matches_pyg_under_the_same_autocast(dtype):
    """CPU autocast stands in for CUDA AMP (params/cuda.yaml: fused + autocast): the fused sparse aggregation runs in
    float32 inside the autocast region (it has no bf16/fp16 kernel) and must agree with PyG's GATConv under the same
    autocast. Tolerance: 2% of the output scale / of each gradient's norm (bf16 keeps 8 mantissa bits: ~0.4% per
    rounding; both implementations round the dense layers, in a different order); 5% of a gradient's norm under fp16,
    whose CPU kernels differ by machine: on an x86 CPU without native fp16 or bf16 instructions (no AVX512-FP16,
    AVX512-BF16 or AMX) the last level's gradients part by 3.0%, the same with the loss scaled by 2^10 or 2^14, so it is
    the rounding order, not underflow."""
    x, ei = _graph(seed=2)
    torch.manual_seed(3)  # fixed initial weights: not whatever the tests before it left torch's generator at
    a, b = GatModel(gat_impl="pyg", gat_dropout=0.0), GatModel(gat_impl="fused", gat_dropout=0.0)
    b.load_state_dict(a.state_dict())
    ref = a(x, ei).detach()
    out = {}
    for m in (a, b):
        m.zero_grad()
        with torch.autocast("cpu", dtype=dtype):
            z = m(x, ei)
        assert z.dtype == dtype  # L_out runs in the low precision
        z.float().square().mean().backward()
        out[m.cfg.gat_impl] = z.float().detach(), {n: p.grad.clone() for n, p in m.named_parameters()}
    scale = ref.abs().max()
    assert (out["fused"][0] - out["pyg"][0]).abs().max() <= 0.02 * scale
    assert (out["fused"][0] - ref).abs().max() <= 0.02 * scale
    for name, g in out["pyg"][1].items():
        gf = out["fused"][1][name]
        assert torch.isfinite(gf).all() and gf.dtype == torch.float32, name  # weights and their gradients stay fp32
        assert (gf - g).norm() <= (0.05 if dtype == torch.float16 else 0.02) * g.norm() + 1e-6, name
