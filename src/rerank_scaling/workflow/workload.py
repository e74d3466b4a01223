"""How much data a config's jobs will see, known before any job runs: the judged positives of the
train split, the queries of each split (all of them, as BM25 searches them, and those each
evaluation scores) and the documents of the corpus.

The workflow sizes its jobs' time limits from these counts at parse time
(:mod:`rerank_scaling.workflow.job_resources`), and ``scripts/paper_grid_cost.py`` prices the paper grid
with them. Sources, none of which downloads anything:

* ``builtin``: the ICT collection's query counts (``dataset.builtin``, one positive per query);
* ``local``: the collection's own files (lines of ``queries/<split>.tsv``, judgements of
  ``qrels/<train>.txt`` at ``examples.positive_threshold`` or above, bytes of ``corpus.jsonl``);
* ``ir_datasets``: ir_datasets' bundled metadata (``queries_count``, ``qrels_count``, ``docs_count``),
  the train positives as the split's qrels per query times its sampled queries.

Every count is capped by the config's query limits that apply to it: a split's queries (the data
stage's ``queries/<split>.tsv``, which BM25 searches) by ``dataset.ir_datasets.max_queries``, the
train positives by ``examples.max_queries`` too, the evaluated queries by ``evaluation.max_queries``
too. A count that cannot be known is None (a split's: absent).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Mean bytes of one corpus line of a local collection (MS MARCO passage: ~330), to turn its size
#: into documents without reading it.
BYTES_PER_DOCUMENT = 330


@dataclass(frozen=True)
class Workload:
    """What the config's data amount to (None: unknown before the data jobs run)."""

    train_positives: int | None
    eval_queries: dict[str, int] = field(default_factory=dict)  # split -> queries (after max_queries)
    documents: int | None = None
    split_queries: dict[str, int] = field(default_factory=dict)  # split -> queries of its TSV (train too)


def _capped(count: int | None, *limits: int | None) -> int | None:
    if count is None:
        return None
    return min([count, *(limit for limit in limits if limit is not None)])


def _builtin(config: dict[str, Any]) -> Workload:
    section = config["dataset"]["builtin"]
    train = config["dataset"]["train_split"]
    counts = {split: section.get(f"{split}_queries") for split in _splits(config)}
    known = {split: count for split, count in counts.items() if count is not None}
    return Workload(
        _capped(section.get(f"{train}_queries"), config["examples"]["max_queries"]),
        {split: count for split, count in known.items() if split in config["dataset"]["eval_splits"]},
        None,
        known,
    )


def _splits(config: dict[str, Any]) -> list[str]:
    """The train split and the evaluation splits, each once."""
    return list(dict.fromkeys([config["dataset"]["train_split"], *config["dataset"]["eval_splits"]]))


def _lines(path: Path) -> int | None:
    if not path.is_file():
        return None
    with open(path, "rb") as handle:
        return sum(1 for line in handle if line.strip())


def _local(config: dict[str, Any]) -> Workload:
    root = Path(config["dataset"]["local"]["path"]).expanduser()
    threshold = int(config["examples"]["positive_threshold"])
    qrels = root / "qrels" / f"{config['dataset']['train_split']}.txt"
    positives = None
    if qrels.is_file():
        with open(qrels, encoding="utf-8", errors="replace") as handle:
            fields = (line.split() for line in handle)
            positives = sum(
                1
                for parts in fields
                if len(parts) == 4 and parts[3].lstrip("-").isdigit() and int(parts[3]) >= threshold
            )
    counts = {split: _lines(root / "queries" / f"{split}.tsv") for split in _splits(config)}
    known = {split: n for split, n in counts.items() if n is not None}
    corpus = root / "corpus.jsonl"
    documents = corpus.stat().st_size // BYTES_PER_DOCUMENT + 1 if corpus.is_file() else None
    queries = {split: n for split, n in known.items() if split in config["dataset"]["eval_splits"]}
    return Workload(positives, queries, documents, known)


def _ir_datasets(config: dict[str, Any]) -> Workload:
    import ir_datasets

    section = config["dataset"]["ir_datasets"]
    limits = section["max_queries"]

    def counts(split: str) -> tuple[int, int] | None:
        try:
            dataset = ir_datasets.load(section["splits"][split])
            return dataset.queries_count(), dataset.qrels_count()
        except Exception:  # unknown id or no metadata: the count stays unknown
            return None

    train = config["dataset"]["train_split"]
    positives = None
    if (found := counts(train)) is not None and found[0]:
        queries = _capped(found[0], limits.get(train), config["examples"]["max_queries"])
        positives = round(queries * found[1] / found[0])
    known = {}
    for split in _splits(config):
        if (found := counts(split)) is not None:
            known[split] = _capped(found[0], limits.get(split))
    try:
        documents = ir_datasets.load(section["corpus"]).docs_count()
    except Exception:
        documents = None
    queries = {split: n for split, n in known.items() if split in config["dataset"]["eval_splits"]}
    return Workload(positives, queries, documents, known)


SOURCES = {"builtin": _builtin, "local": _local, "ir_datasets": _ir_datasets}


def config_workload(config: dict[str, Any]) -> Workload:
    """The :class:`Workload` of a validated config, its defaults filled (module docstring)."""
    found = SOURCES[config["dataset"]["source"]](config)
    limits = config["evaluation"]["max_queries"] or {}  # null: every split's queries
    queries = {split: _capped(n, limits.get(split)) for split, n in found.eval_queries.items()}
    return Workload(found.train_positives, queries, found.documents, found.split_queries)
