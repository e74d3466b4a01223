"""Checks of a collection where it enters the workflow (the ``prepare_*`` jobs), before any model runs.

Malformed lines, a byte-order mark, bytes that are not UTF-8 and empty queries fail in the readers
naming file:line (:mod:`.lines`, :mod:`.collection`, :mod:`.trec`). Here: duplicate document ids
(file:line), empty splits, an evaluated split without a judgement at ``evaluation.relevance_threshold``
(its every metric would be 0), a relevant judgement of a document without text (BM25 never
retrieves it), and judgements naming documents that are not in the corpus or
queries that are not in the split. Those are counted per split; up to
``dataset.max_unknown_qrels_share`` of a split's judgements they are dropped with a warning in the
job's log, and more stop the job. The counts go to ``results/<run>/data/checks.json``, which the
summary can read.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass

from rerank_scaling.data.collection import CollectionDir, Queries, iter_corpus_lines, read_queries
from rerank_scaling.data.trec import Qrels, read_qrels, write_qrels

log = logging.getLogger(__name__)


class DataError(ValueError):
    """The data are wrong; the message names the file (and line) and the fix."""


@dataclass(frozen=True)
class SplitCheck:
    """What the checks found in one split (one row of checks.json)."""

    split: str
    queries: int
    judged_queries: int
    judgements: int
    unknown_documents: int  # judgements naming a document not in the corpus
    unknown_queries: int  # judgements naming a query not in the split
    dropped_share: float
    judged_empty_documents: int = 0  # relevant judgements of documents without text (kept: allowed)


def corpus_ids(collection: CollectionDir) -> set[str]:
    """Every document id of the corpus; a duplicate id raises naming file:line."""
    ids: set[str] = set()
    for line_no, docid, _ in iter_corpus_lines(collection.corpus):
        if docid in ids:
            raise DataError(
                f"{collection.corpus}:{line_no}: duplicate document id {docid!r} (it appears on an earlier "
                "line); document ids must be unique"
            )
        ids.add(docid)
    if not ids:
        raise DataError(f"{collection.corpus}: the corpus has no documents")
    return ids


def corpus_index(corpus: str | os.PathLike[str]) -> tuple[set[str], dict[str, int]]:
    """In one pass over ``corpus``: every document id, and the documents without text (empty or
    whitespace only) with their lines."""
    ids: set[str] = set()
    empty: dict[str, int] = {}
    for line, docid, text in iter_corpus_lines(corpus):
        ids.add(docid)
        if not text.strip():
            empty[docid] = line
    return ids, empty


def judged_empty_problem(
    collection: CollectionDir, split: str, qrels: Qrels, empty: dict[str, int], allow: bool = False
) -> int:
    """Refuse a ``qrels`` that judges relevant (grade >= 1) a document without text: Lucene indexes no
    term of it, so BM25 never retrieves it, and no model can rank it from its text; every recall of
    its query is capped below 1 without a word. ``allow`` (config
    ``dataset.allow_judged_empty_documents``) keeps them with a warning: real test collections hold
    such documents (Cranfield's document 995 is empty and judged) and their published scores count
    them. Returns how many relevant judgements name a document without text (checks.json)."""
    judged = sorted(
        (empty[d], d, q, g) for q, docs in qrels.items() for d, g in docs.items() if g >= 1 and d in empty
    )
    if judged:
        line, docid, qid, grade = judged[0]
        found = (
            f"{collection.corpus}:{line}: document {docid!r} has no text, but {collection.qrels(split)} "
            f"judges it relevant (query {qid!r}, grade {grade}; relevant judgements of documents without "
            f"text in split {split!r}: {len(judged)}); BM25 cannot retrieve a document without text"
        )
        if not allow:
            raise DataError(
                f"{found}. Write its text, or remove the document and its judgements; or set "
                "dataset.allow_judged_empty_documents: true to keep them (a real collection's own "
                "judgements, counted as the collection's published scores count them)"
            )
        log.warning("warning: %s (dataset.allow_judged_empty_documents: true)", found)
    return len(judged)


def _examples(items: list[str]) -> str:
    return ", ".join(repr(i) for i in sorted(items)[:3]) + (", ..." if len(items) > 3 else "")


def check_queries(collection: CollectionDir, split: str) -> Queries:
    """The queries of one split of ``collection``; none raises naming the file (bad lines raise in
    :func:`.collection.read_queries`, naming file:line)."""
    queries = read_queries(collection.queries(split))
    if not queries:
        raise DataError(
            f"{collection.queries(split)}: split {split!r} has no queries; an empty split can be neither "
            "trained on nor evaluated: fill it or remove it from dataset.train_split / dataset.eval_splits"
        )
    return queries


def check_split(
    collection: CollectionDir,
    split: str,
    ids: set[str],
    max_unknown_share: float,
    out: CollectionDir,
    relevance_threshold: int | None = None,
    empty: dict[str, int] | None = None,
    allow_judged_empty: bool = False,
) -> SplitCheck:
    """Check one split of ``collection`` (messages name its files); the few judgements that name
    unknown ids are dropped from the qrels written to ``out`` (the materialised copy). With
    ``relevance_threshold`` (an evaluated split: config ``evaluation.relevance_threshold``), a split
    with no judgement at or above it raises: every metric of it would be 0. ``empty``
    (from :func:`corpus_index`): a relevant judgement of one of these documents raises, unless
    ``allow_judged_empty`` (:func:`judged_empty_problem`)."""
    queries = check_queries(collection, split)
    qrels = read_qrels(collection.qrels(split))
    judgements = sum(len(docs) for docs in qrels.values())
    unknown_queries = [q for q in qrels if q not in queries]
    unknown_docs = [d for q, docs in qrels.items() if q in queries for d in docs if d not in ids]
    bad = sum(len(qrels[q]) for q in unknown_queries) + len(unknown_docs)
    share = bad / judgements if judgements else 0.0
    where = f"{collection.qrels(split)}"
    if bad:
        parts = []
        if unknown_docs:
            parts.append(
                f"{len(unknown_docs)} name documents not in corpus.jsonl ({_examples(unknown_docs)})"
            )
        if unknown_queries:
            named = _examples(unknown_queries)
            parts.append(f"{bad - len(unknown_docs)} name queries not in queries/{split}.tsv ({named})")
        found = f"{bad} of {judgements} judgements ({share:.1%}) name unknown ids: " + "; ".join(parts)
        if share > max_unknown_share:
            raise DataError(
                f"{where}: {found}, more than dataset.max_unknown_qrels_share = {max_unknown_share}. Fix the "
                "collection, or raise dataset.max_unknown_qrels_share to drop them"
            )
        log.warning("%s: %s; dropped (dataset.max_unknown_qrels_share = %s)", where, found, max_unknown_share)
        qrels = {q: {d: g for d, g in docs.items() if d in ids} for q, docs in qrels.items() if q in queries}
        qrels = {q: docs for q, docs in qrels.items() if docs}
        write_qrels(qrels, out.qrels(split))
    if not qrels:
        raise DataError(
            f"{where}: split {split!r} has no judgements of its queries; without qrels it can be neither "
            "trained on nor evaluated"
        )
    judged_empty = judged_empty_problem(collection, split, qrels, empty or {}, allow_judged_empty)
    if relevance_threshold is not None:
        relevant_problem(qrels, relevance_threshold, where, split)
    return SplitCheck(
        split=split,
        queries=len(queries),
        judged_queries=sum(1 for q in queries if q in qrels),
        judgements=judgements,
        unknown_documents=len(unknown_docs),
        unknown_queries=bad - len(unknown_docs),
        dropped_share=share,
        judged_empty_documents=judged_empty,
    )


def relevant_problem(qrels: Qrels, threshold: int, where: str, split: str) -> None:
    """Raise when no judgement of ``qrels`` reaches ``threshold`` (naming the grades found)."""
    grades = Counter(grade for docs in qrels.values() for grade in docs.values())
    if not any(grade >= threshold for grade in grades):
        raise DataError(
            f"{where}: split {split!r} has no judgement with grade >= evaluation.relevance_threshold = "
            f"{threshold} (grades found: {dict(sorted(grades.items()))}); every metric of it would be 0. "
            "Fix the qrels, or lower evaluation.relevance_threshold"
        )
