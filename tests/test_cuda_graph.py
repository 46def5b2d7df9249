"""The CUDA-graph training step (lib.linkpred.cuda_graph): its clear refusals everywhere, and on a GPU (skipped
without one) the same weights as the eager step after the same steps."""

import pytest
import torch
import torch.nn.functional as F

from lib.linkpred.cuda_graph import GraphedTrainStep
from lib.linkpred.data import synthetic_graph
from lib.linkpred.fused_gat import prepare_edges
from lib.linkpred.model import GatModel
from lib.linkpred.sampling import sample_negatives


def _graph(n: int = 300, e: int = 900):
    g = synthetic_graph(n, e, seed=0)
    neg = sample_negatives(g.edge_index, n, g.edge_index.size(1) // 2, seed=1)
    pairs = torch.cat([g.edge_index, neg], 1)
    labels = torch.cat([torch.ones(g.edge_index.size(1)), torch.zeros(neg.size(1))])
    return g.x, g.edge_index, pairs, labels


def test_prepared_edges_give_the_same_encoding():
    x, ei, _, _ = _graph()
    torch.manual_seed(0)
    model = GatModel(gat_impl="fused").eval()
    with torch.no_grad():
        assert torch.equal(model(x, ei), model.encode(x, ei, prepare_edges(ei, x.size(0), 2)))


def test_prepared_edges_are_refused_by_the_pyg_model():
    x, ei, _, _ = _graph()
    with pytest.raises(ValueError, match="gat_impl='fused'"):
        GatModel(gat_impl="pyg").encode(x, ei, prepare_edges(ei, x.size(0), 2))


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({}, "needs its tensors on a CUDA device"),
        ({"gat_impl": "pyg"}, "gat_impl='fused'"),
        ({"decoder": "hadamard_mlp"}, "dot decoder, not 'hadamard_mlp'"),
    ],
)
def test_refusals_name_the_fix(overrides, match):
    x, ei, pairs, labels = _graph()
    with pytest.raises(ValueError, match=match):
        GraphedTrainStep(GatModel(**overrides), x, ei, pairs, labels)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_replays_train_as_the_eager_step(precision):
    """Without dropout (so no random draw differs), 3 warm-up steps and 5 replays give the weights of 8 eager
    AdamW steps from the same start, and a new pair set of the same size is taken at the next replay."""
    dev = torch.device("cuda")
    x, ei, pairs, labels = (t.to(dev) for t in _graph())
    torch.manual_seed(0)
    graphed = GatModel(gat_impl="fused", gat_dropout=0.0).to(dev)
    eager = GatModel(gat_impl="fused", gat_dropout=0.0).to(dev)
    eager.load_state_dict(graphed.state_dict())
    step = GraphedTrainStep(graphed, x, ei, pairs, labels, precision=precision, warmup=3)
    losses = [float(step.step()) for _ in range(5)]
    opt = torch.optim.AdamW(eager.parameters(), lr=1e-3, weight_decay=0.01)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    eager_losses = []
    for _ in range(8):
        with torch.autocast("cuda", dtype=dtype, enabled=precision == "bf16"):
            loss = F.binary_cross_entropy_with_logits(eager.decode(eager(x, ei), pairs).float(), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        eager_losses.append(float(loss))
    tol = 1e-4 if precision == "fp32" else 2e-2
    assert losses == pytest.approx(eager_losses[3:], abs=tol)
    for (name, a), b in zip(graphed.state_dict().items(), eager.state_dict().values()):
        assert torch.allclose(a, b, atol=tol, rtol=tol), name
    flipped = pairs.flip(0)
    before = float(step.step())
    assert float(step.step(flipped)) != pytest.approx(before, abs=0)  # the new pairs were read
    with pytest.raises(ValueError, match="captured for"):
        step.step(pairs[:, :10])
