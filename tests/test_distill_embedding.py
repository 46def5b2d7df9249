"""Stage 5's embedding objective: the loss, the batch plan, a short training run (loss falls, seeded, resumable),
the saved student under stage 2's loader, the layer-dropped assistant, pruning and rounding.

Tiny BERT configs with a hand-written vocabulary, except the one test of the real all-MiniLM-L6-v2 layers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import BertConfig, BertModel, BertTokenizer

from lib.distill import embedding
from lib.distill.eval import encode
from lib.distill.losses import DistillError
from lib.distill.models import Encoder, save_sentence_transformer
from lib.embed.encoder import EmbedError

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far", "away", "big", "red", "ball", "paris", "river"]
TEXTS = [
    "the cat",
    "a dog",
    "big red ball",
    "paris",
    "the river",
    "a cat sat on the mat",
    "the dog ran far away",
    "red river",
    "big cat",
    "a ball",
]


def tiny(tmp_path, hidden=32, seed=0, dropout=0.1) -> Encoder:
    p = tmp_path / "vocab.txt"
    p.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    tok = BertTokenizer(str(p), do_lower_case=True)
    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=2 * hidden,
        max_position_embeddings=32,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    return Encoder(BertModel(cfg, add_pooling_layer=False).eval(), tok, "bert", "tiny")


def embed(enc: Encoder, texts: list[str], max_seq_len: int = 64) -> np.ndarray:
    """Unit-length mean-pooled embeddings [N, D] of an in-memory encoder (eval mode)."""
    enc.model.eval()
    x = encode(enc, texts, max_seq_len)
    return x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-12)


def mean_cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    return float((a * (b / np.linalg.norm(b, axis=1, keepdims=True))).sum(1).mean())


def targets(n=len(TEXTS), width=32, seed=1) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, width)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("loss", embedding.LOSSES)
@pytest.mark.parametrize("w_rel", [0.0, 1.0])
def test_loss_is_zero_for_identical_embeddings_and_positive_otherwise(loss, w_rel):
    g = torch.Generator().manual_seed(0)
    t = torch.randn(6, 8, generator=g)
    same = embedding.embedding_loss(t.clone(), t, loss, w_rel)
    assert float(same["loss"]) == pytest.approx(0.0, abs=1e-6)
    assert float(embedding.embedding_loss(3 * t, t, loss, w_rel)["loss"]) == pytest.approx(
        0.0, abs=1e-6
    )  # unit vectors
    other = embedding.embedding_loss(torch.randn(6, 8, generator=g), t, loss, w_rel)
    assert float(other["loss"]) > 0.05
    if w_rel:
        assert float(other["L_rel"]) > 0


def test_loss_values_by_hand_and_width_check():
    s, t = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    terms = embedding.embedding_loss(s, t, "cosine+mse")
    assert float(terms["L_cos"]) == pytest.approx(1.0) and float(terms["L_mse"]) == pytest.approx(1.0)
    with pytest.raises(EmbedError, match="projection"):
        embedding.embedding_loss(torch.ones(2, 3), torch.ones(2, 4))
    with torch.no_grad():
        assert (
            float(embedding.embedding_loss(torch.ones(2, 3), torch.ones(2, 4), proj=torch.nn.Linear(3, 4))["loss"]) >= 0
        )
    with pytest.raises(EmbedError, match="loss='l1'"):
        embedding.embedding_loss(s, t, "l1")


def test_mixture_plan_follows_the_weights_and_covers_a_source_before_repeating():
    plan = embedding.mixture_plan({"a": 10, "b": 50, "c": 5}, {"a": 1, "b": 3, "c": 0}, steps=200, batch_size=8, seed=3)
    flat = np.concatenate(plan)
    assert len(plan) == 200 and all(len(b) == 8 for b in plan)
    share_a = np.mean(flat < 10)
    assert 0.2 < share_a < 0.3 and not np.any(flat >= 60)  # c (indices 60..64) has weight 0
    a = flat[flat < 10]
    assert sorted(a[:10]) == list(range(10))  # one epoch of a before any repeat
    assert all(
        np.array_equal(x, y)
        for x, y in zip(plan, embedding.mixture_plan({"a": 10, "b": 50, "c": 5}, {"a": 1, "b": 3, "c": 0}, 200, 8, 3))
    )
    with pytest.raises(DistillError, match="draw nothing"):
        embedding.mixture_plan({"a": 10}, {"a": 0}, 2, 2, 0)


def _run(tmp_path, steps=30, seed=0, checkpoint=None, max_steps=None, width=32):
    enc = tiny(tmp_path)
    cfg = embedding.EmbedDistillConfig(
        steps=steps, batch_size=4, max_seq_len=16, lr=3e-3, warmup_frac=0.1, seed=seed, train_word_embeddings=True
    )
    plan = embedding.mixture_plan({"t": len(TEXTS)}, {"t": 1}, steps, 4, seed)
    res = embedding.train_embedding_student(
        enc,
        TEXTS,
        targets(width=width),
        plan,
        cfg,
        checkpoint=checkpoint,
        checkpoint_every=5,
        max_steps=max_steps,
        progress=False,
    )
    return enc, res


def test_training_lowers_the_loss_and_is_deterministic_under_a_seed(tmp_path):
    enc, res = _run(tmp_path)
    before = mean_cosine(embed(tiny(tmp_path), TEXTS, 16), targets())
    after = mean_cosine(embed(enc, TEXTS, 16), targets())
    loss = res["losses"].loss
    assert res["complete"] and loss.head(5).mean() > 1.5 * loss.tail(5).mean() and after > before + 0.2
    enc2, res2 = _run(tmp_path)
    pd.testing.assert_frame_equal(res["losses"], res2["losses"])
    assert all(torch.equal(a, b) for a, b in zip(enc.model.state_dict().values(), enc2.model.state_dict().values()))
    _, res3 = _run(tmp_path, seed=1)
    assert not res3["losses"].loss.equals(loss)


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    full, ref = _run(tmp_path, width=16)
    ck = tmp_path / "ck.pt"
    _, part = _run(tmp_path, checkpoint=ck, max_steps=12, width=16)
    assert not part["complete"] and part["steps"] == 12 and ck.is_file()
    resumed, res = _run(tmp_path, checkpoint=ck, width=16)  # resumes from step 10, the last checkpoint
    assert res["complete"] and res["steps"] == 20
    pd.testing.assert_frame_equal(res["losses"], ref["losses"])
    assert all(torch.equal(a, b) for a, b in zip(full.model.state_dict().values(), resumed.model.state_dict().values()))
    assert torch.equal(res["proj"].weight, ref["proj"].weight)  # 32 -> 16: the projection is trained and resumed
    with pytest.raises(ValueError, match="other settings"):
        _run(tmp_path, steps=40, checkpoint=ck, width=16)


def test_a_checkpoint_of_another_layout_is_moved_aside_and_the_run_starts_over(tmp_path):
    full, ref = _run(tmp_path, steps=10)
    ck = tmp_path / "ck.pt"
    torch.save({"model": full.model.state_dict(), "step": 5, "rows": []}, ck)
    with pytest.warns(
        UserWarning,
        match=r"ck\.pt could not be read \(it is not a training-loop/1 checkpoint\); "
        r"moved aside to ck\.pt\.corrupt, training starts over",
    ):
        again, res = _run(tmp_path, steps=10, checkpoint=ck)
    assert res["complete"] and res["steps"] == 10 and (tmp_path / "ck.pt.corrupt").is_file()
    pd.testing.assert_frame_equal(res["losses"], ref["losses"])
    assert all(torch.equal(a, b) for a, b in zip(full.model.state_dict().values(), again.model.state_dict().values()))


def test_saved_student_loads_with_stage_2s_loader_at_the_right_width(tmp_path):
    from lib.embed.encoder import encode, load_model

    enc = tiny(tmp_path, hidden=24, dropout=0.0)
    folder = save_sentence_transformer(enc, tmp_path / "st", max_seq_len=16, normalize=True)
    model = load_model(folder)
    x, _ = encode(model, TEXTS)
    assert x.shape == (len(TEXTS), 24)
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)
    assert np.allclose(x, embed(enc, TEXTS, 16), atol=1e-5)


def test_assistant_student_keeps_the_chosen_layers_of_all_minilm():
    full = embedding.assistant_student([0, 1, 2, 3, 4, 5])
    part = embedding.assistant_student([1, 5])
    assert part.num_layers == 2 and part.model.config.num_hidden_layers == 2
    for mine, theirs in ((0, 1), (1, 5)):
        a, b = part.model.encoder.layer[mine].state_dict(), full.model.encoder.layer[theirs].state_dict()
        assert all(torch.equal(a[k], b[k]) for k in a)
    titles = ["Paris", "Climate change", "Isaac Newton"]
    assert mean_cosine(embed(full, titles), embedding.target_embeddings(titles, progress=False)) == pytest.approx(
        1.0, abs=1e-5
    )
    with pytest.raises(DistillError, match="layers=\\[6\\]"):
        embedding.assistant_student([6])


def test_pruning_the_feed_forward_keeps_the_strongest_neurons_and_saves_and_loads(tmp_path):
    from lib.embed.encoder import encode, load_model

    enc = tiny(tmp_path, hidden=16, dropout=0.0)  # intermediate 32
    layer = enc.model.encoder.layer[0]
    w_in, w_out = layer.intermediate.dense.weight.clone(), layer.output.dense.weight.clone()
    score = w_in.norm(dim=1) * w_out.norm(dim=0)
    embedding.prune_feed_forward(enc.model, 32)  # every neuron kept: the same function
    before = embed(enc, TEXTS, 16)
    embedding.prune_feed_forward(enc.model, 8)
    keep = score.topk(8).indices.sort().values
    assert torch.equal(layer.intermediate.dense.weight, w_in[keep]) and torch.equal(
        layer.output.dense.weight, w_out[:, keep]
    )
    assert enc.model.config.intermediate_size == 8
    after = embed(enc, TEXTS, 16)
    assert after.shape == before.shape and not np.allclose(after, before)
    x, _ = encode(load_model(save_sentence_transformer(enc, tmp_path / "st", max_seq_len=16, normalize=True)), TEXTS)
    assert np.allclose(x, after, atol=1e-5)
    with pytest.raises(DistillError, match="ffn=9 must lie in 1..8"):
        embedding.prune_feed_forward(enc.model, 9)


def test_rounding_the_weights_moves_the_embedding_only_slightly(tmp_path):
    enc = tiny(tmp_path, dropout=0.0)
    before = embed(enc, TEXTS, 16)
    embedding.round_weights(enc.model, "bf16")
    after = embed(enc, TEXTS, 16)
    assert not np.array_equal(before, after) and mean_cosine(before, after) > 0.999
    with pytest.raises(DistillError, match="dtype='int8' is unknown"):
        embedding.round_weights(enc.model, "int8")
