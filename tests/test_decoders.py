"""Decoders beyond the dot product, and the heuristic stack, against hand calculations."""

import numpy as np
import pytest
import torch

from lib.linkpred import kernels
from lib.linkpred.data import synthetic_graph
from lib.linkpred.decoders import DECODERS, MLP_DECODERS, VARIANTS, common_neighbour_sum, common_neighbours_matrix
from lib.linkpred.heuristics import (
    REGISTRY,
    STACK,
    Heuristic,
    HeuristicStack,
    heuristic_scores,
    pair_features,
    register,
    stack_features,
)
from lib.linkpred.model import GatModel, ModelConfig, count_parameters

SMALL = dict(in_channels=16, gat_hidden=8, gat_out=4, gat_levels=2, gat_heads=2, gat_dropout=0.1)
FOUR = ["cosine", "common_neighbours", "adamic_adar", "pref_attach"]  # the hand calculations' heuristics


def _ei(edges):
    e = torch.tensor(edges).t()
    return torch.cat([e, e.flip(0)], 1)


def test_ncn_common_neighbour_sum_equals_a_hand_computed_one():
    # 0-2, 0-3, 1-2, 1-3, 1-4, 2-4: N(0)={2,3}, N(1)={2,3,4}, N(2)={0,1,4}, N(4)={1,2}
    ei = _ei([(0, 2), (0, 3), (1, 2), (1, 3), (1, 4), (2, 4)])
    z = torch.arange(15, dtype=torch.float32).reshape(5, 3)
    pairs = torch.tensor([[0, 0, 2, 3], [1, 4, 1, 4]])
    got = common_neighbour_sum(z, ei, pairs)
    want = torch.stack([z[2] + z[3], z[2], z[4], z[1]])  # (0,1): {2,3}; (0,4): {2}; (2,1): {4}; (3,4): {1}
    assert torch.equal(got, want)
    z.requires_grad_(True)
    common_neighbour_sum(z, ei, pairs).sum().backward()
    assert z.grad[:, 0].tolist() == [0, 1, 2, 1, 1]  # how often each node is a common neighbour


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="the CUDA autocast path needs a GPU")
        ),
    ],
)
def test_ncn_common_neighbour_sum_runs_under_bf16_autocast(device):
    """The CUDA profile trains under bf16 autocast, which on a GPU would cast the sparse product to bf16 (no kernel)."""
    ei = _ei([(0, 2), (0, 3), (1, 2), (1, 3), (1, 4), (2, 4)]).to(device)
    z = torch.arange(15, dtype=torch.float32, device=device).reshape(5, 3)
    pairs = torch.tensor([[0, 0, 2, 3], [1, 4, 1, 4]], device=device)
    with torch.autocast(device, dtype=torch.bfloat16):
        got = common_neighbour_sum(z.to(torch.bfloat16), ei, pairs)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got.float().cpu(), common_neighbour_sum(z, ei, pairs).cpu())


def test_held_out_pairs_never_enter_the_common_neighbour_computation():
    full = [(0, 2), (1, 2), (0, 3), (1, 3)]
    mp = _ei(full[:3])  # (1, 3) is held out of message passing
    s = common_neighbours_matrix(mp, 4, torch.tensor([[0], [1]])).to_dense()
    assert s.tolist() == [[0.0, 0.0, 1.0, 0.0]]  # 3 is a common neighbour only through the held-out edge
    assert common_neighbours_matrix(_ei(full), 4, torch.tensor([[0], [1]])).to_dense().tolist() == [[0, 0, 1, 1]]


@pytest.mark.parametrize("decoder,features", [("hadamard_mlp", False), ("ncn", False), ("ncn", True)])
def test_decoders_have_the_right_shape_and_are_deterministic_for_a_seed(decoder, features):
    g = synthetic_graph(60, 200, in_channels=16, seed=1)
    pairs = torch.tensor([[0, 1, 2, 5], [7, 9, 3, 40]])
    outs = []
    for _ in range(2):
        torch.manual_seed(3)
        m = GatModel(ModelConfig(**SMALL, decoder=decoder, decoder_features=features)).eval()
        outs.append(m.decode(m(g.x, g.edge_index), pairs, g.edge_index, g.x))
    assert outs[0].shape == (4,) and torch.equal(outs[0], outs[1])
    if decoder == "ncn" or features:
        with pytest.raises(ValueError, match="message-passing edges"):
            m.decode(m(g.x, g.edge_index), pairs)


@pytest.mark.parametrize("switch", ["0", "1"])
def test_dot_decoder_reproduces_the_seed_model(monkeypatch, switch):
    """Bit for bit in torch ops; within float rounding in the C++ pair kernel (lib.linkpred.kernels), which sums
    each product in another order."""
    monkeypatch.setenv(kernels.SWITCH, switch)
    same = torch.equal if switch == "0" else lambda a, b: torch.allclose(a, b, atol=1e-6, rtol=1e-6)
    g = synthetic_graph(60, 200, in_channels=16, seed=2)
    torch.manual_seed(0)
    seed_model = GatModel(ModelConfig(**SMALL)).eval()
    torch.manual_seed(0)
    dot = GatModel(ModelConfig(**SMALL, decoder="dot")).eval()
    assert count_parameters(GatModel(ModelConfig())) == 325_312
    assert seed_model.state_dict().keys() == dot.state_dict().keys()
    z = seed_model(g.x, g.edge_index)
    pairs = g.edge_index[:, :50]
    assert same(dot.decode(dot(g.x, g.edge_index), pairs, g.edge_index, g.x), (z[pairs[0]] * z[pairs[1]]).sum(-1))
    zs = [z.detach().clone().requires_grad_(True) for _ in range(2)]  # float32 gradients as the seed's indexing gives
    dot.decode(zs[0], pairs).sum().backward()
    (zs[1][pairs[0]] * zs[1][pairs[1]]).sum(-1).sum().backward()
    assert same(zs[0].grad, zs[1].grad)
    with pytest.raises(ValueError, match="decoder"):
        ModelConfig(decoder="bilinear")


def test_heuristic_stack_features_and_fit():
    ei = _ei([(0, 2), (1, 2), (0, 3), (1, 3), (3, 4)])
    x = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 1.0]])
    f = pair_features(x, ei, 5, torch.tensor([[0], [1]]), features=FOUR)
    # cos 1; CN {2, 3} -> log 3; AA 1/log 2 + 1/log 3; PA 2·2
    np.testing.assert_allclose(f[0], [1.0, np.log(3), np.log1p(1 / np.log(2) + 1 / np.log(3)), np.log(5)])
    graphs = [synthetic_graph(150, 600, in_channels=16, seed=s, graph_id=f"g{s}") for s in range(3)]
    st = HeuristicStack(seed=0).fit(graphs)
    st2 = HeuristicStack(seed=0).fit(graphs)
    assert st.coefficients == st2.coefficients and list(st.coefficients) == list(stack_features(STACK))
    g = synthetic_graph(150, 600, in_channels=16, seed=9)
    s = st.scores(g.x, g.edge_index, g.num_nodes, g.edge_index[:, :10])
    assert s.shape == (10,) and np.isfinite(s).all()
    with pytest.raises(ValueError, match="at least one training graph"):
        HeuristicStack().fit([])


def test_aauc_from_decoder_scores_equals_aauc_for_the_dot_decoder():
    from lib.metrics.aauc import aauc, aauc_scored

    g = synthetic_graph(200, 600, in_channels=16, seed=4)
    z = torch.randn(200, 4, generator=torch.Generator().manual_seed(1))
    for include_self in (False, True):
        a = aauc(z, g.x, r_cos=0.3, t_cos=0.3, seed=5, include_self=include_self)
        b = aauc_scored(
            lambda p: (z[p[0]] * z[p[1]]).sum(-1), g.x, r_cos=0.3, t_cos=0.3, seed=5, include_self=include_self
        )
        assert a.defined and b.value == pytest.approx(a.value, abs=1e-12)
        assert (a.n_pos, a.n_neg, a.n_nodes) == (b.n_pos, b.n_neg, b.n_nodes)


def test_early_stopping_stops_after_patience_and_keeps_the_best_epoch(tmp_path):
    from lib.linkpred.checkpoint import data_fingerprint
    from lib.linkpred.config import TrainConfig
    from lib.linkpred.train import Checkpointing, train_model

    graphs = [synthetic_graph(100, 300, in_channels=16, seed=s, graph_id=f"g{s}") for s in range(4)]
    mcfg = ModelConfig(**SMALL, decoder="ncn", decoder_features=True)
    cfg = TrainConfig(
        epochs=12,
        lr=0.05,
        patience=2,
        select_metric="mrr",
        seed=0,
        log_aauc=False,
        log_eval=False,
        supervision="disjoint",
    )
    fid = data_fingerprint(graphs)
    _, r = train_model("gat_model", mcfg, graphs[:3], graphs[3:], cfg, Checkpointing(tmp_path, fid), progress=False)
    epochs = [v["epoch"] for v in r.val]
    best = max(r.val, key=lambda v: (v["mrr"], v["epoch"]))["epoch"]
    assert r.best_epoch == best
    assert len(epochs) == 12 or epochs[-1] - best == 2  # ran out of epochs, or stopped 2 epochs after the best
    _, again = train_model("gat_model", mcfg, graphs[:3], graphs[3:], cfg, Checkpointing(tmp_path, fid), progress=False)
    assert again.val == r.val and again.best_epoch == r.best_epoch  # a resumed run stops where the first one did


def test_stack_initialised_decoder_scores_exactly_as_the_fitted_stack_until_trained():
    from lib.linkpred.config import TrainConfig
    from lib.linkpred.train import train_model

    graphs = [synthetic_graph(60, 240, in_channels=16, seed=s) for s in range(3)]
    cfg = TrainConfig(epochs=1, seed=4, disjoint_ratio=0.3, supervision="disjoint")
    stack = HeuristicStack(ratio=cfg.disjoint_ratio, seed=cfg.seed).fit(graphs)
    mcfg = ModelConfig(**SMALL, decoder="ncn", decoder_features=True, decoder_init="stack")
    model = GatModel(mcfg).eval()
    model.decoder.init_from_stack(stack)
    g = synthetic_graph(50, 200, in_channels=16, seed=9)
    pairs = torch.randint(0, 50, (2, 300), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        got = model.decode(model(g.x, g.edge_index), pairs, g.edge_index, g.x)
    want = stack.scores(g.x, g.edge_index, 50, pairs)
    assert np.allclose(got.numpy(), want, atol=1e-4)
    # train_model starts from that stack (same ratio and seed) and moves away from it with training
    trained, _ = train_model("gat_model", mcfg, graphs, graphs[:1], cfg, progress=False, max_steps=0)
    assert torch.allclose(trained.decoder.feat_linear.weight, model.decoder.feat_linear.weight)
    trained, _ = train_model("gat_model", mcfg, graphs, graphs[:1], cfg, progress=False)
    assert not torch.allclose(trained.decoder.mlp[-1].weight, torch.zeros_like(trained.decoder.mlp[-1].weight))
    with pytest.raises(ValueError, match="decoder_features=True"):
        ModelConfig(**{**SMALL, "decoder": "ncn", "decoder_init": "stack"})


def test_density_rescaling_multiplies_the_counts_by_the_squared_degree_ratio():
    from lib.linkpred.heuristics import adjacency, density_factor, reference_degree

    ei = _ei([(0, 2), (1, 2), (0, 3), (1, 3), (3, 4)])  # 10 directed entries on 5 nodes: mean degree 2
    x = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 1.0]])
    pair = torch.tensor([[0], [1]])
    assert density_factor(adjacency(ei, 5), 4.0) == 4.0 and density_factor(adjacency(ei, 5), None) == 1.0
    np.testing.assert_array_equal(pair_features(x, ei, 5, pair, ref_degree=2.0), pair_features(x, ei, 5, pair))
    # counts 2 (CN), 1/log 2 + 1/log 3 (AA), 4 (PA) at mean degree 2, read at reference degree 1: a quarter of each
    np.testing.assert_allclose(
        pair_features(x, ei, 5, pair, ref_degree=1.0, features=FOUR)[0],
        [1.0, np.log1p(0.5), np.log1p((1 / np.log(2) + 1 / np.log(3)) / 4), np.log1p(1.0)],
    )
    g = synthetic_graph(150, 600, in_channels=16, seed=0)
    d = adjacency(g.edge_index, g.num_nodes).nnz / g.num_nodes
    assert reference_degree([g, g], held_out=0.3) == pytest.approx(0.7 * d)
    st = HeuristicStack(ratio=0.3, seed=0, rescale=True).fit([g])
    assert st.ref_degree == pytest.approx(0.7 * d) and HeuristicStack(seed=0).fit([g]).ref_degree is None


def test_rescaled_decoder_equals_the_plain_one_at_the_reference_density_and_starts_as_the_rescaled_stack():
    from lib.linkpred.heuristics import adjacency

    g = synthetic_graph(50, 200, in_channels=16, seed=9)
    pairs = torch.randint(0, 50, (2, 300), generator=torch.Generator().manual_seed(0))
    plain = GatModel(ModelConfig(**SMALL, decoder="ncn", decoder_features=True)).eval()
    scaled = GatModel(ModelConfig(**SMALL, decoder="ncn", decoder_features=True, decoder_rescale=True)).eval()
    assert set(scaled.state_dict()) - set(plain.state_dict()) == {"decoder.ref_degree"}  # others' checkpoints unchanged
    scaled.load_state_dict(plain.state_dict(), strict=False)
    with pytest.raises(RuntimeError, match="no reference degree"):
        scaled.decode(scaled(g.x, g.edge_index), pairs, g.edge_index, g.x)
    d = adjacency(g.edge_index, 50).nnz / 50
    with torch.no_grad():
        z = plain(g.x, g.edge_index)
        want = plain.decode(z, pairs, g.edge_index, g.x)
        scaled.decoder.set_reference_degree(d)
        assert torch.allclose(scaled.decode(z, pairs, g.edge_index, g.x), want, atol=1e-6)
        scaled.decoder.set_reference_degree(d / 2)
        assert not torch.allclose(scaled.decode(z, pairs, g.edge_index, g.x), want, atol=1e-3)
    graphs = [synthetic_graph(60, 240, in_channels=16, seed=s) for s in range(3)]
    stack = HeuristicStack(ratio=0.3, seed=4, rescale=True).fit(graphs)
    m = GatModel(
        ModelConfig(**SMALL, decoder="ncn", decoder_features=True, decoder_init="stack", decoder_rescale=True)
    ).eval()
    m.decoder.init_from_stack(stack)
    assert float(m.decoder.ref_degree) == pytest.approx(stack.ref_degree)
    with torch.no_grad():
        got = m.decode(m(g.x, g.edge_index), pairs, g.edge_index, g.x)
    assert np.allclose(got.numpy(), stack.scores(g.x, g.edge_index, 50, pairs), atol=1e-4)
    with pytest.raises(ValueError, match="rescale=True"):
        m.decoder.init_from_stack(HeuristicStack(ratio=0.3, seed=4).fit(graphs))
    with pytest.raises(ValueError, match="decoder_rescale=True needs an MLP decoder"):
        ModelConfig(decoder="dot", decoder_rescale=True)


def test_pair_structure_matches_networkx_and_the_cache_never_serves_another_graph_or_pair_set():
    import networkx as nx

    from lib.linkpred.heuristics import heuristic_scores, pair_structure

    g = synthetic_graph(80, 300, in_channels=8, seed=4)
    G = nx.Graph(g.edge_index.t().tolist())
    G.add_nodes_from(range(80))
    gen = torch.Generator().manual_seed(0)
    pairs = torch.randint(0, 80, (2, 200), generator=gen)
    pairs = pairs[:, pairs[0] != pairs[1]]
    st = pair_structure(g.edge_index, 80, pairs, cache=False)
    uv = pairs.t().tolist()
    assert st.cn.tolist() == [len(list(nx.common_neighbors(G, u, v))) for u, v in uv]
    np.testing.assert_allclose(st.aa, [p for _, _, p in nx.adamic_adar_index(G, uv)], rtol=1e-12)
    assert st.pa.tolist() == [p for _, _, p in nx.preferential_attachment(G, uv)]
    for k, (u, v) in enumerate(uv[:20]):  # the indicator the NCN sum reads is the same intersection
        assert set(st.common[k].indices.tolist()) == set(nx.common_neighbors(G, u, v))
    # cached and uncached agree; a graph with an edge less, or other pairs, is never served the cached entry
    cached = heuristic_scores("common_neighbours", g.x, g.edge_index, 80, pairs)
    assert cached.tolist() == st.cn.tolist()
    hub = int(torch.bincount(g.edge_index[0]).argmax())
    keep = (g.edge_index[0] != hub) & (g.edge_index[1] != hub)  # the best-connected node loses every edge
    thinner = g.edge_index[:, keep]
    G2 = nx.Graph(thinner.t().tolist())
    G2.add_nodes_from(range(80))
    want = [len(list(nx.common_neighbors(G2, u, v))) for u, v in uv]
    assert want != st.cn.tolist()
    assert heuristic_scores("common_neighbours", g.x, thinner, 80, pairs).tolist() == want
    flipped = pairs.flip(0)[:, :50]
    assert heuristic_scores("common_neighbours", g.x, g.edge_index, 80, flipped).tolist() == st.cn[:50].tolist()


def test_ncn_feat_scores_the_same_from_the_cache_as_computed_afresh():
    from lib.linkpred import heuristics

    g = synthetic_graph(60, 200, in_channels=16, seed=5)
    pairs = torch.randint(0, 60, (2, 40), generator=torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    m = GatModel(ModelConfig(**SMALL, decoder="ncn", decoder_features=True)).eval()
    with torch.no_grad():
        z = m(g.x, g.edge_index)
        heuristics._STRUCTURE.items.clear()
        cold = m.decode(z, pairs, g.edge_index, g.x)
        assert len(heuristics._STRUCTURE.items) == 1  # eval-mode pairs are cached ...
        warm = m.decode(z, pairs, g.edge_index, g.x)
        m.train()
        m.decode(z, pairs[:, :10], g.edge_index, g.x)
        assert len(heuristics._STRUCTURE.items) == 1  # ... a training step's are not
    assert torch.equal(cold, warm)


def test_cosine_is_float64_exact_and_its_cache_follows_the_tensor_and_its_changes():
    import torch.nn.functional as F

    from lib.linkpred.heuristics import cosine_scores

    g = synthetic_graph(50, 100, in_channels=16, seed=6)
    x = g.x.clone()
    x[3] = 0.0  # a zero vector: cosine 0, as F.normalize gives
    for n in (10, 40):  # fewer pairs than half the nodes (rows used only) and more (every row's norm)
        pairs = torch.randint(0, 50, (2, n), generator=torch.Generator().manual_seed(n))
        pairs[0, 0] = 3
        xn = F.normalize(x.double(), dim=1)
        want = (xn[pairs[0]] * xn[pairs[1]]).sum(1).numpy()
        np.testing.assert_allclose(cosine_scores(x, pairs), want, rtol=0, atol=1e-15)
        assert cosine_scores(x, pairs)[0] == 0.0
    x[pairs[0, 1]] = -x[pairs[0, 1]]  # in place: the cached scores of the old values must not be served
    assert cosine_scores(x, pairs)[1] == -want[1]
    y = x.clone()  # another tensor with equal values gets its own entry, with the same scores
    np.testing.assert_array_equal(cosine_scores(y, pairs), cosine_scores(x, pairs))


def test_resource_allocation_and_a_stack_that_reads_it():
    ei = _ei([(0, 2), (1, 2), (0, 3), (1, 3), (3, 4)])  # N(0) ∩ N(1) = {2, 3}; deg 2 = 2, deg 3 = 3
    x = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 1.0]])
    pair = torch.tensor([[0, 0], [1, 4]])  # (0, 4): common neighbour 3
    np.testing.assert_allclose(heuristic_scores("resource_allocation", x, ei, 5, pair), [1 / 2 + 1 / 3, 1 / 3])
    # a count of first order in the mean degree: read at half the density, half of it
    f = pair_features(x, ei, 5, pair, ref_degree=1.0, features=["resource_allocation"])
    np.testing.assert_allclose(f[:, 0], np.log1p(np.array([1 / 2 + 1 / 3, 1 / 3]) / 2))
    assert "resource_allocation" not in STACK  # the default stack is the four the published runs fitted
    graphs = [synthetic_graph(150, 600, in_channels=16, seed=s, graph_id=f"g{s}") for s in range(3)]
    st = HeuristicStack(seed=0, features=(*STACK, "resource_allocation")).fit(graphs)
    assert list(st.coefficients) == [*stack_features(), "log1p_ra"]
    g = synthetic_graph(150, 600, in_channels=16, seed=9)
    assert st.scores(g.x, g.edge_index, g.num_nodes, g.edge_index[:, :10]).shape == (10,)
    with pytest.raises(ValueError, match="heuristic 'katz' is unknown"):
        HeuristicStack(features=["katz"])


def test_a_registered_heuristic_is_scored_and_stacked_by_name():
    h = Heuristic(
        "degree_sum",
        "deg(u) + deg(v)",
        lambda v: v.structure.deg[v.pairs[0].numpy()] + v.structure.deg[v.pairs[1].numpy()],
        "log1p_ds",
        1,
        np.log1p,
    )
    try:
        register(h)
        with pytest.raises(ValueError, match="registered already"):
            register(h)
        ei = _ei([(0, 2), (1, 2), (0, 3), (1, 3), (3, 4)])
        x = torch.ones(5, 2)
        assert heuristic_scores("degree_sum", x, ei, 5, torch.tensor([[0], [3]])).tolist() == [5.0]
        assert pair_features(x, ei, 5, torch.tensor([[0], [3]]), features=["cosine", "degree_sum"]).shape == (1, 2)
    finally:
        REGISTRY.pop("degree_sum", None)


def test_the_decoder_registry_gives_every_decoder_a_variant_and_the_feature_width_follows_the_stack():
    assert set(MLP_DECODERS) == set(DECODERS) - {"dot"} and all(VARIANTS[d]["decoder"] == d for d in DECODERS)
    assert ModelConfig.__dataclass_fields__["decoder"].metadata["choices"] == tuple(DECODERS)
    m = GatModel(ModelConfig(**SMALL, decoder="ncn", decoder_features=True))
    width = len(m.cfg.stack_features)
    assert m.decoder.feat_linear.in_features == width
    assert m.decoder.mlp[0].in_features == DECODERS["ncn"].width(SMALL["gat_out"]) + width
    with pytest.raises(ValueError, match="needs an MLP decoder"):
        ModelConfig(**SMALL, decoder="dot", decoder_features=True)
