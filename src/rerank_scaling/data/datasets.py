"""One dataset interface, three sources, all materialised in the local-collection format.

* ``builtin``: the Inverse-Cloze-Task collection built offline from shipped text (:mod:`.ict`);
* ``local``: a directory already in the local format (``corpus.jsonl``, ``queries/``, ``qrels/``);
* ``ir_datasets``: ids such as ``msmarco-passage/dev/small`` or ``msmarco-passage/trec-dl-2019/judged``.
  ir_datasets downloads into ``$IR_DATASETS_HOME`` (default ``~/.ir_datasets``); offline, a missing
  file makes it fail, and :func:`ir_datasets_collection` re-raises that with the path to fill.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rerank_scaling.data.collection import CollectionDir, Queries, read_queries, write_collection
from rerank_scaling.data.collection_checks import DEFAULT_MAX_UNKNOWN_SHARE, check_collection
from rerank_scaling.data.ict import IctSettings, build_ict_collection
from rerank_scaling.data.trec import Qrels, read_qrels
from rerank_scaling.settings import settings_from_dict

log = logging.getLogger(__name__)


class DatasetUnavailable(RuntimeError):
    """An ir_datasets file could not be fetched (offline); the message says what to place where."""


def _offline_hint(dataset_id: str, err: BaseException) -> DatasetUnavailable:
    home = os.environ.get("IR_DATASETS_HOME", str(Path.home() / ".ir_datasets"))
    return DatasetUnavailable(
        f"ir_datasets could not load {dataset_id!r}: {type(err).__name__}: {err}\n"
        f"This machine cannot download it. Fetch the file named in the URL above on a connected machine "
        f"and place it under {home}/<dataset name>/ (e.g. {home}/cranfield/cran.tar.gz), where "
        f"ir_datasets looks before downloading; or use dataset.source: local with a prepared directory."
    )


def _guarded(dataset_id: str, iterator_factory: Any) -> Iterator[Any]:
    try:
        yield from iterator_factory()
    except (ConnectionError, OSError) as err:  # urllib/requests errors derive from these
        raise _offline_hint(dataset_id, err) from err
    except RuntimeError as err:  # ir_datasets: ('All download sources failed', [...])
        if "download" not in str(err).lower():
            raise
        raise _offline_hint(dataset_id, err) from err


def ir_datasets_split(
    dataset_id: str, relevance_map: dict[str, int] | None = None, max_queries: int | None = None
) -> tuple[Queries, Qrels]:
    """Queries and qrels of one ir_datasets id; ``relevance_map`` recodes grades (<= 0 dropped)."""
    import ir_datasets

    dataset = ir_datasets.load(dataset_id)
    queries: Queries = {q.query_id: q.default_text() for q in _guarded(dataset_id, dataset.queries_iter)}
    qrels: Qrels = {}
    for qrel in _guarded(dataset_id, dataset.qrels_iter):
        grade = int(qrel.relevance)
        if relevance_map is not None:
            grade = relevance_map.get(str(grade), grade)
        if grade > 0 and qrel.query_id in queries:
            qrels.setdefault(qrel.query_id, {})[qrel.doc_id] = grade
    # Queries without any judgement cannot be evaluated or trained on: keep judged ones only.
    queries = {qid: text for qid, text in queries.items() if qid in qrels}
    if max_queries is not None:
        queries = dict(sorted(queries.items())[:max_queries])
        qrels = {qid: qrels[qid] for qid in queries}
    return queries, qrels


def ir_datasets_docs(dataset_id: str) -> Iterator[tuple[str, str]]:
    """Stream (docid, text) of an ir_datasets corpus."""
    import ir_datasets

    dataset = ir_datasets.load(dataset_id)
    for doc in _guarded(dataset_id, dataset.docs_iter):
        yield doc.doc_id, doc.default_text()


def prepare_dataset(section: dict[str, Any], out_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Materialise the configured dataset in ``out_dir`` and check it (:mod:`.collection_checks`).

    Returns the per-split counts of the checks; bad data raise naming file:line and the fix.
    """
    out = materialise_dataset(section, out_dir)
    source = CollectionDir(Path(section["local"]["path"])) if section["source"] == "local" else out
    splits = [section["train_split"], *section["eval_splits"]]
    share = section.get("max_unknown_qrels_share", DEFAULT_MAX_UNKNOWN_SHARE)
    return check_collection(source, splits, share, out)


def materialise_dataset(section: dict[str, Any], out_dir: str | os.PathLike[str]) -> CollectionDir:
    """Write the configured dataset (config ``dataset``) into ``out_dir`` in the local format."""
    source = section["source"]
    splits = [section["train_split"], *section["eval_splits"]]
    if source == "builtin":
        settings = settings_from_dict(IctSettings, section.get("builtin"), "dataset.builtin")
        docs, queries, qrels = build_ict_collection(settings)
        return write_collection(out_dir, docs, queries, qrels)
    if source == "local":
        src = CollectionDir(Path(section["local"]["path"]))
        src.check(splits)
        out = CollectionDir(Path(out_dir))
        out.root.mkdir(parents=True, exist_ok=True)
        # The corpus may be large (MS MARCO: 8.8M passages): link it rather than copy.
        if out.corpus.exists() or out.corpus.is_symlink():
            out.corpus.unlink()
        os.symlink(src.corpus.resolve(), out.corpus)
        queries = {s: read_queries(src.queries(s)) for s in splits}
        qrels = {s: read_qrels(src.qrels(s)) for s in splits}
        for split in splits:
            out.queries(split).parent.mkdir(parents=True, exist_ok=True)
            out.qrels(split).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src.queries(split), out.queries(split))
            shutil.copyfile(src.qrels(split), out.qrels(split))
        log.info("local collection %s: %s", src.root, {s: len(q) for s, q in queries.items()})
        return out
    if source == "ir_datasets":
        spec = section["ir_datasets"]
        relevance_map = spec.get("relevance_map")
        limits = spec.get("max_queries", {})
        queries, qrels = {}, {}
        for split in splits:
            queries[split], qrels[split] = ir_datasets_split(
                spec["splits"][split], relevance_map, limits.get(split)
            )
        return write_collection(out_dir, ir_datasets_docs(spec["corpus"]), queries, qrels)
    raise ValueError(f"config field 'dataset.source': unknown source {source!r}")
