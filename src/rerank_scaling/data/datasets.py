"""One dataset interface, three sources, all materialised in the local-collection format.

* ``builtin``: the Inverse-Cloze-Task collection built offline from shipped text (:mod:`.ict`);
* ``local``: a directory already in the local format (``corpus.jsonl``, ``queries/``, ``qrels/``);
* ``ir_datasets``: ids such as ``msmarco-passage/dev/small`` or ``msmarco-passage/trec-dl-2019/judged``.
  ir_datasets downloads into ``$IR_DATASETS_HOME`` (default ``~/.ir_datasets``); offline, a missing
  file makes it fail, and :func:`rerank_scaling.hub.downloads.guarded_download` re-raises that with the path
  to fill.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rerank_scaling.atomic import copy_file
from rerank_scaling.data.collection import (
    CollectionDir,
    Queries,
    read_queries,
    write_corpus,
    write_queries,
)
from rerank_scaling.data.collection_checks import check_queries, check_split, corpus_ids, corpus_index
from rerank_scaling.data.ict import IctSettings, build_ict_collection
from rerank_scaling.data.split_overlap import check_overlap
from rerank_scaling.data.trec import Qrels, read_qrels, write_qrels
from rerank_scaling.hub.downloads import guarded_download
from rerank_scaling.settings import settings_from_dict, with_defaults

log = logging.getLogger(__name__)


def ir_datasets_split(
    dataset_id: str, relevance_map: dict[str, int] | None = None, max_queries: int | None = None
) -> tuple[Queries, Qrels]:
    """Queries and qrels of one ir_datasets id; ``relevance_map`` recodes grades (<= 0 dropped)."""
    import ir_datasets

    dataset = ir_datasets.load(dataset_id)
    queries: Queries = {
        q.query_id: q.default_text() for q in guarded_download(dataset_id, dataset.queries_iter)
    }
    qrels: Qrels = {}
    for qrel in guarded_download(dataset_id, dataset.qrels_iter):
        grade = int(qrel.relevance)
        if relevance_map is not None:
            grade = relevance_map.get(str(grade), grade)
        if grade > 0 and qrel.query_id in queries:
            qrels.setdefault(qrel.query_id, {})[qrel.doc_id] = grade
    # Queries without any judgement cannot be evaluated or trained on: keep judged ones only. One
    # without text cannot be searched (Anserini's topic reader fails on it); a user cannot fix an
    # ir_datasets file, so it is dropped and counted here (a local file's raises naming its line).
    empty = sorted(qid for qid, text in queries.items() if not text.strip())
    if empty:
        log.warning("%s: %d queries without text dropped (e.g. %s)", dataset_id, len(empty), empty[:3])
    queries = {qid: text for qid, text in queries.items() if qid in qrels and text.strip()}
    qrels = {qid: qrels[qid] for qid in queries}
    if max_queries is not None:
        queries = dict(sorted(queries.items())[:max_queries])
        qrels = {qid: qrels[qid] for qid in queries}
    return queries, qrels


def ir_datasets_docs(dataset_id: str) -> Iterator[tuple[str, str]]:
    """Stream (docid, text) of an ir_datasets corpus."""
    import ir_datasets

    dataset = ir_datasets.load(dataset_id)
    for doc in guarded_download(dataset_id, dataset.docs_iter):
        yield doc.doc_id, doc.default_text()


#: The parts of a collection, each materialised and checked by its own job (rules/data.smk), so
#: that a change to one file re-runs only what reads that file.
PARTS = ("corpus", "queries", "qrels")


def prepare_dataset(
    section: dict[str, Any], out_dir: str | os.PathLike[str], relevance_threshold: int | None = None
) -> list[dict[str, Any]]:
    """Materialise the configured dataset in ``out_dir`` and check it (:mod:`.collection_checks`),
    part by part as the workflow's jobs do (:func:`prepare_part`).

    Returns the per-split counts of the checks; bad data raise naming file:line and the fix.
    ``relevance_threshold`` (config ``evaluation.relevance_threshold``) applies to the eval splits.
    """
    prepare_part(section, out_dir, "corpus")
    splits = configured_splits(section)
    for split in splits:
        prepare_part(section, out_dir, "queries", split)
    shared = check_splits(section, out_dir)
    rows = []
    for split in splits:
        threshold = relevance_threshold if split in section["eval_splits"] else None
        rows.append(prepare_part(section, out_dir, "qrels", split, threshold))
    return [{**row, "shared_queries": shared[row["split"]]} for row in rows]


def check_splits(section: dict[str, Any], out_dir: str | os.PathLike[str]) -> dict[str, int]:
    """The configured splits share no query (:func:`.split_overlap.check_overlap`, on the
    materialised queries of every split, naming the user's files for a local source); returns each
    split's count of shared queries (all 0 unless ``dataset.allow_split_overlap``)."""
    section = with_defaults("dataset", section)
    out = CollectionDir(Path(out_dir))
    names = CollectionDir(Path(section["local"]["path"])) if section["source"] == "local" else out
    splits = configured_splits(section)
    allow = section["allow_split_overlap"]
    return {
        split: check_overlap(names, out, split, [other for other in splits if other != split], allow)
        for split in splits
    }


def configured_splits(section: dict[str, Any]) -> list[str]:
    """The splits config ``dataset`` names: the train split, then the evaluated ones."""
    return list(dict.fromkeys([section["train_split"], *section["eval_splits"]]))


def prepare_part(
    section: dict[str, Any],
    out_dir: str | os.PathLike[str],
    part: str,
    split: str | None = None,
    relevance_threshold: int | None = None,
) -> dict[str, Any] | None:
    """Materialise and check one part (``PARTS``) of the dataset: the corpus (duplicate ids), one
    split's queries, or one split's qrels (against the materialised corpus and queries; returns its
    row of checks.json). Messages name the user's files for a local source. ``section`` is config
    ``dataset`` as written (the job's param) or filled: the schema's defaults fill what it lacks."""
    section = with_defaults("dataset", section)
    out = materialise_part(section, out_dir, part, split)
    source = CollectionDir(Path(section["local"]["path"])) if section["source"] == "local" else out
    if part == "corpus":
        corpus_ids(source)
        return None
    if part == "queries":
        check_queries(source, split)
        return None
    ids, empty = corpus_index(out.corpus)
    share = section["max_unknown_qrels_share"]
    return asdict(check_split(source, split, ids, share, out, relevance_threshold, empty))


def _write_split_part(out: CollectionDir, part: str, split: str, queries: Queries, qrels: Qrels) -> None:
    if part == "queries":
        write_queries(queries, out.queries(split))
    else:
        write_qrels(qrels, out.qrels(split))


def materialise_part(
    section: dict[str, Any], out_dir: str | os.PathLike[str], part: str, split: str | None = None
) -> CollectionDir:
    """Write one part (``PARTS``; ``split`` for queries and qrels) of the configured dataset into
    ``out_dir`` in the local format. A local corpus is copied, not linked: a link would make every
    touch of the user's file look like a change to the jobs that read it. ``section``: config
    ``dataset``, as written or filled (the schema's defaults fill what it lacks)."""
    section = with_defaults("dataset", section)
    source = section["source"]
    out = CollectionDir(Path(out_dir))
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r}; one of {PARTS}")
    if source == "builtin":
        settings = settings_from_dict(IctSettings, section.get("builtin"), "dataset.builtin")
        docs, queries, qrels = build_ict_collection(settings)
        if part == "corpus":
            return write_corpus(out_dir, docs)
        _write_split_part(out, part, split, queries[split], qrels[split])
        return out
    if source == "local":
        src = CollectionDir(Path(section["local"]["path"]))
        if part == "corpus":
            src.check([])
            copy_file(src.corpus, out.corpus)
            return out
        src.check([split])
        path = src.queries(split) if part == "queries" else src.qrels(split)
        (read_queries if part == "queries" else read_qrels)(path)  # bad lines raise naming the user's file
        copy_file(path, out.queries(split) if part == "queries" else out.qrels(split))
        return out
    if source == "ir_datasets":
        spec = section["ir_datasets"]
        if part == "corpus":
            return write_corpus(out_dir, ir_datasets_docs(spec["corpus"]))
        queries, qrels = ir_datasets_split(
            spec["splits"][split], spec["relevance_map"], spec["max_queries"].get(split)
        )
        _write_split_part(out, part, split, queries, qrels)
        return out
    raise ValueError(f"config field 'dataset.source': unknown source {source!r}")


def materialise_dataset(section: dict[str, Any], out_dir: str | os.PathLike[str]) -> CollectionDir:
    """Write the configured dataset (config ``dataset``) into ``out_dir`` in the local format."""
    out = materialise_part(section, out_dir, "corpus")
    for split in configured_splits(section):
        for part in ("queries", "qrels"):
            materialise_part(section, out_dir, part, split)
    return out
