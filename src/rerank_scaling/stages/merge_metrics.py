"""Stage: concatenate per-run metric tables (and the BM25 rows) into the merged long table.

python -m rerank_scaling.stages.merge_metrics --inputs A.parquet B.parquet ... --out all.parquet --csv all.csv
"""

from __future__ import annotations

import argparse

import pandas as pd

from rerank_scaling.atomic import write_table
from rerank_scaling.records import METRIC_COLUMNS


def merge_tables(paths: list[str]) -> pd.DataFrame:
    """Concatenate long metric tables, checking each has exactly the contract's columns."""
    tables = []
    for path in paths:
        table = pd.read_parquet(path)
        if list(table.columns) != list(METRIC_COLUMNS):
            raise ValueError(f"{path}: columns {list(table.columns)} differ from records.METRIC_COLUMNS")
        tables.append(table)
    merged = pd.concat(tables, ignore_index=True)
    return merged.sort_values(["run", "split", "metric", "checkpoint"], kind="stable", ignore_index=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--inputs", nargs="+", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--csv", required=True)
    args = parser.parse_args(argv)
    merged = merge_tables(args.inputs)
    write_table(merged, args.out)
    write_table(merged, args.csv)


if __name__ == "__main__":
    main()
