"""``rerank-scaling forecast`` on a table written by hand (README's example) and on bad tables."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rerank_scaling.forecast.cli import main
from rerank_scaling.forecast.run import FORECAST_COLUMNS, forecast_runs
from rerank_scaling.registries.measures import MetricSpec

REPO = Path(__file__).resolve().parents[2]
#: The README's example, verbatim (tests/forecast/test_cli.py checks the README holds it).
README_CSV = """model,size,value
S1,17e6,0.231
S2,32e6,0.262
S3,68e6,0.290
S4,150e6,0.318
S5,400e6,0.335
"""


def forecast(tmp_path: Path, csv: str, *options: str) -> subprocess.CompletedProcess:
    runs = tmp_path / "runs.csv"
    runs.write_text(csv)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    command = [sys.executable, "-m", "rerank_scaling.forecast", str(runs), "--out", str(tmp_path / "out")]
    return subprocess.run([*command, *options], capture_output=True, text=True, env=env)


def test_the_readme_example_forecasts_the_held_out_and_the_target_size(tmp_path):
    readme = (REPO / "README.md").read_text()
    assert README_CSV in readme
    done = forecast(tmp_path, README_CSV, "--metric", "nDCG@10", "--target-size", "1e9", "--bootstrap", "100")
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(tmp_path / "out" / "forecasts.csv")
    assert table.columns.tolist() == FORECAST_COLUMNS
    assert set(table["model"]) == {"S5", "target 1e+09"}
    assert {"power_N", "ensemble"} <= set(table["law"])
    held = table[table["model"] == "S5"]
    assert (held["observed"] == 0.335).all() and held["forecast_status"].notna().all()
    assert table.loc[table["model"] == "target 1e+09", "observed"].isna().all()
    ordered = table[(table["law"] == "ensemble")].set_index("model")
    assert ordered.loc["target 1e+09", "forecast"] > ordered.loc["S5", "forecast"]  # the curve rises
    assert (table["low"] <= table["forecast"]).all() and (table["forecast"] <= table["high"]).all()
    answer = (tmp_path / "out" / "answer.md").read_text()
    assert "Fitted on S1 (17M), S2 (32M), S3 (68M), S4 (150M)" in answer
    assert "not trained, nothing to compare" in answer
    assert "no seed replicates" in answer and "--run-sigma" in answer  # what was assumed
    for name in ("fits.csv", "calibration.csv"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    assert done.stdout.startswith("# Forecasts from a table of runs")


@pytest.mark.parametrize(
    "csv,options,message",
    [
        ("model,value\nS1,0.2\n", (), "missing column(s) size; a table of runs needs model, size, value"),
        ("model,size,value\nS1,1e6,0.2\nS2,2e6,\nS3,4e6,0.3\n", (), "runs.csv:3: column 'value' is empty"),
        (
            "model,size,value\nS1,1e6,0.2\nS2,2e6,0.25\n",
            (),
            "has 1 fitted size(s); a law in N needs at least 2",
        ),
        (
            "model,size,value\nS1,1e6,3.2\nS2,2e6,3.0\nS3,4e6,2.9\n",
            ("--higher-is-better",),
            "declare it: --range LO HI",
        ),
        ("model,size,value,role\nS1,1e6,0.2,fit\nS2,2e6,0.2,test\n", (), "runs.csv:3: role 'test'"),
        ("model,size,value\nS1,1e6,0.2\nS1,2e6,0.25\nS3,4e6,0.3\n", (), "model 'S1' has several sizes"),
    ],
)
def test_bad_tables_fail_early_with_the_line_and_the_fix(tmp_path, csv, options, message):
    done = forecast(tmp_path, csv, *options)
    assert done.returncode == 2
    assert message in done.stderr, done.stderr
    assert not (tmp_path / "out" / "forecasts.csv").exists()


LOSS_CSV = "model,size,value\n" + "".join(
    f"M{i},{n:g},{1.7 + 400 / n**0.34:.4f}\n" for i, n in enumerate([2e7, 6e7, 1.5e8, 4e8, 1e9])
)


@pytest.mark.parametrize(
    "csv,options,message",
    [
        ("", (), "runs.csv: the file is empty (0 bytes); write a header line (model,size,value)"),
        ("\n\n", (), "runs.csv: no header line (blank file)"),
        ("model,size,value\n", (), "runs.csv:2: a header and no rows; add a row per run"),
        (README_CSV, ("--bootstrap", "0"), "--bootstrap 0: give a positive number of resamples"),
        (README_CSV, ("--run-sigma", "-0.1"), "--run-sigma -0.1: a standard deviation is 0 or more"),
        (README_CSV, ("--range", "1", "0"), "--range 1 0: LO must be finite and below HI"),
        (README_CSV, ("--target-size", "0"), "--target-size 0: a size is a positive parameter count"),
        (README_CSV, ("--target-size=-1e9",), "--target-size -1e+09: a size is a positive parameter count"),
        (
            README_CSV.replace("S2,32e6,0.262\n", "S2,32e6,0.262\nS2,32e6,0.400\n"),
            ("--metric", "nDCG@10"),
            "runs.csv:4: model 'S2' (seed 0, step 1) has 0.4 here and 0.262 on line 3; keep one row",
        ),
        (LOSS_CSV, ("--metric", "loss"), "metric 'loss' is not one whose direction the pipeline knows"),
        (LOSS_CSV, (), "metric 'value' is not one whose direction the pipeline knows; declare it: --lower"),
        (
            README_CSV.replace("S3,68e6", ",68e6"),
            ("--metric", "nDCG@10"),
            "runs.csv:4: column 'model' is empty (1 such rows); name the run's size",
        ),
    ],
)
def test_the_command_names_the_option_or_line_and_the_fix(tmp_path, capsys, csv, options, message):
    """Each bad input of the forecast command: exit 2 and one line on stderr, nothing written."""
    runs = tmp_path / "runs.csv"
    runs.write_text(csv)
    assert main(["forecast", str(runs), "--out", str(tmp_path / "out"), *options]) == 2
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and said.startswith("rerank-scaling forecast: ")
    assert message in said, said
    assert not (tmp_path / "out").exists()


def test_a_row_repeated_verbatim_counts_once(tmp_path, capsys):
    runs = tmp_path / "runs.csv"
    runs.write_text(README_CSV + "S2,32e6,0.262\n")
    assert (
        main(
            [
                "forecast",
                str(runs),
                "--out",
                str(tmp_path / "out"),
                "--metric",
                "nDCG@10",
                "--bootstrap",
                "20",
            ]
        )
        == 0
    )
    assert "1 row(s) repeated verbatim were counted once (e.g. line 7)" in capsys.readouterr().out


def test_a_declared_loss_is_forecast_falling(tmp_path):
    """A language-model loss (not a metric the pipeline names): declared lower-is-better with a range."""
    csv = "model,size,value\n" + "".join(
        f"M{i},{n:g},{1.7 + 400 / n**0.34:.4f}\n" for i, n in enumerate([2e7, 6e7, 1.5e8, 4e8, 1e9])
    )
    done = forecast(tmp_path, csv, "--metric", "loss", "--lower-is-better", "--range", "0", "10")
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(tmp_path / "out" / "forecasts.csv")
    ensemble = table[table["law"] == "ensemble"].iloc[0]
    assert ensemble["forecast"] < 1.7 + 400 / 4e8**0.34  # below the largest fitted size's loss


def test_seed_replicates_give_a_noise_estimate_and_checkpoints_do_not(tmp_path):
    """Two seeds per size: the table estimates run noise, nothing assumed. Checkpoints of one run
    share its luck, so with one seed the answer still says what it assumes."""
    rng = np.random.default_rng(0)
    rows = [
        {"model": f"L{i}", "size": n, "seed": s, "step": step, "value": 0.5 - 0.3 * (n / 1e6) ** -0.3
         - 0.05 / step + rng.normal(0, 0.004)}
        for i, n in enumerate([2e6, 4e6, 8e6, 16e6, 32e6]) for s in (1, 2) for step in (1, 2, 4, 8)
    ]  # fmt: skip
    score = MetricSpec("value", 1, (0.0, 1.0))
    result = forecast_runs(pd.DataFrame(rows), tmp_path / "out", metric=score, bootstrap=50)
    assert not any("no seed replicates" in note for note in result.notes)
    one_seed = forecast_runs(pd.DataFrame(rows).query("seed == 1"), None, metric=score, bootstrap=20)
    assert any("no seed replicates" in note for note in one_seed.notes)
    assert set(result.forecasts["model"]) == {"L4"}
    assert "additive" in set(result.forecasts["law"])  # steps let the joint law fit


def test_the_console_script_names_the_cli():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["rerank-scaling"].split(":")
    assert callable(getattr(importlib.import_module(module), function))


def test_the_docs_quote_the_ladders_benchmark_as_generated():
    """The forecasts page's numbers on the real ladders are benchmarks/results/ladders.md's pooled row."""
    report = (REPO / "benchmarks" / "results" / "ladders.md").read_text()
    pooled = report.split("## Every forecast, duplicates included, pooled", 1)[1].split("##", 1)[0]
    engine = next(line for line in pooled.splitlines() if line.startswith("| engine"))
    seed = next(line for line in pooled.splitlines() if line.startswith("| seed"))
    cells = [c.strip() for c in engine.strip("|").split("|")]
    inside, total = cells[4].split(" = ")[0].split("/")
    interval = cells[4].split(" = ")[1]  # "0.92 [0.83, 0.97]"
    readme = (REPO / "docs" / "forecasts.md").read_text()
    assert (
        f"cover {inside} of {total} held-out points ({interval.replace(' [', ', exact 95% interval [')})"
        in (" ".join(readme.split()))
    )
    seed_inside = [c.strip() for c in seed.strip("|").split("|")][4].split(" = ")[0].replace("/", " of ")
    assert f"{seed_inside} on the same splits" in " ".join(readme.split())
    assert f"median |error| is {cells[2]} against {[c.strip() for c in seed.strip('|').split('|')][2]}" in (
        " ".join(readme.split())
    )
    assert f"{float(cells[5]):.1f}× the median |error|" in " ".join(readme.split())
    frontier = report.split("## What widths that adapt to each group could reach", 1)[1].split("##", 1)[0]
    rows = {
        cells[0]: cells[1:]
        for line in frontier.splitlines()
        if line.startswith("| ") and not line.startswith("| intervals")
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }
    oracle, recalibrated = rows["oracle: forecast +- q s_g"], rows["recalibrated: forecast + b_-i +- q s_-i"]
    flat = " ".join(readme.split())
    assert f"need {float(oracle[0]):.2f}× for 90% coverage and cover {float(oracle[2]):.2f} at 3×" in flat
    assert f"bias included, {float(recalibrated[0]):.2f}× and {float(recalibrated[2]):.2f}." in flat
    honest = report.split("### Pooled, with 95% intervals", 1)[1].split("###", 1)[0]
    quoted = dict(
        line[2:].split(": ", 1) for line in honest.splitlines() if line.startswith("- ") and ": " in line
    )
    table = report.split("### Per method, per ladder", 1)[1]
    row = next(line for line in table.splitlines() if line.startswith("| pooled") and "| engine" in line)
    cells95, cells80 = [c.strip() for c in row.strip("|").split("|")][7:9]
    assert f"95% intervals hold {cells95.split(' = ')[0].replace('/', ' of ')}" in flat
    assert f"80% intervals {cells80.split(' = ')[0].replace('/', ' of ')}" in flat
    for key in ("skill vs seed paper, IS95%", "skill vs log-linear, IS95%"):
        assert f"{key.split(',')[0]} {quoted[key]}" in flat


def test_the_fit_stage_writes_what_forecast_runs_gives_on_the_same_runs(tmp_path):
    """One engine for both: the workflow's fit stage calls the command's core, so its forecasts.csv is
    ``forecast_runs``' on the same runs written as a user's table (their final values, as the command
    fits them), and its answer.md states the same question on the fit's size axis."""
    from rerank_scaling.forecast.fit_stage import fit_everything
    from rerank_scaling.laws.fit_settings import FitSettings
    from rerank_scaling.laws.synthetic import synthetic_metrics_table

    sizes = {
        f"s{i}": (n, n + 1e7, "held_out" if i == 5 else "fit")
        for i, n in enumerate([2e6, 4e6, 8e6, 16e6, 32e6], 1)
    }
    table = synthetic_metrics_table(
        sizes, objectives=("pointwise",), checkpoints=4, splits=("dev",), seeds={"s4": 2}, run_sigma=0.004
    )
    settings = FitSettings.of(metrics=("nDCG@10", "CE@16"), last_k=1, holdout_last=1, bootstrap=20, seed=3)
    fit_everything(table, settings, tmp_path / "laws")
    runs = table.rename(columns={"non_embedding_params": "size"})[
        ["model", "size", "value", "step", "seed", "metric", "split", "objective", "role"]
    ]
    command = forecast_runs(runs, tmp_path / "command", bootstrap=20, seed=3)
    stage = pd.read_csv(tmp_path / "laws" / "forecasts.csv")
    pd.testing.assert_frame_equal(stage, pd.read_csv(tmp_path / "command" / "forecasts.csv"))
    assert set(stage["model"]) == {"s5"} and {"power_N", "ensemble", "two_step"} <= set(stage["law"])
    pd.testing.assert_frame_equal(stage, command.forecasts, check_dtype=False)
    answer = (tmp_path / "laws" / "answer.md").read_text()
    assert "Fitted on s1 (2M), s2 (4M), s3 (8M), s4 (16M); forecast: s5 (32M)" in answer
    assert "(N = non-embedding parameters)" in answer
    said = (tmp_path / "command" / "answer.md").read_text().split("## Assumed", 1)[0]
    assert answer.replace("non-embedding parameters", "the table's size column") == said


def test_forecasts_of_two_attention_variants_say_which_is_which():
    """A workflow grid with attention variants (the tiny config's full and window4): forecasts.csv
    and answer.md name the variant of each row; a user's table (one variant) keeps its columns."""
    from rerank_scaling.forecast.run import answer_lines, forecast_metrics
    from rerank_scaling.laws.fit_settings import FitSettings
    from rerank_scaling.laws.protocols import prepare
    from rerank_scaling.laws.synthetic import synthetic_metrics_table

    sizes = {
        f"s{i}": (n, n + 1e7, "held_out" if i == 4 else "fit") for i, n in enumerate([2e6, 4e6, 8e6, 16e6], 1)
    }
    full = synthetic_metrics_table(
        sizes, objectives=("pointwise",), checkpoints=2, splits=("dev",), metrics=("nDCG@10",)
    )
    table = pd.concat([full, full.assign(attention="window4", value=full["value"] - 0.02)], ignore_index=True)
    settings = FitSettings.of(metrics=("nDCG@10",), last_k=1, holdout_last=1, bootstrap=10, backtest=False)
    result = forecast_metrics(table, settings)
    assert result.forecasts.columns.tolist() == ["attention", *FORECAST_COLUMNS]
    by_variant = result.forecasts[result.forecasts["law"] == "ensemble"].set_index("attention")["forecast"]
    assert by_variant["full"] > by_variant["window4"]  # the variants' rows are not each other's
    answer = "\n".join(answer_lines(result, prepare(table, settings), "non_embedding"))
    assert "- pointwise, attention window4, s4 (16M) by ensemble" in answer
    alone = forecast_metrics(full, settings)
    assert alone.forecasts.columns.tolist() == FORECAST_COLUMNS


def test_every_metric_the_evaluation_writes_has_a_known_direction():
    """The forecast command needs no declared direction for a name the pipeline writes."""
    from rerank_scaling.evaluation.metric_settings import MetricSettings
    from rerank_scaling.evaluation.metrics import metric_names
    from rerank_scaling.forecast.table import known_metric

    names = metric_names(MetricSettings.of(ce_sizes=(16, 64), relative_prob_k=(1, 10), rr_m=(2, 10)))
    assert names and all(known_metric(name) for name in names)
    assert not any(known_metric(name) for name in ("loss", "value", "accuracy", "nDCG@"))
