"""A damaged file never blocks a run for good: every reader of a file the project wrote names it, moves it aside and
rebuilds or resumes; nothing is unpickled as code."""
import pickle
import sqlite3
import warnings

import pytest
import torch

from lib.common.paths import RecoveryWarning
from lib.crawl.pages import Page
from lib.crawl.sources import PageCache
from lib.linkpred.checkpoint import CheckpointLost, data_fingerprint, epoch_checkpoints, load_checkpoint
from lib.linkpred.config import TrainConfig
from lib.linkpred.train import Checkpointing, train_model
from tests.test_train import SMALL, _graphs


def cut(path, share=0.5):
    path.write_bytes(path.read_bytes()[:int(path.stat().st_size * share)])


def test_a_cut_best_epoch_checkpoint_is_moved_aside_and_written_again_with_the_same_weights(tmp_path):
    graphs = _graphs()
    fid = data_fingerprint(graphs)
    cfg = TrainConfig(epochs=2, seed=1, lr=0.005, log_aauc=False)  # selects epoch 1 of 2
    ckpt = Checkpointing(tmp_path, data_id=fid)
    m_full, r_full = train_model("gat_model", SMALL, graphs[:4], graphs[4:], cfg, ckpt, progress=False)
    assert r_full.best_epoch == 1
    cut(epoch_checkpoints(tmp_path)[1])
    with pytest.warns(RecoveryWarning, match=r"best-epoch checkpoint .*epoch_1\.pt could not be read \(cut short or "
                                             r"overwritten\); moved aside to epoch_1\.pt\.corrupt, it is written "
                                             r"again from the weights kept in last\.pt"):
        m_again, r_again = train_model("gat_model", SMALL, graphs[:4], graphs[4:], cfg, ckpt, progress=False)
    assert (tmp_path / "epoch_1.pt.corrupt").is_file() and list(epoch_checkpoints(tmp_path)) == [1, 2]
    assert r_again.best_epoch == 1 and r_again.val == r_full.val
    for (k, a), b in zip(m_full.state_dict().items(), m_again.state_dict().values()):
        assert torch.equal(a, b), k
    written = load_checkpoint(epoch_checkpoints(tmp_path)[1])[0]
    for (k, a), b in zip(m_full.state_dict().items(), written.state_dict().values()):
        assert torch.equal(a, b), k


def test_notebook_04_names_a_cut_checkpoint_moves_it_aside_and_says_how_it_is_rebuilt(tmp_path):
    graphs = _graphs()
    cfg = TrainConfig(epochs=1, seed=0, log_aauc=False)
    train_model("gat_model", SMALL, graphs[:2], graphs[4:], cfg, Checkpointing(tmp_path, data_id="d"), progress=False)
    path = epoch_checkpoints(tmp_path)[1]
    cut(path)
    with pytest.warns(RecoveryWarning), pytest.raises(CheckpointLost, match=r"epoch_1\.pt is missing or was damaged.*"
                                                                            r"run notebook 03"):
        load_checkpoint(path)
    assert (tmp_path / "epoch_1.pt.corrupt").is_file()


def test_a_garbage_negatives_cache_file_is_rebuilt_and_never_unpickled_as_code(tmp_path, monkeypatch):
    from lib.linkpred import protocols
    from lib.linkpred.data import synthetic_graph
    from lib.linkpred.protocols import ProtocolSettings, make_protocol

    monkeypatch.setattr(protocols, "NEGATIVE_CACHE", tmp_path / "neg")
    graphs = {f"g{i}": synthetic_graph(60, 150, 8, seed=i, graph_id=f"g{i}") for i in range(4)}
    roles = {"train": ["g0", "g1"], "val": ["g2"], "test": ["g3"]}
    first = make_protocol(graphs, roles, "leak_free", 0, ProtocolSettings(negatives_per_positive=4))
    files = sorted((tmp_path / "neg").glob("*.pt"))
    marker = tmp_path / "ran"

    class Opens:  # unpickling it with code allowed would create `marker`
        def __reduce__(self):
            return open, (str(marker), "w")

    files[0].write_bytes(pickle.dumps(Opens(), protocol=2))
    files[1].write_bytes(b"garbage" * 50)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = make_protocol(graphs, roles, "leak_free", 0, ProtocolSettings(negatives_per_positive=4))
    told = [str(w.message) for w in caught if w.category is RecoveryWarning]
    assert len(told) == 2 and all("cached negative sets" in t and "weights_only" not in t for t in told)
    assert not marker.exists() and all(f.is_file() and f.with_name(f.name + ".corrupt").is_file() for f in files[:2])
    for t0, t1 in zip(first.test + first.val, again.test + again.val):
        assert torch.equal(t0.negatives("heart"), t1.negatives("heart"))


def test_a_page_cache_with_a_valid_header_and_damaged_pages_is_moved_aside_and_rebuilt(tmp_path):
    path = tmp_path / "pages.sqlite"
    cache = PageCache(path)
    for i in range(2000):
        cache.put("src", f"t{i}", Page(f"t{i}", "ok", tuple(f"l{j}" for j in range(20))))
    cache.close()
    data = bytearray(path.read_bytes())
    data[3 * 4096:3 * 4096 + 3000] = b"\xab" * 3000  # the header page stays valid
    path.write_bytes(bytes(data))
    with pytest.raises(sqlite3.DatabaseError):
        sqlite3.connect(path).execute("SELECT COUNT(*), SUM(LENGTH(links)) FROM pages").fetchone()
    with pytest.warns(RecoveryWarning, match=r"page cache .*pages\.sqlite could not be read .*pages are fetched again"):
        cache = PageCache(path)
    assert len(cache) == 0 and (tmp_path / "pages.sqlite.corrupt").is_file()
    cache.put("src", "a", Page("a", "ok", ("b",)))
    assert cache.get("src", "a") == Page("a", "ok", ("b",))
    cache.close()


def test_the_cache_folder_follows_wikigat_cache(tmp_path):
    import os
    import subprocess
    import sys

    from lib.common.paths import ROOT

    env = {**os.environ, "WIKIGAT_CACHE": str(tmp_path / "c")}
    done = subprocess.run([sys.executable, "-c", "from lib.common.paths import CACHE; print(CACHE)"], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(tmp_path / "c")


def test_a_cut_fine_tuned_teacher_and_damaged_teacher_logits_are_named_and_made_again(tmp_path, monkeypatch):
    import numpy as np

    from lib.distill.train import FinetuneConfig, TaskTargets
    from lib.kd import stage as kd_stage
    from tests.test_kd_stage import TEXTS, _teacher

    enc = _teacher(tmp_path, monkeypatch)
    task = TaskTargets(TEXTS, np.array([0, 1] * 4), 2)
    cfg = FinetuneConfig(steps=3, batch_size=4, max_seq_len=16, lr=1e-3, layers=1)
    kd_stage.task_teacher(enc, task, cfg, tmp_path / "t", progress=False)
    saved = next((tmp_path / "t").glob("teacher_ft_*.pt"))
    cut(saved)
    with pytest.warns(RecoveryWarning, match=r"fine-tuned teacher .*teacher_ft_.*could not be read"):
        _, reloaded = kd_stage.task_teacher(enc, task, cfg, tmp_path / "t", progress=False)
    assert not reloaded and saved.is_file() and saved.with_name(saved.name + ".corrupt").is_file()
    (tmp_path / "logits.npz").write_bytes(b"not an npz")
    with pytest.warns(RecoveryWarning, match=r"teacher logits .*logits\.npz could not be read"):
        kd_stage.LogitCache(tmp_path / "logits.npz", 2)
    assert (tmp_path / "logits.npz.corrupt").is_file()


def test_damaged_target_embeddings_are_named_and_computed_again(tmp_path):
    import numpy as np

    from lib.distill.embedding import target_embeddings

    titles = ["Water", "Energy", "Education"]
    x = target_embeddings(titles, cache_dir=tmp_path, progress=False)
    (cached,) = tmp_path.glob("*.npy")
    cut(cached)
    with pytest.warns(RecoveryWarning, match=r"target embeddings .*\.npy could not be read"):
        again = target_embeddings(titles, cache_dir=tmp_path, progress=False)
    np.testing.assert_array_equal(x, again)


def test_a_cut_dataset_file_is_named_moved_aside_and_rebuilt_by_notebook_02s_builder(tmp_path):
    from lib.common.graphio import write_graph
    from lib.embed.dataset import DatasetError, GraphDataset, build_dataset
    from tests.test_dataset import _graph, _store_for

    graphs = [_graph(k) for k in range(3)]
    files = [tmp_path / "graphs" / f"g{k}.json" for k in range(3)]
    for f, g in zip(files, graphs):
        write_graph(f, g)
    store = _store_for(graphs, tmp_path / "store")
    build_dataset(files, store, tmp_path / "ds", progress=False)
    first = GraphDataset(tmp_path / "ds")[1].x.clone()
    cut(tmp_path / "ds" / "graphs" / "g1.pt")
    with pytest.warns(RecoveryWarning), pytest.raises(DatasetError, match=r"g1\.pt could not be read \(moved aside\); "
                                                                          r"run notebook 02"):
        GraphDataset(tmp_path / "ds")[1]
    build_dataset(files, store, tmp_path / "ds", progress=False)
    assert torch.equal(GraphDataset(tmp_path / "ds")[1].x, first)


def test_a_full_disk_under_the_page_cache_names_the_file_and_the_fix(tmp_path):
    path = tmp_path / "pages.sqlite"
    cache = PageCache(path)
    cache._db.execute("PRAGMA max_page_count = 8")  # what a full disk looks like to SQLite
    with pytest.raises(OSError, match=rf"no space left on the device of {path}; free space there"):
        for i in range(500):
            cache.put("src", f"t{i}", Page(f"t{i}", "ok", tuple(f"link {j}" for j in range(50))))
    cache.close()


def test_notebook_02_refuses_a_folder_that_is_not_a_model_naming_what_is_missing(tmp_path):
    from lib.embed.encoder import EmbedError, load_model

    (tmp_path / "config.json").write_bytes(b"\x89PNG not json")
    with pytest.raises(EmbedError, match=rf"model_dir '{tmp_path}' is not a model folder: config.json is not UTF-8"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text('{"hidden_size": 384}')
    with pytest.raises(EmbedError, match=r"its config.json names no model_type"):
        load_model(tmp_path)
