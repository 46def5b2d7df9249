"""Device and compute-precision resolution (lib.common.device) and its record in params.json (lib.common.runinfo)."""

import json

import pytest
import torch

from lib.common import device as dev
from lib.common.runinfo import write_params_json


def test_auto_picks_fp32_on_a_cpu_without_native_bf16(monkeypatch):
    monkeypatch.setattr(dev, "cpu_bf16_support", lambda: (False, "simulated CPU without bf16"))
    p = dev.resolve_precision("auto", "cpu")
    assert (p.name, p.dtype) == ("fp32", None) and "simulated CPU without bf16" in p.reason
    assert not p.grad_scaling


def test_auto_picks_bf16_on_a_cpu_with_fast_bf16(monkeypatch):
    monkeypatch.setattr(dev, "cpu_bf16_support", lambda: (True, "simulated AMX"))
    p = dev.resolve_precision("auto", "cpu")
    assert (p.name, p.dtype) == ("bf16", torch.bfloat16) and "fast bf16" in p.reason
    assert not p.grad_scaling  # bf16 keeps float32's exponent range


@pytest.mark.parametrize(
    ("flags", "onednn", "fast"),
    [
        ("fpu avx2 avx512f avx512bw avx512_vnni", True, False),  # AVX-512 without BF16: oneDNN says yes, emulated
        ("fpu avx2 avx512f avx512bw avx512_bf16", False, False),  # bf16 dot products, no faster matrix products
        ("fpu avx2 avx512f avx512_bf16 amx_tile amx_bf16", False, True),
        ("fp asimd bf16 i8mm", False, True),  # Arm BF16 (read from "Features" where "flags" is absent)
        (None, True, True),  # flags unreadable: oneDNN's answer
        (None, False, False),
    ],
)
def test_fast_bf16_is_read_from_the_cpu_flags_not_onednn(monkeypatch, flags, onednn, fast):
    arm = flags is not None and "asimd" in flags
    monkeypatch.setattr(dev, "cpuinfo", lambda field: flags if field == ("Features" if arm else "flags") else None)
    monkeypatch.setattr(dev, "_onednn_bf16", lambda: onednn)
    assert dev.cpu_bf16_support()[0] is fast
    assert dev.resolve_precision("auto", "cpu").name == ("bf16" if fast else "fp32")


def test_explicit_precisions_are_honoured_and_unknown_ones_are_named(monkeypatch):
    monkeypatch.setattr(dev, "cpu_bf16_support", lambda: (False, "simulated"))
    assert dev.resolve_precision("bf16", "cpu").name == "bf16"  # emulated, but asked for
    assert "expect a slowdown" in dev.resolve_precision("bf16", "cpu").reason
    assert dev.resolve_precision("fp16", "cpu").grad_scaling
    assert dev.resolve_precision("fp32", "cpu").dtype is None
    with pytest.raises(ValueError, match="precision='half' is unknown"):
        dev.resolve_precision("half", "cpu")


def test_autocast_context_matches_the_precision():
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    with dev.resolve_precision("bf16", "cpu").autocast("cpu"):
        assert (x @ w).dtype == torch.bfloat16
    with dev.resolve_precision("fp32", "cpu").autocast("cpu"):
        assert (x @ w).dtype == torch.float32


def test_params_json_records_what_precision_resolved_to_and_why(tmp_path, monkeypatch):
    monkeypatch.setattr(dev, "cpu_bf16_support", lambda: (False, "simulated CPU without bf16"))
    info = json.loads(write_params_json(tmp_path, {"device": "cpu", "precision": "auto"}).read_text())
    assert info["params"]["precision"] == "auto"
    assert info["precision"] == {
        "requested": "auto",
        "resolved": "fp32",
        "dtype": "torch.float32",
        "reason": "auto on CPU: simulated CPU without bf16, so float32",
    }
    monkeypatch.setattr(dev, "cpu_bf16_support", lambda: (True, "simulated AMX"))
    info = json.loads(write_params_json(tmp_path, {"device": "cpu", "precision": "auto"}).read_text())
    assert info["precision"]["resolved"] == "bf16" and info["precision"]["dtype"] == "torch.bfloat16"
    assert "precision" not in json.loads(write_params_json(tmp_path, {"device": "cpu"}).read_text())


def test_set_threads_follows_omp_num_threads_then_the_cores_and_exports_them(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        assert dev.set_threads(0) == 1 and torch.get_num_threads() == 1
        monkeypatch.delenv("OMP_NUM_THREADS")
        import os

        cores = len(os.sched_getaffinity(0))
        assert dev.set_threads(0) == cores and torch.get_num_threads() == cores
        assert os.environ["OMP_NUM_THREADS"] == os.environ["MKL_NUM_THREADS"] == str(cores)  # for child processes
        assert dev.set_threads(1) == 1 and os.environ["OMP_NUM_THREADS"] == "1"
        for bad in (-1, 1.5, "2", True):
            with pytest.raises(ValueError, match="threads=.*use 0 .* or a positive count"):
                dev.set_threads(bad)
    finally:
        torch.set_num_threads(before)


def test_every_notebook_sets_its_threads_from_the_threads_parameter():
    import nbformat

    from lib.common.params import notebook_parameters, numbered_notebooks

    for nb in numbered_notebooks():
        assert notebook_parameters(nb)["threads"]["default"] == "0", nb.name
        code = "\n".join(c.source for c in nbformat.read(nb, as_version=4).cells if c.cell_type == "code")
        assert "set_threads(threads)" in code, f"{nb.name} does not call set_threads(threads)"
        assert "torch.set_num_threads" not in code, f"{nb.name} sets torch threads by itself"
