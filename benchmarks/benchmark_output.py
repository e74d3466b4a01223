"""Shared by the benchmark scripts: print the Markdown report and, if asked, save it."""

from __future__ import annotations

from pathlib import Path


def emit(text: str, out: str | None) -> None:
    """Print ``text``; write it to ``out`` too (folders created) when a path is given."""
    print(text)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text)
