"""Notebook 05b's library: unseen-title data, the encoder registry, and the one rule for speed, pairing and the goal."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from safetensors.numpy import save_file

from lib.common.params import ParamError
from lib.distill.data import load_vital_articles
from lib.embed.encoder import encode, load_model
from lib.embedders import data, encoders, evaluate
from lib.embedders.config import VITAL_TOPICS, EmbeddersParams, shares
from lib.embedders.goals import goal_of
from lib.linkpred.config import GatTrainingParams
from tests.test_model_folders import static_folder


@pytest.fixture(scope="module")
def part():
    return data.partition(["Biology and health sciences"], ["Geography", "Physical sciences"], 0.05, seed=0)


def test_no_training_text_is_a_held_out_title_and_the_held_out_roles_do_not_overlap(part):
    texts = data.transfer_texts(part, ["titles", "capitalised", "sentences"], 3000, seed=0)
    trained = {data.normalised(t) for ts in texts.values() for t in ts}
    assert trained and not trained & part.held_out
    arts = part.train_articles
    assert not set(arts.topic) & {"Biology and health sciences", "Physical sciences"}
    speedia = {data.normalised(t) for t in part.test["wikispeedia"]}
    assert len(speedia) > 4000 and not {data.normalised(t) for t in arts.title} & speedia
    assert not set(part.val) & set(part.test["vital_heldout"]) and not set(part.in_domain) & set(arts.title)
    assert all(len(v) <= 3000 for v in texts.values())


def test_the_partition_and_the_texts_are_seeded(part):
    again = data.partition(["Biology and health sciences"], ["Geography", "Physical sciences"], 0.05, seed=0)
    other = data.partition(["Biology and health sciences"], ["Physical sciences"], 0.05, seed=1)
    assert again.in_domain == part.in_domain and other.in_domain != part.in_domain
    assert data.transfer_texts(part, ["titles"], 50, 3) == data.transfer_texts(again, ["titles"], 50, 3)


def test_a_topic_both_chosen_on_and_tested_on_is_refused_by_the_config_and_the_partition():
    with pytest.raises(ParamError, match="either chosen on or tested on"):
        data.partition(["Arts"], ["Arts"], 0.05, 0)
    with pytest.raises(ParamError, match="either chosen on or tested on"):
        EmbeddersParams(embedder_val_topics=["Arts"], embedder_test_topics=["Arts", "History"])
    assert sorted(VITAL_TOPICS) == sorted(set(load_vital_articles().topic))  # the config's choices are the data's
    with pytest.raises(ParamError, match="embedder_val_topics"):
        data.partition(["Sports"], ["Arts"], 0.05, 0)


def test_capitalised_spans_skip_a_first_word_and_keep_names_with_inner_particles():
    spans = data.capitalised_spans("The Battle of Hastings was fought by William the Conqueror in England.")
    assert spans == ["The Battle of Hastings", "William the Conqueror", "England"]
    assert data.capitalised_spans("Water boils.") == []


def test_mention_share_counts_titles_spelled_inside_a_text():
    assert data.mention_share(
        ["Roman Empire", "Moon", "Mars"], ["the roman empire fell", "a moonlit night"]
    ) == pytest.approx(1 / 3)


def test_the_heldout_vital_source_links_only_its_own_titles(part):
    snap = data.link_snapshot("vital_heldout", part)
    keep = set(part.test["vital_heldout"])
    assert set(snap.links) == keep and all(set(v) <= keep for v in snap.links.values())
    assert sum(map(len, snap.links.values())) > 500


def test_mixes_and_encoder_specs_are_checked_with_the_fix_named():
    assert shares("titles:2,phrases:0", ["titles", "phrases"]) == {"titles": 2.0, "phrases": 0.0}
    for bad in ("titles=1", "titles:0", "poems:1"):
        with pytest.raises(ParamError, match="embedder_mixes"):
            shares(bad, ["titles", "phrases"])
    assert encoders.parse("student:0,2,5/1024").label == "student 0,2,5 ffn1024"
    assert encoders.parse("student:0,2,5/1024").layers == 3 and encoders.parse("static-pca:256").layers == 0
    for bad in ("teacher:1", "student:7", "static-pca:x", "static-pca:-1"):
        with pytest.raises(ParamError, match="embedder_encoders"):
            encoders.parse(bad)
    with pytest.raises(ParamError, match="embedder_test_graphs"):
        EmbeddersParams(embedder_graphs=3, embedder_test_graphs=2)
    two = ["titles:1", "phrases:1"]
    with pytest.raises(ParamError, match="embedder_mixes offers a choice but embedder_encoders has no student"):
        EmbeddersParams(embedder_encoders=["static-trained:0"], embedder_mixes=two)  # trained on a mix nobody chose
    EmbeddersParams(embedder_encoders=["control:0,5"], embedder_mixes=two)  # nothing trained: no mix is used


def test_every_registered_kind_is_described_and_parses_its_own_example():
    for row in encoders.encoder_kind_rows():
        if row["kind"] == "folder":  # its argument is a folder on the user's disk: the control test below parses one
            continue
        example = row["spec"].split("e.g. ")[-1].split(" ")[0]
        assert encoders.parse(example).kind == row["kind"]


def test_a_control_is_built_once_and_loads_as_stage_2s_model_dir(tmp_path):
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
    spec = encoders.parse("control:0,5")
    folder = encoders.build(spec, recipe, tmp_path)
    assert json.loads((folder / "made.json").read_text())["spec"] == "control:0,5"
    stamp = (folder / "made.json").stat().st_mtime_ns
    assert encoders.build(spec, recipe, tmp_path) == folder and (folder / "made.json").stat().st_mtime_ns == stamp
    builds = pd.read_csv(tmp_path / "builds.csv")
    assert builds[["encoder", "spec", "steps"]].values.tolist() == [["control 0,5", "control:0,5", 0]]
    x, _ = encode(load_model(folder), ["Photosynthesis", "Isaac Newton"])
    assert x.shape == (2, 384)
    own = encoders.parse(f"folder:{folder}")  # the same folder as one of your own: scored where it is, never built
    assert (own.layers, own.label, encoders.build(own, recipe, tmp_path / "elsewhere")) == (
        2,
        "folder control_05",
        folder,
    )
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize(
    "make, missing",
    [
        (None, "does not exist"),
        (lambda d: None, "has no config.json and no modules.json"),
        (lambda d: (d / "config.json").write_text('{"hidden_size": 8}'), "config.json names no model_type"),
        (lambda d: (d / "config.json").write_text('{"model_type": "bert"}'), "holds no weights"),
        (
            lambda d: [
                (d / "config.json").write_text('{"model_type": "bert"}'),
                (d / "vocab.txt").write_text("[UNK]\n"),
                save_file({"w": np.zeros(1, np.float32)}, str(d / "model.safetensors")),
            ],
            "no config.json in it names num_hidden_layers",
        ),
    ],
)
def test_a_folder_encoder_that_is_not_a_model_is_refused_naming_what_it_lacks(tmp_path, make, missing):
    folder = tmp_path / "not_a_model"
    if make is not None:
        folder.mkdir()
        make(folder)
    with pytest.raises(ParamError) as e:
        encoders.parse(f"folder:{folder}")
    assert str(e.value).startswith(f"embedder_encoders has 'folder:{folder}': the folder '{folder}' ")
    assert missing in str(e.value) and "\n" not in str(e.value)
    static_folder(tmp_path / "m2v")
    assert encoders.parse(f"folder:{tmp_path / 'm2v'}").layers == 0  # a static table: judged by the static goal
    static_folder(tmp_path / "elsewhere" / "m2v")
    with pytest.raises(ParamError, match=r"embedder_encoders names \['folder m2v'\] more than once"):
        EmbeddersParams(
            embedder_encoders=[f"folder:{tmp_path / 'm2v'}", f"folder:{tmp_path / 'elsewhere' / 'm2v'}"],
            embedder_mixes=["titles:1"],
        ).check()


def _lp_rows() -> pd.DataFrame:
    rows = []
    for source in ("wikispeedia", "vital_heldout"):
        for seed in range(5):
            for enc, offset in ((encoders.REFERENCE, 0.0), ("small", -0.005), ("bad", -0.05)):
                for model in ("gat_model", "cosine"):
                    rows.append(
                        {
                            "source": source,
                            "protocol": "leak_free",
                            "model": model,
                            "embedder": enc,
                            "seed": seed,
                            "auc": 0.8 + 0.01 * seed + offset * (1 + 0.2 * (seed % 2)),
                            "mrr": 0.3,
                        }
                    )
    return pd.DataFrame(rows)


def test_paired_differences_pair_by_source_protocol_model_and_seed():
    paired = evaluate.paired_to_reference(_lp_rows())
    small = paired[(paired.encoder == "small") & (paired.metric == "auc")]
    assert len(small) == 4 and (small.seeds == 5).all()
    assert small["diff"].to_numpy() == pytest.approx(-0.005 * 1.08)
    assert (small.ci_low < small["diff"]).all() and (small["diff"] < small.ci_high).all()


def test_the_goal_rule_needs_every_part():
    paired = evaluate.paired_to_reference(_lp_rows())
    speed = pd.DataFrame({"encoder": [encoders.REFERENCE, "small", "bad"], "ratio": [1.0, 2.5, 40.0]})
    goals = evaluate.goal_rows(paired, speed, {"small": 3, "bad": 0}).set_index("encoder")
    assert goals.loc["small", "met"] and goals.loc["small", "goal"] == "student"
    assert not goals.loc["bad", "met"] and goals.loc["bad", "fast"] and not goals.loc["bad", "close"]
    slow = evaluate.goal_rows(paired, speed.assign(ratio=[1.0, 1.5, 40.0]), {"small": 3}).iloc[0]
    assert not slow.met and "too slow" in evaluate.goal_sentence(slow, goal_of(3))
    deep = evaluate.goal_rows(paired, speed, {"small": 4}).iloc[0]
    assert not deep.met and not deep.small


def test_speed_is_a_ratio_to_the_reference_measured_in_the_same_rounds(tmp_path):
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
    folder = encoders.build(encoders.parse("control:0"), recipe, tmp_path)
    titles = [f"Title number {i}" for i in range(128)]
    table = evaluate.speed_table({encoders.REFERENCE: None, "one layer": folder}, titles, repeats=2).set_index(
        "encoder"
    )
    assert table.loc[encoders.REFERENCE, "ratio"] == 1.0 and table.loc["one layer", "ratio"] > 1.5
    assert (table.repeats == 2).all() and (table.titles == 128).all()


def test_a_rounded_copy_embeds_like_all_minilm_to_three_decimals(tmp_path):
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
    spec = encoders.parse("rounded:bf16")
    assert (spec.label, spec.layers) == ("all-MiniLM-L6-v2 bf16", 6)
    titles = ["Photosynthesis", "Isaac Newton", "Pacific Ocean"]
    x = evaluate.embed(encoders.build(spec, recipe, tmp_path), titles)
    y = evaluate.embed(None, titles)
    assert not np.array_equal(x, y) and (x * y).sum(1).min() > 0.999
    with pytest.raises(ParamError, match="rounded:bf16"):
        encoders.parse("rounded:int4")


def test_an_encoder_of_another_width_has_no_cosine_to_the_target_but_a_link_auc():
    titles = ["Photosynthesis", "Isaac Newton", "Pacific Ocean", "Mount Everest"]
    links = {"titles": titles, "pos": np.array([[0, 1]]), "neg": np.array([[0, 2], [1, 3]])}
    row = evaluate.validation_row(None, {"a": titles}, {"a": np.ones((4, 256), np.float32)}, links)
    assert np.isnan(row["cos_a"]) and np.isnan(row["cos_p05_a"]) and 0 <= row["link_auc"] <= 1


def test_a_retrained_encoder_in_the_same_folder_gets_its_own_dataset_and_checkpoints(tmp_path, monkeypatch):
    """The dataset and GatModel checkpoints of a pair live under the model's identity, not its folder's name, so
    an encoder rebuilt in place (other steps, other layers) never meets the checkpoints of the one before it."""
    from lib.distill import lp as lp_mod

    outs = []

    def score(files, titles, model, key, out, split_file, params, progress, rows_file):
        outs.append(out)
        return [{**key, "model": m, "protocol": p, "auc": 0.5} for m in lp_mod.LP_MODELS for p in params.protocols]

    monkeypatch.setattr(lp_mod, "_score", score)
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
    folder = tmp_path / "encoder"
    for spec in ("control:0", "control:5"):
        built = encoders.build(encoders.parse(spec), recipe, tmp_path / spec.replace(":", "_"))
        if folder.exists():
            shutil.rmtree(folder)
        shutil.copytree(built, folder)
        lp_mod.graph_link_prediction(
            [],
            [("encoder", 0, folder)],
            tmp_path / "lp",
            lambda s: lp_mod.lp_params(GatTrainingParams(gat_epochs=1), s, ("leak_free",), 1, 0.1),
        )
    assert len(outs) == 2 and outs[0] != outs[1] and all(o.parent == tmp_path / "lp" for o in outs)
