"""The A-AUC-and-size finding says "rises" or "falls" only when the change's 95% interval says so (the one rule)."""

import pandas as pd

from lib.run.link_findings import AaucTrend, Point, judged_change, trend_word


def _rows(folder, aaucs):
    folder.mkdir(parents=True)
    pd.DataFrame(
        [
            {
                "seed": s,
                "model": "gat_model",
                "protocol": "seed",
                "supervision": "mp",
                "negatives": "uniform",
                "aauc": a,
            }
            for s, a in enumerate(aaucs)
        ]
    ).to_csv(folder / "train_gat_rows.csv", index=False)


def test_a_change_is_judged_over_the_runs_seeds_and_worded_by_its_verdict(tmp_path):
    _rows(tmp_path / "small", [0.70, 0.71, 0.72])
    _rows(tmp_path / "large", [0.80, 0.81, 0.83])
    _rows(tmp_path / "noisy", [0.60, 0.90, 0.72])
    small, large, noisy = (Point(r, n, 0.0) for r, n in (("small", 40), ("large", 315), ("noisy", 315)))
    up = judged_change(tmp_path, small, large, "seed", "aauc")
    assert up["verdict"] == "met" and up["seeds"] == 3 and abs(up["diff"] - 0.1033) < 1e-3
    assert trend_word(up, 0.71, 0.81) == "rises"
    assert trend_word(judged_change(tmp_path, large, small, "seed", "aauc"), 0.81, 0.71) == "falls"
    flat = judged_change(tmp_path, small, noisy, "seed", "aauc")
    assert flat["verdict"] == "undecided" and trend_word(flat, 0.71, 0.74) == "moves"
    assert judged_change(tmp_path, small, Point("absent", 180, 0.0), "seed", "aauc") is None
    text = AaucTrend((("title mentions (proxy)", (small, noisy)),), (flat,)).readme()
    assert "moves [0.000][small] → [0.000][noisy] (+0.030 [" in text and ", undecided)" in text
