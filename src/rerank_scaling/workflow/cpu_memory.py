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
* ``annotation_examples`` (and ``fraction_check``) read the example tables the examples job wrote:
  their (row, document) pairs.
* ``prepare_corpus`` checks the ids of the corpus it copies (a set: one entry per passage), and
  ``prepare_qrels`` indexes the materialised corpus (ids, and the documents without text) before
  checking a split's judgements against it: both per passage.
* ``split_texts`` reads a split's BM25 run whole, keeps the texts of the documents its top
  ``evaluation.rerank_depth`` names, and scans the corpus once.
* ``evaluate_bm25`` reads every evaluated split's run and judgements (their lines).

Each job's model is a :class:`LinearCost` over the fields of its counts; :data:`CPU_MODELS` holds them
by rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from rerank_scaling.workflow.workload import Workload

MB = 1e6


class Counts(Protocol):
    """What a CPU job holds and reads: dataclass fields (or properties) by name (:class:`LinearCost`)."""

    __dataclass_fields__: dict


@dataclass(frozen=True)
class LinearCost:
    """A job's measured cost, linear in its counts (attributes of a counts dataclass, by name):
    MB = ``base_mb`` + sum of ``bytes_per[name]`` x count; seconds = ``start_seconds`` + sum of
    ``seconds_per[name]`` x count."""

    base_mb: float
    bytes_per: dict[str, float]
    start_seconds: float
    seconds_per: dict[str, float]

    def peak_mb(self, counts: Counts) -> float:
        return self.base_mb + sum(b * getattr(counts, name) for name, b in self.bytes_per.items()) / MB

    def seconds(self, counts: Counts) -> float:
        return self.start_seconds + sum(s * getattr(counts, name) for name, s in self.seconds_per.items())


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
class MergeCounts:
    """What a ``merge_metrics`` job holds and reads (rows of the per-query tables)."""

    largest_file_rows: int  # the largest input file
    largest_run_rows: int  # the most rows one run keeps
    total_rows: int  # every input's rows (each read once, its run and checkpoint columns twice)

    @property
    def held_rows(self) -> int:
        """The rows held at once: the largest input file and the most one run keeps."""
        return self.largest_file_rows + self.largest_run_rows


def examples_counts(
    config: dict[str, Any], workload: Workload, split: str | None = None
) -> ExamplesCounts | None:
    """What a validated config's ``training_examples`` job of ``split`` (default: the train split;
    another: an annotation file's examples) holds (None: the corpus, the split's queries or their
    positives unknown at parse time). Another split's positives: as many per query as the train
    split's."""
    examples = config["examples"]
    train = config["dataset"]["train_split"]
    queries = workload.split_queries.get(split or train)
    train_queries = workload.split_queries.get(train)
    if workload.documents is None or queries is None or workload.train_positives is None or not train_queries:
        return None
    positives = workload.train_positives
    if (split or train) != train:  # train_positives: of the train queries examples.max_queries keeps
        kept = min(train_queries, examples["max_queries"] or train_queries)
        positives = math.ceil(positives * queries / kept)
    if examples["max_queries"] is not None:
        queries = min(queries, int(examples["max_queries"]))
    return ExamplesCounts.of(
        workload.documents,
        queries,
        positives,
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
    from rerank_scaling.evaluation.metric_settings import MetricSettings
    from rerank_scaling.registries.measures import metric_names
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


@dataclass(frozen=True)
class ExampleTableCounts:
    """``annotation_examples``: the (row, document) pairs of the example tables it reads."""

    example_documents: int


@dataclass(frozen=True)
class CorpusCounts:
    """``prepare_corpus`` and ``prepare_qrels``: the corpus's passages (ids held, lines read)."""

    passages: int


@dataclass(frozen=True)
class SplitTextsCounts:
    """``split_texts`` of one split: its run's lines (held), the candidates' texts (held) and the
    corpus's passages (scanned)."""

    run_lines: int
    texts: float
    passages: int


@dataclass(frozen=True)
class RunLinesCounts:
    """``evaluate_bm25``: the lines of every evaluated split's BM25 run."""

    run_lines: int


def example_table_counts(config: dict[str, Any], workload: Workload) -> ExampleTableCounts | None:
    """The human example tables ``annotation_examples`` reads (None: the train queries unknown)."""
    counts = examples_counts(config, workload)
    return None if counts is None else ExampleTableCounts(counts.example_documents)


def corpus_counts(workload: Workload) -> CorpusCounts | None:
    """The corpus of ``prepare_corpus``/``prepare_qrels`` (None: its size unknown at parse time)."""
    return None if workload.documents is None else CorpusCounts(workload.documents)


def split_texts_counts(config: dict[str, Any], workload: Workload, split: str) -> SplitTextsCounts | None:
    """One evaluated split's ``split_texts`` job (None: the corpus or the split unknown)."""
    queries = workload.eval_queries.get(split, workload.split_queries.get(split))
    if workload.documents is None or queries is None:
        return None
    candidates = queries * min(int(config["evaluation"]["rerank_depth"]), int(config["retrieval"]["depth"]))
    return SplitTextsCounts(
        run_lines=queries * int(config["retrieval"]["depth"]),
        texts=expected_distinct(workload.documents, candidates),
        passages=workload.documents,
    )


def run_lines_counts(config: dict[str, Any], workload: Workload) -> RunLinesCounts | None:
    """``evaluate_bm25``'s runs: every evaluated split's queries x ``retrieval.depth``."""
    splits = config["dataset"]["eval_splits"]
    if any(split not in workload.eval_queries for split in splits):
        return None
    return RunLinesCounts(sum(workload.eval_queries[s] for s in splits) * int(config["retrieval"]["depth"]))


#: The measured models of ``training_examples`` and ``merge_metrics`` (``benchmarks/results/cpu_memory.md``'s
#: JSON block, ``examples`` and ``merge``; a test checks they are that file's).
EXAMPLES = LinearCost(
    base_mb=152.8,
    bytes_per={"queries": 0.0, "pool_entries": 0.0, "texts": 1150.0, "example_documents": 381.3},
    start_seconds=5.191,
    seconds_per={"run_lines": 1.709e-05, "passages": 2.673e-05},
)
MERGE = LinearCost(
    base_mb=156.5,
    bytes_per={"held_rows": 639.4},
    start_seconds=4.18,
    seconds_per={"total_rows": 5.343e-06},
)
#: The LinearCost models of the other data-sized CPU jobs, by rule (the same JSON block's ``costs``).
CPU_COSTS: dict[str, LinearCost] = {
    "annotation_examples": LinearCost(
        base_mb=205.2,
        bytes_per={"example_documents": 988.2},
        start_seconds=11.75,
        seconds_per={"example_documents": 8.583e-05},
    ),
    "prepare_corpus": LinearCost(
        base_mb=111.8,
        bytes_per={"passages": 129.4},
        start_seconds=4.791,
        seconds_per={"passages": 1.832e-05},
    ),
    "prepare_qrels": LinearCost(
        base_mb=112.0,
        bytes_per={"passages": 128.7},
        start_seconds=4.348,
        seconds_per={"passages": 2.013e-05},
    ),
    "split_texts": LinearCost(
        base_mb=126.6,
        bytes_per={"run_lines": 26.05, "texts": 1207.0},
        start_seconds=5.119,
        seconds_per={"run_lines": 2.117e-06, "passages": 2.746e-05},
    ),
    "evaluate_bm25": LinearCost(
        base_mb=140.3,
        bytes_per={"run_lines": 296.7},
        start_seconds=7.5,
        seconds_per={"run_lines": 2.883e-05},
    ),
}

#: Every data-sized CPU rule's model, by rule
#: (:meth:`rerank_scaling.workflow.job_resources.JobSizes.cpu_job`).
CPU_MODELS: dict[str, LinearCost] = {
    "training_examples": EXAMPLES,
    "merge_metrics": MERGE,
    **CPU_COSTS,
}
