"""The project's one judging rule (lib.metrics.paired): met, missed or undecided from a paired 95% interval."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as student_t

from lib.metrics.paired import (
    all_of,
    judge,
    judge_independent,
    judge_ratio,
    judged_text,
    ratio_text,
    verdict,
    verdicts,
)


def test_a_claim_is_met_above_its_margin_missed_below_and_undecided_when_the_interval_holds_it():
    assert verdict(0.03, 0.05, 0.02) == "met"
    assert verdict(-0.01, 0.01, 0.02) == "missed"
    assert verdict(0.01, 0.03, 0.02) == "undecided"
    assert verdict(0.02, 0.05, 0.02) == "undecided"  # a bound on the margin does not lie above it
    assert verdict(float("nan"), float("nan"), 0.0) == "undecided" and verdict(None, None) == "undecided"


def test_judge_reads_the_paired_t_interval_of_the_differences():
    d = [0.05, 0.06, 0.03, 0.04]
    r = judge(d, margin=0.02)
    half = student_t.ppf(0.975, 3) * np.std(d, ddof=1) / 2
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((np.mean(d) - half, np.mean(d) + half))
    assert r["verdict"] == "met" and r["seeds"] == 4 and r["margin"] == 0.02
    one = judge([0.5])
    assert one["verdict"] == "undecided" and math.isnan(one["ci_low"])  # one seed decides nothing
    assert judge([-0.05, -0.04, -0.06])["verdict"] == "missed"


def test_a_change_between_independent_runs_reads_welchs_interval_over_every_seed_of_both():
    first, last = [0.70, 0.72, 0.71, 0.69, 0.73, 0.70, 0.72, 0.71, 0.70, 0.72], [0.80, 0.79, 0.81]
    r = judge_independent(first, last, margin=0.02)
    assert r["diff"] == pytest.approx(np.mean(last) - np.mean(first))  # the difference of the printed means
    va, vb = np.var(first, ddof=1) / 10, np.var(last, ddof=1) / 3
    df = (va + vb) ** 2 / (va**2 / 9 + vb**2 / 2)  # Welch-Satterthwaite, written out to check scipy's interval
    half = student_t.ppf(0.975, df) * np.sqrt(va + vb)
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((r["diff"] - half, r["diff"] + half))
    assert (r["seeds"], r["seeds_first"], r["seeds_last"], r["verdict"]) == (3, 10, 3, "met")
    assert judge_independent(last, first)["verdict"] == "missed"
    assert judge_independent([0.7], last)["verdict"] == "undecided"  # one seed on a side decides nothing


def test_a_claim_of_several_parts_needs_every_part_met_and_fails_on_one_missed():
    assert all_of(["met", "met"]) == "met"
    assert all_of(["met", "undecided"]) == "undecided"
    assert all_of(["undecided", "missed", "met"]) == "missed"
    assert all_of([]) == "undecided"


def test_the_verdict_is_printed_beside_its_interval_and_a_table_of_intervals_is_judged_row_by_row():
    assert judged_text(0.043, 0.031, 0.055, 0.02) == "met: +0.043 [+0.031, +0.055] > +0.020"
    assert judged_text(0.01, -0.02, 0.04) == "undecided: +0.010 [-0.020, +0.040] holds +0.000"
    assert judged_text(0.5, float("nan"), float("nan")) == "undecided: +0.500 (no interval) holds +0.000"
    rows = pd.DataFrame({"ci_low": [0.1, -0.3, -0.1], "ci_high": [0.2, -0.2, 0.1]}, index=[5, 6, 7])
    assert verdicts(rows).to_dict() == {5: "met", 6: "missed", 7: "undecided"}
    assert verdicts(rows, margin=-0.25).to_dict() == {5: "met", 6: "undecided", 7: "met"}


def test_a_speed_target_is_judged_on_the_paired_ratios_of_steps_timed_back_to_back():
    reference = [2.0, 2.6, 2.2, 3.0]  # the machine's load moves both timings of a repeat together
    fast = judge_ratio([0.5, 0.66, 0.55, 0.74], reference, 0.30)
    ratios = np.array([0.5, 0.66, 0.55, 0.74]) / np.array(reference)
    half = student_t.ppf(0.975, 3) * np.std(ratios, ddof=1) / 2
    assert fast["ratio"] == pytest.approx(ratios.mean()) and fast["repeats"] == 4
    assert (fast["ci_low"], fast["ci_high"]) == pytest.approx((ratios.mean() - half, ratios.mean() + half))
    assert fast["verdict"] == "met" and fast["ci_high"] < 0.30
    assert judge_ratio([0.8, 1.04, 0.88, 1.2], reference, 0.30)["verdict"] == "missed"  # 0.40 every time
    straddles = judge_ratio([0.5, 0.86, 0.55, 1.0], reference, 0.30)
    assert straddles["ci_low"] < 0.30 < straddles["ci_high"] and straddles["verdict"] == "undecided"
    one = judge_ratio([0.1], [2.0], 0.30)
    assert (
        one["verdict"] == "undecided"
        and ratio_text(one) == "undecided: 0.050 (no interval) (1 paired repeat) against <= 0.3"
    )
    assert ratio_text(fast).startswith(f"met: {ratios.mean():.3f} [")
    with pytest.raises(ValueError, match="paired lists of equal length"):
        judge_ratio([1.0, 2.0], [1.0], 0.3)
