"""A damaged file never blocks a run for good: every reader of a file the project wrote names it, moves it aside and
rebuilds or resumes; nothing is unpickled as code."""

import json
import pickle
import re
import sqlite3
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from lib.common.paths import RecoveryWarning, append_csv_rows, read_rows
from lib.crawl.pages import Page
from lib.crawl.sources import PageCache
from lib.linkpred.checkpoint import CheckpointLost, data_fingerprint, epoch_checkpoints, load_checkpoint
from lib.linkpred.config import GatTrainingParams, TrainConfig
from lib.linkpred.train import Checkpointing, train_model
from tests.test_train import SMALL, _graphs


def cut(path, share=0.5):
    path.write_bytes(path.read_bytes()[: int(path.stat().st_size * share)])


def test_a_cut_best_epoch_checkpoint_is_moved_aside_and_written_again_with_the_same_weights(tmp_path):
    graphs = _graphs()
    fid = data_fingerprint(graphs)
    cfg = TrainConfig(epochs=2, seed=9, lr=0.005, log_aauc=False)  # selects epoch 1 of 2
    ckpt = Checkpointing(tmp_path, data_id=fid)
    m_full, r_full = train_model("gat_model", SMALL, graphs[:4], graphs[4:], cfg, ckpt, progress=False)
    assert r_full.best_epoch == 1
    cut(epoch_checkpoints(tmp_path)[1])
    with pytest.warns(
        RecoveryWarning,
        match=r"best-epoch checkpoint .*epoch_1\.pt could not be read \(cut short or "
        r"overwritten\); moved aside to epoch_1\.pt\.corrupt, it is written "
        r"again from the weights kept in last\.pt",
    ):
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
    with (
        pytest.warns(RecoveryWarning),
        pytest.raises(
            CheckpointLost,
            match=r"epoch_1\.pt is missing or was damaged.*"
            r"run notebook 03",
        ),
    ):
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
    data[3 * 4096 : 3 * 4096 + 3000] = b"\xab" * 3000  # the header page stays valid
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
    done = subprocess.run(
        [sys.executable, "-c", "from lib.common.paths import CACHE; print(CACHE)"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
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
    from lib.embed.dataset import DatasetError, GraphDataset, build_dataset
    from tests.test_dataset import built_dataset

    graphs, files, store, _ = built_dataset(tmp_path, 3)
    first = GraphDataset(tmp_path / "ds")[1].x.clone()
    cut(tmp_path / "ds" / "graphs" / "g01.pt")
    with (
        pytest.warns(RecoveryWarning),
        pytest.raises(
            DatasetError,
            match=r"g01\.pt could not be read \(moved aside\); "
            r"run notebook 02",
        ),
    ):
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


DAMAGED_CSV = {  # what a rows file can hold after a full disk, a bad copy or an edit, and the reason the warning gives
    "a cut header": (b"encoder,se", r"its header line is cut short"),
    "nothing": (b"", r"it is empty"),
    "binary garbage": (b"\x89PNG\r\n\x1a\n\x00\xff\xfe" * 8, r"not UTF-8 text"),
}


def moved_aside(path, what: str, reason: str, consequence: str) -> str:
    """The RecoveryWarning text of move_aside for `path`, as a pattern."""
    return (
        rf"{what} {re.escape(str(path))} could not be read \({reason}\); moved aside to "
        rf"{re.escape(path.name)}\.corrupt, {consequence}"
    )


@pytest.mark.parametrize("damage", DAMAGED_CSV)
def test_appending_to_a_damaged_rows_file_moves_it_aside_and_keeps_the_new_rows(tmp_path, damage):
    data, reason = DAMAGED_CSV[damage]
    path = tmp_path / "rows.csv"
    path.write_bytes(data)
    with pytest.warns(
        RecoveryWarning, match=moved_aside(path, "rows file", reason, "a new one is started with the rows added now")
    ):
        append_csv_rows(path, [{"encoder": "control", "seed": 1, "auc": 0.6}])
    assert path.with_name("rows.csv.corrupt").read_bytes() == data
    append_csv_rows(path, [{"encoder": "control", "seed": 2, "auc": 0.7}])
    assert pd.read_csv(path).values.tolist() == [["control", 1, 0.6], ["control", 2, 0.7]]


def test_a_rows_file_without_a_column_its_reader_needs_is_moved_aside(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text("garbagegarbage\n")  # pandas reads it: one column, no rows
    with pytest.warns(RecoveryWarning, match=moved_aside(path, "finished rows", "it has no row_id column", "again")):
        rows = read_rows(path, "finished rows", "again", columns=["row_id"])
    assert rows.empty and list(rows.columns) == ["row_id"] and not path.exists()
    assert read_rows(path, "finished rows", "again", columns=["row_id"]).empty  # no file: nothing to say


def test_a_damaged_encoder_record_of_notebook_05b_is_moved_aside_and_the_encoder_built_again(tmp_path):
    from lib.embedders import encoders

    recipe = encoders.Recipe(
        texts=["a"],
        targets=np.zeros((1, 384), np.float32),
        sizes={"titles": 1},
        weights={"titles": 1.0},
        steps=1,
        static_steps=1,
        batch_size=2,
        lr=1e-4,
        static_lr=1e-3,
        seed=0,
    )
    spec = encoders.parse("control:0")
    folder = encoders.build(spec, recipe, tmp_path)
    record = folder / "made.json"
    made = record.read_bytes()
    damaged = {
        made[: len(made) // 2]: r"not valid JSON: .+ at line \d+",
        b"": r"not valid JSON: Expecting value at line 1",
        b"\xff\xfe\x00 garbage": r"not UTF-8 text",
        b"[1, 2]": r"it holds a JSON list, not an object",
    }
    for data, reason in damaged.items():
        record.write_bytes(data)
        with pytest.warns(
            RecoveryWarning,
            match=moved_aside(record, "encoder record", reason, "its folder is deleted and the encoder built again"),
        ):
            assert encoders.build(spec, recipe, tmp_path) == folder
        assert record.read_bytes() == made
    assert len(pd.read_csv(tmp_path / "builds.csv")) == 1 + len(damaged)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        encoders.build(spec, recipe, tmp_path)  # a whole record: kept, nothing said
    assert len(pd.read_csv(tmp_path / "builds.csv")) == 1 + len(damaged)


def test_a_damaged_dataset_index_is_moved_aside_and_every_graph_built_again(tmp_path):
    from lib.embed.dataset import GraphDataset, build_dataset
    from tests.test_dataset import built_dataset

    graphs, files, store, first = built_dataset(tmp_path, 2)
    index = tmp_path / "ds" / "index.json"
    index.write_bytes(index.read_bytes()[:40])
    with pytest.warns(
        RecoveryWarning,
        match=moved_aside(index, "dataset index", r"not valid JSON: .+", "every graph of the dataset is built again"),
    ):
        assert build_dataset(files, store, tmp_path / "ds", progress=False) == first
    assert index.with_name("index.json.corrupt").is_file() and GraphDataset(tmp_path / "ds").ids == ["g00", "g01"]


def test_a_damaged_cache_of_title_mention_links_is_moved_aside_and_computed_again(tmp_path):
    from lib.crawl.sources import embedded_snapshot

    links = embedded_snapshot(tmp_path).links
    (cached,) = tmp_path.glob("embedded_links_*.json")
    cached.write_text("[]")
    with pytest.warns(
        RecoveryWarning,
        match=moved_aside(
            cached, "cached title-mention links", "it holds a JSON list, not an object", "they are computed again"
        ),
    ):
        assert embedded_snapshot(tmp_path).links == links
    assert cached.with_name(cached.name + ".corrupt").read_text() == "[]" and json.loads(cached.read_text()) == links


def fake_link_prediction(tmp_path, monkeypatch, **extra):
    """(run, scored, rows_file): stage 5's link prediction of two (embedder, seed) pairs into rows_file, each pair
    scored by a stand-in for stage 3 that appends its seed to `scored` and writes rows with `extra` columns."""
    from lib.distill import lp as lp_mod

    scored = []

    def score(files, titles, model, key, out, split_file, params, progress, rows_file):  # stage 3 is not under test
        scored.append(key["seed"])
        new = [
            {**key, "model": m, "protocol": p, "auc": 0.5 + key["seed"] / 10, **extra}
            for m in lp_mod.LP_MODELS
            for p in params.protocols
        ]
        append_csv_rows(rows_file, new, replace=key)
        return new

    monkeypatch.setattr(lp_mod, "_score", score)
    rows_file = tmp_path / "lp_rows.csv"

    one_epoch = GatTrainingParams(gat_epochs=1)

    def run() -> pd.DataFrame:
        return lp_mod.graph_link_prediction(
            [],
            [("reference", 0, None), ("reference", 1, None)],
            tmp_path / "lp",
            lambda s: lp_mod.lp_params(one_epoch, s, ("leak_free",), 1, 0.1),
            rows_file=rows_file,
            key={"source": "wikispeedia"},
        )

    return run, scored, rows_file


def test_a_damaged_link_prediction_rows_file_is_moved_aside_and_its_pairs_scored_again(tmp_path, monkeypatch):
    run, scored, rows_file = fake_link_prediction(tmp_path, monkeypatch)
    first = run()
    assert scored == [0, 1] and len(run()) == 4 and scored == [0, 1]  # the second run resumes every pair
    data = b"\xff\xfe" + rows_file.read_bytes()[2:]
    rows_file.write_bytes(data)
    with pytest.warns(
        RecoveryWarning,
        match=moved_aside(
            rows_file, "link-prediction rows", r"not UTF-8 text", r"their \(embedder, seed\) pairs are scored again"
        ),
    ):
        again = run()
    assert scored == [0, 1, 0, 1] and rows_file.with_name("lp_rows.csv.corrupt").read_bytes() == data
    pd.testing.assert_frame_equal(again, first)
    pd.testing.assert_frame_equal(read_rows(rows_file, "rows", "-"), first)


def test_a_damaged_rows_file_of_notebook_06_is_moved_aside_and_its_students_trained_again(tmp_path, monkeypatch):
    from lib.kd import stage as kd_stage
    from tests.test_kd_stage import TEXTS, _cfg, _teacher, fake_tagger

    enc = _teacher(tmp_path, monkeypatch)
    rng = np.random.default_rng(0)
    data = {
        "polarity": {
            s: pd.DataFrame({"text": [TEXTS[i] for i in rng.permutation(8)] + TEXTS[:2], "label": [0, 1] * 5})
            for s in ("train", "val", "test")
        }
    }
    rows, _ = kd_stage.run_students(_cfg(), enc, data, tmp_path / "kd", TEXTS[:6], progress=False, tagger=fake_tagger)
    path = tmp_path / "kd" / "rows.csv"
    path.write_bytes(b"\xff\xfe" + path.read_bytes()[2:])
    with pytest.warns(
        RecoveryWarning,
        match=moved_aside(path, "finished student rows", "not UTF-8 text", "their students are trained again"),
    ):
        again, _ = kd_stage.run_students(
            _cfg(), enc, data, tmp_path / "kd", TEXTS[:6], progress=False, tagger=fake_tagger
        )
    assert path.with_name("rows.csv.corrupt").is_file()
    pd.testing.assert_frame_equal(again.drop(columns="train_s"), rows.drop(columns="train_s"))
    pd.testing.assert_frame_equal(pd.read_csv(path).drop(columns="train_s"), rows.drop(columns="train_s"))


def test_notebook_03b_moves_a_damaged_stage_3_rows_file_aside_and_names_notebook_03(tmp_path):
    from lib.common.params import ParamError
    from lib.linkpred.beyond_stage import load_stage3
    from lib.linkpred.config import BeyondParams

    (tmp_path / "metrics.json").write_text(json.dumps({"train_gat": {}}))
    path = tmp_path / "train_gat_rows.csv"
    path.write_bytes(b"")
    with (
        pytest.warns(
            RecoveryWarning,
            match=moved_aside(
                path, "notebook 03's rows", "it is empty", "run notebook 03 on this run_dir again to write them"
            ),
        ),
        pytest.raises(ParamError, match=r"run notebook 03 \(train_gat\) on this run_dir first"),
    ):
        load_stage3(BeyondParams(run_dir=str(tmp_path)))
    assert path.with_name("train_gat_rows.csv.corrupt").is_file()


def test_a_damaged_loss_history_of_a_finished_distillation_run_is_moved_aside_and_left_out(tmp_path):
    from lib.distill.checkpoint import GridCheckpoint
    from tests.test_distill import _grid_cfg

    cfg = _grid_cfg()
    losses = pd.DataFrame({"step": [0, 1], "loss": [2.0, 1.5]})
    GridCheckpoint(tmp_path, cfg).put({"model": "S1", "seed": 0}, {"S1": losses}, {"S1": losses})
    hist, curves = {}, {}
    assert GridCheckpoint(tmp_path, cfg).get("S1", hist, curves) == {"model": "S1", "seed": 0}
    pd.testing.assert_frame_equal(hist["S1"], losses)
    path = tmp_path / "losses" / "S1.csv"
    path.write_bytes(b"step,loss\n\xff\xfe0,2.0\n")
    hist, curves = {}, {}
    with pytest.warns(
        RecoveryWarning,
        match=moved_aside(path, "losses of the run S1", r"not UTF-8 text", "the figures leave them out"),
    ):
        assert GridCheckpoint(tmp_path, cfg).get("S1", hist, curves) == {"model": "S1", "seed": 0}
    assert "S1" not in hist and path.with_name("S1.csv.corrupt").is_file()
    pd.testing.assert_frame_equal(curves["S1"], losses)


def grid_with_two_finished_runs(folder):
    """(grid settings, rows.jsonl path) of a distillation grid folder in which runs S1 and S2 finished."""
    from lib.distill.checkpoint import GridCheckpoint
    from tests.test_distill import _grid_cfg

    cfg = _grid_cfg()
    ck = GridCheckpoint(folder, cfg)
    for name in ("S1", "S2"):
        ck.put({"model": name, "seed": 0}, {})
    return cfg, folder / "rows.jsonl"


def test_unreadable_lines_of_a_grids_finished_rows_are_moved_aside_and_its_readable_rows_kept(tmp_path):
    from lib.distill.checkpoint import GridCheckpoint

    cfg, path = grid_with_two_finished_runs(tmp_path)
    first, second = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(first + b"\xff\xfe{garbage\n" + b'["model"]\n' + second)
    with pytest.warns(
        RecoveryWarning,
        match=moved_aside(
            path, "finished-run rows", "2 of its 4 lines hold no row", "the runs of those lines are trained again"
        ),
    ):
        assert set(GridCheckpoint(tmp_path, cfg).rows) == {"S1", "S2"}
    assert path.read_bytes() == first + second and path.with_name("rows.jsonl.corrupt").is_file()


@pytest.mark.slow
def test_a_damaged_probe_rows_file_of_notebook_05b_is_moved_aside_and_its_encoders_probed_again(tmp_path, monkeypatch):
    from lib.embedders import encoders, stage
    from lib.embedders.config import EmbeddersParams

    recipe = encoders.Recipe(
        texts=["a"],
        targets=np.zeros((1, 384), np.float32),
        sizes={"titles": 1},
        weights={"titles": 1.0},
        steps=1,
        static_steps=1,
        batch_size=2,
        lr=1e-4,
        static_lr=1e-3,
        seed=0,
    )
    built = {
        "control 0": {
            "folder": encoders.build(encoders.parse("control:0"), recipe, tmp_path),
            "layers": 1,
            "kind": "control",
        }
    }
    path = tmp_path / "embedders" / "probe_rows.csv"
    path.parent.mkdir()
    path.write_bytes(b'encoder,model_id,texts\ncontrol 0,"bert-L1')
    with pytest.warns(
        RecoveryWarning,
        match=moved_aside(
            path,
            "probe rows",
            "1 row is not whole, cut short or overwritten: line 2 with encoder=control 0, model_id=bert-L1",
            "its 0 whole rows are written back and the cut one dropped: its encoders are probed again",
        ),
    ):
        rows = stage.probes(EmbeddersParams(embedder_probe_texts=50), built, tmp_path)
    assert rows.encoder.tolist() == ["control 0"] and rows.fid_cosine.notna().all()
    assert path.with_name("probe_rows.csv.corrupt").is_file()
    pd.testing.assert_frame_equal(pd.read_csv(path), rows)
    monkeypatch.setattr(stage, "ensure_teacher", lambda: pytest.fail("every encoder was probed: no teacher to load"))
    pd.testing.assert_frame_equal(stage.probes(EmbeddersParams(embedder_probe_texts=50), built, tmp_path), rows)
