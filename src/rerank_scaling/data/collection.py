"""The local-collection format: the one on-disk layout every later stage reads.

A collection directory holds::

    corpus.jsonl          one {"id": str, "contents": str} object per line (Anserini JsonCollection)
    queries/<split>.tsv   qid <TAB> query text, no header
    qrels/<split>.txt     TREC qrels: qid 0 docid grade (graded; >= threshold counts as relevant)

All three dataset sources (built-in ICT, a local directory, ir_datasets ids) are
materialised into this layout by :func:`write_collection`, so one reader serves them all.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rerank_scaling.atomic import atomic_path
from rerank_scaling.data.lines import numbered_lines
from rerank_scaling.data.trec import Qrels, read_qrels, write_qrels

Queries = dict[str, str]


@dataclass(frozen=True)
class CollectionDir:
    """Paths of a collection in the local format."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def corpus(self) -> Path:
        return self.root / "corpus.jsonl"

    def queries(self, split: str) -> Path:
        return self.root / "queries" / f"{split}.tsv"

    def qrels(self, split: str) -> Path:
        return self.root / "qrels" / f"{split}.txt"

    def splits(self) -> list[str]:
        """Splits that have both queries and qrels."""
        names = {p.stem for p in (self.root / "queries").glob("*.tsv")}
        return sorted(n for n in names if self.qrels(n).exists())

    def check(self, splits: Iterable[str]) -> None:
        """Raise a clear error naming each missing file of a local collection."""
        missing = [self.corpus] if not self.corpus.exists() else []
        for split in splits:
            missing += [p for p in (self.queries(split), self.qrels(split)) if not p.exists()]
        if missing:
            listed = ", ".join(str(p) for p in missing)
            raise FileNotFoundError(
                f"local collection {self.root} is incomplete: missing {listed}. "
                "Expected corpus.jsonl, queries/<split>.tsv and qrels/<split>.txt "
                "(see docs/configuration.md, 'Datasets')."
            )


def id_problem(kind: str, name: str) -> str | None:
    """Why ``name`` cannot be a document or query id (``kind``), with the fix; None if it can. TREC
    run and qrels lines separate their fields by whitespace, so an id holding a space or a tab
    would be read back as two fields, or as another id, by every later stage."""
    if not name:
        return f"empty {kind} id; give every {kind} an id"
    if any(char.isspace() for char in name):
        return (
            f"{kind} id {name!r} contains whitespace; TREC run and qrels files separate fields by "
            f"whitespace, so it would not survive them: rename it (e.g. spaces to '_') here and in the qrels"
        )
    return None


def iter_corpus(path: str | os.PathLike[str]) -> Iterator[tuple[str, str]]:
    """Yield (docid, text) from a JSONL corpus."""
    for _, docid, text in iter_corpus_lines(path):
        yield docid, text


def iter_corpus_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, str, str]]:
    """Yield (line number, docid, text) from a JSONL corpus; a malformed line raises naming file:line."""
    for line_no, line in numbered_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            docid, text = str(record["id"]), record["contents"]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ValueError(
                f"{path}:{line_no}: expected a JSON object with 'id' and 'contents' ({err}); "
                "fix or remove the line"
            ) from err
        if not isinstance(text, str):
            raise ValueError(f"{path}:{line_no}: 'contents' of document {docid!r} is not a string")
        problem = id_problem("document", docid)
        if problem:
            raise ValueError(f"{path}:{line_no}: {problem}")
        yield line_no, docid, text


def load_texts(path: str | os.PathLike[str], docids: Iterable[str] | None = None) -> dict[str, str]:
    """Load document texts, only those in ``docids`` when given (keeps MS MARCO-sized corpora cheap)."""
    wanted = None if docids is None else set(docids)
    return {d: t for d, t in iter_corpus(path) if wanted is None or d in wanted}


def read_queries(path: str | os.PathLike[str]) -> Queries:
    """Read a ``qid<TAB>text`` query file."""
    return {qid: text for qid, (_, text) in read_query_lines(path).items()}


def read_query_lines(path: str | os.PathLike[str]) -> dict[str, tuple[int, str]]:
    """Read a ``qid<TAB>text`` query file: qid -> (line number, text); a bad line raises naming
    file:line (no tab, an id with whitespace, no text, an id given twice)."""
    queries: dict[str, tuple[int, str]] = {}
    for line_no, line in numbered_lines(path):
        if not line:
            continue
        qid, sep, text = line.partition("\t")
        if not sep:
            raise ValueError(f"{path}:{line_no}: expected 'qid<TAB>query text', got {line!r}")
        problem = id_problem("query", qid)
        if problem:
            raise ValueError(f"{path}:{line_no}: {problem}")
        if not text.strip():
            raise ValueError(
                f"{path}:{line_no}: query {qid!r} has no text (empty or whitespace only); "
                "write its text after the tab, or remove the line and its judgements"
            )
        if qid in queries:
            raise ValueError(
                f"{path}:{line_no}: duplicate query id {qid!r} (first on line {queries[qid][0]}); "
                "query ids must be unique"
            )
        queries[qid] = (line_no, text)
    return queries


def query_key(text: str) -> str:
    """What makes two query texts the same query: their words, case folded."""
    return " ".join(text.split()).casefold()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def write_queries(queries: Queries, path: str | os.PathLike[str]) -> None:
    """Write a ``qid<TAB>text`` query file atomically (whitespace in the text collapsed)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        for qid, text in queries.items():
            handle.write(f"{qid}\t{_one_line(text)}\n")


def write_corpus(root: str | os.PathLike[str], docs: Iterable[tuple[str, str]]) -> CollectionDir:
    """Write the ``corpus.jsonl`` of a collection atomically (whitespace in texts collapsed)."""
    out = CollectionDir(root)
    with atomic_path(out.corpus) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        for docid, text in docs:
            handle.write(json.dumps({"id": docid, "contents": _one_line(text)}, ensure_ascii=False) + "\n")
    return out


def write_collection(
    root: str | os.PathLike[str],
    docs: Iterable[tuple[str, str]],
    queries: dict[str, Queries],
    qrels: dict[str, Qrels],
) -> CollectionDir:
    """Materialise a collection in the local format; every file is written atomically."""
    out = write_corpus(root, docs)
    for split, split_queries in queries.items():
        write_queries(split_queries, out.queries(split))
        write_qrels(qrels[split], out.qrels(split))
    return out


def read_split(root: str | os.PathLike[str], split: str) -> tuple[Queries, Qrels]:
    """Queries and qrels of one split of a local-format collection."""
    coll = CollectionDir(root)
    coll.check([split])
    return read_queries(coll.queries(split)), read_qrels(coll.qrels(split))
