"""How every config check reports a problem: a line naming the config field and the fix."""

from __future__ import annotations

Problems = list[str]


def problem(field: str, text: str) -> str:
    """``config field '<field>': <text>``, the form every check's message takes."""
    return f"config field '{field}': {text}"
