"""Stage 6 soft-logit distillation: losses against hand calculations, the two students, toy runs, resuming.

Tiny tokenizer and encoder from test_distill, so nothing here needs the real teacher.
"""

from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from lib.kd import train
from lib.kd.config import KdError
from tests.test_distill import make_tokenizer, tiny_encoder

ZS = torch.tensor([[1.0, 0.0, -1.0], [0.5, 0.5, 0.0]])  # student logits [B=2, C=3]
ZT = torch.tensor([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # teacher logits


def test_mse_by_hand():
    # squared differences: row 1 (1, 0, 1), row 2 (0.25, 0.25, 0); mean over the 6 entries
    assert train.mse_logits(ZS, ZT).item() == pytest.approx((1 + 0 + 1 + 0.25 + 0.25 + 0) / 6)
    assert train.kd_loss(ZS, ZT, soft="mse", temperature=7.0)["loss"].item() == pytest.approx(2.5 / 6)  # T unused


def test_kl_by_hand_and_the_t_squared_scaling():
    # teacher (0, T ln 3) softens to (1/4, 3/4) at temperature T; a zero student gives (1/2, 1/2)
    want = 0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.75 / 0.5)  # 0.130812...
    for t in (1.0, 3.0):
        zt = torch.tensor([[0.0, t * math.log(3)]])
        assert train.kl_logits(torch.zeros(1, 2), zt, t).item() == pytest.approx(t * t * want, rel=1e-6)
    assert train.kl_logits(ZT, ZT, 3.0).item() == pytest.approx(0.0, abs=1e-7)

    # 2 x 3 batch, T = 3: mean over rows of T² KL, each computed from exp by hand
    def soft(z, t):
        e = [math.exp(v / t) for v in z]
        return [v / sum(e) for v in e]

    rows = [
        sum(p * math.log(p / q) for p, q in zip(soft(zt, 3), soft(zs, 3))) for zs, zt in zip(ZS.tolist(), ZT.tolist())
    ]
    assert train.kd_loss(ZS, ZT, soft="kl")["loss"].item() == pytest.approx(
        9 * sum(rows) / 2, rel=1e-5
    )  # default T = 3; float32


def test_kl_at_t1_is_torch_kl_div():
    torch.manual_seed(0)
    zs, zt = torch.randn(5, 4), torch.randn(5, 4)
    want = F.kl_div(F.log_softmax(zs, -1), F.softmax(zt, -1), reduction="batchmean")
    assert train.kl_logits(zs, zt, 1.0).item() == pytest.approx(want.item(), rel=1e-6)


def test_hard_label_ce_skips_unlabelled_rows_and_is_weighted():
    zs = torch.tensor([[0.0, 0.0, 0.0], [5.0, 0.0, 0.0]])
    labels = torch.tensor([1, train.NO_LABEL])
    got = train.kd_loss(zs, ZT, labels, soft="mse", ce_weight=0.5)
    assert got["L_CE"].item() == pytest.approx(math.log(3))  # uniform row, one labelled row
    assert got["loss"].item() == pytest.approx(got["L_soft"].item() + 0.5 * math.log(3))
    none = train.kd_loss(zs, ZT, torch.tensor([train.NO_LABEL] * 2), ce_weight=1.0)
    assert none["L_CE"].item() == 0.0 and none["loss"].item() == pytest.approx(none["L_soft"].item())
    assert "L_CE" not in train.kd_loss(zs, ZT, labels)  # ce_weight = 0, the thesis's choice


def test_the_control_loss_is_hard_label_ce_only():
    labels = torch.tensor([0, train.NO_LABEL])
    got = train.kd_loss(ZS, ZT * 100, labels, soft="none", ce_weight=2.0)  # teacher logits ignored
    assert "L_soft" not in got and got["loss"].item() == pytest.approx(2 * F.cross_entropy(ZS[:1], labels[:1]).item())
    with pytest.raises(KdError, match="hard labels only"):
        train.kd_loss(ZS, ZT, labels, soft="none")


def test_gradients_flow_to_the_student_only():
    zs = ZS.clone().requires_grad_(True)
    train.kd_loss(zs, ZT, soft="mse")["loss"].backward()
    assert torch.allclose(zs.grad, 2 * (ZS - ZT) / 6)  # d/dzs of the mean over 6 entries
    for soft in ("kl", "mse"):
        zs, zt = ZS.clone().requires_grad_(True), ZT.clone()
        train.kd_loss(zs, zt, torch.tensor([0, 2]), soft=soft, ce_weight=1.0)["loss"].backward()
        assert zs.grad.abs().sum() > 0 and zt.grad is None


def test_bad_losses_are_refused():
    with pytest.raises(KdError, match="soft='ce'"):
        train.kd_loss(ZS, ZT, soft="ce")
    with pytest.raises(KdError, match="temperature=0"):
        train.kl_logits(ZS, ZT, 0)
    with pytest.raises(KdError, match="needs labels"):
        train.kd_loss(ZS, ZT, ce_weight=1.0)
    with pytest.raises(KdError, match="as many classes"):
        train.kd_loss(ZS, ZT[:, :2])


# --------------------------------------------------------------------------------------------------------- students
def test_bilstm_student_thesis_size_and_teacher_embeddings(tmp_path):
    tok = make_tokenizer(tmp_path)
    emb = train.teacher_wordpiece_embeddings(tiny_encoder(tok, hidden=32))
    s = train.BiLSTMStudent(emb, tok, n_classes=2)  # thesis defaults: 300-d channels x 2, 300 units, fc 400
    assert s.param_counts()["params_other"] == 2 * (4 * 300 * (600 + 300) + 2 * 4 * 300) + 600 * 400 + 400 + 400 * 2 + 2
    assert s.param_counts()["params_other"] == pytest.approx(2.41e6, rel=0.01)  # "2.41M non-embedding parameters"
    assert torch.equal(s.channels[0].table.weight, emb) and not s.channels[1].table.weight.requires_grad
    b = s.tokenize(["the cat sat", "a dog ran far away ."], 16)
    assert s(b["input_ids"], b["attention_mask"]).shape == (2, 2)
    assert s.represent(b["input_ids"], b["attention_mask"]).shape == (2, 600)
    # padding must not change a sentence's representation
    alone = s.tokenize(["the cat sat"], 16)
    assert torch.allclose(
        s.represent(alone["input_ids"], alone["attention_mask"])[0],
        s.represent(b["input_ids"], b["attention_mask"])[0],
        atol=1e-6,
    )
    with pytest.raises(KdError, match="wordpieces"):
        train.BiLSTMStudent(emb[:5], tok, 2)


def test_bert_student_shapes_and_projected_teacher_embeddings(tmp_path):
    tok = make_tokenizer(tmp_path)
    emb = train.teacher_wordpiece_embeddings(tiny_encoder(tok, hidden=32))
    s = train.BertStudent(tok, 3, teacher_embeddings=emb, max_positions=64)  # thesis BERT_S: 5 x 204, 750, 3 heads
    c = s.model.config
    assert (c.num_hidden_layers, c.hidden_size, c.intermediate_size, c.num_attention_heads) == (5, 204, 750, 3)
    we = s.model.embeddings.word_embeddings
    assert torch.equal(we.table.weight, emb) and we.proj.in_features == 32 and we.proj.out_features == 204
    b = s.tokenize(["the cat sat", "a dog ran far away ."], 16)
    assert s(b["input_ids"], b["attention_mask"]).shape == (2, 3)
    assert s.sentence_representations(["the cat sat"] * 3, 16).shape == (3, 204)
    plain = train.BertStudent(tok, 3, layers=1, hidden=12, heads=3, intermediate=20, max_positions=64)
    assert isinstance(plain.model.embeddings.word_embeddings, torch.nn.Embedding)


# --------------------------------------------------------------------------------------------------------- training
TOY = [
    "the cat sat",
    "a cat ran",
    "the big cat",
    "cat on a mat",
    "the dog sat",
    "a dog ran",
    "the big dog",
    "dog on a mat",
]
TOY_Y = np.array([0, 0, 0, 0, 1, 1, 1, 1])
TOY_T = np.where(TOY_Y[:, None] == 0, [[3.0, -3.0]], [[-3.0, 3.0]]).astype(np.float32)  # a confident teacher


def _small(kind, tok, emb, dropout=0.0):
    if kind == "bilstm":
        return train.BiLSTMStudent(emb, tok, 2, embed_dim=16, hidden=16, fc=16, dropout=dropout, seed=0)
    return train.BertStudent(
        tok,
        2,
        layers=1,
        hidden=12,
        heads=3,
        intermediate=24,
        teacher_embeddings=emb,
        dropout=dropout,
        max_positions=64,
        seed=0,
    )


@pytest.mark.parametrize("kind,soft", [("bilstm", "mse"), ("bert", "kl")])
def test_a_tiny_student_learns_a_separable_toy_set(tmp_path, kind, soft):
    tok = make_tokenizer(tmp_path)
    s = _small(kind, tok, train.teacher_wordpiece_embeddings(tiny_encoder(tok, hidden=32)))
    cfg = train.KDConfig(soft=soft, epochs=40, batch_size=4, lr=1e-2, max_seq_len=16)
    res = train.train_student(s, TOY, TOY_T, None, cfg, progress=False)
    hist = res["losses"]
    assert len(hist) == cfg.steps(len(TOY)) == res["steps"] == 80 and res["complete"]
    assert hist.L_soft.iloc[-5:].mean() < 0.2 * hist.L_soft.iloc[:5].mean()
    assert (s.predict_logits(TOY, 16).argmax(1) == TOY_Y).all()
    assert not s.training


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    tok = make_tokenizer(tmp_path)
    emb = train.teacher_wordpiece_embeddings(tiny_encoder(tok, hidden=32))
    cfg = train.KDConfig(epochs=3, batch_size=4, lr=1e-2, max_seq_len=16, ce_weight=0.5, warmup_frac=0.2, seed=3)
    labels = np.where(np.arange(8) % 2 == 0, TOY_Y, train.NO_LABEL)  # half of them "augmented"
    whole = _small("bilstm", tok, emb, dropout=0.3)
    h_all = train.train_student(whole, TOY, TOY_T, labels, cfg, progress=False)["losses"]
    ck = tmp_path / "ck.pt"
    part = _small("bilstm", tok, emb, dropout=0.3)
    first = train.train_student(
        part, TOY, TOY_T, labels, cfg, progress=False, checkpoint=ck, checkpoint_every=2, max_steps=3
    )  # "killed" after step 3: the file holds step 2
    assert first["steps"] == 3 and not first["complete"]
    fresh = _small("bilstm", tok, emb, dropout=0.3)
    res = train.train_student(fresh, TOY, TOY_T, labels, cfg, progress=False, checkpoint=ck, checkpoint_every=2)
    assert res["steps"] == 4 and res["complete"] and list(res["losses"].step) == list(range(6))
    pd.testing.assert_frame_equal(res["losses"], h_all)
    for (k, a), b in zip(whole.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), k
    with pytest.raises(ValueError, match=r"other settings \(cfg\.epochs\)"):
        train.train_student(
            fresh, TOY, TOY_T, labels, train.KDConfig(**{**asdict(cfg), "epochs": 4}), progress=False, checkpoint=ck
        )


def test_a_mismatched_transfer_set_is_refused(tmp_path):
    tok = make_tokenizer(tmp_path)
    s = _small("bilstm", tok, train.teacher_wordpiece_embeddings(tiny_encoder(tok, hidden=32)))
    with pytest.raises(KdError, match="transfer set disagrees"):
        train.train_student(s, TOY, TOY_T[:3], None, train.KDConfig(epochs=1), progress=False)
    with pytest.raises(KdError, match="soft='x'"):
        train.train_student(s, TOY, TOY_T, None, train.KDConfig(soft="x"), progress=False)
