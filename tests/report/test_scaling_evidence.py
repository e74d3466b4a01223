"""The summary's scaling evidence: training gain, size gap and BM25, each with its yardsticks
(paired per-query standard errors, seed spread) and a verdict that is never "yes" without one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from synthetic_runs import synthetic_metrics_table

from rerank_scaling.records import PER_QUERY_COLUMNS
from rerank_scaling.report.paired import paired_difference_se, paired_standard_error
from rerank_scaling.report.scaling_evidence import (
    QueryTable,
    both,
    final_standard_errors,
    scaling_evidence,
    verdict,
)
from rerank_scaling.report.summary import claims


def with_second_seed(table: pd.DataFrame, model: str, shift: float) -> pd.DataFrame:
    """Add a second seed of ``model`` whose values are ``shift`` higher (losses: lower)."""
    extra = table[table["model"] == model].copy()
    extra["seed"] = 2
    extra["run"] = extra["run"].str.replace("__s1", "__s2")
    extra["value"] += [shift if m.startswith("nDCG") else -shift for m in extra["metric"]]
    return pd.concat([table, extra], ignore_index=True)


def with_bm25(table: pd.DataFrame, value: float) -> pd.DataFrame:
    bm25 = table.iloc[:1].copy()
    bm25[["run", "model", "family", "objective", "attention"]] = "bm25"
    bm25[["split", "metric", "value", "checkpoint"]] = ["dev", "nDCG@10", value, 0]
    return pd.concat([table, bm25], ignore_index=True)


def per_query_table(metrics: pd.DataFrame, queries: int, noise: float, seed: int = 0) -> pd.DataFrame:
    """Per-query rows whose mean is exactly each long-table value: value + query difficulty (shared
    by every run: what pairing cancels) + per-(run, checkpoint) noise of sd ``noise``, centred."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0, 0.2, queries)
    difficulty -= difficulty.mean()
    parts = []
    for _, row in metrics.iterrows():
        own = rng.normal(0, noise, queries)
        parts.append(
            pd.DataFrame(
                {
                    "run": row["run"],
                    "checkpoint": row["checkpoint"],
                    "split": row["split"],
                    "metric": row["metric"],
                    "qid": [f"q{i}" for i in range(queries)],
                    "value": row["value"] + difficulty + own - own.mean(),
                    "n": 1,
                }
            )
        )
    return pd.concat(parts, ignore_index=True)[list(PER_QUERY_COLUMNS)]


def dev_ndcg(table: pd.DataFrame) -> pd.DataFrame:
    return table[(table["split"] == "dev") & (table["metric"] == "nDCG@10")]


def test_the_paired_standard_error_is_the_se_of_the_mean_per_query_difference():
    """By hand: d = (0.10, 0.12, 0.08, 0.10, 0.11, 0.09), mean 0.1, sum of squared deviations 0.001,
    variance 0.001 / 5, SE = sqrt(0.0002 / 6) = 0.005774. The two runs' separate SEs, combined as
    if independent, are ~0.1: the shared query difficulty counted twice."""
    a = np.array([0.5, 0.7, 0.2, 0.9, 0.4, 0.6])
    b = a - np.array([0.10, 0.12, 0.08, 0.10, 0.11, 0.09])
    assert paired_difference_se(a, b) == pytest.approx(np.sqrt(0.0002 / 6), rel=1e-9)
    unpaired = np.sqrt(a.var(ddof=1) / 6 + b.var(ddof=1) / 6)
    assert unpaired > 15 * paired_difference_se(a, b)
    # a metric averaged over per-query counts n: a constant n changes nothing (the delta method)
    frame = pd.DataFrame({"a": 2 * a, "b": 2 * b})
    twos = pd.DataFrame({"a": np.full(6, 2.0), "b": np.full(6, 2.0)})
    assert paired_standard_error(frame, twos, {"a": 1.0, "b": -1.0}) == pytest.approx(np.sqrt(0.0002 / 6))
    assert np.isnan(paired_difference_se(a[:4], b[:4]))  # fewer than 5 queries: no yardstick


def test_the_paired_standard_error_of_a_count_weighted_metric_matches_a_query_bootstrap():
    """M = sum n v / sum n with unequal n per query (the delta method): the same SE as resampling the
    queries and recomputing both runs' ratios on each resample (2000 resamples: within 10%)."""
    rng = np.random.default_rng(5)
    queries = 200
    n = pd.DataFrame({"a": rng.integers(1, 6, queries), "b": rng.integers(1, 6, queries)}).astype(float)
    difficulty = rng.normal(0.5, 0.2, queries)
    values = pd.DataFrame({"a": difficulty + rng.normal(0.05, 0.1, queries), "b": difficulty})
    weighted = values * n
    se = paired_standard_error(weighted, n, {"a": 1.0, "b": -1.0})
    counts = rng.multinomial(queries, np.full(queries, 1 / queries), size=2000)
    ratio = {c: counts @ weighted[c].to_numpy() / (counts @ n[c].to_numpy()) for c in "ab"}
    assert se == pytest.approx(np.std(ratio["a"] - ratio["b"], ddof=1), rel=0.1)


def test_the_paired_standard_error_recovers_the_known_noise_of_a_difference():
    metrics = dev_ndcg(synthetic_metrics_table(noise=0.0))
    final = metrics[metrics["checkpoint"] == 15]
    pointwise = final[final["objective"] == "pointwise"]
    noise, queries = 0.1, 400
    per_query = per_query_table(pointwise, queries, noise)
    table = QueryTable.build(per_query, "nDCG@10", "dev")
    runs = pointwise.sort_values("non_embedding_params")["run"].tolist()
    difference = table.standard_error({(runs[-1], 15): 1.0, (runs[0], 15): -1.0})
    # d_q = e1 - e2 with sd noise * sqrt(2); the query difficulty (sd 0.2) cancels in the pair.
    assert difference == pytest.approx(noise * np.sqrt(2 / queries), rel=0.12)
    values = {run: per_query[per_query["run"] == run].sort_values("qid")["value"].to_numpy() for run in runs}
    assert difference == pytest.approx(paired_difference_se(values[runs[-1]], values[runs[0]]), rel=1e-9)
    single = table.standard_error({(runs[0], 15): 1.0})  # difficulty does not cancel
    assert single == pytest.approx(np.sqrt(0.2**2 + noise**2) / np.sqrt(queries), rel=0.15)
    assert single > 1.5 * difference


def test_a_clear_size_gap_is_real_scaling():
    metrics = with_bm25(dev_ndcg(with_second_seed(synthetic_metrics_table(noise=0.0), "s1", 0.001)), 0.3)
    per_query = per_query_table(metrics, 100, 0.05)
    evidence = scaling_evidence(metrics, per_query, "nDCG@10", "dev").set_index("objective")
    assert set(evidence.index) == {"pointwise", "listwise"}
    row = evidence.loc["pointwise"]
    assert row["queries"] == 100 and row["training_gain"] > 0 and row["size_gap"] > 0.01
    assert row["seed_spread"] == pytest.approx(0.001) and row["seed_spread_models"] == "s1"
    # the two seeds compared query by query: their own noise (sd 0.05 each), not the difficulty
    assert row["seed_spread_se"] == pytest.approx(0.05 * np.sqrt(2 / 100), rel=0.3)
    assert 0 < row["size_gap_se"] < row["size_gap"] / 3 and 0 < row["training_gain_se"]
    assert row["training_gain_verdict"] == row["size_gap_verdict"] == row["real_scaling"] == "yes"
    assert row["largest_beats_bm25"] == "yes" and row["largest_minus_bm25"] > 0


def test_a_size_gap_within_the_query_noise_is_not_scaling():
    metrics = dev_ndcg(synthetic_metrics_table(noise=0.0))
    per_query = per_query_table(metrics, 20, 1.0)  # SE of a difference ~ 0.3, the gap ~ 0.1
    row = scaling_evidence(metrics, per_query, "nDCG@10", "dev").set_index("objective").loc["listwise"]
    assert row["size_gap"] > 0 and row["size_gap"] < 1.96 * row["size_gap_se"]
    assert row["size_gap_verdict"] == "no" and row["real_scaling"] == "no"
    assert np.isnan(row["seed_spread"])


def test_a_seed_spread_larger_than_the_size_gap_is_not_scaling():
    metrics = with_bm25(dev_ndcg(with_second_seed(synthetic_metrics_table(noise=0.0), "s1", 0.5)), 0.99)
    per_query = per_query_table(metrics, 100, 0.01)  # the query noise alone would call it real
    row = scaling_evidence(metrics, per_query, "nDCG@10", "dev").set_index("objective").loc["listwise"]
    assert row["size_gap"] > 1.96 * row["size_gap_se"] and row["seed_spread"] == pytest.approx(0.5)
    assert row["size_gap_verdict"] == "no" and row["real_scaling"] == "no"
    assert row["largest_beats_bm25"] == "no"


def test_a_reranker_clearly_below_bm25_is_worse_not_within_the_noise():
    metrics = dev_ndcg(synthetic_metrics_table(noise=0.0))
    top = metrics.loc[metrics["checkpoint"] == metrics["checkpoint"].max(), "value"].max()
    metrics = with_bm25(metrics, top + 0.2)  # BM25 well above every run
    per_query = per_query_table(metrics, 100, 0.05)
    row = scaling_evidence(metrics, per_query, "nDCG@10", "dev").set_index("objective").loc["listwise"]
    assert row["largest_minus_bm25"] < -1.96 * row["largest_minus_bm25_se"]
    assert row["largest_beats_bm25"] == "worse"
    assert "below, beyond its noise" in claims(scaling_evidence(metrics, per_query, "nDCG@10", "dev"))[0]
    # the two sides of one two-sided test, and the band between them
    assert [verdict(d, 0.01) for d in (0.03, 0.0, -0.03)] == ["yes", "no", "worse"]
    assert both("yes", "worse") == "no" and both("worse", "unknown") == "no"


def test_without_a_noise_estimate_the_verdict_is_unknown_never_true():
    metrics = with_bm25(dev_ndcg(synthetic_metrics_table(noise=0.0)), 0.1)  # one seed per size
    for per_query in (None, per_query_table(metrics, 3, 0.05)):  # no table; too few queries
        row = scaling_evidence(metrics, per_query, "nDCG@10", "dev").iloc[0]
        assert row["size_gap"] > 0.05 and np.isnan(row["size_gap_se"]) and np.isnan(row["seed_spread"])
        assert row["real_scaling"] == row["size_gap_verdict"] == row["largest_beats_bm25"] == "unknown"
    assert verdict(0.2, float("nan"), 0.01) == "unknown"


def test_losses_count_lower_as_better():
    metrics = with_second_seed(synthetic_metrics_table(noise=0.0), "s1", 0.001)
    metrics = metrics[(metrics["split"] == "dev") & (metrics["metric"] == "CE@16")]
    row = scaling_evidence(metrics, per_query_table(metrics, 50, 0.05), "CE@16", "dev").iloc[0]
    assert row["size_gap"] > 0 and row["training_gain"] > 0 and row["real_scaling"] == "yes"


def test_final_standard_errors_per_run():
    metrics = dev_ndcg(synthetic_metrics_table(noise=0.0))
    table = final_standard_errors(metrics, per_query_table(metrics, 200, 0.05))
    assert len(table) == 10 and (table["checkpoint"] == 15).all() and (table["queries"] == 200).all()
    assert table["se"].between(0.2 / np.sqrt(200) * 0.8, 0.21 / np.sqrt(200) * 1.2).all()
    assert final_standard_errors(metrics, None)["se"].isna().all()


def test_summary_states_each_comparison_with_its_yardstick(tmp_path):
    from rerank_scaling.report.summary import summary

    metrics = with_bm25(with_second_seed(synthetic_metrics_table(noise=0.0), "s1", 0.001), 0.3)
    metrics = metrics[metrics["metric"] == "nDCG@10"]
    text = summary(metrics, tmp_path, per_query_table(metrics, 50, 0.05))
    claims = text.split("## Claims")[1].split("##")[0]
    assert claims.count("- **") == 4  # 2 objectives x 2 splits
    assert "pointwise (full), dev nDCG@10, 50 queries" in claims and "Real scaling: **yes**" in claims
    assert "seed spread 0.0010 at s1 (paired SE 0.0" in claims and "SE 0.0" in claims
    assert "standard error over queries" in text
    unknown = summary(metrics, tmp_path, None)
    assert "Real scaling: **yes**" not in unknown and "Real scaling: **unknown**" in unknown


def test_the_merged_per_query_table_keeps_what_the_summary_compares(tmp_path):
    """merge_metrics keeps each run's first and final checkpoint: the evidence is unchanged."""
    from rerank_scaling.evaluation import merge_metrics

    metrics = with_bm25(dev_ndcg(synthetic_metrics_table(noise=0.0)), 0.3)
    per_query = per_query_table(metrics, 30, 0.05)
    paths = []
    for run, rows in per_query.groupby("run"):
        paths.append(str(tmp_path / f"{run}.parquet"))
        rows.to_parquet(paths[-1])
    metrics.to_parquet(tmp_path / "all_in.parquet")
    out = tmp_path / "per_query.parquet"
    merge_metrics.main(
        ["--inputs", str(tmp_path / "all_in.parquet"), "--out", str(tmp_path / "all.parquet")]
        + ["--csv", str(tmp_path / "all.csv"), "--per-query-inputs", *paths, "--per-query-out", str(out)]
    )
    merged = pd.read_parquet(out)
    assert sorted(merged["checkpoint"].unique()) == [0, 1, 15] and len(merged) < len(per_query) / 5
    pd.testing.assert_frame_equal(scaling_evidence(metrics, merged), scaling_evidence(metrics, per_query))


def test_summary_warns_about_judgements_the_data_checks_dropped(tmp_path):
    from rerank_scaling.report.summary import summary

    metrics = with_bm25(synthetic_metrics_table(noise=0.0), 0.3)
    metrics = metrics[metrics["metric"] == "nDCG@10"]
    row = {"queries": 25, "judged_queries": 25, "judgements": 40, "unknown_queries": 0}
    checks = {
        "splits": [
            {"split": "train", **row, "unknown_documents": 0, "dropped_share": 0.0},
            {"split": "dev", **row, "unknown_documents": 2, "dropped_share": 0.05},
        ]
    }
    section = summary(metrics, tmp_path, None, checks).split("## Data checks")[1].split("\n## ")[0]
    assert section.count("**Warning**") == 1 and "dev: 2 judgements name documents" in section
    assert "5.0% of judgements" in section
    assert "(no data checks recorded)" in summary(metrics, tmp_path, None, None)


def test_summary_shows_thin_training_data_before_the_answer(tmp_path):
    """The examples job's warning (counts.json) heads the summary; its counts are in Data checks."""
    from rerank_scaling.report.summary import summary

    metrics = with_bm25(synthetic_metrics_table(noise=0.0), 0.3)
    metrics = metrics[metrics["metric"] == "nDCG@10"]
    counts = {
        "queries": 24,
        "without_positive": 20,
        "left_out_by_max_queries": 0,
        "dropped_for_negatives": {"pointwise": 1},
        "warnings": ["thin training data (pointwise examples): 21 of 24 training queries ..."],
    }
    text = summary(metrics, tmp_path, None, None, counts)
    assert text.index("- **Warning**: thin training data (pointwise examples): 21 of 24") < text.index(
        "## Claims"
    )
    checks = text.split("## Data checks")[1].split("\n## ")[0]
    assert "Training queries: 24; without a judgement at examples.positive_threshold: 20" in checks
    assert "dropped for too few BM25 negatives: 1 (pointwise)" in checks
    quiet = summary(metrics, tmp_path, None, None, {**counts, "warnings": []})
    assert "**Warning**" not in quiet.split("## Data checks")[0]


def _final_rows(values: dict[str, float], sizes: dict[str, int], queries: int) -> pd.DataFrame:
    """Two checkpoints per size; the final one (step 10) carries ``values``."""
    rows = []
    for model, value in values.items():
        for step, v in ((5, value / 2), (10, value)):
            rows.append(
                {
                    "run": f"{model}__pointwise__full__s1",
                    "model": model,
                    "role": "held_out" if model == "C" else "fit",
                    "objective": "pointwise",
                    "attention": "full",
                    "seed": 1,
                    "step": step,
                    "checkpoint": step,
                    "split": "dev",
                    "metric": "nDCG@10",
                    "value": v,
                    "queries": queries,
                    "non_embedding_params": sizes[model],
                }
            )
    return pd.DataFrame(rows)


def test_held_out_check_compares_the_miss_with_the_gap_between_the_two_largest_sizes():
    from rerank_scaling.report.held_out_check import held_out_check

    values, sizes = {"A": 0.20, "B": 0.30, "C": 0.36}, {"A": 1, "B": 2, "C": 4}
    metrics = _final_rows(values, sizes, queries=100)
    per_query = per_query_table(metrics, 100, 0.17, seed=3)
    table8 = pd.DataFrame(
        [
            {
                "objective": "pointwise",
                "attention": "full",
                "metric": "nDCG@10",
                "split": "dev",
                "protocol": protocol,
                "law": "additive",
                "model": "C",
                "observed": 0.36,
                "forecast": forecast,
                "low": forecast - 0.05,
                "high": forecast + 0.05,
                "covered": abs(forecast - 0.36) <= 0.05,
                "forecast_status": "usable",
                "status": "ok",
            }
            for protocol, forecast in (("model", 0.33), ("joint_code", 0.25), ("joint_text", 0.36))
        ]
    )
    check = held_out_check(table8, metrics, per_query, ("model", "joint_code")).set_index("protocol")
    assert set(check.index) == {"model", "joint_code"}
    gap = values["C"] - values["B"]
    assert check["largest_fitted"].eq("B").all() and np.allclose(check["gap"], gap)
    assert np.isclose(check.loc["model", "miss"], 0.03) and check.loc["model", "miss_within_gap"]
    assert (
        np.isclose(check.loc["joint_code", "miss"], 0.11) and not check.loc["joint_code", "miss_within_gap"]
    )
    # the gap's SE is paired: C's and B's values compared query by query (the difficulty, sd 0.2,
    # cancels; each run's own noise has sd 0.17): exactly the SE of the mean per-query difference
    final = per_query[per_query["checkpoint"] == 10].sort_values("qid")
    by_run = {run: rows["value"].to_numpy() for run, rows in final.groupby("run")}
    paired = paired_difference_se(by_run["C__pointwise__full__s1"], by_run["B__pointwise__full__s1"])
    assert np.allclose(check["gap_se"], paired) and paired == pytest.approx(0.17 * np.sqrt(2 / 100), rel=0.2)
    separate = np.hypot(*(np.std(by_run[f"{m}__pointwise__full__s1"], ddof=1) / 10 for m in "CB"))
    assert separate > 1.3 * paired
    assert 1.96 * paired < gap < 3 * paired  # beyond its noise, not yet readable to a third
    assert (check["gap_verdict"] == "yes").all() and not check["se_below_third_of_gap"].any()
    # SE shrinks as 1/sqrt(queries): 100 * (3 * se / gap)^2 queries make it gap / 3
    assert np.allclose(check["queries_for_third_of_gap"], np.ceil(100 * (3 * paired / gap) ** 2))

    # a held-out size that ends below the largest fitted one: no miss, however small, is within the gap
    below = held_out_check(
        table8.assign(observed=0.29, forecast=0.295),
        _final_rows({**values, "C": 0.29}, sizes, queries=100),
        None,
        ("model",),
    )
    assert np.isclose(below["gap"].iloc[0], -0.01) and np.isclose(below["miss"].iloc[0], 0.005)
    assert not below["miss_within_gap"].iloc[0]
    assert (
        np.isnan(below["gap_se"].iloc[0]) and below["gap_verdict"].iloc[0] == "unknown"
    )  # no per-query table


def test_no_held_out_size_gives_an_empty_check_and_a_summary_line(tmp_path):
    """A grid without a held-out size writes an empty Table 8; the summary says so instead of failing."""
    from rerank_scaling.report.held_out_check import NO_CHECK, held_out_check, run_check
    from rerank_scaling.report.summary import held_out_lines

    metrics = _final_rows({"A": 0.2}, {"A": 1}, queries=10)
    assert held_out_check(pd.DataFrame(), metrics, None, ("model",)).empty
    (tmp_path / "tables").mkdir()
    # what law_tables.write_all writes for an empty table
    pd.DataFrame().to_csv(tmp_path / "tables" / "table08_final_checkpoint.csv", index=False)
    assert held_out_lines(*run_check(tmp_path, metrics, None)) == [NO_CHECK]
