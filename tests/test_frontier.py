"""The frontier's summary: paired differences to all-MiniLM-L6-v2, the validation-only choice, the goal sentences and
the figure, on small hand-made result tables whose answers are known."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lib.distill.frontier import (
    carry_over,
    choose_on_validation,
    goal_sentences,
    paired_to_reference,
    plot_frontier,
    summary_table,
)
from lib.distill.lp import REFERENCE

PROTOCOLS = ["leak_free", "new_nodes"]


def lp_rows(offsets: dict[str, float], val: dict[str, float], noise: dict[str, list[float]] | None = None) -> pd.DataFrame:
    """Rows shaped like link_prediction_eval's: reference AUC 0.70 + 0.01 * seed, each embedder offset from it."""
    rows = []
    for emb, off in offsets.items():
        for seed in (0, 1, 2):
            for p in PROTOCOLS:
                for model in ("gat_model", "cosine"):
                    auc = 0.70 + 0.01 * seed + off + (noise or {}).get(emb, [0, 0, 0])[seed]
                    rows.append({"embedder": emb, "seed": seed, "protocol": p, "model": model, "auc": auc,
                                 "mrr": auc / 10, "dim": 384 if emb == REFERENCE else 256,
                                 "val_auc": val[emb] if model == "gat_model" else np.nan})
    return pd.DataFrame(rows)


def tables(lp: pd.DataFrame, speed: dict[str, float]):
    probes = pd.DataFrame([{"embedder": e, "polarity_test": 0.7, "topic_test": 0.8, "fid_cosine": 0.9,
                            "fid_spearman": 0.8} for e in lp.embedder.unique()])
    sp = pd.DataFrame([{"embedder": e, "threads": t, "titles_per_s": v * t} for e, v in speed.items() for t in (1, 2)])
    return summary_table(lp, probes, sp)


def test_paired_differences_are_per_seed():
    lp = lp_rows({REFERENCE: 0.0, "static a": -0.02}, {REFERENCE: 0.7, "static a": 0.6},
                 noise={"static a": [0.0, 0.01, -0.01]})
    d = paired_to_reference(lp)
    r = d[(d.embedder == "static a") & (d.metric == "auc") & (d.model == "gat_model") & (d.protocol == "leak_free")]
    assert len(r) == 1 and r.seeds.iloc[0] == 3
    assert r["diff"].iloc[0] == pytest.approx(-0.02)
    half = 4.302653 * 0.01 / np.sqrt(3)  # t(0.975, 2) * sd / sqrt(n), sd of (0, 0.01, -0.01) = 0.01
    assert r.ci_high.iloc[0] == pytest.approx(-0.02 + half, abs=1e-6)
    assert set(d.embedder) == {"static a"}  # the reference is not compared with itself


def test_the_choice_reads_validation_only():
    # "static b" is better on test, "static a" on validation: the choice must follow validation
    lp = lp_rows({REFERENCE: 0.0, "static a": -0.05, "static b": 0.0}, {REFERENCE: 0.7, "static a": 0.66,
                                                                       "static b": 0.61})
    assert choose_on_validation(lp, ["static a", "static b"]) == "static a"


def test_goal_needs_both_the_interval_and_the_speed():
    lp = lp_rows({REFERENCE: 0.0, "close fast": 0.001, "close slow": 0.0, "far fast": -0.05, "better fast": 0.02},
                 {e: 0.6 for e in (REFERENCE, "close fast", "close slow", "far fast", "better fast")},
                 noise={"close fast": [0.0, 0.001, -0.001], "better fast": [0.0, 0.001, -0.001]})
    table = tables(lp, {REFERENCE: 1000.0, "close fast": 50000.0, "close slow": 1500.0, "far fast": 90000.0,
                        "better fast": 3000.0})
    assert table.set_index("embedder").loc["close fast", "speedup_1t"] == pytest.approx(50.0)
    said = dict(s.split(":", 1) for s in goal_sentences(paired_to_reference(lp), table))
    assert said["close fast"].endswith("-> meets the goal")
    assert "does not meet the goal (below 2.0x speed)" in said["close slow"]
    assert "does not meet the goal (an AUC interval leaves ±0.01)" in said["far fast"]
    assert said["better fast"].endswith("meets the goal read as non-inferiority only (no interval below -0.01, one "
                                        "above +0.01)")


def test_goal_needs_at_most_three_layers(tmp_path):
    import json

    from lib.distill.frontier import Embedder

    lp = lp_rows({REFERENCE: 0.0, "deep": 0.0, "shallow": 0.0}, {e: 0.6 for e in (REFERENCE, "deep", "shallow")})
    embedders = []
    for name, layers in (("deep", 6), ("shallow", 3)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({"num_hidden_layers": layers}))
        embedders.append(Embedder(name, tmp_path / name, "student"))
    embedders += [Embedder(REFERENCE, None), Embedder("static", tmp_path, "static")]
    probes = pd.DataFrame([{"embedder": e, "polarity_test": 0.7, "topic_test": 0.8, "fid_cosine": 0.9,
                            "fid_spearman": 0.8} for e in lp.embedder.unique()])
    sp = pd.DataFrame([{"embedder": e, "threads": 1, "titles_per_s": v} for e, v in
                       ((REFERENCE, 1000.0), ("deep", 3000.0), ("shallow", 3000.0))])
    table = summary_table(lp, probes, sp, embedders)
    assert table.set_index("embedder")[["kind", "layers", "seeds"]].to_dict("index") == {
        REFERENCE: {"kind": "transformer", "layers": 6, "seeds": 3}, "deep": {"kind": "student", "layers": 6,
                                                                             "seeds": 3},
        "shallow": {"kind": "student", "layers": 3, "seeds": 3}}
    assert Embedder("static", tmp_path, "static").layers == 0
    from lib.distill.frontier import speed_spread

    (tmp_path / "deep" / "config.json").write_text(json.dumps({"num_hidden_layers": 3, "hidden_size": 384}))
    (tmp_path / "shallow" / "config.json").write_text(json.dumps({"num_hidden_layers": 3, "hidden_size": 384}))
    assert speed_spread(table, embedders) == ["deep, shallow share one architecture (L3-H384-F0) and measured 3.00x "
                                              "to 3.00x at 1 thread(s)"]
    said = dict(s.split(":", 1) for s in goal_sentences(paired_to_reference(lp), table))
    assert said["shallow"].endswith("-> meets the goal")
    assert said["deep"].endswith("does not meet the goal (6 layers > 3)")


def test_the_figure_has_a_marker_per_encoder_and_the_legend_outside(tmp_path):
    lp = lp_rows({REFERENCE: 0.0, "static a": -0.02}, {REFERENCE: 0.7, "static a": 0.6})
    fig = plot_frontier(tables(lp, {REFERENCE: 1000.0, "static a": 40000.0}), PROTOCOLS, path=tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 10_000
    assert len(fig.axes) == 4  # GatModel and feature-cosine AUC under both protocols
    ax = next(a for a in fig.axes if a.get_legend() is not None)
    legend = ax.get_legend()
    assert {f"{REFERENCE} (384-d)", "static a (256-d)"} <= {t.get_text() for t in legend.get_texts()}
    assert legend.get_bbox_to_anchor().x0 > ax.get_window_extent().x1  # beside the axes, not over the data
    assert ax.get_xscale() == "log"


def test_rows_of_the_same_weights_are_carried_over_under_this_runs_label(tmp_path):
    old = tmp_path / "old.csv"
    pd.DataFrame([{"embedder": "MiniLM_bf16", "model_id": "m1", "seed": s, "epochs": e, "auc": 0.5 + s / 10}
                  for s in (0, 1) for e in (2, 3)] + [{"embedder": "x", "model_id": "other", "seed": 0, "epochs": 2,
                                                       "auc": 0.9}]).to_csv(old, index=False)
    rows = tmp_path / "rows.csv"
    pd.DataFrame([{"embedder": "noise floor", "model_id": "m1", "seed": 0, "epochs": 2, "auc": 0.5}]).to_csv(
        rows, index=False)
    n = carry_over({"noise floor": "m1", "ref": "m0"}, [old], rows, ["seed", "epochs"], {"epochs": 2})
    got = pd.read_csv(rows)
    assert n == 1 and got.embedder.tolist() == ["noise floor"] * 2 and got.seed.tolist() == [0, 1]
    assert got.auc.tolist() == [0.5, 0.6]  # seed 0 was there already; other epochs and other weights stay out
    assert carry_over({"noise floor": "m1"}, [old], rows, ["seed", "epochs"], {"epochs": 2}) == 0


def test_every_row_of_a_carried_pair_comes_over(tmp_path):
    old = tmp_path / "old.csv"
    pd.DataFrame([{"embedder": "a", "model_id": "m", "seed": 0, "model": m, "protocol": p, "auc": 0.5}
                  for m in ("gat_model", "cosine") for p in PROTOCOLS]).to_csv(old, index=False)
    rows = tmp_path / "rows.csv"
    assert carry_over({"b": "m"}, [old], rows, ["seed", "model", "protocol"], {}) == 4
    assert len(pd.read_csv(rows)) == 4
