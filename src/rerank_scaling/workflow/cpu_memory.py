"""Memory and time of the CPU jobs whose data grow with the grid: ``training_examples``
(:mod:`rerank_scaling.data.build_examples`) and ``merge_metrics``
(:mod:`rerank_scaling.evaluation.merge_metrics`), from counts known at parse time.

A linear model in what each job holds, its coefficients measured (peak resident set and wall time
of the real command on synthetic MS MARCO-shaped inputs, fitted by non-negative least squares in
``benchmarks/bench_cpu_memory.py``; ``benchmarks/results/cpu_memory.md`` holds the run, and checks
the model's predictions at 5% and 10% of the paper's data against the measured peaks):

* ``training_examples`` holds the train queries and judgements, one negative pool per query (its
  BM25 top ``examples.negative_depth``, interned docids), the texts of every passage a pool or a
  judgement names (:func:`expected_distinct`: draws from the corpus), and the two example tables
  with one text per (row, document), which Arrow copies on writing. Its time: the run's lines and
  the corpus's passages, each read once.
* ``merge_metrics`` streams run by run: it holds one input file and one run's kept rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rerank_scaling.workflow.workload import Workload

MB = 1e6


@dataclass(frozen=True)
class ExamplesCounts:
    """What a ``training_examples`` job holds (module docstring)."""

    queries: int  # train queries (the split's TSV)
    pool_entries: int  # queries x the negatives kept of each query's run
    texts: float  # distinct passages a pool or a judgement names
    example_documents: int  # (row, document) pairs of both example tables
    run_lines: int  # lines of the train split's BM25 run
    passages: int  # lines of the corpus (scanned once)

    @classmethod
    def of(
        cls,
        passages: int,
        queries: int,
        positives: int,
        run_depth: int,
        negative_depth: int,
        pointwise_negatives: int,
        group_negatives: int,
    ) -> ExamplesCounts:
        pool = queries * min(negative_depth, run_depth)
        return cls(
            queries=queries,
            pool_entries=pool,
            texts=expected_distinct(passages, pool + positives),
            example_documents=positives * (2 + pointwise_negatives + group_negatives),
            run_lines=queries * run_depth,
            passages=passages,
        )


def expected_distinct(population: int, draws: int) -> float:
    """Distinct items among ``draws`` uniform draws with replacement from ``population``:
    ``N (1 - exp(-draws / N))``. BM25 runs name popular passages more often, so fewer: an upper bound."""
    if population <= 0:
        return 0.0
    return population * -math.expm1(-draws / population)


@dataclass(frozen=True)
class ExamplesCoefficients:
    """Measured: MB = base + bytes per query, pool entry, text and example document; seconds =
    start + per run line + per passage."""

    base_mb: float
    bytes_per_query: float
    bytes_per_pool_entry: float
    bytes_per_text: float
    bytes_per_example_document: float
    start_seconds: float
    seconds_per_run_line: float
    seconds_per_passage: float

    def peak_mb(self, counts: ExamplesCounts) -> float:
        variable = (
            self.bytes_per_query * counts.queries
            + self.bytes_per_pool_entry * counts.pool_entries
            + self.bytes_per_text * counts.texts
            + self.bytes_per_example_document * counts.example_documents
        )
        return self.base_mb + variable / MB

    def seconds(self, counts: ExamplesCounts) -> float:
        return (
            self.start_seconds
            + self.seconds_per_run_line * counts.run_lines
            + self.seconds_per_passage * counts.passages
        )


@dataclass(frozen=True)
class MergeCounts:
    """What a ``merge_metrics`` job holds and reads (rows of the per-query tables)."""

    largest_file_rows: int  # the largest input file
    largest_run_rows: int  # the most rows one run keeps
    total_rows: int  # every input's rows (each read once, its run and checkpoint columns twice)


@dataclass(frozen=True)
class MergeCoefficients:
    """Measured: MB = base + bytes per held row; seconds = start + per row read."""

    base_mb: float
    bytes_per_row: float
    start_seconds: float
    seconds_per_row: float

    def peak_mb(self, counts: MergeCounts) -> float:
        return self.base_mb + self.bytes_per_row * (counts.largest_file_rows + counts.largest_run_rows) / MB

    def seconds(self, counts: MergeCounts) -> float:
        return self.start_seconds + self.seconds_per_row * counts.total_rows


def examples_counts(config: dict[str, Any], workload: Workload) -> ExamplesCounts | None:
    """What a validated config's ``training_examples`` job holds (None: the corpus, the train
    queries or their positives unknown at parse time)."""
    examples = config["examples"]
    queries = workload.split_queries.get(config["dataset"]["train_split"])
    if workload.documents is None or queries is None or workload.train_positives is None:
        return None
    if examples["max_queries"] is not None:
        queries = min(queries, int(examples["max_queries"]))
    return ExamplesCounts.of(
        workload.documents,
        queries,
        workload.train_positives,
        int(config["retrieval"]["depth"]),
        int(examples["negative_depth"]),
        int(examples["pointwise_negatives"]),
        int(examples["group_negatives"]),
    )


def merge_counts(
    config: dict[str, Any], workload: Workload, runs: int, checkpoints: int
) -> MergeCounts | None:
    """What ``merge_metrics`` holds and reads of ``runs`` runs' per-query tables at ``checkpoints``
    evaluated checkpoints each (None: a split's queries unknown): a file is a run's, a checkpoint's
    or a (checkpoint, split)'s rows by ``evaluation.unit``; a run keeps two checkpoints' rows."""
    from rerank_scaling.evaluation.metrics import MetricSettings, metric_names
    from rerank_scaling.settings import settings_of

    queries, splits = workload.eval_queries, config["dataset"]["eval_splits"]
    if any(split not in queries for split in splits):
        return None
    metrics = len(metric_names(settings_of(MetricSettings, config["evaluation"])))
    per_checkpoint = sum(queries[split] for split in splits) * metrics
    largest = {
        "run": checkpoints * per_checkpoint,
        "checkpoint": per_checkpoint,
        "checkpoint_split": max(queries[split] for split in splits) * metrics,
    }[config["evaluation"]["unit"]]
    return MergeCounts(largest, 2 * per_checkpoint, (runs * checkpoints + 1) * per_checkpoint)


#: The measured coefficients (``benchmarks/results/cpu_memory.md``'s JSON block; a test checks
#: they are that file's).
EXAMPLES = ExamplesCoefficients(
    base_mb=192.5,
    bytes_per_query=0.0,
    bytes_per_pool_entry=0.0,
    bytes_per_text=1198.0,
    bytes_per_example_document=331.4,
    start_seconds=1.804,
    seconds_per_run_line=3.005e-05,
    seconds_per_passage=0.0,
)
MERGE = MergeCoefficients(
    base_mb=190.1,
    bytes_per_row=608.4,
    start_seconds=2.562,
    seconds_per_row=4.832e-06,
)
