"""TREC run and qrels files: the field's own formats, read and written in one place."""

from __future__ import annotations

import os
from collections import defaultdict

from rerank_scaling.atomic import atomic_path

Run = dict[str, dict[str, float]]  # qid -> docid -> score
Qrels = dict[str, dict[str, int]]  # qid -> docid -> graded relevance


def read_run(path: str | os.PathLike[str]) -> Run:
    """Read a TREC run file (``qid Q0 docid rank score tag``)."""
    run: Run = defaultdict(dict)
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 6:
                raise ValueError(
                    f"{path}:{line_no}: expected 6 fields 'qid Q0 docid rank score tag', got {line!r}"
                )
            qid, docid = parts[0], parts[2]
            try:
                score = float(parts[4])
            except ValueError:
                raise ValueError(f"{path}:{line_no}: score {parts[4]!r} is not a number") from None
            if docid in run[qid]:
                raise ValueError(f"{path}:{line_no}: document {docid!r} is ranked twice for query {qid!r}")
            run[qid][docid] = score
    return dict(run)


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
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4:
                raise ValueError(f"{path}:{line_no}: expected 4 fields 'qid 0 docid relevance', got {line!r}")
            qid, docid = parts[0], parts[2]
            try:
                grade = int(parts[3])
            except ValueError:
                raise ValueError(
                    f"{path}:{line_no}: relevance {parts[3]!r} is not an integer grade"
                ) from None
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
