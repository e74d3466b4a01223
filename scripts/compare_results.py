"""Are two results folders of the workflow the same? (Issue 31's "the default run's tables are
identical before and after".)

    python scripts/compare_results.py results/default OTHER_CHECKOUT/results/default

Both folders are arguments (this checkout's run, and the same run of another checkout or commit).

Every table under either folder (``.parquet``, ``.csv``; ``.tsv`` read as text without a header) is
compared with ``pandas.testing.assert_frame_equal(check_exact=True)``, and every
``model.safetensors`` by its sha256. Timing is not a result and is ignored, listed in the output:
Snakemake's per-job timings (``benchmarks/``), the job logs (``logs/``), the jobs' scratch and
caches (``work/``: the training's resume state, and caches whose content the compared tables
already hold), ``workflow_time.json`` and any column whose name says it is a time
(:data:`TIMING_COLUMN`). Exit status 1 when a file differs
or is on one side only.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path

import pandas as pd

IGNORED_DIRS = ("benchmarks", "logs", "work")
IGNORED_FILES = ("workflow_time.json",)
TIMING_COLUMN = re.compile(r"seconds|time|wall|elapsed|duration|(^|_)(cpu_)?s$|_ms$", re.IGNORECASE)
TABLE_SUFFIXES = (".parquet", ".csv", ".tsv")


def compared_files(root: Path) -> set[str]:
    """Paths (relative to ``root``) of the tables and model weights to compare."""
    found = set()
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if not path.is_file() or set(relative.parts[:-1]) & set(IGNORED_DIRS) or path.name in IGNORED_FILES:
            continue
        if path.suffix in TABLE_SUFFIXES or path.name == "model.safetensors":
            found.add(str(relative))
    return found


def read_table(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix == ".csv":
        try:
            return pd.read_csv(path)
        except pd.errors.EmptyDataError:  # a table with no rows and no header
            return pd.DataFrame()
    return pd.read_csv(path, sep="\t", header=None, dtype=str, keep_default_na=False, quoting=3)


def timing_columns(table: pd.DataFrame) -> list[str]:
    return [str(c) for c in table.columns if isinstance(c, str) and TIMING_COLUMN.search(c)]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def compare_file(a: Path, b: Path) -> tuple[str | None, list[str]]:
    """(why ``a`` and ``b`` differ or None, the timing columns ignored)."""
    if a.name == "model.safetensors":
        return (None if sha256(a) == sha256(b) else "sha256 differs"), []
    left, right = read_table(a), read_table(b)
    ignored = sorted(set(timing_columns(left)) | set(timing_columns(right)))
    left, right = left.drop(columns=ignored, errors="ignore"), right.drop(columns=ignored, errors="ignore")
    try:
        pd.testing.assert_frame_equal(left, right, check_exact=True)
    except AssertionError as error:
        return " ".join(str(error).split())[:400], ignored
    return None, ignored


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("a", type=Path, help="a results folder, e.g. results/default")
    parser.add_argument("b", type=Path, help="the folder to compare it with")
    args = parser.parse_args(argv)
    files_a, files_b = compared_files(args.a), compared_files(args.b)
    problems, ignored_columns, counts = [], {}, {"tables": 0, "model.safetensors": 0}
    for name in sorted(files_a ^ files_b):
        problems.append(f"only in {args.a if name in files_a else args.b}: {name}")
    for name in sorted(files_a & files_b):
        why, ignored = compare_file(args.a / name, args.b / name)
        counts["model.safetensors" if name.endswith("model.safetensors") else "tables"] += 1
        if ignored:
            ignored_columns[name] = ignored
        if why:
            problems.append(f"differs: {name}: {why}")
    print(
        f"compared {args.a} with {args.b}: {counts['tables']} tables, "
        f"{counts['model.safetensors']} model.safetensors"
    )
    print(f"ignored (timing, scratch): folders {list(IGNORED_DIRS)}, files {list(IGNORED_FILES)}")
    for name, columns in sorted(ignored_columns.items()):
        print(f"ignored (timing) columns of {name}: {columns}")
    for problem in problems:
        print(problem)
    print("identical" if not problems else f"{len(problems)} difference(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
