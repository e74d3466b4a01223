"""Are two results folders of the workflow the same? (A refactoring's check: "the default run's
tables are identical before and after".)

    python scripts/compare_results.py results/default OTHER_CHECKOUT/results/default

Both folders are arguments (this checkout's run, and the same run of another checkout or commit).

Every table under either folder (``.parquet``, ``.csv``; ``.tsv`` read as text without a header) is
compared with ``pandas.testing.assert_frame_equal(check_exact=True)``, and every file of model
weights (``.safetensors``: one per checkpoint, or its frozen and trained shards) by its sha256.
Timing is not a result and is ignored, listed in the output:
Snakemake's per-job timings (``benchmarks/``), the job logs (``logs/``), the jobs' scratch and
caches (``work/``: the training's resume state, and caches whose content the compared tables
already hold), ``workflow_time.json`` and any column whose name says it is a time
(:data:`TIMING_COLUMN`). Exit status 1 when a file differs
or is on one side only.

Row order is not a result: two tables holding the same rows in another order are reported as
"same rows, other order" and count as identical (a renamed metric sorts elsewhere). A change made on
purpose between the two commits is declared, never hidden: ``--rename OLD=NEW`` replaces the text
OLD by NEW in every column name and text cell of both sides before comparing (e.g.
``--rename RBP@=RelP@`` for the RelP@k rename), and the output lists each declared rename.
Planning and advice price runs from the device profiles measured during the run
(``results/profiles``); runs compared for identical planning tables must share those profiles
(copy one run's ``results/profiles`` into the other's and re-run ``plan`` with ``--forcerun``).
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
WEIGHTS_SUFFIX = ".safetensors"


def compared_files(root: Path) -> set[str]:
    """Paths (relative to ``root``) of the tables and model weights to compare."""
    found = set()
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if not path.is_file() or set(relative.parts[:-1]) & set(IGNORED_DIRS) or path.name in IGNORED_FILES:
            continue
        if path.suffix in (*TABLE_SUFFIXES, WEIGHTS_SUFFIX):
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


def parse_rename(text: str) -> tuple[str, str]:
    """``OLD=NEW`` of ``--rename``."""
    old, sep, new = text.partition("=")
    if not sep or not old:
        raise argparse.ArgumentTypeError(f"--rename {text!r}: expected OLD=NEW, e.g. RBP@=RelP@")
    return old, new


def renamed(table: pd.DataFrame, renames: list[tuple[str, str]]) -> pd.DataFrame:
    """``table`` with every declared rename applied to its column names and text cells."""
    if not renames:
        return table

    def apply(value: object) -> object:
        if not isinstance(value, str):
            return value
        for old, new in renames:
            value = value.replace(old, new)
        return value

    table = table.rename(columns=apply)
    for column in table.columns:
        if pd.api.types.is_object_dtype(table[column]) or pd.api.types.is_string_dtype(table[column]):
            table[column] = table[column].map(apply)
    return table


def sorted_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``table`` in one canonical order (every column, as text, then by value)."""
    if table.empty or len(table.columns) == 0:
        return table
    keys = table.astype(str)
    order = keys.sort_values(by=list(keys.columns), kind="stable").index
    return table.loc[order].reset_index(drop=True)


def frame_difference(left: pd.DataFrame, right: pd.DataFrame) -> str | None:
    try:
        pd.testing.assert_frame_equal(left, right, check_exact=True)
    except AssertionError as error:
        return " ".join(str(error).split())[:400]
    return None


def compare_file(
    a: Path, b: Path, renames: list[tuple[str, str]] | None = None
) -> tuple[str | None, list[str], bool]:
    """(why ``a`` and ``b`` differ or None, the timing columns ignored, whether only the row
    order differs)."""
    if a.suffix == WEIGHTS_SUFFIX:
        return (None if sha256(a) == sha256(b) else "sha256 differs"), [], False
    left, right = renamed(read_table(a), renames or []), renamed(read_table(b), renames or [])
    ignored = sorted(set(timing_columns(left)) | set(timing_columns(right)))
    left, right = left.drop(columns=ignored, errors="ignore"), right.drop(columns=ignored, errors="ignore")
    why = frame_difference(left, right)
    if why is None:
        return None, ignored, False
    same_columns = list(left.columns) == list(right.columns)
    if same_columns and frame_difference(sorted_rows(left), sorted_rows(right)) is None:
        return None, ignored, True
    return why, ignored, False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("a", type=Path, help="a results folder, e.g. results/default")
    parser.add_argument("b", type=Path, help="the folder to compare it with")
    parser.add_argument(
        "--rename",
        type=parse_rename,
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="a deliberate rename between the two commits, applied to both sides (repeatable)",
    )
    args = parser.parse_args(argv)
    files_a, files_b = compared_files(args.a), compared_files(args.b)
    problems, ignored_columns, counts = [], {}, {"tables": 0, "weights": 0}
    reordered = []
    for name in sorted(files_a ^ files_b):
        problems.append(f"only in {args.a if name in files_a else args.b}: {name}")
    for name in sorted(files_a & files_b):
        why, ignored, other_order = compare_file(args.a / name, args.b / name, args.rename)
        if other_order:
            reordered.append(name)
        counts["weights" if name.endswith(WEIGHTS_SUFFIX) else "tables"] += 1
        if ignored:
            ignored_columns[name] = ignored
        if why:
            problems.append(f"differs: {name}: {why}")
    print(
        f"compared {args.a} with {args.b}: {counts['tables']} tables, "
        f"{counts['weights']} weight files ({WEIGHTS_SUFFIX})"
    )
    print(f"ignored (timing, scratch): folders {list(IGNORED_DIRS)}, files {list(IGNORED_FILES)}")
    for name, columns in sorted(ignored_columns.items()):
        print(f"ignored (timing) columns of {name}: {columns}")
    for old, new in args.rename:
        print(f"declared rename: {old!r} -> {new!r}")
    for name in reordered:
        print(f"same rows, other order: {name}")
    for problem in problems:
        print(problem)
    print("identical" if not problems else f"{len(problems)} difference(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
