"""The structural-count decoders: exact distance-pair and walk counts against a breadth-first search, the MPLP
signature estimates against them, and both decoders in a model (shapes, training, saving)."""

import io
import itertools
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import torch

from lib.common.params import load_yaml
from lib.linkpred.config import BeyondParams, TrainConfig
from lib.linkpred.data import synthetic_graph
from lib.linkpred.decoders import COUNT_FEATURES, DECODERS, VARIANTS, PairGraph
from lib.linkpred.heuristics import (
    REGISTRY,
    HeuristicStack,
    adjacency,
    heuristic_scores,
    pair_features,
    stack_features,
)
from lib.linkpred.model import GatModel, ModelConfig
from lib.linkpred.signature_counts import SignatureCounts, signatures
from lib.linkpred.train import EncodeDecode, init_model, step_loss

SMALL = dict(in_channels=16, gat_hidden=8, gat_out=4, gat_levels=2, gat_heads=2, gat_dropout=0.1)
NEW = ("dist_1_2", "dist_2_1", "dist_2_2", "walks_3")


def edge_index_of(graph: nx.Graph) -> torch.Tensor:
    e = torch.tensor(list(graph.edges), dtype=torch.long).t().reshape(2, -1)
    return torch.cat([e, e.flip(0)], 1)


def brute_force(graph: nx.Graph, u: int, v: int) -> dict:
    """The counts by breadth-first search and by walking every walk of length 3."""
    du = nx.single_source_shortest_path_length(graph, u, cutoff=2)
    dv = nx.single_source_shortest_path_length(graph, v, cutoff=2)
    at = {(i, j): sum(1 for k in graph if du.get(k) == i and dv.get(k) == j) for i in (1, 2) for j in (1, 2)}
    walks = sum(1 for a in graph[u] for b in graph[a] if v in graph[b])
    return {
        "common_neighbours": at[1, 1],
        "dist_1_2": at[1, 2],
        "dist_2_1": at[2, 1],
        "dist_2_2": at[2, 2],
        "walks_3": walks,
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_counts_equal_a_breadth_first_search_on_random_graphs(seed):
    graph = nx.gnp_random_graph(30, 0.12, seed=seed)
    ei, x = edge_index_of(graph), torch.ones(30, 2)
    pairs = torch.tensor(list(itertools.combinations(range(30), 2))).t()  # linked and unlinked pairs, both orders
    pairs = torch.cat([pairs, pairs.flip(0)], 1)
    want = [brute_force(graph, int(u), int(v)) for u, v in pairs.t()]
    for name in ("common_neighbours", *NEW):
        got = heuristic_scores(name, x, ei, 30, pairs)
        np.testing.assert_array_equal(got, [w[name] for w in want], err_msg=name)
        assert got.max() > 0, name  # the graph has pairs with every kind of count
    uncached = pair_features(x, ei, 30, pairs, features=COUNT_FEATURES, cache=False)
    np.testing.assert_array_equal(uncached, np.log1p([[w[n] for n in COUNT_FEATURES] for w in want]))


def test_a_held_out_edge_never_enters_the_counts():
    # 0-2-3-1 in message passing; 0-3 is held out: on the full graph 3 would be a common neighbour of (0, 1)
    mp = edge_index_of(nx.Graph([(0, 2), (2, 3), (3, 1)]))
    full, x = edge_index_of(nx.Graph([(0, 2), (2, 3), (3, 1), (0, 3)])), None
    pair = torch.tensor([[0], [1]])
    got = {n: heuristic_scores(n, x, mp, 4, pair)[0] for n in ("common_neighbours", *NEW)}
    assert got == {"common_neighbours": 0, "dist_1_2": 1, "dist_2_1": 1, "dist_2_2": 0, "walks_3": 1}
    leaked = {n: heuristic_scores(n, x, full, 4, pair)[0] for n in ("common_neighbours", *NEW)}
    assert leaked != got  # so the check above would see a leak
    z = torch.zeros(4, 3)
    graph = PairGraph(mp, adjacency(mp, 4), None, True)
    counts_input = DECODERS["counts"].pair_input(z, pair, graph)
    assert counts_input[0, 3:].tolist() == pytest.approx(np.log1p([got[n] for n in COUNT_FEATURES]).tolist())


def test_the_counts_rescale_with_their_power_of_the_mean_degree_and_stack():
    g = synthetic_graph(150, 600, in_channels=16, seed=3)
    pairs = g.edge_index[:, :20]
    raw = np.stack([heuristic_scores(n, g.x, g.edge_index, 150, pairs) for n in NEW], 1)
    half = g.edge_index.size(1) / 150 / 2  # a reference at half this graph's mean degree
    f = pair_features(g.x, g.edge_index, 150, pairs, ref_degree=half, features=NEW)
    np.testing.assert_allclose(f, np.log1p(raw * 0.5 ** np.array([3, 3, 4, 3])))
    graphs = [synthetic_graph(150, 600, in_channels=16, seed=s, graph_id=f"g{s}") for s in range(3)]
    st = HeuristicStack(seed=0, features=("cosine", *NEW)).fit(graphs)
    assert list(st.coefficients) == ["cosine", "log1p_d12", "log1p_d21", "log1p_d22", "log1p_w3"]
    assert stack_features(NEW) == tuple(REGISTRY[n].feature for n in NEW)


def test_signature_estimates_approach_the_exact_counts_as_the_signatures_widen():
    graph = nx.gnp_random_graph(40, 0.1, seed=5)
    ei = edge_index_of(graph)
    pairs = torch.tensor([(u, v) for u, v in itertools.combinations(range(40), 2) if not graph.has_edge(u, v)]).t()
    exact = np.stack([heuristic_scores(n, None, ei, 40, pairs) for n in ("common_neighbours", "walks_3", "walks_3")], 1)
    torch.manual_seed(0)
    est = SignatureCounts(dim=16384)(pairs, adjacency(ei, 40), "cpu")
    counts = (torch.sign(est) * torch.expm1(est.abs())).numpy()  # undo the log scale
    np.testing.assert_allclose(counts[:, :3], exact, atol=0.6)
    deg = np.array([graph.degree(i) for i in range(40)])
    np.testing.assert_allclose(counts[:, 4:], np.stack([deg[pairs[0]], deg[pairs[1]]], 1), rtol=1e-5)
    held = torch.cat([ei, torch.tensor([[0, 1], [1, 0]])], 1)  # a link more changes the estimates of (0, 1) only
    torch.manual_seed(0)
    est_held = SignatureCounts(dim=16384)(pairs, adjacency(held, 40), "cpu")
    assert not torch.equal(est, est_held)


def test_signatures_are_fixed_by_the_seed_and_do_not_depend_on_the_graph_size():
    s = signatures(7, 3000)
    assert s.shape == (3000, 256) and set(s.unique().tolist()) == {-1 / 16, 1 / 16}
    assert torch.equal(signatures(7, 1500), s[:1500]) and not torch.equal(signatures(8, 1500), s[:1500])
    module = SignatureCounts()
    assert torch.equal(module.signatures(30, "cpu"), module.signatures(2000, "cpu")[:30])
    gram = s[:500] @ s[:500].t()
    assert torch.allclose(gram.diagonal(), torch.ones(500)) and (gram - torch.eye(500)).abs().max() < 0.4


@pytest.mark.parametrize("variant", ["counts", "mplp", "counts_stack", "mplp_stack"])
def test_decoders_score_one_logit_per_pair_deterministically(variant):
    graphs = [synthetic_graph(80, 300, in_channels=16, seed=s, graph_id=f"g{s}") for s in range(2)]
    g, pairs = graphs[0], torch.tensor([[0, 1, 2, 5, 9], [7, 9, 3, 40, 9]])
    cfg = TrainConfig(seed=0, supervision="disjoint")
    outs = []
    for _ in range(2):
        m = init_model("gat_model", ModelConfig(**SMALL, **VARIANTS[variant]), graphs, cfg, "cpu").eval()
        outs.append(m.decode(m(g.x, g.edge_index), pairs, g.edge_index, g.x))
    assert outs[0].shape == (5,) and torch.isfinite(outs[0]).all() and torch.equal(outs[0], outs[1])
    assert m.decoder.mlp[0].in_features == DECODERS[VARIANTS[variant]["decoder"]].width(SMALL["gat_out"]) + (
        len(m.decoder.feat_linear.weight[0]) if m.decoder.features else 0
    )
    with pytest.raises(ValueError, match="message-passing edges"):
        m.decode(m(g.x, g.edge_index), pairs)


@pytest.mark.parametrize("decoder", ["counts", "mplp"])
def test_a_model_with_the_decoder_trains_on_a_toy_task(decoder):
    g = synthetic_graph(200, 800, in_channels=16, seed=1)
    cfg = TrainConfig(seed=0, supervision="disjoint", lr=0.01)
    model = init_model("gat_model", ModelConfig(**SMALL, decoder=decoder), [g], cfg, "cpu")
    run, opt = EncodeDecode(model), torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for step in range(30):
        loss = step_loss(run, g, cfg, "gat_model", 0, step % 3, "cpu")["loss"]  # three fixed splits, seen ten times
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.mean(losses[-3:]) < 0.8 * np.mean(losses[:3])


def test_a_saved_mplp_model_reloads_with_its_signatures():
    g = synthetic_graph(80, 300, in_channels=16, seed=2)
    pairs = g.edge_index[:, :30]
    torch.manual_seed(0)
    saved = GatModel(ModelConfig(**SMALL, decoder="mplp")).eval()
    buf = io.BytesIO()
    torch.save(saved.state_dict(), buf)
    torch.manual_seed(1)
    other = GatModel(ModelConfig(**SMALL, decoder="mplp")).eval()
    assert "decoder.pair_module.seed" in saved.state_dict()
    mine, theirs = saved.decoder.pair_module, other.decoder.pair_module
    assert not torch.equal(theirs.signatures(80, "cpu"), mine.signatures(80, "cpu"))
    want = saved.decode(saved(g.x, g.edge_index), pairs, g.edge_index)
    assert not torch.equal(other.decode(other(g.x, g.edge_index), pairs, g.edge_index), want)
    buf.seek(0)
    other.load_state_dict(torch.load(buf))
    assert torch.equal(theirs.signatures(80, "cpu"), mine.signatures(80, "cpu"))
    assert torch.equal(other.decode(other(g.x, g.edge_index), pairs, g.edge_index), want)


def test_the_count_variants_exist_the_demo_leaves_them_out_and_the_beyond_profile_runs_the_stacked_ones():
    new = {"counts", "mplp", *(f"{d}_stack{m}" for d in ("counts", "mplp") for m in ("", "_uniform", "_matched"))}
    assert new <= set(VARIANTS)
    for v in new:
        ModelConfig(**SMALL, **VARIANTS[v])  # a valid model setting
    assert not new & set(BeyondParams().beyond_variants)  # the demo's default stays four decoders
    beyond = set(load_yaml(Path(__file__).parents[1] / "params" / "beyond.yaml")["beyond_variants"])
    assert {v for v in new if "_stack" in v} <= beyond
    assert not {"counts", "mplp"} & beyond
