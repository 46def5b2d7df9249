"""Stage 2 with a static model: model2vec distillation from a real (tiny, random) BERT on all-MiniLM-L6-v2's tokenizer,
loading through load_model, encoding, the store identity, and training the table towards a target encoder."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from lib.common.paths import RecoveryWarning
from lib.common.tensorfiles import read_checkpoint
from lib.distill.embedding import mixture_plan
from lib.embed.encoder import EmbedError, default_model_dir, encode, load_model
from lib.embed.static import StaticEncoder, StaticModelError, bags, distil, is_static_folder, pool
from lib.embed.static_train import StaticTrainConfig, train_static
from lib.embed.store import EmbeddingStore, StoreError, embed_titles, open_store

TITLES = ["Water", "Climate change", "Zürich", "São Paulo", "C++", "World War II", "Byzantine Empire", "DNA"]


@pytest.fixture(scope="module")
def tiny_source(tmp_path_factory):
    """A 1-layer, 32-wide BERT with random weights (seeded) and all-MiniLM-L6-v2's tokenizer files:
    distils in seconds."""
    import torch
    from transformers import BertConfig, BertModel

    folder = tmp_path_factory.mktemp("tiny_bert")
    torch.manual_seed(0)
    BertModel(
        BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    ).save_pretrained(folder)
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(default_model_dir() / f, folder / f)
    return folder


@pytest.fixture(scope="module")
def static8(tiny_source, tmp_path_factory):
    return distil(tiny_source, tmp_path_factory.mktemp("m2v") / "pca8", pca_dims=8, seed=0, source_name="tiny")


def test_distil_gives_a_static_folder_of_the_asked_width(static8, tiny_source, tmp_path):
    assert is_static_folder(static8) and not is_static_folder(tiny_source)
    made = json.loads((static8 / "static.json").read_text())
    assert made["pca_dims"] == 8 and made["seed"] == 0 and made["source"] == "tiny"
    assert json.loads((static8 / "config.json").read_text())["tokenizer_name"] == "tiny"  # no absolute path
    vecs, cut = StaticEncoder(static8).encode(TITLES)
    assert vecs.shape == (len(TITLES), 8) and vecs.dtype == np.float32 and cut == 0
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert StaticEncoder(distil(tiny_source, tmp_path / "nopca", pca_dims=None)).dim == 32


def test_the_pca_table_on_disk_is_the_pca_of_the_token_vectors(static8, tiny_source, tmp_path):
    """Rows read back from model.safetensors are the PCA projection of the unreduced token vectors (a table stored in
    the wrong memory order reads back as a permutation of its numbers, not as these rows)."""
    from sklearn.decomposition import PCA

    full = StaticEncoder(distil(tiny_source, tmp_path / "nopca", pca_dims=None)).table
    expect = PCA(n_components=8, svd_solver="full").fit_transform(full)
    np.testing.assert_allclose(np.abs(StaticEncoder(static8).table), np.abs(expect), atol=1e-4)


def test_distil_is_deterministic(static8, tiny_source, tmp_path):
    again = distil(tiny_source, tmp_path / "again", pca_dims=8, seed=0, source_name="tiny")
    for f in ("model.safetensors", "tokenizer.json", "config.json", "static.json"):
        assert (again / f).read_bytes() == (static8 / f).read_bytes(), f
    assert load_model(again).wikigat_model_id == load_model(static8).wikigat_model_id


def test_encode_matches_model2vec_and_ignores_the_batch(static8):
    enc = StaticEncoder(static8)
    vecs, _ = enc.encode(TITLES)
    np.testing.assert_allclose(vecs, enc.model.encode(TITLES, max_length=256, use_multiprocessing=False), atol=1e-5)
    # the source tokenizer pads every text to 128 tokens: a [PAD] vector in the mean would tie a title to its batch
    alone, _ = enc.encode(["Water"])
    np.testing.assert_allclose(alone[0], vecs[0], atol=1e-6)
    assert json.loads((static8 / "tokenizer.json").read_text())["padding"] is None


def test_long_titles_are_cut_and_counted(static8):
    enc = StaticEncoder(static8, max_seq_length=4)
    vecs, cut = enc.encode(["one two three four five six", "Water"])
    assert cut == 1
    np.testing.assert_allclose(vecs[0], enc.encode(["one two three four"])[0][0], atol=1e-6)


def test_load_model_takes_a_static_folder_with_its_own_store(static8, tiny_source, tmp_path):
    model = load_model(static8)
    assert model.wikigat_kind == "static" and model.wikigat_model_id.startswith("model2vec-D8-")
    assert (
        model.wikigat_precision.name == "fp32"
        and load_model(static8, precision="auto").wikigat_model_id == model.wikigat_model_id
    )
    vecs, cut = encode(model, TITLES)
    assert vecs.shape == (len(TITLES), 8) and cut == 0
    other = load_model(distil(tiny_source, tmp_path / "pca4", pca_dims=4))
    assert other.wikigat_model_id != model.wikigat_model_id
    store = open_store(model, tmp_path / "store")
    stats = embed_titles(TITLES + ["Water"], model, store, chunk_size=3, progress=False)
    assert stats["newly_encoded"] == len(TITLES) and stats["chunks_written"] == 3
    np.testing.assert_array_equal(store.get(TITLES), vecs)
    assert embed_titles(TITLES, model, open_store(model, tmp_path / "store"), progress=False)["newly_encoded"] == 0
    with pytest.raises(StoreError, match="written by model"):
        EmbeddingStore(tmp_path / "store", other.wikigat_model_id)


def test_static_refuses_a_low_precision(static8):
    with pytest.raises(EmbedError, match="precision='bf16' does not apply to the static model"):
        load_model(static8, precision="bf16")


def test_a_static_folder_without_its_table_names_the_folder(static8, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(static8, broken)
    (broken / "model.safetensors").unlink()
    with pytest.raises(
        EmbedError,
        match=r"broken' is not a model folder: it has no model.safetensors \(a model2vec "
        r"folder holds config.json, model.safetensors and tokenizer.json\)",
    ):
        load_model(broken)


def test_distil_refuses_a_folder_without_a_model(tmp_path):
    with pytest.raises(StaticModelError, match=r"source_dir=.*empty.* has no config.json"):
        distil(tmp_path / "empty", tmp_path / "out")
    with pytest.raises(StaticModelError, match="pca_dims=0 must be a positive integer or None"):
        distil(default_model_dir(), tmp_path / "out", pca_dims=0)


TRAIN_TEXTS = TITLES + [
    "Ancient Rome",
    "Photosynthesis",
    "Albert Einstein",
    "Mount Everest",
    "French Revolution",
    "Quantum mechanics",
    "Pacific Ocean",
    "William Shakespeare",
    "Solar System",
    "Printing press",
]


def _train(static8, out, steps=40, checkpoint=None, max_steps=None, **cfg):
    """Train static8 (8-d) towards seeded random 12-d targets: the map 8 -> 12 is folded into the saved table."""
    targets = np.random.default_rng(0).standard_normal((len(TRAIN_TEXTS), 12)).astype(np.float32)
    cfg = StaticTrainConfig(**{"steps": steps, "batch_size": 6, "lr": 3e-2, "warmup_frac": 0.1, **cfg})
    plan = mixture_plan({"t": len(TRAIN_TEXTS)}, {"t": 1}, cfg.steps, cfg.batch_size, cfg.seed)
    return targets, train_static(static8, out, TRAIN_TEXTS, targets, plan, cfg, checkpoint, 5, max_steps)


def test_training_lowers_the_loss_and_the_saved_folder_encodes_as_trained(static8, tmp_path):
    targets, res = _train(static8, tmp_path / "trained", checkpoint=tmp_path / "ck.pt")
    loss = res["losses"].loss
    assert res["complete"] and list(res["losses"].columns) == ["step", "loss"] and len(loss) == 40
    assert loss.head(5).mean() > 1.5 * loss.tail(5).mean()
    trained = StaticEncoder(tmp_path / "trained")
    made = json.loads((tmp_path / "trained" / "static.json").read_text())
    assert trained.dim == made["dim"] == 12 and made["source"] == "tiny" and made["pca_dims"] == 8
    assert made["trained"]["texts"] == len(TRAIN_TEXTS) and made["trained"]["lr"] == 3e-2
    # the training-time student from the checkpoint's parts: pool the distilled table with the trained rows, then map
    init = StaticEncoder(static8)
    part = read_checkpoint(tmp_path / "ck.pt")["parts"]["student"]
    flat, offsets = bags(init.token_ids(TRAIN_TEXTS)[0])
    used = np.unique(flat)
    table = torch.from_numpy(init.table.copy())
    table[used] = part["rows"]
    student = pool(table, torch.from_numpy(flat), torch.from_numpy(offsets), torch.from_numpy(init.weights[flat]))
    student = torch.nn.functional.normalize(student @ part["map.weight"].T, dim=1).numpy()
    np.testing.assert_allclose(trained.encode(TRAIN_TEXTS)[0], student, atol=1e-5)
    unused = np.setdiff1d(np.arange(len(init.table)), used)
    np.testing.assert_allclose(trained.table[unused], init.table[unused] @ part["map.weight"].numpy().T, atol=1e-5)
    cos = (trained.encode(TRAIN_TEXTS)[0] * targets / np.linalg.norm(targets, axis=1, keepdims=True)).sum(1).mean()
    assert cos == pytest.approx(1 - loss.tail(5).mean(), abs=0.1)


def test_a_killed_run_resumes_to_the_uninterrupted_tables(static8, tmp_path):
    _, whole = _train(static8, tmp_path / "whole", train_weights=True)
    _, part = _train(static8, tmp_path / "resumed", checkpoint=tmp_path / "ck.pt", max_steps=12, train_weights=True)
    assert not part["complete"] and part["steps"] == 12 and not (tmp_path / "resumed").exists()
    _, rest = _train(static8, tmp_path / "resumed", checkpoint=tmp_path / "ck.pt", train_weights=True)
    assert rest["complete"] and rest["steps"] == 30  # resumed from the checkpoint of step 10
    pd.testing.assert_frame_equal(rest["losses"], whole["losses"])
    a, b = StaticEncoder(tmp_path / "whole"), StaticEncoder(tmp_path / "resumed")
    assert np.array_equal(a.table, b.table) and np.array_equal(a.weights, b.weights)
    assert not np.array_equal(a.weights, StaticEncoder(static8).weights)  # train_weights trains them
    with pytest.raises(ValueError, match="other settings .cfg.weight_decay."):  # refused, naming the key
        _train(static8, tmp_path / "other", checkpoint=tmp_path / "ck.pt", train_weights=True, weight_decay=0.1)


def test_a_damaged_record_of_the_initial_model_is_moved_aside_and_the_trained_one_names_its_folder(static8, tmp_path):
    init = tmp_path / "pca8_copy"
    shutil.copytree(static8, init)
    (init / "static.json").write_text('{"source": "tiny", "pca_di')
    with pytest.warns(
        RecoveryWarning,
        match=r"static model record .*pca8_copy/static\.json could not be read \(not "
        r"valid JSON: Unterminated string .*\); moved aside to "
        r"static\.json\.corrupt, the trained model records only the initial "
        r"model's folder name",
    ):
        _train(init, tmp_path / "trained", steps=6)
    made = json.loads((tmp_path / "trained" / "static.json").read_text())
    assert made["source"] == "pca8_copy" and made["trained"]["steps"] == 6 and made["dim"] == 12
    assert (init / "static.json.corrupt").is_file() and not (init / "static.json").exists()


def test_training_refuses_an_impossible_setting(static8, tmp_path):
    with pytest.raises(StaticModelError, match=r"^StaticTrainConfig lr=0\.0 must be > 0; pass a value > 0$"):
        StaticTrainConfig(lr=0.0).check()
    with pytest.raises(StaticModelError, match=r"warmup_frac=1\.5 must be in \[0, 1\)"):
        _train(static8, tmp_path / "out", warmup_frac=1.5)
    cfg = StaticTrainConfig(steps=3, batch_size=2)
    with pytest.raises(StaticModelError, match="the batch plan has 2 batches .* the config 3 of 2"):
        train_static(static8, tmp_path / "out", TITLES, np.zeros((len(TITLES), 4), np.float32), [np.arange(2)] * 2, cfg)
    with pytest.raises(StaticModelError, match="8 texts but targets of shape \\(7, 4\\)"):
        train_static(static8, tmp_path / "out", TITLES, np.zeros((7, 4), np.float32), [np.arange(2)] * 3, cfg)
    with pytest.raises(StaticModelError, match="the batch plan draws indices 0..8 from 8 texts"):
        train_static(
            static8, tmp_path / "out", TITLES, np.zeros((8, 4), np.float32), [np.arange(2), [7, 8], [0, 1]], cfg
        )
    assert not (tmp_path / "out").exists()


def test_texts_the_plan_never_draws_are_not_trained_on(static8, tmp_path):
    texts = ["Water", "Climate change", "Photosynthesis", "Zürich"]
    targets = np.random.default_rng(1).standard_normal((4, 12)).astype(np.float32)
    cfg = StaticTrainConfig(steps=6, batch_size=2, lr=1e-2)
    train_static(static8, tmp_path / "drawn", texts, targets, [np.array([0, 3])] * 6, cfg)
    train_static(static8, tmp_path / "two", [texts[0], texts[3]], targets[[0, 3]], [np.array([0, 1])] * 6, cfg)
    assert json.loads((tmp_path / "drawn" / "static.json").read_text())["trained"]["texts"] == 2
    assert np.array_equal(StaticEncoder(tmp_path / "drawn").table, StaticEncoder(tmp_path / "two").table)
