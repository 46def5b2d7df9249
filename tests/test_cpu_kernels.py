"""The fused step's C++ CPU kernels (lib.linkpred.kernels) against the torch ops they replace, which run where the
kernels cannot be built or are switched off (WIKIGAT_CPU_KERNELS=0)."""

import shutil

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lib.linkpred import kernels
from lib.linkpred.fused_gat import (
    MaskDropout,
    draw_bits,
    dropout_bits,
    keep_mask,
    mask_from_bits,
    prepare_edges,
    residual_norm,
)
from lib.linkpred.model import GatModel, dot_decode

# p -> fields of b bits: 1, 2 (the seed's 0.75), 4, 8, 16 bits exactly, and 16 bits rounded (0.9)
PS = [0.5, 0.75, 0.9375, 1 - 3 / 256, 1 - 5 / 65536, 0.9]


@pytest.fixture
def built():
    if kernels.cpu_kernels(torch.empty(1)) is None:
        if shutil.which("c++") or shutil.which("g++"):
            pytest.fail("a C++ compiler is here but the CPU kernels were not built (see the warning)")
        pytest.skip("no C++ compiler: the torch ops run (their tests are in test_fused_step.py)")
    return kernels.cpu_kernels(torch.empty(1))


@pytest.fixture
def threads(request):
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


def test_dropout_bits_takes_the_fewest_bits_that_hold_the_keep_probability_exactly():
    assert [dropout_bits(1 - p)[0] for p in PS] == [1, 2, 4, 8, 16, 16]
    for p in PS[:5]:
        b, t = dropout_bits(1 - p)
        assert t / (1 << b) == 1 - p
    b, t = dropout_bits(0.1)
    assert b == 16 and t == round(0.1 * 65536)


@pytest.mark.parametrize("b", [1, 2, 4, 8, 16])
def test_mask_from_bits_reads_little_endian_fields(b):
    """Element i is field i of the bytes, lowest bits first: what the C++ kernels read."""
    bits = draw_bits(37, b, torch.device("cpu"))
    stream = "".join(
        format(byte, "08b")[::-1] for byte in bits.tolist()
    )  # bit k of the stream = bit k % 8 of byte k // 8
    fields = [int(stream[i * b : (i + 1) * b][::-1], 2) for i in range(37)]
    t = (1 << b) // 2 + (b > 1)
    assert mask_from_bits(bits, torch.Size([37]), b, t).tolist() == [f < t for f in fields]


def test_the_kernels_build_here(built):
    assert kernels.kernels_status() == "built"


@pytest.mark.parametrize("p", PS)
def test_kernel_dropout_equals_the_torch_ops_bit_for_bit(built, monkeypatch, p):
    x, grad = torch.randn(33, 48), torch.randn(33, 48)

    def run():
        torch.manual_seed(3)
        xi = x.clone().requires_grad_(True)
        out = MaskDropout(p)(xi)
        out.backward(grad)
        return out.detach(), xi.grad

    fast = run()
    monkeypatch.setenv(kernels.SWITCH, "0")
    slow = run()
    assert torch.equal(fast[0], slow[0]) and torch.equal(fast[1], slow[1])
    _, keep = keep_mask(x, 1 - p)
    assert abs((fast[0] != 0).float().mean().item() - keep) < 0.05


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("threads", [1, 2], indirect=True)
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("width", [40, 7])  # rows of 7: a row's fields start inside a byte
def test_residual_norm_kernel_equals_layernorm_of_the_dropped_sum(built, monkeypatch, p, threads, with_bias, width):
    torch.manual_seed(0)
    norm, drop = nn.LayerNorm(width), MaskDropout(p)
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
    x, y, grad = torch.randn(70, width), torch.randn(70, width), torch.randn(70, width)
    y_bias = torch.randn(width) if with_bias else None

    def run():
        torch.manual_seed(11)
        norm.zero_grad()
        xi, yi = x.clone().requires_grad_(True), y.clone().requires_grad_(True)
        bi = y_bias.clone().requires_grad_(True) if with_bias else None
        out = residual_norm(xi, yi, norm, drop, bi)
        out.backward(grad)
        got = [out.detach(), xi.grad, yi.grad, norm.weight.grad.clone(), norm.bias.grad.clone()]
        return got + ([bi.grad] if with_bias else [])

    fast = run()
    monkeypatch.setenv(kernels.SWITCH, "0")
    slow = run()  # the same bits: the same elements dropped
    for a, b in zip(fast, slow):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-5)
    assert torch.equal(fast[2] == 0, slow[2] == 0)


def test_residual_norm_is_plain_layernorm_in_eval_and_for_nn_dropout(built):
    norm, x, y = nn.LayerNorm(8), torch.randn(5, 8), torch.randn(5, 8)
    assert torch.equal(residual_norm(x, y, norm, MaskDropout(0.75).eval()), norm(x + y))
    assert torch.equal(residual_norm(x, y, norm, nn.Dropout(0.0)), norm(x + y))


def test_residual_norm_under_bf16_autocast_returns_the_input_dtypes_gradients(built):
    norm, drop = nn.LayerNorm(16), MaskDropout(0.75)
    x = torch.randn(9, 16, requires_grad=True)
    y = torch.randn(9, 16, dtype=torch.bfloat16, requires_grad=True)
    residual_norm(x, y, norm, drop).sum().backward()
    assert x.grad.dtype == torch.float32 and y.grad.dtype == torch.bfloat16


@pytest.mark.parametrize("threads", [1, 2], indirect=True)
def test_pair_dot_kernel_equals_the_gathered_products(built, monkeypatch, threads):
    z = torch.randn(30, 12)
    pairs = torch.cat([torch.randint(0, 30, (2, 500)), torch.tensor([[4, 4, 7], [4, 4, 2]])], 1)  # (i, i), repeats
    grad = torch.randn(pairs.size(1))

    def run():
        zi = z.clone().requires_grad_(True)
        out = dot_decode(zi, pairs)
        out.backward(grad)
        return out.detach(), zi.grad

    fast = run()
    monkeypatch.setenv(kernels.SWITCH, "0")
    slow = run()
    torch.testing.assert_close(fast[0], slow[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast[1], slow[1], atol=1e-5, rtol=1e-5)


def test_pair_dot_kernel_names_a_pair_outside_the_graph(built):
    with pytest.raises(RuntimeError, match=r"pair 1 \(2, 9\) refers to a node outside 0\.\.4"):
        dot_decode(torch.randn(5, 3), torch.tensor([[0, 2], [1, 9]]))


def test_a_training_step_with_and_without_kernels_agrees(built, monkeypatch):
    torch.manual_seed(0)
    x, ei = torch.randn(120, 384), torch.randint(0, 120, (2, 600))

    def run():
        torch.manual_seed(0)
        model = GatModel(gat_impl="fused").train()
        torch.manual_seed(1)
        logits = model.decode(model(x, ei), ei)
        F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits)).backward()
        return logits.detach(), [p.grad for p in model.parameters()]

    fast = run()
    monkeypatch.setenv(kernels.SWITCH, "0")
    slow = run()
    torch.testing.assert_close(fast[0], slow[0], atol=1e-4, rtol=1e-5)
    for a, b in zip(fast[1], slow[1]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-3)


def test_switched_off_or_on_a_non_float32_tensor_there_are_no_kernels(monkeypatch):
    assert kernels.cpu_kernels(torch.empty(1, dtype=torch.bfloat16)) is None
    monkeypatch.setenv(kernels.SWITCH, "0")
    assert kernels.cpu_kernels(torch.empty(1)) is None
    assert kernels.kernels_status() == f"off ({kernels.SWITCH}=0)"


def test_a_failed_build_warns_once_and_falls_back(monkeypatch, tmp_path):
    def fail(*args, **kwargs):
        raise RuntimeError("Ninja is required to load C++ extensions")

    monkeypatch.setattr("torch.utils.cpp_extension.load", fail)
    monkeypatch.setattr("torch.utils.cpp_extension._get_build_directory", lambda name, verbose: str(tmp_path))
    monkeypatch.setattr(kernels, "build_name", lambda flags: "wikigat_cpu_test_missing")
    kernels._built.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="could not be built .*install a C\\+\\+ compiler"):
            assert kernels.cpu_kernels(torch.empty(1)) is None
        out = MaskDropout(0.75)(torch.randn(4, 4))  # the torch ops run
        assert out.shape == (4, 4)
    finally:
        kernels._built.cache_clear()


@pytest.mark.parametrize("heads", [1, 2, 3])
def test_prepare_edges_kernel_gives_the_torch_ops_tensors(built, monkeypatch, heads):
    """Duplicates, self-loops, nodes without edges and no edges at all: the same sorted edges and patterns."""
    cases = [torch.randint(0, 40, (2, 300), generator=torch.Generator().manual_seed(s)) for s in range(5)]
    cases += [torch.tensor([[3, 3, 1, 1], [3, 0, 0, 0]]), torch.empty(2, 0, dtype=torch.long)]
    for ei in cases:
        fast = prepare_edges(ei, 45, heads)
        monkeypatch.setenv(kernels.SWITCH, "0")
        slow = prepare_edges(ei, 45, heads)
        monkeypatch.setenv(kernels.SWITCH, "1")
        for name in ["edge_index", "ptr", "crow_heads", "col_heads", "crow_t", "col_t", "perm_t"]:
            assert torch.equal(getattr(fast, name), getattr(slow, name)), name


def test_prepare_edges_kernel_names_an_edge_outside_the_graph(built):
    with pytest.raises(RuntimeError, match=r"edge 1 \(2, 7\) refers to a node outside 0\.\.4"):
        prepare_edges(torch.tensor([[0, 2], [1, 7]]), 5, 2)
