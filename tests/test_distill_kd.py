"""Stage 5 L_OUT and loss combinations: hand calculations, a toy task run, and the comparison with the controls."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from lib.distill.eval import task_accuracy
from lib.distill.losses import (
    DistillError,
    LossSpec,
    StepTargets,
    StudentOutputs,
    attention_transfer_loss,
    combined_loss,
    distill_losses,
    kd_output_loss,
    qk_attention,
    value_relation_loss,
)
from lib.distill.train import DistillConfig, FinetuneConfig, TaskTargets, distill, finetune_teacher, predict_logits
from lib.distill.verdicts import goal_verdicts, versus_control
from tests.test_distill import CORPUS, kl, make_tokenizer, tiny_encoder


def test_kd_output_loss_soft_and_hard_parts_by_hand():
    zs, zt, y = torch.tensor([[1.0, 0.0, -1.0]]), torch.tensor([[0.0, 2.0, 0.5]]), torch.tensor([2])
    for T in (1.0, 3.0):
        ps, pt = torch.softmax(zs / T, -1)[0].tolist(), torch.softmax(zt / T, -1)[0].tolist()
        soft = T * T * kl(pt, ps)
        hard = -math.log(torch.softmax(zs, -1)[0, 2].item())  # CE at T = 1, whatever T the soft part uses
        assert kd_output_loss(zs, zt, y, T, alpha=1.0).item() == pytest.approx(soft, rel=1e-6)
        assert kd_output_loss(zs, None, y, T, alpha=0.0).item() == pytest.approx(hard, rel=1e-6)
        assert kd_output_loss(zs, zt, y, T, alpha=0.25).item() == pytest.approx(0.25 * soft + 0.75 * hard, rel=1e-6)
    two = torch.cat([zs, zt]), torch.cat([zt, zs]), torch.tensor([2, 0])
    per_row = [
        kd_output_loss(two[0][i : i + 1], two[1][i : i + 1], two[2][i : i + 1], 2.0, 0.5).item() for i in range(2)
    ]
    assert kd_output_loss(*two, 2.0, 0.5).item() == pytest.approx(sum(per_row) / 2, rel=1e-6)  # batch mean
    with pytest.raises(DistillError, match="alpha=1.5"):
        kd_output_loss(zs, zt, y, 1.0, alpha=1.5)
    with pytest.raises(DistillError, match="needs teacher_logits"):
        kd_output_loss(zs, None, y, 1.0, alpha=0.5)


def test_loss_spec_parses_weights_and_labels_every_combination():
    s = LossSpec.parse("at+vr+out", w_at=2.0, w_vr=0.5, w_out=3.0, temperature=2.0, alpha=0.7)
    assert (s.at, s.vr, s.vmse, s.out, s.temperature, s.alpha) == (2.0, 0.5, 0.0, 3.0, 2.0, 0.7)
    assert s.label() == "2·AT + 0.5·VR + 3·OUT(T=2, α=0.7)"
    ce = LossSpec.parse("ce", alpha=0.7)
    assert ce.alpha == 0 and ce.label() == "1·CE" and ce.needs_task and not ce.needs_attention
    assert not ce.needs_teacher_logits
    for bad in ("", "at+kd", "at+at", "ce+out"):
        with pytest.raises(DistillError, match="loss combination"):
            LossSpec.parse(bad)
    with pytest.raises(DistillError, match="w_vr=-1"):
        LossSpec.parse("vr", w_vr=-1)


def test_combined_loss_is_the_weighted_sum_of_its_terms():
    torch.manual_seed(0)
    mask = torch.tensor([[1, 1, 1, 0]])
    q, k, v = (torch.randn(1, 4, 8) for _ in range(3))
    tq, tk, tv = (torch.randn(1, 4, 8) for _ in range(3))
    targets = {5: {"att": qk_attention(tq, tk, mask, 2), "v": tv}}
    qkv = {(0, "q"): q, (0, "k"): k, (0, "v"): v}
    zs, zt, y = torch.randn(1, 3), torch.randn(1, 3), torch.tensor([1])
    spec = LossSpec.parse("at+vr+out", w_at=2.0, w_vr=0.5, w_out=3.0, temperature=2.0, alpha=0.4)
    got = combined_loss(StudentOutputs(qkv, mask, logits=zs), StepTargets(targets, zt, y), [(5, 0)], 2, spec)
    at = attention_transfer_loss(targets[5]["att"], q, k, mask, 2)
    vr = value_relation_loss(tv, v, mask, 2)
    out = kd_output_loss(zs, zt, y, 2.0, 0.4)
    assert set(got) == {"L_AT", "L_VR", "L_OUT", "loss"}
    assert got["loss"].item() == pytest.approx((2 * at + 0.5 * vr + 3 * out).item(), rel=1e-6)
    # the task-agnostic variants keep their meaning
    assert set(distill_losses(targets, qkv, mask, [(5, 0)], 2, "no_value_relation")) == {"L_AT", "loss"}


def _task(tok, teacher_logits=True, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, len(CORPUS))
    logits = rng.normal(0, 2, (len(CORPUS), 3)).astype(np.float32) if teacher_logits else None
    return TaskTargets(list(CORPUS), labels, 3, logits)


def test_l_out_only_moves_student_logits_toward_the_teachers(tmp_path):
    tok = make_tokenizer(tmp_path)
    teacher = tiny_encoder(tok, layers=2, seed=1, name="teacher")
    student = tiny_encoder(tok, layers=1, hidden=16, heads=2, seed=2, name="student")
    task = _task(tok)
    cfg = DistillConfig(
        steps=60,
        batch_size=8,
        max_seq_len=16,
        lr=1e-2,
        relation_heads=4,
        losses="out",
        alpha=1.0,
        temperature=2.0,
        seed=0,
    )
    hist = distill(teacher, student, list(CORPUS), cfg, progress=False, task=task)
    assert set(hist.columns) == {"step", "L_OUT", "loss"}  # no attention term was computed
    pt = torch.softmax(torch.tensor(task.teacher_logits), -1)
    before = torch.full_like(pt, 1 / 3)  # a fresh head is near uniform; measure against that and the first step
    after = torch.softmax(torch.tensor(predict_logits(student, list(CORPUS), 16)), -1)

    def kl_to_teacher(q):
        return (pt * (pt.log() - q.log())).sum(-1).mean().item()

    assert kl_to_teacher(after) < 0.5 * kl_to_teacher(before)
    assert hist.L_OUT.iloc[-5:].mean() < 0.5 * hist.L_OUT.iloc[:5].mean()


@pytest.mark.parametrize("combo", ["ce", "at", "vr", "out", "at+vr", "at+out", "vr+out", "at+vr+out", "at+vmse+out"])
def test_every_combination_trains_and_logs_its_terms(tmp_path, combo):
    tok = make_tokenizer(tmp_path)
    teacher = tiny_encoder(tok, layers=2, seed=1, name="teacher")
    student = tiny_encoder(tok, layers=1, hidden=16, heads=2, seed=2, name="student")
    cfg = DistillConfig(steps=3, batch_size=4, max_seq_len=16, lr=1e-3, relation_heads=4, losses=combo, seed=0)
    hist = distill(teacher, student, list(CORPUS), cfg, progress=False, task=_task(tok))
    names = {"at": "L_AT", "vr": "L_VR", "vmse": "L_VMSE", "out": "L_OUT", "ce": "L_OUT"}
    assert set(hist.columns) - {"step", "loss"} == {names[t] for t in combo.split("+")}
    assert np.isfinite(hist.loss).all()
    assert (student.head is not None) == any(t in combo for t in ("out", "ce"))


def test_l_out_without_a_task_is_refused(tmp_path):
    tok = make_tokenizer(tmp_path)
    teacher, student = tiny_encoder(tok, layers=2), tiny_encoder(tok, layers=1, hidden=16, heads=2)
    with pytest.raises(DistillError, match="pass task=TaskTargets"):
        distill(teacher, student, list(CORPUS), DistillConfig(steps=1, relation_heads=4, losses="out"), progress=False)
    with pytest.raises(DistillError, match="needs teacher logits"):
        distill(
            teacher,
            student,
            list(CORPUS),
            DistillConfig(steps=1, relation_heads=4, losses="at+out"),
            progress=False,
            task=_task(tok, teacher_logits=False),
        )


def test_finetune_teacher_leaves_the_shared_teacher_alone_and_learns(tmp_path):
    tok = make_tokenizer(tmp_path)
    teacher = tiny_encoder(tok, layers=3, seed=1, name="teacher")
    before = {k: v.clone() for k, v in teacher.model.state_dict().items()}
    task = TaskTargets(list(CORPUS), [int("cat" in t) for t in CORPUS], 2)
    ft = finetune_teacher(teacher, task, FinetuneConfig(steps=40, batch_size=8, max_seq_len=16, lr=1e-2, layers=1))
    assert all(torch.equal(v, teacher.model.state_dict()[k]) for k, v in before.items())
    sd = ft.model.state_dict()
    assert torch.equal(
        sd["encoder.layer.0.output.dense.weight"], before["encoder.layer.0.output.dense.weight"]
    )  # frozen
    assert not torch.equal(sd["encoder.layer.2.output.dense.weight"], before["encoder.layer.2.output.dense.weight"])
    acc = (predict_logits(ft, list(CORPUS), 16).argmax(1) == task.labels).mean()
    assert acc == 1.0


def test_versus_control_and_verdicts_come_from_the_numbers():
    rows = []
    for seed in (0, 1, 2):
        for task in ("polarity", "topic"):
            for combo, acc, fid in (("ce", 0.6, 0.40), ("at+vr+out", 0.7 if task == "polarity" else 0.5, 0.45)):
                rows.append(
                    dict(
                        stage="task-specific",
                        student="3x384",
                        init="random",
                        task=task,
                        combo=combo,
                        losses=combo,
                        seed=seed,
                        task_test=acc + 0.01 * seed,
                        fid_cosine=fid,
                        scored_by="head",
                    )
                )
    vs = versus_control(pd.DataFrame(rows))
    assert vs.loc[("3x384", "random", "polarity", "at+vr+out"), "task_test_gain"] == pytest.approx(0.1)
    assert vs.loc[("3x384", "random", "topic", "at+vr+out"), "task_test_gain"] == pytest.approx(-0.1)
    assert vs.loc[("3x384", "random", "topic", "ce"), "task_test_std"] == pytest.approx(0.01)
    (line,) = goal_verdicts(vs, "at+vr+out")
    assert "polarity accuracy +0.100" in line and "does NOT beat its control on topic accuracy" in line
    assert "fidelity cosine +0.050" in line and "3 seed(s)" in line


def test_task_accuracy_uses_the_head_when_there_is_one_else_a_probe(tmp_path):
    tok = make_tokenizer(tmp_path)
    enc = tiny_encoder(tok, layers=1, hidden=16, heads=2)
    df = pd.DataFrame({"text": list(CORPUS) * 3, "label": [int("cat" in t) for t in CORPUS] * 3})
    data = {"polarity": {"train": df, "val": df, "test": df}}
    probe = task_accuracy(enc, data, "polarity", 16)
    assert probe["scored_by"] == "probe" and 0 <= probe["task_test"] <= 1
    enc.head = torch.nn.Linear(16, 2)
    with torch.no_grad():
        enc.head.weight.zero_()
        enc.head.bias.copy_(torch.tensor([1.0, 0.0]))  # always predicts class 0
    got = task_accuracy(enc, data, "polarity", 16)
    assert got == {
        "task_val": pytest.approx((df.label == 0).mean()),
        "task_test": pytest.approx((df.label == 0).mean()),
        "scored_by": "head",
    }
