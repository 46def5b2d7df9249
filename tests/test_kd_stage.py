"""Stage 6 orchestration (lib.kd.stage): the logit cache, the saved task teacher, the control's budget, probing inputs,
and a resumable end-to-end grid on a tiny teacher. No real teacher or spaCy model needed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from lib.common.params import ParamError
from lib.distill.train import FinetuneConfig, TaskTargets, predict_logits
from lib.kd import stage as kd_stage
from lib.kd import train
from lib.kd.config import KdError, KdParams
from tests.test_distill import CORPUS, make_tokenizer, tiny_encoder

TEXTS = CORPUS  # 8 sentences of the tiny vocabulary


def fake_tagger(sentences):
    """Every word a NOUN: the rules still mask, swap and cut, with no spaCy model."""
    return [[(w, "NOUN") for w in s.split()] for s in sentences]


def _teacher(tmp_path, monkeypatch, classes=2):
    enc = tiny_encoder(make_tokenizer(tmp_path), hidden=32)
    enc.head = torch.nn.Linear(32, classes)
    monkeypatch.setattr(kd_stage, "encoder_identity", lambda e: "tiny-teacher")  # built in memory, no folder to hash
    return enc


def test_logit_cache_computes_each_text_once_and_survives_a_reload_and_damage(tmp_path, monkeypatch):
    enc = _teacher(tmp_path, monkeypatch)
    path = tmp_path / "c" / "logits.npz"
    cache = kd_stage.LogitCache(path, 2)
    z = cache.logits(TEXTS[:5] + TEXTS[:2], enc, 16)
    assert cache.passes == 5 and z.shape == (7, 2)
    np.testing.assert_allclose(z[:5], predict_logits(enc, TEXTS[:5], 16), rtol=1e-6, atol=1e-6)
    again = kd_stage.LogitCache(path, 2)
    np.testing.assert_array_equal(again.logits(TEXTS[:5], enc, 16), z[:5])
    assert again.passes == 0
    again.logits(TEXTS, enc, 16)
    assert again.passes == 3  # only the new ones
    path.write_bytes(b"not an npz")
    broken = kd_stage.LogitCache(path, 2)
    np.testing.assert_allclose(broken.logits(TEXTS[:5], enc, 16), z[:5], rtol=1e-6, atol=1e-6)
    assert broken.passes == 5
    with pytest.raises(KdError, match="3 classes|not 3"):
        kd_stage.LogitCache(path, 3).logits(TEXTS[:1], enc, 16)


def test_the_task_teacher_is_fine_tuned_once_then_reloaded_exactly(tmp_path, monkeypatch):
    enc = _teacher(tmp_path, monkeypatch)
    task = TaskTargets(TEXTS, np.array([0, 1] * 4), 2)
    cfg = FinetuneConfig(steps=3, batch_size=4, max_seq_len=16, lr=1e-3, layers=1)
    before = {k: v.clone() for k, v in enc.model.state_dict().items()}
    ft, reloaded = kd_stage.task_teacher(enc, task, cfg, tmp_path / "t", progress=False)
    assert not reloaded and len(list((tmp_path / "t").glob("teacher_ft_*.pt"))) == 1
    assert all(torch.equal(v, enc.model.state_dict()[k]) for k, v in before.items())  # shared teacher untouched
    again, reloaded = kd_stage.task_teacher(enc, task, cfg, tmp_path / "t", progress=False)
    assert reloaded
    np.testing.assert_array_equal(predict_logits(again, TEXTS, 16), predict_logits(ft, TEXTS, 16))
    saved = torch.load(next((tmp_path / "t").glob("*.pt")), weights_only=True)["model"]
    assert saved and all(k.startswith("encoder.layer.1.") for k in saved)  # only the fine-tuned top layer is stored
    _, other = kd_stage.task_teacher(
        enc, task, FinetuneConfig(steps=4, batch_size=4, max_seq_len=16, layers=1), tmp_path / "t", progress=False
    )
    assert not other  # another setting never reloads a file made with different settings


def _cfg(**kw) -> KdParams:
    """Notebook 06's parameters for tiny students on the tiny teacher."""
    return KdParams(
        **{
            **dict(
                kd_task_train=10,
                kd_task_eval=10,
                kd_max_seq_len=16,
                kd_teacher_ft_steps=2,
                kd_teacher_ft_lr=1e-3,
                kd_teacher_ft_batch_size=4,
                augment_n_iter=2,
                augment_max=6,
                augment_p_mask=0.2,
                augment_p_pos=0.2,
                kd_batch_size=4,
                kd_lr=1e-3,
                bilstm_hidden=8,
                bilstm_fc=8,
                bilstm_embed_dim=8,
                bert_layers=1,
                bert_hidden=12,
                bert_heads=3,
                bert_intermediate=16,
                probing_sentences=100,
                probing_word_content_words=5,
                kd_speed_sentences=8,
            ),
            **kw,
        }
    )


def test_a_bad_parameter_names_its_key_and_the_fix():
    _cfg()
    for key, value, says in [
        ("kd_tasks", ["sst2"], "every item must be one of polarity, topic"),
        ("kd_tasks", [], "use a non-empty subset of ['polarity', 'topic']"),
        ("kd_students", [], "use a non-empty subset of ['bilstm', 'bert']"),
        ("kd_students", ["cnn"], "every item must be one of bilstm, bert"),
        ("kd_seeds", [], "give at least one seed"),
        ("bilstm_soft", "ce", "must be one of mse, kl"),
        ("bert_heads", 5, "bert_hidden=12 is not a multiple of it"),
        ("kd_task_train", 3, "must be >= 10"),
        ("kd_task_eval", 9, "must be >= 10"),
        ("augment_max", -1, "must be >= 0"),
        ("probing_sentences", 99, "must be >= 100"),
        ("augment_p_pos", 0.9, "augment_p_mask + augment_p_pos must be <= 1"),
        ("kd_epochs", 0.0, "must be > 0"),
        ("probing_max_per_class", None, "is a NoneType"),
    ]:
        with pytest.raises(ParamError) as e:
            _cfg(**{key: value})
        assert e.value.key == key and f"parameter {key}=" in str(e.value) and says in str(e.value), (key, str(e.value))


def test_the_record_leaves_out_the_thread_count():
    rec = _cfg(threads=3).record()
    assert "threads" not in rec and rec["device"] == "cpu" and rec["run_dir"] == "outputs/demo"
    assert set(rec) == set(KdParams.names()) - {"threads"}


def test_the_control_gets_as_many_steps_as_its_distilled_twin():
    cfg = _cfg(kd_epochs=3.0, kd_batch_size=32)
    kd, ctrl = (
        kd_stage.kd_config("bert", "kd", cfg, 0, 1000, 200),
        kd_stage.kd_config("bert", "control", cfg, 0, 1000, 200),
    )
    assert kd.soft == "kl" and kd.temperature == 3.0 and ctrl.soft == "none" and ctrl.ce_weight == 1.0
    assert kd.steps(1000) == ctrl.steps(200) == 94
    assert kd_stage.kd_config("bilstm", "kd", cfg, 0, 1000, 200).soft == "mse"


def test_probe_inputs_and_by_task_keep_each_tasks_order():
    tasks = {"a": (["x", "y", "z"], [0, 1, 0]), "b": (["z", "w"], [1, 0])}
    texts = kd_stage.probe_inputs(tasks)
    assert texts == ["x", "y", "z", "w"]
    reps = np.arange(8, dtype=np.float32).reshape(4, 2)
    got = kd_stage.by_task(reps, texts, tasks)
    np.testing.assert_array_equal(got["b"], reps[[2, 3]])
    with pytest.raises(KdError, match="probe_inputs"):
        kd_stage.by_task(reps[:3], texts, tasks)


def test_minilm_folders_are_labelled_like_stage_5(tmp_path):
    for f in ("student_3x384_s0", "control_3x384_s0", "student_6x384_s1"):
        (tmp_path / f).mkdir()
    assert kd_stage.minilm_folders(tmp_path, 0) == {
        "MiniLM 3x384": tmp_path / "student_3x384_s0",
        "3x384 no distillation": tmp_path / "control_3x384_s0",
    }
    assert kd_stage.minilm_folders("", 0) == {} and kd_stage.minilm_folders(tmp_path / "absent", 0) == {}
    new = tmp_path / "new"
    for f in (
        "student_3x384_random_s0",
        "student_3x384_assistant_s0",
        "control_3x384_random_s0",
        "student_6x384_random_s0",
        "at_vr_emb_3x384_random_s0",
        "at_vr_emb_6x384_random_s0",
    ):
        (new / f).mkdir(parents=True)
    assert kd_stage.minilm_folders(new, 0) == {
        "MiniLM 3x384 (assistant init)": new / "student_3x384_assistant_s0",
        "MiniLM 3x384 (random init)": new / "student_3x384_random_s0",
        "3x384 no distillation (random init)": new / "control_3x384_random_s0",
        "MiniLM 6x384": new / "student_6x384_random_s0",
        "AT+VR+EMB 3x384 (random init)": new / "at_vr_emb_3x384_random_s0",
        "AT+VR+EMB 6x384": new / "at_vr_emb_6x384_random_s0",
    }


def test_verdicts_pair_each_student_with_its_control_per_seed():
    rows = pd.DataFrame(
        {
            "task": "polarity",
            "student": "bilstm",
            "method": ["kd", "control"] * 3,
            "seed": [0, 0, 1, 1, 2, 2],
            "test": [0.8, 0.7, 0.82, 0.7, 0.78, 0.71],
        }
    )
    (v,) = kd_stage.kd_verdicts(rows)
    assert "beats its control by +0.097 ± 0.025" in v and "3 seeds" in v  # diffs 0.10, 0.12, 0.07: sample std 0.0252


def test_the_grid_runs_end_to_end_and_resumes_without_training_again(tmp_path, monkeypatch):
    enc = _teacher(tmp_path, monkeypatch)
    rng = np.random.default_rng(0)
    data = {
        "polarity": {
            s: pd.DataFrame({"text": [TEXTS[i] for i in rng.permutation(8)] + TEXTS[:2], "label": [0, 1] * 5})
            for s in ("train", "val", "test")
        }
    }
    probe = TEXTS[:6]
    rows, info = kd_stage.run_students(_cfg(), enc, data, tmp_path / "kd", probe, progress=False, tagger=fake_tagger)
    assert len(rows) == 4 and set(rows.method) == {"kd", "control"} and set(rows.student) == {"bilstm", "bert"}
    assert info["augmented"]["polarity"] > 0 and info["transfer"]["polarity"] == 10 + info["augmented"]["polarity"]
    assert rows[rows.method == "control"].texts.eq(10).all()
    assert (rows.groupby("student").steps.nunique() == 1).all()  # control and KD: same number of steps
    for r in rows.itertuples():
        assert np.load(tmp_path / "kd" / "reps" / f"{r.row_id}.npy").shape[0] == len(probe)
    assert rows[["val", "test", "agree_test"]].apply(lambda c: c.between(0, 1)).all().all()

    def no_training(*a, **k):
        raise AssertionError("a finished row was trained again")

    monkeypatch.setattr(train, "train_student", no_training)
    again, info2 = kd_stage.run_students(_cfg(), enc, data, tmp_path / "kd", probe, progress=False, tagger=fake_tagger)
    pd.testing.assert_frame_equal(again, rows)
    assert info2["teacher_passes"] == 0 and info2["teacher"][0]["reloaded"]
    moved = _cfg(run_dir="outputs/elsewhere", device="cuda", threads=1, kd_speed_sentences=4)  # no row depends on them
    pd.testing.assert_frame_equal(
        kd_stage.run_students(moved, enc, data, tmp_path / "kd", probe, progress=False, tagger=fake_tagger)[0], rows
    )
    with pytest.raises(ValueError, match=r"rows.csv was made with other settings \(kd_epochs\)"):
        kd_stage.run_students(
            _cfg(kd_epochs=2.0), enc, data, tmp_path / "kd", probe, progress=False, tagger=fake_tagger
        )
    with pytest.raises(ValueError, match=r"other settings \(probe_texts\)"):
        kd_stage.run_students(_cfg(), enc, data, tmp_path / "kd", probe[:3], progress=False, tagger=fake_tagger)
    table = kd_stage.kd_table(rows, info["teacher"])
    assert table.student.iloc[0] == "teacher (fine-tuned)" and len(table) == 5


def test_notebook_06_comparisons_reuse_the_saved_teacher_and_print_from_the_numbers(tmp_path, monkeypatch):
    from lib.kd import compare

    enc = _teacher(tmp_path, monkeypatch)
    data = {
        "polarity": {
            s: pd.DataFrame({"text": TEXTS + TEXTS[:2], "label": [0, 1] * 5}) for s in ("train", "val", "test")
        }
    }
    cfg = _cfg(kd_students=["bilstm"], kd_controls=False)
    rows, info = kd_stage.run_students(cfg, enc, data, tmp_path / "kd", TEXTS[:4], progress=False, tagger=fake_tagger)
    saved = sorted((tmp_path / "kd" / "teachers").glob("teacher_ft_*.pt"))
    ft = compare.task_teachers(enc, data, cfg, tmp_path / "kd" / "teachers")
    assert sorted((tmp_path / "kd" / "teachers").glob("teacher_ft_*.pt")) == saved  # reloaded, not fine-tuned again
    sizes = compare.speed_table(enc, ft, {"tiny": enc}, cfg, TEXTS[:4])
    assert sizes.model.tolist() == ["teacher (fine-tuned)", "bilstm", "tiny"] and sizes.speedup.iloc[0] == 1.0
    assert (sizes.non_embedding_M < sizes.params_M).all()
    frozen = compare.frozen_table({"tiny": enc}, data, cfg)
    assert frozen[["task", "model"]].values.tolist() == [["polarity", "tiny"]] and frozen.test.between(0, 1).all()
    probing = pd.DataFrame({"a": [0.5, 0.7, 0.6], "b": [0.5, 0.7, 0.6]}, index=["majority", "x", "y"])
    lines = compare.closing_sentences(kd_stage.kd_table(rows, info["teacher"]), info["teacher"], frozen, probing)
    assert len(lines) == 3 and lines[0].startswith("polarity: fine-tuned teacher") and "tiny" in lines[1]
    assert lines[2].endswith("over 2 tasks: highest x (+0.200), lowest y (+0.100)")


def test_every_published_params_06_builds_the_config_it_records():
    from lib.common.paths import OUTPUTS
    from lib.common.runinfo import load_json

    paths = sorted((OUTPUTS / "reference").glob("**/params_06.json"))
    assert paths
    for path in paths:
        raw = load_json(path)["params"]
        rec = KdParams.from_values(raw).record()
        assert set(raw) <= set(rec) and {k: rec[k] for k in raw} == raw, path
