"""Stage: concatenate per-run metric tables (and the BM25 rows) into the merged long table, and the
per-run per-query tables, at each run's first and final checkpoint (what the summary compares; all
checkpoints stay in eval/<run>/per_query.parquet), into the merged per-query table.

python -m rerank_scaling.evaluation.merge_metrics --inputs A.parquet ... --out all.parquet --csv all.csv \
    --per-query-inputs A_q.parquet B_q.parquet ... --per-query-out per_query.parquet
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pandas as pd

from rerank_scaling.atomic import write_table
from rerank_scaling.records import METRIC_COLUMNS, PER_QUERY_COLUMNS


def first_and_final(table: pd.DataFrame) -> pd.DataFrame:
    """Rows at each run's first and final checkpoint (per-query tables are large: queries x metrics)."""
    checkpoint = table.groupby("run")["checkpoint"]
    keep = table["checkpoint"].eq(checkpoint.transform("min")) | table["checkpoint"].eq(
        checkpoint.transform("max")
    )
    return table[keep]


def merge_tables(
    paths: list[str],
    columns: tuple[str, ...] = METRIC_COLUMNS,
    select: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
) -> pd.DataFrame:
    """Concatenate tables, checking each has exactly ``columns`` (a records contract), sorted by them;
    ``select`` filters each table as it is read."""
    tables = []
    for path in paths:
        table = pd.read_parquet(path)
        if list(table.columns) != list(columns):
            raise ValueError(
                f"{path}: columns {list(table.columns)} differ from the records contract {columns}"
            )
        tables.append(select(table) if select is not None else table)
    merged = pd.concat(tables, ignore_index=True)
    order = [c for c in ("run", "split", "metric", "checkpoint", "qid") if c in columns]
    return merged.sort_values(order, kind="stable", ignore_index=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--inputs", nargs="+", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--csv", required=True)
    parser.add_argument("--per-query-inputs", nargs="+", required=True)
    parser.add_argument("--per-query-out", required=True)
    args = parser.parse_args(argv)
    merged = merge_tables(args.inputs)
    write_table(merged, args.out)
    write_table(merged, args.csv)
    per_query = merge_tables(args.per_query_inputs, PER_QUERY_COLUMNS, first_and_final)
    write_table(per_query, args.per_query_out)


if __name__ == "__main__":
    main()
