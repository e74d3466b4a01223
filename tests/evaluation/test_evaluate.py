"""Checkpoint evaluation: long tables per checkpoint x split, BM25 rows, per-checkpoint caching."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess

import pandas as pd
import pytest
from conftest import LADDER, TINY_TRAINING, served_env, train_command

from rerank_scaling.records import METRIC_COLUMNS, PER_QUERY_COLUMNS
from rerank_scaling.training.checkpoint_store import FILES, CheckpointDamaged
from rerank_scaling.training.model_saves import TRAINED_SHARD

pytestmark = pytest.mark.slow


def evaluate(small_collection, checkpoints, work, out, mode="run", **settings):
    from rerank_scaling.evaluation import evaluate as stage

    args = [
        mode,
        "--collection",
        str(small_collection["collection"].root),
        "--bm25-dir",
        str(small_collection["runs"]),
        "--splits",
        "dev",
        "test",
        "--settings",
        json.dumps({"rerank_depth": 10, "ce_sizes": [4], "relative_prob_k": [1, 3], "rr_m": [2], **settings}),
        "--out",
        str(out),
        "--per-query",
        str(out.with_suffix(".per_query.parquet")),
    ]
    if mode == "run":
        args += [
            "--checkpoints",
            str(checkpoints),
            "--max-length",
            "32",
            "--device",
            "cpu",
            "--work",
            str(work),
        ]
    stage.main(args)
    return pd.read_parquet(out)


def per_query_of(out):
    return pd.read_parquet(out.with_suffix(".per_query.parquet"))


@pytest.fixture(scope="module")
def trained(tmp_path_factory, examples):
    """One tiny run trained once (6 steps, 3 checkpoints); tests copy its checkpoints."""
    out = tmp_path_factory.mktemp("trained")
    training = {**TINY_TRAINING, "max_steps": 6, "checkpoints": 3}
    result = subprocess.run(
        train_command("L1__pointwise__full__s13", LADDER, training, examples, out, served=True),
        capture_output=True,
        text=True,
        env=served_env(),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return out / "ckpts"


def checkpoints_copy(trained, tmp_path):
    return shutil.copytree(trained, tmp_path / "ckpts")


def assert_means_of_the_per_query_rows(table, per_query):
    """The long table's nDCG@10 is the mean of the per-query rows; CE@4_dropped counts their 1s."""
    assert list(per_query.columns) == list(PER_QUERY_COLUMNS)
    keys = ["run", "checkpoint", "split"]
    rows = per_query[per_query["metric"] == "nDCG@10"].groupby(keys)["value"].mean()
    long = table[table["metric"] == "nDCG@10"].set_index(keys)["value"]
    pd.testing.assert_series_equal(rows.sort_index(), long.sort_index(), check_names=False)
    dropped = per_query[per_query["metric"] == "CE@4_dropped"].groupby(keys)["value"].sum()
    counted = table[table["metric"] == "CE@4_dropped"].set_index(keys)["value"]
    pd.testing.assert_series_equal(dropped.sort_index(), counted.sort_index(), check_names=False)


def test_evaluation_scores_every_checkpoint_and_only_new_ones_on_rerun(small_collection, trained, tmp_path):
    ckpts, work = checkpoints_copy(trained, tmp_path), tmp_path / "eval-work"
    held_back = tmp_path / "held-back"
    shutil.move(ckpts / "ckpt-03", held_back)

    first = evaluate(small_collection, ckpts, work, tmp_path / "m1.parquet")
    assert list(first.columns) == list(METRIC_COLUMNS)
    assert sorted(first["checkpoint"].unique()) == [1, 2] and set(first["split"]) == {"dev", "test"}
    assert {
        "nDCG@10",
        "AP",
        "RR@10",
        "R@10",
        "P@10",
        "CE@4",
        "CE@4_dropped",
        "RelP@1",
        "RelP@3",
        "RRstar@2",
    } <= set(first["metric"])
    assert_means_of_the_per_query_rows(first, per_query_of(tmp_path / "m1.parquet"))
    assert (work / "runs" / "ckpt-01.dev.trec").exists()
    cached = {p.name: p.stat().st_mtime_ns for p in (work / "cache").glob("*.parquet")}
    assert len(cached) == 8  # per-query rows and scores of 2 checkpoints x 2 splits

    shutil.move(held_back, ckpts / "ckpt-03")  # one more checkpoint appears
    second = evaluate(small_collection, ckpts, work, tmp_path / "m2.parquet")
    after = {p.name: p.stat().st_mtime_ns for p in (work / "cache").glob("*.parquet")}
    assert len(after) == 12 and all(after[name] == mtime for name, mtime in cached.items())
    assert sorted(second["checkpoint"].unique()) == [1, 2, 3]
    pd.testing.assert_frame_equal(
        second[second["checkpoint"] < 3].reset_index(drop=True), first.reset_index(drop=True)
    )
    assert_means_of_the_per_query_rows(second, per_query_of(tmp_path / "m2.parquet"))

    # a metric setting changes: the metrics again from the cached scores (no run file rewritten),
    # equal to an evaluation from scratch
    runs = {p.name: p.stat().st_mtime_ns for p in (work / "runs").glob("*.trec")}
    third = evaluate(small_collection, ckpts, work, tmp_path / "m3.parquet", relative_prob_k=[2])
    assert {p.name: p.stat().st_mtime_ns for p in (work / "runs").glob("*.trec")} == runs
    fresh = evaluate(
        small_collection, ckpts, tmp_path / "fresh-work", tmp_path / "m4.parquet", relative_prob_k=[2]
    )
    assert "RelP@2" in set(third["metric"])
    pd.testing.assert_frame_equal(third, fresh)


def test_a_retrained_identical_checkpoint_is_not_scored_again(small_collection, trained, tmp_path):
    """Training re-run to the same weights (its sidecars' wall_s differ): the metrics come from the
    cached scores (no model loaded: no run file rewritten) and equal the first evaluation's. A
    checkpoint with other weights than its sidecar records is an error naming the file and the repair;
    with its sidecar's records it is scored again, alone."""
    ckpts, work = checkpoints_copy(trained, tmp_path), tmp_path / "eval-work"
    first = evaluate(small_collection, ckpts, work, tmp_path / "m1.parquet")
    runs = {p.name: p.stat().st_mtime_ns for p in (work / "runs").glob("*.trec")}
    assert len(runs) == 6  # 3 checkpoints x 2 splits
    for sidecar in ckpts.glob("ckpt-*/checkpoint.json"):
        fields = json.loads(sidecar.read_text())
        sidecar.write_text(json.dumps({**fields, "wall_s": fields["wall_s"] + 1.5}))
    second = evaluate(small_collection, ckpts, work, tmp_path / "m2.parquet")
    assert {p.name: p.stat().st_mtime_ns for p in (work / "runs").glob("*.trec")} == runs
    pd.testing.assert_frame_equal(second, first)

    # other weights under ckpt-02's sidecar: a damaged checkpoint, before anything is scored
    shutil.copy(ckpts / "ckpt-01" / TRAINED_SHARD, ckpts / "ckpt-02" / TRAINED_SHARD)
    with pytest.raises(CheckpointDamaged) as damaged:
        evaluate(small_collection, ckpts, work, tmp_path / "m3.parquet")
    weights = ckpts / "ckpt-02" / TRAINED_SHARD
    assert f"{weights}: its SHA-256 is not the one recorded" in str(damaged.value)
    assert f"rm {ckpts / 'ckpt-02' / 'checkpoint.json'} and run snakemake again" in str(damaged.value)
    assert {p.name: p.stat().st_mtime_ns for p in (work / "runs").glob("*.trec")} == runs
    # ... and with its sidecar's records (a training that made ckpt-01's weights at ckpt-02's step)
    # it is scored again, alone
    records = [json.loads((ckpts / name / "checkpoint.json").read_text()) for name in ("ckpt-01", "ckpt-02")]
    records[1][FILES][TRAINED_SHARD] = records[0][FILES][TRAINED_SHARD]
    (ckpts / "ckpt-02" / "checkpoint.json").write_text(json.dumps(records[1]))
    third = evaluate(small_collection, ckpts, work, tmp_path / "m3.parquet")
    rescored = {p.name for p in (work / "runs").glob("*.trec") if p.stat().st_mtime_ns != runs[p.name]}
    assert rescored == {"ckpt-02.dev.trec", "ckpt-02.test.trec"}
    ndcg = third[third["metric"] == "nDCG@10"].set_index(["checkpoint", "split"])["value"]
    assert (ndcg.loc[2] == ndcg.loc[1]).all(), "ckpt-02 now holds ckpt-01's weights"


def test_an_auto_batch_size_is_keyed_as_its_number(small_collection, trained, tmp_path, caplog):
    """``evaluation.batch_size: auto`` scores in the CPU kind's measured batch size and is cached as
    that number: the same number given explicitly scores nothing again, another one scores everything
    again (a batch's padding changes the GEMMs' rounding, not the scores beyond it)."""
    from rerank_scaling.compute.cpu_profiles import cpu_profile

    ckpts, work = checkpoints_copy(trained, tmp_path), tmp_path / "eval-work"
    measured = cpu_profile().eval_batch_size
    fp32 = {"precision": "fp32"}  # on every CPU kind: bf16 rounding could exceed the atol below
    with caplog.at_level(logging.INFO, logger="rerank_scaling.evaluation.checkpoints"):
        first = evaluate(small_collection, ckpts, work, tmp_path / "m1.parquet", batch_size="auto", **fp32)
    assert f"batches of {measured} pairs (evaluation.batch_size: auto)" in caplog.text
    runs = {p.name: p.stat().st_mtime_ns for p in (work / "runs").glob("*.trec")}
    assert len(runs) == 6  # 3 checkpoints x 2 splits
    same = evaluate(small_collection, ckpts, work, tmp_path / "m2.parquet", batch_size=measured, **fp32)
    assert {p.name: p.stat().st_mtime_ns for p in (work / "runs").glob("*.trec")} == runs
    pd.testing.assert_frame_equal(same, first)
    scores = {p.name: _scores(p) for p in (work / "runs").glob("*.trec")}
    evaluate(small_collection, ckpts, work, tmp_path / "m3.parquet", batch_size=measured + 3, **fp32)
    assert all(p.stat().st_mtime_ns != runs[p.name] for p in (work / "runs").glob("*.trec"))
    for p in (work / "runs").glob("*.trec"):
        pd.testing.assert_series_equal(_scores(p), scores[p.name], rtol=0, atol=1e-5)


def _scores(trec):
    from rerank_scaling.data.trec import read_run

    run = read_run(str(trec))
    return pd.Series({(q, d): s for q, docs in run.items() for d, s in docs.items()}).sort_index()


def test_final_only_splits_and_bf16_scoring(small_collection, trained, tmp_path, caplog):
    """A final-only split is scored at the last checkpoint only; bf16 scoring really runs in bf16 on
    the CPU (its scores differ from fp32's where the near-tie rescoring compares them)."""
    ckpts = checkpoints_copy(trained, tmp_path)
    tables = {}
    for precision in ("fp32", "bf16"):
        with caplog.at_level(logging.INFO, logger="rerank_scaling.evaluation.rerank"):
            tables[precision] = evaluate(
                small_collection,
                ckpts,
                tmp_path / precision,
                tmp_path / f"{precision}.parquet",
                precision=precision,
                final_only_splits=["test"],
            )
        table = tables[precision]
        assert sorted(table.loc[table["split"] == "dev", "checkpoint"].unique()) == [1, 2, 3]
        assert sorted(table.loc[table["split"] == "test", "checkpoint"].unique()) == [3]
        assert_means_of_the_per_query_rows(table, per_query_of(tmp_path / f"{precision}.parquet"))
        assert set(table["precision"]) == {precision}, "each row records what its scores were computed in"
        assert set(table["train_precision"]) <= {"fp32", "bf16"}
    fp32 = _scores(tmp_path / "fp32" / "runs" / "ckpt-03.dev.trec")
    bf16 = _scores(tmp_path / "bf16" / "runs" / "ckpt-03.dev.trec")
    assert list(fp32.index) == list(bf16.index)
    # this tiny model scores every pair within about 2e-4: all near ties, rescored in fp32
    # (evaluation/near_ties.py), so the bf16 scores show on the rescoring's calibration sample
    reports = [r.near_ties for r in caplog.records if hasattr(r, "near_ties")]
    assert len(reports) == 4, "bf16 scored dev at 3 checkpoints and test at the last"
    assert all(r.calibration_error > 0 for r in reports), "bf16 gave fp32's exact scores: no cast took effect"
    # How far bf16 moves the metrics of trained checkpoints is measured, not asserted here:
    # benchmarks/bench_eval_precision.py on a run's own final checkpoints.


def test_bm25_rows_use_the_same_metrics(small_collection, tmp_path):
    rows = evaluate(small_collection, None, None, tmp_path / "bm25.parquet", mode="bm25")
    assert set(rows["run"]) == {"bm25"} and set(rows["split"]) == {"dev", "test"}
    ndcg = rows[(rows["metric"] == "nDCG@10") & (rows["split"] == "test")]["value"].iloc[0]
    assert 0.1 < ndcg < 0.7
    assert_means_of_the_per_query_rows(rows, per_query_of(tmp_path / "bm25.parquet"))
    assert list(rows.columns) == list(METRIC_COLUMNS) and rows["model_commit"].isna().all()


def test_rows_name_the_model_commit_of_the_sidecar(small_collection, trained, tmp_path):
    """A run from a pinned hub model (its sidecars name ``model_commit``) has the commit on every
    metrics row; a local model's rows have none."""
    ckpts, work = checkpoints_copy(trained, tmp_path), tmp_path / "eval-work"
    local = evaluate(small_collection, ckpts, work, tmp_path / "m1.parquet")
    assert local["model_commit"].isna().all()
    commit = "0123456789abcdef0123456789abcdef01234567"
    for sidecar in ckpts.glob("ckpt-*/checkpoint.json"):
        sidecar.write_text(json.dumps({**json.loads(sidecar.read_text()), "model_commit": commit}))
    pinned = evaluate(small_collection, ckpts, work, tmp_path / "m2.parquet")
    assert len(pinned) == len(local) and (pinned["model_commit"] == commit).all()


def test_pre_written_texts_and_tokens_score_like_a_corpus_scan(small_collection, trained, tmp_path):
    """The workflow's per-split jobs (split_texts, split_tokens) change no score, only the set-up."""
    from rerank_scaling.evaluation import split_texts, split_tokens

    collection, runs = small_collection["collection"], small_collection["runs"]
    settings = json.dumps({"rerank_depth": 10, "ce_sizes": [4], "relative_prob_k": [1, 3], "rr_m": [2]})
    for split in ("dev", "test"):
        texts = tmp_path / "texts" / f"{split}.parquet"
        split_texts.main(
            ["--corpus", str(collection.corpus), "--run", str(runs / f"{split}.trec")]
            + ["--depth", "10", "--out", str(texts)]
        )
        split_tokens.main(
            ["--model", json.dumps(LADDER), "--collection", str(collection.root), "--bm25-run"]
            + [str(runs / f"{split}.trec"), "--texts", str(texts), "--split", split, "--settings", settings]
            + ["--max-length", "32", "--out", str(tmp_path / "tokens" / f"{split}.parquet")]
        )
    scanned = evaluate(small_collection, trained, tmp_path / "w1", tmp_path / "a.parquet")
    from rerank_scaling.evaluation import evaluate as stage

    stage.main(
        ["run", "--collection", str(collection.root), "--bm25-dir", str(runs), "--splits", "dev", "test"]
        + ["--settings", settings, "--out", str(tmp_path / "b.parquet")]
        + ["--per-query", str(tmp_path / "b.per_query.parquet"), "--checkpoints", str(trained)]
        + ["--max-length", "32", "--device", "cpu", "--work", str(tmp_path / "w2")]
        + ["--texts-dir", str(tmp_path / "texts"), "--tokens-dir", str(tmp_path / "tokens")]
    )
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "b.parquet"), scanned)
    for trec in sorted((tmp_path / "w1" / "runs").glob("*.trec")):
        pd.testing.assert_series_equal(_scores(trec), _scores(tmp_path / "w2" / "runs" / trec.name))
    assert len(list((tmp_path / "w1" / "runs").glob("*.trec"))) == 6  # 3 checkpoints x 2 splits
