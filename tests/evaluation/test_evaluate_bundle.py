"""An evaluate_bundle job scores several runs in one process and writes what their evaluate_run jobs
would have written, merged: the same rows, values and per-query table (and it reuses their cache)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pandas as pd
import pytest
from conftest import LADDER, TINY_TRAINING, served_env, train_command

from rerank_scaling.evaluation import evaluate, evaluate_bundle

pytestmark = pytest.mark.slow

RUNS = ("L1__pointwise__full__s13", "L1__pairwise__full__s13")


def common_args(small_collection) -> list[str]:
    """What evaluate_run passes besides the run's own paths (no space in a test's paths)."""
    collection, runs = small_collection["collection"].root, small_collection["runs"]
    settings = {"rerank_depth": 10, "ce_sizes": [4], "relative_prob_k": [1, 3], "rr_m": [2]}
    words = f"--collection {collection} --bm25-dir {runs} --splits dev test --max-length 32 --device cpu"
    return [*words.split(), "--settings", json.dumps(settings)]


def test_a_bundle_writes_the_merged_tables_of_its_runs(small_collection, examples, tmp_path) -> None:
    results = tmp_path / "results"
    training = {**TINY_TRAINING, "max_steps": 4, "checkpoints": 2}
    trained = subprocess.run(
        train_command(RUNS[0], LADDER, training, examples, tmp_path / "trained", served=True),
        capture_output=True,
        text=True,
        env=served_env(),
    )
    assert trained.returncode == 0, trained.stderr[-2000:]
    # the second run: the same weights under the other run's name (its sidecars say so)
    for run in RUNS:
        shutil.copytree(tmp_path / "trained" / "ckpts", results / "checkpoints" / run)
        for sidecar in (results / "checkpoints" / run).glob("ckpt-*/checkpoint.json"):
            fields = json.loads(sidecar.read_text())
            sidecar.write_text(json.dumps({**fields, "run": run, "objective": run.split("__")[1]}))
    separate = []
    for run in RUNS:
        out = tmp_path / "separate" / f"{run}.parquet"
        evaluate.main(
            ["run", *common_args(small_collection), "--checkpoints", str(results / "checkpoints" / run)]
            + ["--work", str(tmp_path / "separate-work" / run), "--out", str(out)]
            + ["--per-query", str(out.with_suffix(".per_query.parquet"))]
        )
        separate.append(out)
    bundle = tmp_path / "bundle"
    evaluate_bundle.main(
        ["--runs", *RUNS, "--results", str(results), *common_args(small_collection)]
        + ["--out", str(bundle / "metrics.parquet"), "--per-query", str(bundle / "per_query.parquet")]
    )
    order = ["run", "split", "metric", "checkpoint"]
    expected = pd.concat([pd.read_parquet(p) for p in separate]).sort_values(order, ignore_index=True)
    got = pd.read_parquet(bundle / "metrics.parquet")
    assert set(got["run"]) == set(RUNS)
    pd.testing.assert_frame_equal(got.sort_values(order, ignore_index=True), expected)
    per_query = [pd.read_parquet(p.with_suffix(".per_query.parquet")) for p in separate]
    order = [*order, "qid"]
    expected_q = pd.concat(per_query).sort_values(order, ignore_index=True)
    got_q = pd.read_parquet(bundle / "per_query.parquet").sort_values(order, ignore_index=True)
    pd.testing.assert_frame_equal(got_q, expected_q)
    # each run's cache sits where evaluate_run and evaluate_part keep it
    assert all((results / "work" / "eval" / run / "cache").is_dir() for run in RUNS)
