"""Bounded, identifiable laws; both joint protocols; rolling-origin backtests; Table 4's model column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rerank_scaling.forecast.run import forecast_runs
from rerank_scaling.laws import forms as laws
from rerank_scaling.laws.allocation import allocation_table
from rerank_scaling.laws.backtests import backtest_group, rolling_origins
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.fitting import fit_law, refit_batch
from rerank_scaling.laws.identifiability import degenerate_reasons
from rerank_scaling.laws.law_tables import n_over_n_star
from rerank_scaling.laws.protocols import but_last_checkpoints, fit_split, prepare, splits_for
from rerank_scaling.laws.synthetic import synthetic_metrics_table
from rerank_scaling.registries.measures import MetricSpec
from rerank_scaling.settings import settings_from_dict

N = np.array([2.0, 4.0, 8.0, 16.0, 32.0, 64.0])


def test_metric_ranges_bound_the_asymptote():
    assert laws.metric_range("nDCG@10") == (0.0, 1.0)
    assert laws.metric_range("CE@16") == (0.0, pytest.approx(np.log(16)))
    law = laws.power_law("N", -1, laws.metric_range("CE@16"))
    assert (law.lower[0], law.upper[0]) == (0.0, pytest.approx(np.log(16)))


def test_bounded_fit_recovers_an_asymptote_near_its_bound():
    law = laws.power_law("N", +1, (0.0, 1.0))
    true = np.array([0.93, 0.5, 0.4])
    y = law.predict(true, {"N": N}) + np.random.default_rng(0).normal(0, 1e-4, len(N))
    fit = fit_law(law, {"N": N}, y)
    assert fit.ok and np.abs(fit.params - true).max() < 0.02
    assert degenerate_reasons(law, fit.params, {"N": N}, y) == ""


def test_log_linear_data_pin_the_asymptote_and_are_flagged():
    """A log-linear trend has no asymptote below 1: unbounded, a runs away (a = 51-88 on the default's
    ladder); bounded, it ends on its bound and the fit is called degenerate."""
    y = 0.2 + 0.08 * np.log(N)  # reaches 0.53 at N = 64 and keeps growing
    free = fit_law(laws.power_law("N", +1), {"N": N}, y)
    assert free.ok and free.params[0] > 1.0
    law = laws.power_law("N", +1, (0.0, 1.0))
    bounded = fit_law(law, {"N": N}, y)
    assert bounded.params[0] <= 1.0
    assert degenerate_reasons(law, bounded.params, {"N": N}, y) == "a = 1 on its upper bound"


def test_flat_term_and_too_few_sizes_are_flagged():
    law = laws.power_law("N", +1, (0.0, 1.0))
    flat = np.array([0.3, 0.3, 0.3, 0.3, 0.3, 0.3]) + np.array([1, -1, 1, -1, 1, -1]) * 1e-3
    fit = fit_law(law, {"N": N}, flat)
    assert "is flat over the data" in degenerate_reasons(law, fit.params, {"N": N}, flat)
    two = {"N": np.repeat([2.0, 4.0], 5)}
    y = law.predict(np.array([0.6, 0.3, 0.5]), two)
    assert "2 distinct N" in degenerate_reasons(law, np.array([0.6, 0.3, 0.5]), two, y)


def test_wide_bootstrap_spread_is_flagged():
    law = laws.power_law("N", +1, (0.0, 1.0))
    params = np.array([0.6, 0.3, 0.5])
    x = {"N": N}
    y = law.predict(params, x)
    refits = np.column_stack([np.full(100, 0.6), np.full(100, 0.3), np.linspace(0.0, 3.0, 100)])
    assert "c = 0.5 has bootstrap spread" in degenerate_reasons(law, params, x, y, refits)
    steady = np.column_stack([np.full(100, 0.6), np.full(100, 0.3), np.linspace(0.45, 0.55, 100)])
    assert degenerate_reasons(law, params, x, y, steady) == ""


def test_batched_refits_match_scipy():
    law = laws.power_law("S", +1, (0.0, 1.0))
    x = {"S": np.geomspace(0.01, 0.3, 20)}
    true = np.array([0.6, 0.3, 0.5])
    y = law.predict(true, x)[:, None] + np.random.default_rng(0).normal(0, 0.01, (20, 30))
    batched, ok = refit_batch(law, x, y, true)
    assert ok.all()
    for column in range(30):
        single = fit_law(law, x, y[:, column], starts=[true])
        assert np.abs(batched[column] - single.params).max() < 1e-4


def test_bad_choices_name_the_key():
    with pytest.raises(ValueError, match="fitting.uncertainty"):
        settings_from_dict(FitSettings, {"uncertainty": "bayes"}, "fitting")
    with pytest.raises(ValueError, match="fitting.joint_protocol"):
        settings_from_dict(FitSettings, {"joint_protocol": "paper"}, "fitting")


def _group(checkpoints: int = 6) -> pd.DataFrame:
    table = synthetic_metrics_table(
        objectives=("pointwise",), checkpoints=checkpoints, splits=("dev",), metrics=("nDCG@10",)
    )
    return prepare(table, FitSettings.of())


def test_joint_protocols_split_as_the_paper_text_and_code_do():
    group = _group()
    settings = FitSettings.of(holdout_last=2)
    ((_, text_fit, text_held),) = splits_for("joint_text", group, settings)
    ((_, code_fit, code_held),) = splits_for("joint_code", group, settings)
    # text: checkpoints 1-4 of s1-s3 fitted; 5-6 of s1-s3 and all 6 of s4 held out
    assert sorted(set(zip(text_fit["model"], text_fit["checkpoint"], strict=True))) == [
        (m, k) for m in ("s1", "s2", "s3") for k in range(1, 5)
    ]
    assert sorted(set(zip(text_held["model"], text_held["checkpoint"], strict=True))) == sorted(
        [(m, k) for m in ("s1", "s2", "s3") for k in (5, 6)] + [("s4", k) for k in range(1, 7)]
    )
    # code: every checkpoint of s1-s3 fitted; every checkpoint of s4 held out
    assert len(code_fit) == 18 and set(code_fit["model"]) == {"s1", "s2", "s3"}
    assert len(code_held) == 6 and set(code_held["model"]) == {"s4"}


def test_but_last_keeps_the_model_column():
    """pandas 3's groupby(...).apply drops the grouping column; Table 4 lost its model labels."""
    kept = but_last_checkpoints(_group(), 2)
    assert "model" in kept.columns and kept["model"].notna().all()
    assert kept.groupby("model")["checkpoint"].max().eq(4).all()


def _joint_fit(status: str, reason: str, params: str) -> pd.DataFrame:
    """One planning (joint_code, additive) fit row of the pointwise dev nDCG@10 group."""
    keys = {"family": "ladder", "objective": "pointwise", "attention": "full"}
    keys |= {"metric": "nDCG@10", "split": "dev", "annotations": "human"}
    labels = {"protocol": "joint_code", "split_label": "joint_code", "law": "additive", "planning": True}
    return pd.DataFrame([{**keys, **labels, "status": status, "reason": reason, "params": params}])


def test_table4_keeps_one_row_per_model():
    group = _group()
    settings = FitSettings.of(bootstrap=20)
    ((_, fit_rows, held_rows),) = splits_for("joint_code", group, settings)
    done = fit_split(laws.additive_law(+1, (0.0, 1.0)), fit_rows, held_rows, settings, 0)
    both = done.rows.assign(law="additive", split_label="joint_code", protocol="joint_code")
    fits = _joint_fit("ok", "", '{"a": 0.7, "b": 0.2, "alpha": 0.5, "c": 0.05, "beta": 0.4}')
    table = n_over_n_star(allocation_table(fits, both))
    assert sorted(table["model"]) == ["s1", "s2", "s3", "s4"]
    assert table["n_over_n_star"].notna().all() and (table["status"] == "ok").all()


def test_degenerate_joint_fit_gives_no_allocation():
    group = _group()
    forecasts = group.assign(law="additive", split_label="joint_code", held_out=False)
    reason = "term of b = 1e-28 is flat over the data"
    fits = _joint_fit("degenerate", reason, '{"a": 0.7, "b": 1e-28, "alpha": 5.0, "c": 0.05, "beta": 0.4}')
    table = allocation_table(fits, forecasts)
    assert table["n_star"].isna().all() and (table["status"] == "degenerate").all()
    assert table["reason"].eq("not identifiable: term of b = 1e-28 is flat over the data").all()


def test_rolling_origin_reproduces_a_hand_computed_split():
    """4 sizes: fit s1+s2 -> forecast s3; fit s1+s2+s3 -> forecast s4 (last k checkpoints each)."""
    group = _group(checkpoints=8)
    # a held-out size is never part of a backtest: with s4 held out only one origin is left
    assert rolling_origins(group) == [(2, ["s1", "s2"], "s3")]
    group = group.assign(role="fit")
    assert rolling_origins(group) == [(2, ["s1", "s2"], "s3"), (3, ["s1", "s2", "s3"], "s4")]
    settings = FitSettings.of(bootstrap=20, last_k=3)
    keys = {
        "family": "ladder",
        "objective": "pointwise",
        "attention": "full",
        "metric": "nDCG@10",
        "split": "dev",
    }
    points = backtest_group(keys, group, settings, seed=0)
    model = points[(points["protocol"] == "model") & (points["law"] == "power_N")]
    by_origin = model.groupby("origin")
    assert by_origin["forecast_size"].unique().map(list).to_dict() == {2: ["s3"], 3: ["s4"]}
    assert by_origin["fit_sizes"].first().to_dict() == {2: "s1+s2", 3: "s1+s2+s3"}
    assert sorted(model.loc[model["origin"] == 3, "checkpoint"]) == [6, 7, 8]
    # the power law in N cannot be identified from 2 sizes: that backtest step is flagged
    assert "2 distinct N" in model.loc[model["origin"] == 2, "reason"].iloc[0]
    # the forecast at origin 3 is the law fitted on exactly s1-s3's last 3 checkpoints
    rows = group[group["model"].isin(["s1", "s2", "s3"])].sort_values("step").groupby("model").tail(3)
    by_hand = fit_law(
        laws.power_law("N", +1, (0.0, 1.0)), {"N": rows["N"].to_numpy()}, rows["value"].to_numpy()
    )
    expected = laws.power_law("N", +1).predict(by_hand.params, {"N": np.array([16.0])})[0]
    assert model.loc[model["origin"] == 3, "forecast"].to_numpy() == pytest.approx(expected, abs=1e-6)
    joint = points[points["protocol"] == "joint_code"]
    assert len(joint[joint["origin"] == 3]) == 8  # every checkpoint of s4


def test_size_axis_sets_n_and_training_flops_together():
    """config.paper.yaml fits on total parameters (Scaling Laws for Cross-Encoder Reranking): N and C = 6 N
    tokens follow the axis."""
    table = synthetic_metrics_table(
        objectives=("pointwise",), checkpoints=3, splits=("dev",), metrics=("nDCG@10",)
    )
    for axis, column in (("non_embedding", "non_embedding_params"), ("total", "params")):
        rows = prepare(table, FitSettings.of(size_axis=axis)).merge(
            table[["model", "checkpoint", column, "tokens"]].drop_duplicates(), on=["model", "checkpoint"]
        )
        assert np.allclose(rows["N"], rows[column] / 1e6)
        assert np.allclose(rows["flops"], 6 * rows[column] * rows["tokens"])


def test_a_table_whose_every_fit_fails_still_writes_every_table(tmp_path):
    from rerank_scaling.forecast.fit_stage import fit_everything
    from rerank_scaling.laws.fit_settings import TABLES

    # two sizes, two checkpoints: too few points for every law (as in a tiny smoke run)
    sizes = {"A": (1e6, 2e6, "fit"), "B": (2e6, 3e6, "held_out")}
    table = synthetic_metrics_table(sizes, objectives=("pointwise",), checkpoints=2, metrics=("nDCG@10",))
    settings = FitSettings.of(metrics=("nDCG@10",), last_k=1, holdout_last=1, bootstrap=5)
    fit_everything(table, settings, tmp_path)
    fits = pd.read_parquet(tmp_path / "fits.parquet")
    assert len(fits) and (fits["status"] != "ok").all() and fits["params"].isna().all()
    for name in TABLES:
        assert (tmp_path / "tables" / f"{name}.csv").exists(), name


def test_the_ensemble_is_backtested_where_its_members_are_identified():
    """With two or three fitted sizes the power law cannot forecast, but the ensemble's log-linear
    member can: its rolling-origin points count for the validated range."""
    from rerank_scaling.laws.backtests import backtest_group
    from rerank_scaling.laws.synthetic import synthetic_metrics_table

    spec = {f"s{i}": (2e6 * 1.6**i, 12e6 + 2e6 * 1.6**i, "fit") for i in range(4)}
    table = synthetic_metrics_table(
        spec, objectives=("pointwise",), checkpoints=4, splits=("dev",), metrics=("nDCG@10",)
    )
    settings = FitSettings.of(bootstrap=20, last_k=1, backtest=True)
    group = prepare(table, settings)
    keys = {k: group[k].iloc[0] for k in ("family", "objective", "attention", "metric", "split")}
    points = backtest_group(keys, group, settings, 0)
    ensemble = points[(points["law"] == "ensemble") & points["final"]]
    by_origin = ensemble.set_index("origin")
    # two sizes, one final point each: two points for log-linear's two parameters, no forecast
    assert not by_origin.loc[2, "enough_sizes"] and np.isnan(by_origin.loc[2, "forecast"])
    assert by_origin.loc[3, "enough_sizes"] and np.isfinite(by_origin.loc[3, "forecast"])
    assert by_origin.loc[3, "reason"].startswith("members: log_linear_N")
    power = points[(points["law"] == "power_N") & points["final"]]
    assert power["forecast"].isna().all()  # 3 points for 3 parameters at best: no power-law forecast


def test_the_backtested_ensemble_is_the_forecast_the_fit_stage_reports():
    """An origin with four fitted sizes has an inner origin, so the ensemble's backtest carries the
    model-discrepancy term: its forecast and 95% interval of the next size are exactly what the fit
    stage's ensemble (laws/ensemble.py fit_ensemble) reports for the same split and seed, and a curve
    that bends beyond the law's reach gets a nonzero term."""
    from rerank_scaling.laws.ensemble import fit_ensemble
    from rerank_scaling.laws.forecast_status import StatusRule
    from rerank_scaling.laws.protocols import last_checkpoints

    spec = {f"s{i}": (2e6 * 1.6**i, 12e6 + 2e6 * 1.6**i, "fit") for i in range(6)}
    table = synthetic_metrics_table(
        spec, objectives=("pointwise",), checkpoints=3, splits=("dev",), metrics=("nDCG@10",)
    )
    settings = FitSettings.of(bootstrap=40, last_k=1, backtest=True)
    group = prepare(table, settings)
    # s4 falls below the smooth curve (a misfit the bootstrap cannot see), s5 follows the curve
    group.loc[group["model"] == "s4", "value"] -= 0.03
    keys = {k: group[k].iloc[0] for k in ("family", "objective", "attention", "metric", "split")}
    points = backtest_group(keys, group, settings, 0)
    at_five = points[(points["law"] == "ensemble") & points["final"] & (points["origin"] == 5)].iloc[0]
    assert "inner origin: s4 from the smaller sizes" in at_five["reason"]
    assert "discrepancy sd 0 " not in at_five["reason"]
    fit_rows = last_checkpoints(group[group["model"].isin([f"s{i}" for i in range(5)])], 1)
    held_rows = last_checkpoints(group[group["model"] == "s5"], 1)
    _, forecast = fit_ensemble(keys, "model", fit_rows, held_rows, settings, 5, (0.0, 0.0), StatusRule(2.0))
    reported = forecast[forecast["held_out"]].iloc[0]
    assert (at_five["forecast"], at_five["low"], at_five["high"]) == pytest.approx(
        (reported["forecast"], reported["low"], reported["high"]), rel=1e-12
    )


def test_a_model_name_holding_a_plus_is_backtested_and_validated_like_any_other():
    """Backtests join the fitted models' names with "+" for reading (``fit_sizes``); the validated
    ratio reads the largest fitted model from its own column, so names like "A1.0e+07" (a size or
    compute budget written as a number) give the forecasts the same names give without "+"."""
    sizes = np.array([1e7, 2e7, 4e7, 8e7, 1.6e8])
    rng = np.random.default_rng(3)
    values = 0.55 - 0.88 * (sizes / 1e6) ** -0.4 + rng.normal(0, 0.005, len(sizes))
    plain = pd.DataFrame({"model": [f"M{i}" for i in range(5)], "size": sizes, "value": values})
    # the same alphabetical order as M0-M4 (the bootstrap's draws follow the models' order)
    plus = plain.assign(model=[f"{letter}{n:.1e}" for letter, n in zip("ABCDE", sizes, strict=True)])
    assert plus["model"].str.contains(r"\+").all()
    metric = MetricSpec("simulated_accuracy", +1, (0.0, 1.0))
    found = [
        forecast_runs(runs, target_sizes=(3.2e8,), metric=metric, bootstrap=20, seed=0).forecasts
        for runs in (plain, plus)
    ]
    columns = ["law", "forecast", "low", "high", "forecast_status"]
    # a covered rolling origin (2x) validated the 2x forecast: the ratio lookup ran on the names
    assert (found[0]["forecast_status"] != "beyond_validated_range").any()
    pd.testing.assert_frame_equal(found[0][columns], found[1][columns])
