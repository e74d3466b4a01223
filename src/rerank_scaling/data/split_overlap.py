"""Splits are disjoint: no query id and no query text in two of the configured splits.

A training query that is also evaluated measures memorisation, not the held-out reranking quality
the laws forecast; two evaluated splits that share queries (a test split copied from dev) are one
split counted twice. The ``check_splits`` job (rules/data.smk) compares each configured split's
queries with every other's, by id and by text (whitespace collapsed, case folded). A shared query
stops the job naming both ``file:line``; ``dataset.allow_split_overlap: true`` accepts deliberate
overlap, counted in ``checks.json`` (``shared_queries``) and named in the job's log.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

from rerank_scaling.data.collection import CollectionDir, query_key, read_query_lines
from rerank_scaling.data.collection_checks import DataError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SharedQuery:
    """One query of a split that another split also holds."""

    line: int
    qid: str
    other_split: str
    other_line: int
    other_qid: str

    @property
    def how(self) -> str:
        return "the same id" if self.qid == self.other_qid else f"the same text as {self.other_qid!r}"


def shared_queries(read_from: CollectionDir, split: str, others: list[str]) -> list[SharedQuery]:
    """Each query of ``split`` found, by id or by text, in one of the ``others`` splits (the first
    such split, in the order given), read from the collection ``read_from``."""
    mine = read_query_lines(read_from.queries(split))
    found: dict[str, SharedQuery] = {}
    for other in others:
        theirs = read_query_lines(read_from.queries(other))
        by_text = {query_key(text): (line, qid) for qid, (line, text) in reversed(theirs.items())}
        for qid, (line, text) in mine.items():
            if qid in found:
                continue
            match = (theirs[qid][0], qid) if qid in theirs else by_text.get(query_key(text))
            if match is not None:
                found[qid] = SharedQuery(line, qid, other, *match)
    return sorted(found.values(), key=lambda shared: shared.line)


def check_overlap(
    names: CollectionDir, read_from: CollectionDir, split: str, others: list[str], allow: bool
) -> int:
    """Refuse queries of ``split`` that one of the ``others`` splits also holds (naming both files of
    ``names``, the user's collection, with their lines), unless ``allow`` (config
    ``dataset.allow_split_overlap``); returns how many there are. ``read_from``: the collection
    whose files are read (the materialised copy, the same lines as a local source's)."""
    shared = shared_queries(read_from, split, others)
    if not shared:
        return 0
    total = len(read_query_lines(read_from.queries(split)))
    counts = Counter(found.other_split for found in shared)
    per_split = ", ".join(f"{count} in {other!r}" for other, count in counts.items())
    first = shared[0]
    found = (
        f"{names.queries(split)}:{first.line}: query {first.qid!r} is also in split {first.other_split!r} "
        f"({names.queries(first.other_split)}:{first.other_line}, {first.how}); {len(shared)} of {total} "
        f"queries of split {split!r} are in other splits ({per_split})"
    )
    if allow:
        log.warning("%s; kept (dataset.allow_split_overlap: true)", found)
        return len(shared)
    raise DataError(
        f"{found}. A query in two splits is trained on and then evaluated, or evaluated twice: remove it "
        "from one split, or set dataset.allow_split_overlap: true if the overlap is deliberate"
    )
