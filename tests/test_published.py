"""Each translation of lib.common.published: a record in an older format in, the current names and shape out."""

import pytest

from lib.common import published
from lib.distill.config import DistillParams


def test_metrics_name_the_distance_2_negative_set_dist2_in_the_stage_3_sections_only():
    old = {
        "train_gat": {
            "audit": [{"test_neg_hard_pairs": 3, "hard_missing": 1}],
            "mean": [{"negatives": "hard", "auc": 0.6}, {"negatives": "uniform", "auc": 0.9}],
        },
        "beyond": {"structure": [{"shortcut_hard_auc": 0.9, "hard_no_cn": 0.0}], "sets": ["uniform", "hard"]},
        "distill": {"hard": "kept"},
    }
    new = published.metrics(old)
    assert new["train_gat"]["audit"] == [{"test_neg_dist2_pairs": 3, "dist2_missing": 1}]
    assert [r["negatives"] for r in new["train_gat"]["mean"]] == ["dist2", "uniform"]
    assert new["beyond"] == {
        "structure": [{"shortcut_dist2_auc": 0.9, "dist2_no_cn": 0.0}],
        "sets": ["uniform", "dist2"],
    }
    assert new["distill"] == {"hard": "kept"}  # only stages 3 and 3b name negative sets
    assert published.metrics(new) == new


def test_a_negative_set_name_of_a_published_table_is_the_current_one():
    assert [published.negative_set(n) for n in ("hard", "dist2", "uniform")] == ["dist2", "dist2", "uniform"]


def test_heuristic_rows_without_supervision_are_scorers_trained_on_nothing():
    old = [
        {"protocol": "seed", "model": "gat_model", "auc": 0.9},
        {"protocol": "seed", "model": "adamic_adar", "auc": 0.95},
    ]
    assert published.link_rows(old) == [old[0], {**old[1], "supervision": "none"}]
    new = [{"model": "gat_model", "supervision": "mp"}, {"model": "resource_allocation", "supervision": "none"}]
    assert published.link_rows(new) == new


def test_distill_params_read_the_unprefixed_names_and_no_embedding_runs_where_the_record_has_none():
    old = {
        "seeds": [0, 1],
        "steps": 40,
        "batch_size": 8,
        "max_seq_len": 32,
        "lr": 3e-4,
        "warmup_frac": 0.01,
        "weight_decay": 0.01,
        "students": [3],
    }
    assert published.distill_params(old) == {
        "embedding_methods": [],
        "distill_seeds": [0, 1],
        "distill_steps": 40,
        "distill_batch_size": 8,
        "distill_max_seq_len": 32,
        "distill_lr": 3e-4,
        "distill_warmup_frac": 0.01,
        "distill_weight_decay": 0.01,
        "students": [3],
    }
    # a field name present wins over its unprefixed twin; a current record is unchanged
    assert published.distill_params({"steps": 5, "distill_steps": 7, "seeds": [3], "embedding_methods": ["emb"]}) == {
        "embedding_methods": ["emb"],
        "distill_steps": 7,
        "distill_seeds": [3],
    }
    assert {f"distill_{n}" for n in published.DISTILL_PREFIXED} == {
        n for n in DistillParams.names() if n.startswith("distill_")
    }


def test_grid_settings_gain_the_run_adding_parameters_at_their_current_values():
    current = {
        "distill_steps": 12,
        "students": [3],
        "embedding_methods": ["at+vr+emb"],
        "embedding_target": "minilm",
        "embedding_loss": "cosine",
        "w_emb": 1.0,
    }
    saved = {"steps": 12, "students": [3]}
    assert published.grid_settings(saved, current) == (current, True)
    assert published.grid_settings(current, current) == (current, False)
    assert set(published.RUN_ADDING) <= set(DistillParams.names())


def test_rows_without_settings_match_by_their_digest():
    assert published.rows_match_digest([{"model": "a", "_digest": "d1"}], "d1")
    assert not published.rows_match_digest([{"model": "a", "_digest": "d1"}, {"model": "b"}], "d1")
    assert published.rows_match_digest([], "d1")


def test_student_folder_names_read_as_kind_shape_and_init_whatever_the_kind():
    assert published.parse_student_folder("student_3x384_s0") == ("student", "3x384", "")
    assert published.parse_student_folder("control_3x384_assistant_s1") == ("control", "3x384", "assistant")
    assert published.parse_student_folder("at_vr_emb_6x384_random_s2") == ("at_vr_emb", "6x384", "random")
    with pytest.raises(ValueError, match="not a stage-5 student folder"):
        published.parse_student_folder("notes")


def test_a_parameter_the_params_record_lacks_is_at_its_notebook_default():
    assert published.params_with_defaults({"a": 1, "gone": 3}, {"a": 0, "b": 2}) == {"a": 1, "b": 2}
