"""Training examples for the three objectives, from qrels and BM25 negatives.

Parquet schemas (one file per objective family):

``pointwise.parquet`` — one row per (query, document) pair, for BinaryCrossEntropyLoss:
    qid: str, docid: str, query: str, document: str, label: float (1.0 positive, 0.0 negative)

``groups.parquet`` — one row per (query, positive), for RankNetLoss / ListNetLoss:
    qid: str, query: str, docids: list[str], documents: list[str], labels: list[float]
    (the positive first, then ``group_negatives`` BM25 negatives; labels 1.0 / 0.0)

Positives are the judged documents with grade >= ``positive_threshold``. Negatives are sampled
without replacement from the query's BM25 top ``negative_depth`` among documents judged below
``relevance_threshold`` or unjudged (so partially relevant documents are never used as negatives).
Queries with no positive, or too few negatives, are skipped and counted (:func:`example_counts`);
more than :data:`THIN_SHARE` of them is a warning in the run's summary and answer page.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rerank_scaling.data.collection import Queries
from rerank_scaling.data.trec import Qrels, ranked
from rerank_scaling.registries.objectives import EXAMPLE_FORMATS
from rerank_scaling.settings import SectionSettings

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class ExampleSettings(SectionSettings):
    """Config ``examples``; defaults: the schema's."""

    SECTION: ClassVar[str] = "examples"

    positive_threshold: int
    relevance_threshold: int
    negative_depth: int
    pointwise_negatives: int
    group_negatives: int
    max_queries: int | None
    seed: int


@dataclass(frozen=True)
class QueryExamples:
    qid: str
    positives: list[str]
    negative_pool: list[str]


def negative_pools(
    run: Iterable[tuple[str, dict[str, float]]], qrels: Qrels, settings: ExampleSettings
) -> dict[str, list[str]]:
    """Per query of ``run`` ((qid, scores) pairs, e.g. streamed by ``trec.iter_run_queries``): its
    BM25 top ``negative_depth`` judged below ``relevance_threshold`` or unjudged, in BM25 order.
    Only these lists are kept, not the run's scores."""
    pools = {}
    for qid, scores in run:
        judged = qrels.get(qid, {})
        pools[qid] = [
            d
            for d, _ in ranked(scores)[: settings.negative_depth]
            if judged.get(d, 0) < settings.relevance_threshold
        ]
    return pools


def select_examples(
    queries: Queries, qrels: Qrels, pools: dict[str, list[str]], settings: ExampleSettings
) -> list[QueryExamples]:
    """Per training query: its positives and its pool of BM25 negatives (:func:`negative_pools`)."""
    selected = []
    for qid in sorted(queries):
        judged = qrels.get(qid, {})
        positives = sorted(d for d, g in judged.items() if g >= settings.positive_threshold)
        if positives:
            selected.append(QueryExamples(qid, positives, pools.get(qid, [])))
    if settings.max_queries is not None:
        selected = random.Random(settings.seed).sample(selected, min(settings.max_queries, len(selected)))
        selected.sort(key=lambda example: example.qid)
    return selected


def _negatives(example: QueryExamples, positive: str, count: int, seed: int) -> list[str] | None:
    # Seeded per (qid, positive) so the sample does not depend on iteration order.
    if len(example.negative_pool) < count:
        return None
    return random.Random(f"{seed}/{example.qid}/{positive}").sample(example.negative_pool, count)


def pointwise_examples(
    selected: list[QueryExamples], queries: Queries, texts: dict[str, str], settings: ExampleSettings
) -> pd.DataFrame:
    """(q, d, label) rows: each positive followed by ``pointwise_negatives`` BM25 negatives."""
    import pandas as pd  # here, not at the top: the Snakefile imports this module (its settings)

    rows = []
    for example in selected:
        for positive in example.positives:
            negatives = _negatives(example, positive, settings.pointwise_negatives, settings.seed)
            if negatives is None:
                continue
            rows.append((example.qid, positive, 1.0))
            rows.extend((example.qid, negative, 0.0) for negative in negatives)
    frame = pd.DataFrame(rows, columns=["qid", "docid", "label"])
    frame.insert(2, "query", frame["qid"].map(queries))
    frame.insert(3, "document", frame["docid"].map(texts))
    return frame


def group_examples(
    selected: list[QueryExamples], queries: Queries, texts: dict[str, str], settings: ExampleSettings
) -> pd.DataFrame:
    """Groups of 1 positive + ``group_negatives`` BM25 negatives, one row per (query, positive)."""
    import pandas as pd

    rows = []
    for example in selected:
        for positive in example.positives:
            negatives = _negatives(example, positive, settings.group_negatives, settings.seed)
            if negatives is None:
                continue
            docids = [positive, *negatives]
            rows.append(
                {
                    "qid": example.qid,
                    "query": queries[example.qid],
                    "docids": docids,
                    "documents": [texts[d] for d in docids],
                    "labels": [1.0] + [0.0] * len(negatives),
                }
            )
    return pd.DataFrame(rows, columns=["qid", "query", "docids", "documents", "labels"])


#: The share of the training queries above which giving no training example is a warning in the
#: run's summary and answer page (not only in the examples job's log): with more unused, the laws
#: are fitted on far fewer queries than the split holds, and usually a setting is off (a
#: ``positive_threshold`` above the qrels' grades, a ``negative_depth`` too shallow for the negatives)
THIN_SHARE = 0.10


def example_counts(
    queries: Queries,
    qrels: Qrels,
    selected: list[QueryExamples],
    frames: dict[str, pd.DataFrame],
    settings: ExampleSettings,
) -> dict[str, Any]:
    """How many training queries give examples (the examples job's ``counts.json``): the split's
    queries, those without a judgement at ``positive_threshold`` (unjudged or judged lower), those
    left out by ``examples.max_queries`` (by choice), and per example kind (``frames``: pointwise,
    groups) those dropped for too few BM25 negatives; ``warnings``: :func:`thin_data_warnings`."""
    with_positive = sum(
        1 for q in queries if any(g >= settings.positive_threshold for g in qrels.get(q, {}).values())
    )
    kept = {example.qid for example in selected}
    counts: dict[str, Any] = {
        "queries": len(queries),
        "without_positive": len(queries) - with_positive,
        "left_out_by_max_queries": with_positive - len(kept),
        "dropped_for_negatives": {kind: len(kept - set(frame["qid"])) for kind, frame in frames.items()},
    }
    counts["warnings"] = thin_data_warnings(counts, settings)
    return counts


def thin_data_warnings(counts: dict[str, Any], settings: ExampleSettings) -> list[str]:
    """One warning per example kind whose training queries without an example exceed
    :data:`THIN_SHARE` of those the examples could use (all but ``examples.max_queries``'s choice)."""
    usable = counts["queries"] - counts["left_out_by_max_queries"]
    warnings = []
    for kind, dropped in counts["dropped_for_negatives"].items():
        unused = counts["without_positive"] + dropped
        if usable and unused / usable > THIN_SHARE:
            key = EXAMPLE_FORMATS[kind].negatives_key
            warnings.append(
                f"thin training data ({kind} examples): {unused} of {usable} training queries "
                f"({unused / usable:.0%}, more than {THIN_SHARE:.0%}) give none: "
                f"{counts['without_positive']} have no judgement at examples.positive_threshold = "
                f"{settings.positive_threshold} (unjudged or judged lower), {dropped} have fewer BM25 "
                f"negatives than examples.{key} = {getattr(settings, key)}. Judge more queries, lower "
                f"examples.positive_threshold or examples.{key}, or raise examples.negative_depth"
            )
    return warnings


def needed_docids(selected: list[QueryExamples]) -> set[str]:
    """Every document an example may use (to load only those texts from a large corpus)."""
    return {d for example in selected for d in (*example.positives, *example.negative_pool)}


def grade_counts(qrels: Qrels) -> dict[int, int]:
    """How many judgements have each grade."""
    counts: dict[int, int] = {}
    for judged in qrels.values():
        for grade in judged.values():
            counts[grade] = counts.get(grade, 0) + 1
    return dict(sorted(counts.items()))


def no_examples_reason(
    qrels: Qrels, selected: list[QueryExamples], settings: ExampleSettings, objective: str, key: str
) -> str:
    """Why ``objective`` got no training examples, naming the config field to change; ``key``: the
    ``examples`` key of its negatives (its :class:`~rerank_scaling.registries.objectives.ExampleFormat`)."""
    grades = grade_counts(qrels)
    if not selected:
        usable = [g for g in grades if g >= 1]
        hint = (
            f"Set examples.positive_threshold to at most {max(usable)}" if usable else "Judge some documents"
        )
        return (
            f"no training examples: no train judgement reaches examples.positive_threshold = "
            f"{settings.positive_threshold}; the grades found (grade: judgements) are {grades}. {hint}."
        )
    needed = getattr(settings, key)
    most = max(len(example.negative_pool) for example in selected)
    return (
        f"no {objective} training examples: {len(selected)} queries have positives, but at most {most} "
        f"BM25 negatives each, fewer than examples.{key} = {needed}; lower examples.{key} or raise "
        "examples.negative_depth (and retrieval.depth)"
    )
