"""Whether a folder is a model this project can load, read from its files without loading the model.

A model folder has JSON configs that parse (its config.json names a model_type), weights in safetensors files whose
headers parse, and a tokenizer that parses (tokenizer.json, read by the tokenizers library, or a vocabulary file).
Weights kept only as a pickle (pytorch_model.bin) are refused with how to convert them: unpickling can run code, so
nothing in the project unpickles a model, and this check never opens such a file.

A sentence-transformers folder lists its modules in modules.json (the transformer at the top or in a subfolder such as
0_Transformer, pooling in 1_Pooling, ...): every module folder there is checked. A folder without modules.json (a
Hugging Face model folder) is one module; a model2vec folder (config.json with model_type "model2vec") is read as
model2vec reads it: model.safetensors and tokenizer.json at its top.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from safetensors import SafetensorError, safe_open
from tokenizers import Tokenizer

from lib.common.errors import WikigatError

FIX = (
    "pass a folder saved with SentenceTransformer.save(folder) or a model2vec folder (empty model_dir: "
    "all-MiniLM-L6-v2)"
)
RESTORE = "copy the folder again from where it was saved, or save the model again with SentenceTransformer.save(folder)"
CONVERT = (
    "convert it once, in a Python session you trust: SentenceTransformer(folder).save(folder) or "
    "model.save_pretrained(folder, safe_serialization=True) writes model.safetensors"
)
JSON_FILES = (
    "config.json",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)  # what sentence-transformers and transformers read
PICKLED_WEIGHTS = "pytorch_model*.bin"  # one file or the shards pytorch_model-00001-of-00002.bin, ...
VOCABULARIES = ("vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model", "tokenizer.model")


class ModelFolderError(WikigatError, ValueError):
    """Why a folder is not a model this project can load: what follows its name in the message, fix included."""


def check_model_folder(path: Path) -> None:
    """ModelFolderError saying what `path` lacks or holds that cannot be read, with the fix; None for a model folder.
    Reads configs, safetensors headers and tokenizers only: cheap next to loading the model."""
    if not path.exists():
        raise ModelFolderError(f"does not exist; check the path, or {FIX}")
    if not path.is_dir():
        raise ModelFolderError(f"is not a folder; {FIX}")
    if not (path / "config.json").is_file() and not (path / "modules.json").is_file():
        raise ModelFolderError(f"is not a model folder: it has no config.json and no modules.json; {FIX}")
    read_configs(path, path)
    config = read_json(path, path / "config.json")
    if config is not None and (not isinstance(config, dict) or not config.get("model_type")):
        raise ModelFolderError(f"is not a model folder: its config.json names no model_type; {FIX}")
    if config is not None and config["model_type"] == "model2vec":
        for needed in ("model.safetensors", "tokenizer.json"):
            if not (path / needed).is_file():
                raise ModelFolderError(
                    f"is not a model folder: it has no {needed} (a model2vec folder holds "
                    f"config.json, model.safetensors and tokenizer.json); {RESTORE}"
                )
        check_weights(path, path)
        check_tokenizer(path, path)
        return
    modules = module_folders(path)
    weighed = False
    for folder, _ in modules:
        read_configs(path, folder)
        weighed = check_weights(path, folder) or weighed
    if not weighed:
        raise ModelFolderError(f"is not a model folder: it holds no weights (model.safetensors); {FIX}")
    for folder, transformer in modules:
        if transformer:
            check_transformer(path, folder)
        elif (folder / "tokenizer.json").is_file():
            check_tokenizer(path, folder)


def module_folders(path: Path) -> list[tuple[Path, bool]]:
    """(folder, whether it is the transformer) of each module in modules.json that has a folder, in its order (a
    Normalize module may have none); a folder without modules.json is one transformer."""
    if not (path / "modules.json").is_file():
        return [(path, True)]
    modules = read_json(path, path / "modules.json")
    if not isinstance(modules, list) or not all(
        isinstance(m, dict) and isinstance(m.get("path"), str) for m in modules
    ):
        raise ModelFolderError(
            f"is not a model folder: its modules.json is not a list of modules with a path each; {RESTORE}"
        )
    found = [(path / m["path"], str(m.get("type", "")).rsplit(".", 1)[-1] == "Transformer") for m in modules]
    return [(folder, transformer) for folder, transformer in found if folder.is_dir()]


def read_json(top: Path, file: Path):
    """The JSON in `file` (None when there is none); a file that is not UTF-8 JSON is a ModelFolderError naming it."""
    if not file.is_file():
        return None
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise ModelFolderError(f"is not a model folder: {shown(top, file)} is not UTF-8 JSON; {FIX}") from None


def read_configs(top: Path, folder: Path) -> None:
    for name in JSON_FILES:
        read_json(top, folder / name)


def check_weights(top: Path, folder: Path) -> bool:
    """Whether `folder` holds weights, each safetensors file's header parsed (its tensors are not read). A folder with
    pickled weights only is refused: they are never unpickled."""
    tensors = sorted(folder.glob("*.safetensors"))
    for file in tensors:
        try:
            with safe_open(file, framework="numpy"):
                pass
        except (SafetensorError, OSError) as e:
            reason = str(e).rsplit(": ", 1)[-1]
            raise ModelFolderError(
                f"is not a model folder: {shown(top, file)} is not a safetensors file ({reason}); {RESTORE}"
            ) from None
    pickles = sorted(folder.glob(PICKLED_WEIGHTS))
    if not tensors and pickles:
        raise ModelFolderError(
            f"is not a model folder: its weights {shown(top, pickles[0])} are a pickle, which this "
            f"project never loads (unpickling can run code); {CONVERT}"
        )
    return bool(tensors)


def check_transformer(top: Path, folder: Path) -> None:
    """The transformer module's config names a model_type and its tokenizer parses."""
    config = read_json(top, folder / "config.json")
    if folder != top and (not isinstance(config, dict) or not config.get("model_type")):
        raise ModelFolderError(
            f"is not a model folder: {shown(top, folder / 'config.json')} is missing or names no model_type; {FIX}"
        )
    if (folder / "tokenizer.json").is_file():
        check_tokenizer(top, folder)
    elif not any((folder / v).is_file() for v in VOCABULARIES):
        where = "it" if folder == top else shown(top, folder)
        raise ModelFolderError(
            f"is not a model folder: {where} has no tokenizer (tokenizer.json or {', '.join(VOCABULARIES)}); {RESTORE}"
        )


def check_tokenizer(top: Path, folder: Path) -> None:
    file = folder / "tokenizer.json"
    try:
        Tokenizer.from_file(str(file))
    except Exception as e:  # the tokenizers library raises a bare Exception for a file it cannot parse
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ModelFolderError(
            f"is not a model folder: {shown(top, file)} cannot be read by the tokenizers library ({reason}); {RESTORE}"
        ) from None


def shown(top: Path, file: Path) -> str:
    """`file` as the message names it: its path inside the model folder."""
    return os.path.relpath(file, top)
