"""merge_metrics streams run by run and writes what the in-memory merge wrote: the sorted
concatenation of every input, the per-query table at each run's first and final checkpoint over all
of the run's files (not within each part file, which kept every checkpoint of a per-checkpoint grid)."""

from __future__ import annotations

from pathlib import Path

import msmarco_shaped
import pandas as pd
import pytest

from rerank_scaling.atomic import write_table
from rerank_scaling.evaluation import merge_metrics
from rerank_scaling.records import METRIC_COLUMNS, PER_QUERY_COLUMNS


def in_memory_merge(paths: list[Path], first_and_final: bool) -> pd.DataFrame:
    """The merge as one table (the implementation before streaming, first_and_final applied to
    the concatenation): the reference the streamed outputs must equal."""
    merged = pd.concat([pd.read_parquet(path) for path in paths], ignore_index=True)
    if first_and_final:
        checkpoint = merged.groupby("run")["checkpoint"]
        first, final = checkpoint.transform("min"), checkpoint.transform("max")
        merged = merged[merged["checkpoint"].eq(first) | merged["checkpoint"].eq(final)]
    order = [c for c in ("run", "split", "metric", "checkpoint", "qid") if c in merged.columns]
    return merged.sort_values(order, kind="stable", ignore_index=True)


@pytest.fixture
def grid(tmp_path: Path) -> dict[str, list[Path]]:
    """Per-checkpoint parts of 4 runs x 5 checkpoints, a per-run file (evaluation.unit: run) of a
    fifth run listed between them, and BM25's tables (checkpoint 0) first."""
    per_query = msmarco_shaped.write_parts(tmp_path / "eval", scale=0.004, runs=4, checkpoints=5, metrics=3)
    metrics = [path.with_name(path.name.replace(".per_query", "")) for path in per_query]
    whole = tmp_path / "eval" / "whole"
    whole.mkdir()
    per_run = pd.concat(
        [pd.read_parquet(p).assign(run="a_whole_run") for p in per_query[:5]], ignore_index=True
    )
    per_run.to_parquet(whole / "per_query.parquet")  # with its pandas index, as to_parquet writes by default
    pd.concat([pd.read_parquet(p).assign(run="a_whole_run") for p in metrics[:5]]).to_parquet(
        whole / "m.parquet"
    )
    bm25_q = pd.read_parquet(per_query[0]).assign(run="bm25", checkpoint=0)
    bm25 = pd.read_parquet(metrics[0]).assign(run="bm25", checkpoint=0)
    bm25_q.to_parquet(tmp_path / "bm25_q.parquet", index=False)
    bm25.to_parquet(tmp_path / "bm25.parquet", index=False)
    middle = len(per_query) // 2
    return {
        "metrics": [tmp_path / "bm25.parquet", *metrics[:middle], whole / "m.parquet", *metrics[middle:]],
        "per_query": [
            tmp_path / "bm25_q.parquet",
            *per_query[:middle],
            whole / "per_query.parquet",
            *per_query[middle:],
        ],
    }


def test_streamed_outputs_equal_the_in_memory_merge(tmp_path: Path, grid: dict[str, list[Path]]) -> None:
    out = tmp_path / "out"
    merge_metrics.main(
        [
            "--inputs",
            *map(str, grid["metrics"]),
            "--out",
            str(out / "all.parquet"),
            "--csv",
            str(out / "all.csv"),
        ]
        + [
            "--per-query-inputs",
            *map(str, grid["per_query"]),
            "--per-query-out",
            str(out / "per_query.parquet"),
        ]
    )
    metrics = in_memory_merge(grid["metrics"], first_and_final=False)
    pd.testing.assert_frame_equal(pd.read_parquet(out / "all.parquet"), metrics)
    write_table(metrics, tmp_path / "reference.csv")
    assert (out / "all.csv").read_text() == (tmp_path / "reference.csv").read_text()
    per_query = pd.read_parquet(out / "per_query.parquet")
    pd.testing.assert_frame_equal(per_query, in_memory_merge(grid["per_query"], first_and_final=True))
    # every run of the per-checkpoint parts keeps its first and final checkpoint only
    kept = per_query.groupby("run")["checkpoint"].unique().map(sorted)
    expected = {**{run: (1, 5) for run in kept.index}, "bm25": (0,)}
    assert {run: tuple(ks) for run, ks in kept.items()} == expected
    assert list(per_query.columns) == list(PER_QUERY_COLUMNS)
    assert not list(out.glob(".*.tmp"))  # no temporary file left


def test_a_table_off_the_records_contract_is_refused_naming_it(tmp_path: Path, grid) -> None:
    bad = tmp_path / "bad.parquet"
    pd.read_parquet(grid["metrics"][1]).drop(columns="value").to_parquet(bad)
    with pytest.raises(ValueError, match="bad.parquet: columns"):
        merge_metrics.write_merged([str(grid["metrics"][0]), str(bad)], [str(tmp_path / "all.parquet")])
    assert not (tmp_path / "all.parquet").exists()


def test_merge_tables_in_memory_equals_the_reference(grid) -> None:
    merged = merge_metrics.merge_tables([str(p) for p in grid["metrics"]], METRIC_COLUMNS)
    pd.testing.assert_frame_equal(merged, in_memory_merge(grid["metrics"], first_and_final=False))


def test_a_commit_after_runs_without_one_is_kept(tmp_path: Path, grid) -> None:
    """``model_commit`` is null in BM25's and unpinned runs' rows (a null-typed parquet column) and a
    commit in a pinned run's: the merged table keeps both, whichever run comes first."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    for index, path in enumerate(grid["metrics"]):
        table = pd.read_parquet(path)
        first_runs = table["run"].iloc[0] in ("a_whole_run", "bm25")  # the first two in run order
        table["model_commit"] = None if first_runs or index % 2 else commit
        table.to_parquet(path, index=False)
    out = tmp_path / "all.parquet"
    merge_metrics.write_merged([str(p) for p in grid["metrics"]], [str(out)])
    merged = pd.read_parquet(out)
    reference = in_memory_merge(grid["metrics"], first_and_final=False)  # None and str: object dtype
    reference["model_commit"] = reference["model_commit"].astype(merged["model_commit"].dtype)
    pd.testing.assert_frame_equal(merged, reference)
    assert merged.loc[merged["run"] == "bm25", "model_commit"].isna().all()
    assert (merged["model_commit"] == commit).sum() > 0
