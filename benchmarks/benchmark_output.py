"""Shared by the benchmark scripts: print the Markdown report and, if asked, save it."""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def commit() -> str:
    """This checkout's short commit, said to carry uncommitted changes when src/ or tests/ differ from it."""
    head = ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]
    dirty = ["git", "-C", str(REPO), "status", "--porcelain", "--", "src", "tests"]
    name = subprocess.run(head, capture_output=True, text=True).stdout.strip()
    changed = subprocess.run(dirty, capture_output=True, text=True).stdout.strip()
    return name + (" (with uncommitted changes)" if changed else "")


def emit(text: str, out: str | None) -> None:
    """Print ``text``; write it to ``out`` too (folders created) when a path is given."""
    print(text)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text)


def overlay_run_arguments(doc: str, *extra: tuple[str, dict]) -> argparse.Namespace:
    """The command line of a table over finished overlay runs: the overlays
    (``benchmarks/configs/*.yaml``), where their run folders are, and where to save the report;
    ``extra``: (flag, ``add_argument`` keywords) of the script's own options."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("overlays", nargs="+", type=Path, help="benchmarks/configs/*.yaml, each run already")
    parser.add_argument("--results", type=Path, default=REPO / "results", help="where run folders are")
    parser.add_argument("--out", help="also write the Markdown report here")
    for flag, keywords in extra:
        parser.add_argument(flag, **keywords)
    return parser.parse_args()


def emit_table(title: str, notes: Sequence[str], table: object, out: str | None) -> None:
    """:func:`emit` a Markdown report: a ``# title``, its note lines, then ``table`` (a DataFrame)."""
    emit("\n".join([f"# {title}", "", *notes, "", table.to_markdown(index=False), ""]), out)
