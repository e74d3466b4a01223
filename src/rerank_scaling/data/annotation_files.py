"""Generated-query annotation sources (Fang et al., Scaling Laws for Dense Retrieval §4.3): user-supplied
queries over the collection's corpus, e.g. docT5query (Nogueira & Lin 2019) or LLM output, each named by its
key in ``training.annotation_files`` and listed in ``training.annotations`` to train on it.

A source is a query file (``qid<TAB>text``) and TREC qrels (``qid 0 docid grade``) in the local
collection format whose documents are passages of the collection's own corpus, plus a provenance
text (model, prompt, date). The stage below checks them strictly (every judged passage must be in
the corpus; every judged query in the query file: a generated query that points nowhere is a bug of
the generator, not noise to drop) and writes them into the run's collection as a split named after
the source, so the human pipeline (``bm25_search``, ``build_examples``) builds its examples with the
same BM25 negatives and settings: one example builder for every source. Evaluation still uses the
human qrels of dev/test.

    python -m rerank_scaling.data.annotation_files --source doct5query --queries Q.tsv \
        --qrels Q.txt --provenance TEXT --corpus corpus.jsonl --collection DIR --record OUT.json
"""

from __future__ import annotations

import argparse
import logging
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rerank_scaling.atomic import write_json
from rerank_scaling.data.collection import CollectionDir, Queries, read_queries, write_queries
from rerank_scaling.data.collection_checks import DataError, corpus_ids
from rerank_scaling.data.lines import numbered_lines
from rerank_scaling.data.source_digests import file_sha256
from rerank_scaling.data.training_examples import ExampleSettings
from rerank_scaling.data.trec import Qrels, read_qrels, write_qrels
from rerank_scaling.grid import ANNOTATIONS
from rerank_scaling.settings import settings_from_dict

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AnnotationFile:
    """One entry of ``training.annotation_files``."""

    name: str
    queries: Path
    qrels: Path
    provenance: str


def annotation_files(training: dict[str, Any]) -> dict[str, AnnotationFile]:
    """The ``training.annotation_files`` entries that ``training.annotations`` trains on, by name
    (``training``: the section of a validated config, which has both keys)."""
    entries = training["annotation_files"]
    return {
        name: AnnotationFile(
            name,
            Path(os.path.expanduser(entries[name]["queries"])),
            Path(os.path.expanduser(entries[name]["qrels"])),
            entries[name]["provenance"],
        )
        for name in training["annotations"]
        if name in entries
    }


def check_annotation_file(source: AnnotationFile, ids: set[str]) -> tuple[Queries, Qrels]:
    """The source's queries and qrels; a judgement naming a passage not in ``ids`` (the corpus) or a
    query not in its query file raises :class:`DataError` naming file:line and the fix (malformed
    lines raise ``ValueError`` in the readers, naming file:line)."""
    queries = read_queries(source.queries)
    qrels = read_qrels(source.qrels)
    missing_docs, missing_queries = [], []
    for line_no, line in numbered_lines(source.qrels):
        parts = line.split()
        if parts and parts[2] not in ids:
            missing_docs.append((line_no, parts[2]))
        if parts and parts[0] not in queries:
            missing_queries.append((line_no, parts[0]))
    judgements = sum(len(docs) for docs in qrels.values())
    if missing_docs:
        line_no, docid = missing_docs[0]
        raise DataError(
            f"{source.qrels}:{line_no}: passage {docid!r} is not in the collection's corpus.jsonl "
            f"({len(missing_docs)} of {judgements} judgements of annotation source {source.name!r} name "
            "passages not in it); generated queries must point into the same corpus: map the ids to "
            "the corpus's ids, or remove those lines"
        )
    if missing_queries:
        line_no, qid = missing_queries[0]
        raise DataError(
            f"{source.qrels}:{line_no}: query {qid!r} is not in {source.queries} ({len(missing_queries)} "
            f"of {judgements} judgements name queries not in it); add the generated query's text there, "
            "or remove those lines"
        )
    if not judgements:
        raise DataError(
            f"{source.qrels}: annotation source {source.name!r} has no judgements; fill the qrels"
        )
    return queries, qrels


def _problem(field: str, text: str) -> str:
    return f"config field '{field}': {text}"


def _grade_problems(source: AnnotationFile, threshold: int) -> list[str]:
    """The source's qrels have positives for the example builder (grade >= positive_threshold)."""
    try:
        qrels = read_qrels(source.qrels)
    except ValueError as error:  # a malformed line: file:line from the reader
        return [_problem(f"training.annotation_files.{source.name}.qrels", str(error))]
    grades = Counter(grade for docs in qrels.values() for grade in docs.values())
    if any(grade >= threshold for grade in grades):
        return []
    return [
        _problem(
            f"training.annotation_files.{source.name}.qrels",
            f"no judgement of {source.qrels} reaches examples.positive_threshold = {threshold} (grades "
            f"found: {dict(sorted(grades.items()))}), so the source would give no training examples; "
            f"grade the generated pairs {threshold} or more, or lower examples.positive_threshold",
        )
    ]


def config_problems(config: dict[str, Any]) -> list[str]:
    """Parse-time checks of the annotation sources: every name in ``training.annotations`` is
    built in or has files; the files exist; a source is not named like a split of the dataset (its
    queries become a split of the run's collection); with ``planning.annotation_cost_per_pair``
    given, each file source has a price (else its budget would silently mix a per-pair price with
    ``planning.z_data``); for a local collection, every judged passage is in its corpus.
    ``config``: validated, so every section has every key (the schema's defaults)."""
    training, dataset = config["training"], config["dataset"]
    entries = training["annotation_files"]
    problems = []
    for i, name in enumerate(training["annotations"]):
        if name not in ANNOTATIONS and name not in entries:
            problems.append(
                _problem(
                    f"training.annotations[{i}]",
                    f"{name!r} is neither a built-in source {list(ANNOTATIONS)} nor a key of "
                    "training.annotation_files; to train on generated queries add training.annotation_files: "
                    f"{{{name}: {{queries: PATH, qrels: PATH, provenance: TEXT}}}}, or remove {name!r}",
                )
            )
    splits = [dataset["train_split"], *dataset["eval_splits"]]
    prices = config["planning"]["annotation_cost_per_pair"]
    examples = settings_from_dict(ExampleSettings, config["examples"], "examples")
    readable = []
    for name, source in annotation_files(training).items():
        field = f"training.annotation_files.{name}"
        if name in splits:
            problems.append(_problem(field, f"{name!r} is also a split of the dataset; rename the source"))
        if prices is not None and name not in prices:
            problems.append(
                _problem(
                    "planning.annotation_cost_per_pair",
                    f"has no price for annotation source {name!r} ({sorted(prices)} are priced); the budget "
                    f"prices every source per annotated pair once prices are given: add {name}: <price of "
                    "one generated pair> (0.0 if it cost nothing)",
                )
            )
        missing = [key for key in ("queries", "qrels") if not getattr(source, key).is_file()]
        for key in missing:
            problems.append(
                _problem(
                    f"{field}.{key}",
                    f"{getattr(source, key)} is not a file; give the "
                    + (
                        "generated queries ('qid<TAB>text' a line)"
                        if key == "queries"
                        else "TREC qrels ('qid 0 docid grade')"
                    )
                    + " (a relative path is read from the working directory)",
                )
            )
        if not missing:
            readable.append(source)
            problems += _grade_problems(source, examples.positive_threshold)
    # Other sources' corpora exist only after prepare_corpus: the job checks them (main below). A
    # local source without its section is dataset_problems' to report.
    if dataset["source"] == "local" and "local" in dataset and readable:
        problems += _corpus_problems(Path(os.path.expanduser(dataset["local"]["path"])), readable)
    return problems


def _corpus_problems(root: Path, readable: list[AnnotationFile]) -> list[str]:
    """A local collection's corpus (when there): every judged passage of each source is in it."""
    problems = []
    if (root / "corpus.jsonl").is_file():
        ids = corpus_ids(CollectionDir(root))
        for source in readable:
            try:
                check_annotation_file(source, ids)
            except ValueError as error:
                problems.append(_problem(f"training.annotation_files.{source.name}", str(error)))
    return problems


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", required=True, help="the source's key in training.annotation_files")
    parser.add_argument("--queries", required=True)
    parser.add_argument("--qrels", required=True)
    parser.add_argument("--provenance", required=True, help="how the queries were made")
    parser.add_argument("--corpus", required=True, help="the run's prepared corpus.jsonl")
    parser.add_argument("--collection", required=True, help="the run's collection directory")
    parser.add_argument("--record", required=True, help="provenance.json to write")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    source = AnnotationFile(args.source, Path(args.queries), Path(args.qrels), args.provenance)
    try:
        queries, qrels = check_annotation_file(source, corpus_ids(CollectionDir(Path(args.corpus).parent)))
    except ValueError as error:
        raise SystemExit(f"annotation_files: {error}") from error
    out = CollectionDir(args.collection)
    write_queries(queries, out.queries(args.source))
    write_qrels(qrels, out.qrels(args.source))
    record = {
        "source": args.source,
        "method": "generated queries from a file (training.annotation_files): its qrels' passages as "
        "positives, BM25 negatives of its queries over the same corpus (build_examples)",
        "provenance": args.provenance,
        "files": {
            key: {"path": str(path), "sha256": file_sha256(path)}
            for key, path in (("queries", source.queries), ("qrels", source.qrels))
        },
        "queries": len(queries),
        "judgements": sum(len(docs) for docs in qrels.values()),
    }
    log.info("%s: %d queries, %d judgements", args.source, record["queries"], record["judgements"])
    write_json(args.record, record)


if __name__ == "__main__":
    main()
