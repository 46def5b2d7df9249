"""Stage 5 teacher targets: the attention definition against HF eager attention, and the disk cache (exactness,
warm re-runs without a teacher pass, corrupt chunks detected and recomputed)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import MPNetConfig, MPNetModel

from lib.distill.cache import TeacherCache, TeacherTargetStore, target_divergence, teacher_targets
from lib.distill.losses import DistillError, kl_rows, qk_attention
from lib.distill.models import Encoder
from lib.distill.train import DistillConfig, batch_plan, distill
from tests.test_distill import CORPUS, make_tokenizer, tiny_encoder


def tiny_mpnet(tok, seed=0):
    torch.manual_seed(seed)
    cfg = MPNetConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=70,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=0,
        attn_implementation="eager",
    )
    model = MPNetModel(cfg, add_pooling_layer=False).eval()
    with torch.no_grad():  # a visible relative-position bias (it starts near zero) so the two definitions differ
        model.encoder.relative_attention_bias.weight.normal_(0, 2.0)
    return Encoder(model, tok, "mpnet", "tiny-mpnet")


def _valid(mask, like):
    return mask.bool()[:, None, :, None].expand_as(like) & mask.bool()[:, None, None, :].expand_as(like)


def test_eager_definition_is_hf_eager_attention_with_mpnet_position_bias(tmp_path):
    tok = make_tokenizer(tmp_path)
    t = tiny_mpnet(tok)
    b = t.tokenize(CORPUS[:4], 16)
    ref = t.model(**b, output_attentions=True).attentions  # HF's own eager attention probabilities
    eager = teacher_targets(t, b, [0, 1], 4, "eager")
    qk = teacher_targets(t, b, [0, 1], 4, "qk")
    for layer in (0, 1):
        ok = _valid(b["attention_mask"], ref[layer])
        assert torch.equal(eager[layer]["att"], ref[layer])
        # "qk" leaves MPNet's relative-position bias out, so it is *not* the teacher's attention ...
        assert not torch.allclose(qk[layer]["att"][ok], ref[layer][ok], atol=1e-3)
        # ... and it is exactly softmax(q k^T / sqrt(d)) of the hooked projections
        _, _, qkv = t.run(b)
        assert torch.allclose(
            qk[layer]["att"], qk_attention(qkv[(layer, "q")], qkv[(layer, "k")], b["attention_mask"], 4)
        )
    with pytest.raises(DistillError, match="teacher_attention='eager' is the teacher's own 4-head attention"):
        teacher_targets(t, b, [1], 2, "eager")
    with pytest.raises(DistillError, match="teacher_attention='bias' is unknown"):
        teacher_targets(t, b, [1], 4, "bias")


def test_both_definitions_agree_for_a_bert_teacher(tmp_path):
    t = tiny_encoder(make_tokenizer(tmp_path), layers=2, seed=1)
    b = t.tokenize(CORPUS[:4], 16)
    eager, qk = teacher_targets(t, b, [1], 4, "eager"), teacher_targets(t, b, [1], 4, "qk")
    ok = _valid(b["attention_mask"], eager[1]["att"])
    assert torch.allclose(eager[1]["att"][ok], qk[1]["att"][ok], atol=1e-6)


def fp16(x):
    return x.to(torch.float16).to(torch.float32)


@pytest.mark.parametrize("definition", ["eager", "qk"])
def test_disk_cache_returns_what_the_teacher_computes(tmp_path, definition):
    tok = make_tokenizer(tmp_path)
    t = tiny_mpnet(tok, seed=3)
    store = TeacherTargetStore(t, "tiny", 16, definition, root=tmp_path / "cache", batch_size=3, chunk_size=4)
    texts = [CORPUS[i] for i in (5, 0, 3, 7)]
    batch, got = store.targets(texts, [0, 1], 4)
    assert store.teacher_sentences == 4
    want = teacher_targets(t, batch, [0, 1], 4, definition)
    for layer in (0, 1):
        ok = _valid(batch["attention_mask"], want[layer]["att"])
        m = batch["attention_mask"].bool()
        # stored as float16 per unpadded sentence: equal to the teacher's float16 values at every token position
        assert torch.equal(got[layer]["v"][m], fp16(want[layer]["v"])[m])
        tol = 0 if definition == "eager" else 2e-3  # "qk" recomputes the softmax from float16 q and k
        assert torch.allclose(got[layer]["att"][ok], fp16(want[layer]["att"])[ok], atol=tol, rtol=0)
        assert (got[layer]["att"][~ok] == 0).all() or definition == "qk"
    # a warm re-run (new object, same folder) does no teacher pass and returns the same tensors
    again = TeacherTargetStore(t, "tiny", 16, definition, root=tmp_path / "cache")
    _, got2 = again.targets(texts[::-1], [1, 0], 4)
    assert again.teacher_sentences == 0
    assert torch.equal(got2[1]["v"][0], got[1]["v"][3])


def test_corrupt_chunk_is_detected_and_recomputed(tmp_path):
    tok = make_tokenizer(tmp_path)
    t = tiny_encoder(tok, layers=2, seed=1)
    store = TeacherTargetStore(t, "tiny", 16, "eager", root=tmp_path / "cache", batch_size=4, chunk_size=4)
    _, good = store.targets(list(CORPUS), [1], 4)
    chunks = sorted((tmp_path / "cache").rglob("c*.bin"))
    assert len(chunks) == 2
    raw = bytearray(chunks[0].read_bytes())
    raw[-3] ^= 0xFF  # one flipped byte inside the float16 data
    chunks[0].write_bytes(bytes(raw))
    with pytest.warns(UserWarning, match="could not be read .*moved aside"):
        again = TeacherTargetStore(t, "tiny", 16, "eager", root=tmp_path / "cache")
        _, got = again.targets(list(CORPUS), [1], 4)
    assert [p.name for p in again.corrupt] == [chunks[0].name + ".corrupt"]
    assert again.teacher_sentences == 4  # exactly the sentences of the bad chunk were run through the teacher again
    assert torch.equal(got[1]["v"], good[1]["v"]) and torch.equal(got[1]["att"], good[1]["att"])
    third = TeacherTargetStore(t, "tiny", 16, "eager", root=tmp_path / "cache")
    third.targets(list(CORPUS), [1], 4)
    assert third.teacher_sentences == 0 and not third.corrupt


def test_store_of_another_teacher_is_kept_apart_and_a_changed_tokenizer_refused(tmp_path):
    tok = make_tokenizer(tmp_path)
    a = TeacherTargetStore(tiny_encoder(tok, layers=2, seed=1), "teacher-a", 16, root=tmp_path / "c")
    b = TeacherTargetStore(tiny_encoder(tok, layers=2, seed=2), "teacher-b", 16, root=tmp_path / "c")
    a.targets(CORPUS[:2], [1], 4)
    b.targets(CORPUS[:2], [1], 4)
    assert a.teacher_sentences == b.teacher_sentences == 2
    assert len(list((tmp_path / "c").iterdir())) == 2


def test_distillation_from_the_disk_cache_matches_the_in_memory_cache(tmp_path):
    tok = make_tokenizer(tmp_path)
    teacher = tiny_encoder(tok, layers=2, seed=1, name="teacher")
    cfg = DistillConfig(steps=6, batch_size=3, max_seq_len=16, lr=1e-3, relation_heads=4, seed=3)
    mem = distill(
        TeacherCache(teacher, list(CORPUS), 16),
        tiny_encoder(tok, layers=1, hidden=16, heads=2, seed=2),
        list(CORPUS),
        cfg,
        progress=False,
    )
    store = TeacherTargetStore(teacher, "tiny", 16, root=tmp_path / "cache")
    disk = distill(store, tiny_encoder(tok, layers=1, hidden=16, heads=2, seed=2), list(CORPUS), cfg, progress=False)
    assert np.allclose(mem.loss, disk.loss, rtol=0, atol=2e-5)  # targets differ only by float16 rounding (loss ~2e-4)
    used = {i for idx in batch_plan(len(CORPUS), 6, 3, 3) for i in idx}
    assert store.teacher_sentences == len(used)  # one teacher pass per sentence, however many steps reuse it
    with pytest.raises(DistillError, match="uses teacher_attention='eager', the run asks for 'qk'"):
        distill(
            store,
            tiny_encoder(tok, layers=1, hidden=16, heads=2),
            list(CORPUS),
            DistillConfig(steps=1, relation_heads=4, teacher_attention="qk"),
            progress=False,
        )


def test_low_precision_targets_live_in_their_own_folder_and_their_kl_is_reported(tmp_path):
    """A bf16 teacher pass (autocast) fills a store of its own, never the float32 one; its targets stay close to the
    float32 targets (KL of the attention rows per head and token < 1e-3 on this tiny random teacher) and
    target_divergence reports exactly 0 for float32 against itself."""
    tok = make_tokenizer(tmp_path)
    t = tiny_mpnet(tok, seed=3)
    fp32 = TeacherTargetStore(t, "tiny", 16, root=tmp_path / "cache")
    bf16 = TeacherTargetStore(t, "tiny", 16, root=tmp_path / "cache", precision="bf16")
    assert bf16.teacher_id == "tiny@bf16" and bf16.precision.name == "bf16"
    batch, a = fp32.targets(CORPUS[:4], [1], 4)
    _, b = bf16.targets(CORPUS[:4], [1], 4)
    assert fp32.teacher_sentences == bf16.teacher_sentences == 4  # neither store served the other's sentences
    folders = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert len(folders) == 2 and folders[0].startswith("tiny-L1-") and folders[1].startswith("tiny@bf16-L1-")
    assert not torch.equal(a[1]["att"], b[1]["att"])
    kl = float(kl_rows(a[1]["att"], b[1]["att"].clamp(min=1e-30).log(), batch["attention_mask"]))
    assert abs(kl) < 1e-3  # float16-stored rows: a tiny KL of either sign (rows sum to 1 only within rounding)
    div = target_divergence(t, list(CORPUS), [0, 1], 4, 16, precision="bf16", batch_size=3)
    assert div["precision"] == "bf16" and 0 < div["kl_att"] <= div["kl_att_max"] < 1e-3
    assert 0 < div["value_rel_err"] < 0.02
    same = target_divergence(t, list(CORPUS), [1], 4, 16, precision="fp32")
    assert abs(same["kl_att"]) < 1e-6 and same["value_rel_err"] == 0  # float32 against itself: rounding only
