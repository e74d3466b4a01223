"""Stage: concatenate per-run metric tables (and the BM25 rows) into the merged long table, and the
per-run per-query tables, at each run's first and final checkpoint (what the summary compares; all
checkpoints stay in eval/<run>/per_query.parquet or its parts), into the merged per-query table.

    python -m rerank_scaling.evaluation.merge_metrics --inputs A.parquet ... --out all.parquet --csv all.csv \
        --per-query-inputs A_q.parquet B_q.parquet ... --per-query-out per_query.parquet

Streamed one run at a time (:func:`merge_tables`), so the job's memory is one run's rows, not the
grid's: a first pass reads only the ``run`` and ``checkpoint`` columns of every input (which runs
each file holds, each run's first and final checkpoint over all its files, so that with
``evaluation.unit: checkpoint`` the per-query table keeps two of a run's parts, not all), a second
reads each run's rows, sorts them and appends them to the outputs. The outputs equal the sorted
concatenation of every input (tests/evaluation/test_merge_metrics.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rerank_scaling.atomic import atomic_path
from rerank_scaling.records import METRIC_COLUMNS, PER_QUERY_COLUMNS

#: The merged tables' sort order (the columns of it a table has).
ORDER = ("run", "split", "metric", "checkpoint", "qid")


def _columns(path: str) -> list[str]:
    """A parquet file's data columns (not a pandas index stored with it)."""
    names = pq.ParquetFile(path).schema_arrow.names
    return [name for name in names if not name.startswith("__index_level_")]


def run_bounds(paths: list[str], columns: tuple[str, ...]) -> tuple[dict[str, set[str]], dict[str, tuple]]:
    """The first pass: the runs each file holds, and each run's (first, final) checkpoint over all
    its files, reading only those two columns; a file without exactly ``columns`` (the records
    contract) is refused, naming it."""
    runs_in: dict[str, set[str]] = {}
    bounds: dict[str, tuple] = {}
    for path in paths:
        if _columns(path) != list(columns):
            raise ValueError(f"{path}: columns {_columns(path)} differ from the records contract {columns}")
        keys = pd.read_parquet(path, columns=["run", "checkpoint"])
        runs_in[path] = set(keys["run"])
        for run, checkpoints in keys.groupby("run")["checkpoint"]:
            low, high = checkpoints.min(), checkpoints.max()
            if run in bounds:
                low, high = min(low, bounds[run][0]), max(high, bounds[run][1])
            bounds[run] = (low, high)
    return runs_in, bounds


def run_chunks(
    paths: list[str], columns: tuple[str, ...], first_and_final: bool = False
) -> Iterator[pd.DataFrame]:
    """The merged table run by run, in run order, each run's rows sorted by :data:`ORDER` (stable:
    equal keys keep the inputs' order), so that the chunks in turn equal the sorted concatenation of
    ``paths``; ``first_and_final`` keeps each run's rows at its first and final checkpoint only."""
    runs_in, bounds = run_bounds(paths, columns)
    order = [c for c in ORDER if c in columns]
    for run in sorted(bounds):
        wanted = [("run", "==", run)]
        if first_and_final:  # filtered as read: a run's other checkpoints are never held
            wanted.append(("checkpoint", "in", sorted(set(bounds[run]))))
        parts = [pd.read_parquet(path, filters=wanted) for path in paths if run in runs_in[path]]
        rows = pd.concat(parts, ignore_index=True)
        yield rows.sort_values(order, kind="stable", ignore_index=True)


def text_if_null(schema: pa.Schema) -> pa.Schema:
    """``schema`` with its all-null columns typed as text: a column null in the first run's rows
    (``model_commit`` of BM25 or an unpinned model) may hold a commit in a later run's."""
    fields = [f.with_type(pa.string()) if pa.types.is_null(f.type) else f for f in schema]
    return pa.schema(fields)


def merge_tables(
    paths: list[str], columns: tuple[str, ...] = METRIC_COLUMNS, first_and_final: bool = False
) -> pd.DataFrame:
    """The sorted concatenation of ``paths`` in memory (for tables known to be small)."""
    return pd.concat(list(run_chunks(paths, columns, first_and_final)), ignore_index=True)


def write_merged(
    paths: list[str],
    outputs: list[str],
    columns: tuple[str, ...] = METRIC_COLUMNS,
    first_and_final: bool = False,
) -> None:
    """Write the merged table to each of ``outputs`` (.parquet, .csv) run by run: parquet as one row
    group per run, CSV appended with one header; each output appears only when complete."""
    with ExitStack() as stack:
        temporary = [stack.enter_context(atomic_path(path)) for path in outputs]
        writers: list[pq.ParquetWriter | None] = [None] * len(outputs)
        schema = None
        for index, chunk in enumerate(run_chunks(paths, columns, first_and_final)):
            if schema is None:  # the first run's types, its all-null columns as text
                schema = text_if_null(pa.Table.from_pandas(chunk, preserve_index=False).schema)
            table = pa.Table.from_pandas(chunk, schema=schema, preserve_index=False)
            table = table.replace_schema_metadata(None)
            for k, (path, tmp) in enumerate(zip(outputs, temporary, strict=True)):
                if Path(path).suffix == ".parquet":
                    writers[k] = writers[k] or stack.enter_context(pq.ParquetWriter(tmp, schema))
                    writers[k].write_table(table)
                else:
                    chunk.to_csv(tmp, mode="w" if index == 0 else "a", header=index == 0, index=False)
        if schema is None:  # no rows at all: the columns only
            empty = pd.DataFrame(columns=list(columns))
            for path, tmp in zip(outputs, temporary, strict=True):
                if Path(path).suffix == ".parquet":
                    empty.to_parquet(tmp, index=False)
                else:
                    empty.to_csv(tmp, index=False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--inputs", nargs="+", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--csv", required=True)
    parser.add_argument("--per-query-inputs", nargs="+", required=True)
    parser.add_argument("--per-query-out", required=True)
    args = parser.parse_args(argv)
    write_merged(args.inputs, [args.out, args.csv])
    write_merged(args.per_query_inputs, [args.per_query_out], PER_QUERY_COLUMNS, first_and_final=True)


if __name__ == "__main__":
    main()
