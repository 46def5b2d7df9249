"""A model folder (notebook 02's model_dir, notebook 05b's folder: encoders) is checked from its files before any work
and again where it is loaded: weights in safetensors files whose headers parse, configs and a tokenizer that parse;
weights kept only as a pickle are refused with how to convert them, and never unpickled. Results of local ranks are
read back as tensors and plain values only."""

import os
import pickle

import numpy as np
import pytest
import torch
from safetensors.numpy import save_file
from tokenizers import Tokenizer
from tokenizers.models import WordLevel

from lib.embed.encoder import EmbedError, check_model_dir, default_model_dir, load_model
from lib.run.ranks import Dist, rank_result, run_local
from lib.run.runner import main

CONVERSION = (
    "SentenceTransformer(folder).save(folder) or model.save_pretrained(folder, safe_serialization=True) "
    "writes model.safetensors"
)


class RunsCode:
    """A pickle that creates the file `marker` when it is unpickled: what a hostile weights file can do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def linked_copy(dst, skip=()):
    """all-MiniLM-L6-v2's folder as symlinks under `dst` (same bytes, no copy), less the files named in `skip`."""
    src = default_model_dir()
    for p in src.rglob("*"):
        if p.is_file() and p.relative_to(src).as_posix() not in skip:
            (dst / p.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(p, dst / p.relative_to(src))
    return dst


def pickled(folder, marker):
    """The folder with its weights as a pickle only: pytorch_model.bin, which would create `marker` if unpickled."""
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(RunsCode(marker)))
    return folder


def dry(tmp_path, key, folder):
    value = str(folder) if key == "model_dir" else f"['folder:{folder}']"
    return main(
        ["--outputs", str(tmp_path / "out"), "--dry-run", "--size", "tiny", "--notebooks", "01", "-p", f"{key}={value}"]
    )


def refusal(tmp_path, capsys, key, folder) -> str:
    assert dry(tmp_path, key, folder) == 2
    err = capsys.readouterr().err
    what = "model_dir" if key == "model_dir" else "the folder"
    assert f"{what} '{folder}' is not a model folder: " in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()
    return err


KEYS = ["model_dir", "embedder_encoders"]


@pytest.mark.parametrize("key", KEYS)
def test_pickled_weights_are_refused_at_dry_run_naming_the_file_and_the_conversion(tmp_path, capsys, key):
    folder = pickled(linked_copy(tmp_path / "m", skip={"model.safetensors"}), tmp_path / "ran")
    err = refusal(tmp_path, capsys, key, folder)
    assert "its weights pytorch_model.bin are a pickle, which this project never loads" in err and CONVERSION in err
    assert "weights_only" not in err and not (tmp_path / "ran").exists()


@pytest.mark.parametrize("key", KEYS)
def test_random_bytes_for_model_safetensors_are_refused_naming_the_file(tmp_path, capsys, key):
    folder = linked_copy(tmp_path / "m", skip={"model.safetensors"})
    (folder / "model.safetensors").write_bytes(np.random.default_rng(0).bytes(4096))
    err = refusal(tmp_path, capsys, key, folder)
    assert "model.safetensors is not a safetensors file (header too large); copy the folder again" in err


@pytest.mark.parametrize("key", KEYS)
def test_a_broken_tokenizer_is_refused_in_one_line(tmp_path, capsys, key):
    folder = linked_copy(tmp_path / "m", skip={"tokenizer.json"})
    (folder / "tokenizer.json").write_text('{"version": "1.0", "truncation": ')
    err = refusal(tmp_path, capsys, key, folder)
    assert "tokenizer.json cannot be read by the tokenizers library (EOF while parsing" in err


@pytest.mark.parametrize("key", KEYS)
def test_a_good_folder_passes_the_dry_run(tmp_path, capsys, key):
    assert dry(tmp_path, key, linked_copy(tmp_path / "m")) == 0, capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_where_it_is_loaded_a_pickle_is_refused_before_anything_is_unpickled(tmp_path):
    folder = pickled(linked_copy(tmp_path / "m", skip={"model.safetensors"}), tmp_path / "ran")
    with pytest.raises(EmbedError, match=rf"^model_dir '{folder}' is not a model folder: its weights pytorch_model"):
        load_model(folder)
    assert not (tmp_path / "ran").exists()


def test_a_transformer_in_a_subfolder_is_found_through_modules_json(tmp_path):
    """The older sentence-transformers layout: the transformer, its weights and tokenizer in 0_Transformer/."""
    src, folder = default_model_dir(), tmp_path / "m"
    (folder / "0_Transformer").mkdir(parents=True)
    for p in src.iterdir():
        if p.is_file() and p.name != "modules.json":
            os.symlink(p, folder / "0_Transformer" / p.name)
    (folder / "1_Pooling").mkdir()
    os.symlink(src / "1_Pooling" / "config.json", folder / "1_Pooling" / "config.json")
    (folder / "modules.json").write_text(
        '[{"idx": 0, "name": "0", "path": "0_Transformer", "type": '
        '"sentence_transformers.models.Transformer"}, {"idx": 1, "name": "1", '
        '"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]'
    )
    check_model_dir(folder)
    (folder / "0_Transformer" / "model.safetensors").unlink()
    pickled(folder / "0_Transformer", tmp_path / "ran")
    with pytest.raises(EmbedError, match=r"its weights 0_Transformer/pytorch_model\.bin are a pickle"):
        check_model_dir(folder)
    (folder / "0_Transformer" / "model.safetensors").write_bytes(b"")
    with pytest.raises(
        EmbedError,
        match=r"0_Transformer/model\.safetensors is not a safetensors file \(header too "
        r"small\)",
    ):
        check_model_dir(folder)


def static_folder(folder):
    """A model2vec folder of 3 tokens x 2 dims."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "model2vec", "hidden_dim": 2}')
    save_file({"embeddings": np.eye(3, 2, dtype=np.float32)}, str(folder / "model.safetensors"))
    Tokenizer(WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]")).save(str(folder / "tokenizer.json"))
    return folder


def test_a_model2vec_folder_has_its_table_and_tokenizer_checked(tmp_path):
    folder = static_folder(tmp_path / "m2v")
    check_model_dir(folder, what="the folder")
    (folder / "model.safetensors").write_bytes(b"\x00" * 64)
    with pytest.raises(EmbedError, match=r"^the folder '.*m2v' is not a model folder: model\.safetensors is not a "):
        check_model_dir(folder, what="the folder")
    (folder / "model.safetensors").unlink()
    with pytest.raises(EmbedError, match=r"it has no model\.safetensors \(a model2vec folder holds"):
        check_model_dir(folder, what="the folder")


# ------------------------------------------------------------------------------------------------ local ranks
def plain_result(d):
    return {"rank": d.rank, "state": {"w": torch.arange(3.0)}, "loss": [0.5, 0.25], "name": "ok"}


def result_that_runs_code(d, marker):
    return {"rank": d.rank, "extra": RunsCode(marker)}


def test_a_rank_file_is_read_as_tensors_and_plain_values_only(tmp_path):
    torch.save(plain_result(Dist()), tmp_path / "rank0.pt")
    res = rank_result(tmp_path / "rank0.pt", 0, plain_result)
    assert res["name"] == "ok" and res["loss"] == [0.5, 0.25] and torch.equal(res["state"]["w"], torch.arange(3.0))
    torch.save(result_that_runs_code(Dist(), tmp_path / "ran"), tmp_path / "rank1.pt")
    with pytest.raises(
        RuntimeError,
        match=r"^the result of result_that_runs_code on rank 1 cannot be read back: not a "
        r"file of arrays and plain values; return tensors and plain values",
    ):
        rank_result(tmp_path / "rank1.pt", 1, result_that_runs_code)
    assert not (tmp_path / "ran").exists()


@pytest.mark.slow  # a job started in a fresh process
def test_a_local_job_whose_result_would_run_code_is_refused_in_one_line(tmp_path):
    with pytest.raises(RuntimeError) as e:
        run_local(result_that_runs_code, (str(tmp_path / "ran"),), world=1, timeout_s=60)
    assert str(e.value) == (
        "the result of result_that_runs_code on rank 0 cannot be read back: not a file of arrays "
        "and plain values; return tensors and plain values (numbers, strings, lists and dicts of "
        "them) from the job"
    )
    assert not (tmp_path / "ran").exists()
