"""TREC run and qrels files: the field's own formats, read and written in one place."""

from __future__ import annotations

import os
import sys
from collections import defaultdict
from collections.abc import Iterator

from rerank_scaling.atomic import atomic_path
from rerank_scaling.data.lines import numbered_lines

Run = dict[str, dict[str, float]]  # qid -> docid -> score
Qrels = dict[str, dict[str, int]]  # qid -> docid -> graded relevance


def _run_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, str, str, float]]:
    """(line number, qid, docid, score) of each line of a TREC run; a malformed line raises naming it."""
    for line_no, line in numbered_lines(path):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 6:
            raise ValueError(
                f"{path}:{line_no}: expected 6 fields 'qid Q0 docid rank score tag', got {line!r}"
            )
        try:
            score = float(parts[4])
        except ValueError:
            raise ValueError(f"{path}:{line_no}: score {parts[4]!r} is not a number") from None
        yield line_no, parts[0], parts[2], score


def _add(scores: dict[str, float], docid: str, score: float, qid: str, where: str) -> None:
    if docid in scores:
        raise ValueError(f"{where}: document {docid!r} is ranked twice for query {qid!r}")
    scores[docid] = score


def read_run(path: str | os.PathLike[str]) -> Run:
    """Read a TREC run file (``qid Q0 docid rank score tag``)."""
    run: Run = defaultdict(dict)
    for line_no, qid, docid, score in _run_lines(path):
        _add(run[qid], docid, score, qid, f"{path}:{line_no}")
    return dict(run)


def iter_run_queries(path: str | os.PathLike[str]) -> Iterator[tuple[str, dict[str, float]]]:
    """Stream a TREC run query by query, (qid, {docid: score}), holding one query at a time (a
    20M-line MS MARCO train run read whole as nested dicts takes > 2 GB). The run must list each
    query's lines together, as BM25 writes them; a query that comes back later raises naming file:line."""
    done: set[str] = set()
    current, scores = None, {}
    for line_no, qid, docid, score in _run_lines(path):
        if qid != current:
            if current is not None:
                yield current, scores
                done.add(current)
            if qid in done:
                raise ValueError(
                    f"{path}:{line_no}: query {qid!r} comes back after other queries; sort the run by "
                    "query (sort -s -k1,1)"
                )
            current, scores = qid, {}
        _add(scores, sys.intern(docid), score, qid, f"{path}:{line_no}")
    if current is not None:
        yield current, scores


def ranked(scores: dict[str, float]) -> list[tuple[str, float]]:
    """Sort documents by score, descending; ties broken by docid ascending so output is deterministic."""
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def write_run(run: Run, path: str | os.PathLike[str], tag: str) -> None:
    """Write a TREC run file atomically, each query's documents in descending score order."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        for qid in sorted(run):
            for rank, (docid, score) in enumerate(ranked(run[qid]), 1):
                handle.write(f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n")


def read_qrels(path: str | os.PathLike[str]) -> Qrels:
    """Read TREC qrels (``qid iteration docid relevance``); graded relevance is kept as int."""
    qrels: Qrels = defaultdict(dict)
    for line_no, line in numbered_lines(path):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 4:
            raise ValueError(f"{path}:{line_no}: expected 4 fields 'qid 0 docid relevance', got {line!r}")
        qid, docid = parts[0], parts[2]
        try:
            grade = int(parts[3])
        except ValueError:
            raise ValueError(f"{path}:{line_no}: relevance {parts[3]!r} is not an integer grade") from None
        if docid in qrels[qid]:
            raise ValueError(
                f"{path}:{line_no}: duplicate judgement of document {docid!r} for query {qid!r}; "
                "keep one line per (query, document)"
            )
        qrels[qid][docid] = grade
    return dict(qrels)


def write_qrels(qrels: Qrels, path: str | os.PathLike[str]) -> None:
    """Write TREC qrels atomically."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        for qid in sorted(qrels):
            for docid in sorted(qrels[qid]):
                handle.write(f"{qid} 0 {docid} {qrels[qid][docid]}\n")


def run_depth(run: Run) -> int:
    """Largest number of documents retrieved for any query."""
    return max((len(docs) for docs in run.values()), default=0)


def top_k(run: Run, k: int) -> Run:
    """Keep each query's ``k`` highest-scored documents."""
    return {qid: dict(ranked(docs)[:k]) for qid, docs in run.items()}
