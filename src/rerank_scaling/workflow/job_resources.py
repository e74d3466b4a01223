"""What each workflow job asks the cluster for: partition, account, GPUs, memory and time.

One owner for the numbers the rules' ``resources:`` blocks declare (``rules/common.smk`` calls
:class:`JobSizes` once at parse time), so that a SLURM run needs no ``--set-resources``, and
``snakemake -n`` shows what each job will ask for:

* **partition and account** (config ``cluster``): the rules that run a model,
  :data:`MODEL_RULES`, go to ``cluster.gpu_partition``, every other rule to
  ``cluster.cpu_partition``; every rule carries ``cluster.account``. A key left null is not set,
  so the executor's own choice (or ``--default-resources``) applies.
* **GPUs** (:data:`MODEL_RULES`): a model rule asks for one GPU when the config's ``device`` is
  ``cuda``, on nodes with the feature ``cluster.gpu_constraint`` when set (the plugin's
  ``constraint``: ``sbatch -C``), the cards of ``gpu_memory_gb`` that the memory preflight planned
  for (each GPU job checks its card at start-up: :mod:`rerank_scaling.planning.gpu_fit`).
* **time** (minutes): a model job's FLOPs from the planning cost model
  (:class:`rerank_scaling.planning.encoder_flops.EncoderShape`; every sequence at ``training.max_length``
  tokens, an upper bound) over the achieved FLOP/s ``planning.peak_flops x planning.mfu``, times
  ``cluster.runtime_margin``, plus ``cluster.startup_minutes`` (loading, set-up, checkpoint
  exports). Training: steps x rows per step x sequences per row x 3 forward FLOPs (x 4/3 with the
  memory preflight's gradient checkpointing); evaluation: queries x ``evaluation.rerank_depth``
  candidates per split and checkpoint of the job. Without ``planning.peak_flops`` or a workload
  known at parse time (:mod:`rerank_scaling.workflow.workload`) the section's ``runtime`` is used instead.
* **memory** (host RAM, MB): the section's ``mem_mb`` (data, tokenizer, Python) plus the CPU copies
  of the weights a job makes (loading; the export of a checkpoint), :data:`HOST_BYTES_PER_PARAM`
  per parameter.
* **CPU jobs that grow with the data** (``training_examples``, ``merge_metrics``,
  ``annotation_examples``, ``prepare_corpus``, ``prepare_qrels``, ``split_texts``,
  ``evaluate_bm25``: :data:`rerank_scaling.workflow.cpu_memory.CPU_MODELS`): memory and time from the
  measured model of :mod:`rerank_scaling.workflow.cpu_memory` (train queries, passages, run depth, the
  examples' negatives; evaluated queries, metrics, checkpoints and runs), memory times
  :data:`CPU_MEMORY_MARGIN`, time times ``cluster.runtime_margin`` plus ``cluster.startup_minutes``;
  the fixed :data:`CPU_FALLBACK` where a count is unknown at parse time.
* **BM25** (``bm25_index``, ``bm25_search``; :mod:`rerank_scaling.data.bm25`): time from the
  corpus's documents and each split's queries (:class:`rerank_scaling.workflow.workload.Workload`) at the
  rates :data:`BM25_RATES` measured on CPU (``benchmarks/bench_bm25.py``), Lucene's work divided
  over ``retrieval.threads``, times ``cluster.runtime_margin``, plus ``cluster.startup_minutes``
  (reading the corpus from a shared file system, which the CPU-time rates do not see); memory: the
  JVM heap ``retrieval.memory_mb``, the JVM's own :data:`JVM_NATIVE_MB`, and the index's pages
  (mapped into the process, so counted in its resident set) at the measured bytes per document.
  An unknown corpus size (or a split's query count) keeps :data:`BM25_FALLBACK_MINUTES`.

Every time and memory grows with the attempt (attempt k gets k times the first's: a retry after an
out-of-memory kill or a time limit gets more; :func:`resources_for`), then is clamped to
[``cluster.min_runtime``, ``cluster.max_runtime``] and
[``cluster.min_mem_mb``, ``cluster.max_mem_mb``]: the floor keeps tiny jobs schedulable, the cap
is the partition's limit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rerank_scaling.grid import RunSpec
from rerank_scaling.planning.encoder_flops import EncoderShape
from rerank_scaling.settings import SectionSettings
from rerank_scaling.workflow.cpu_memory import (
    CPU_MODELS,
    Counts,
    ExamplesCounts,
    MergeCounts,
    corpus_counts,
    example_table_counts,
    examples_counts,
    merge_counts,
    run_lines_counts,
    split_texts_counts,
)
from rerank_scaling.workflow.workload import Workload

if TYPE_CHECKING:
    from rerank_scaling.data.bm25 import Bm25Settings

#: The rules that load a model and run it: on the GPU partition, one GPU each under device: cuda.
MODEL_RULES = ("train", "evaluate_run", "evaluate_part", "evaluate_bundle", "plan")

#: Host bytes per parameter beyond the section's mem_mb: fp32 weights read from disk, and the fp32
#: copy a checkpoint export serialises (training); the weights read (evaluation).
HOST_BYTES_PER_PARAM = {"train": 8, "evaluate": 4}

MB = 1e6


@dataclass(frozen=True)
class Bm25Rates:
    """Lucene BM25 throughput per CPU thread, in CPU seconds, measured by ``benchmarks/bench_bm25.py``
    (200k synthetic passages; ``benchmarks/results/bm25_cpu.md`` holds the run these come from)."""

    jvm_start_seconds: float  # a Java process's start and the index's opening
    python_seconds_per_doc: float  # the stage's own passes: the shard copy and the indexed-count check
    lucene_thread_seconds_per_doc: float  # IndexCollection, one thread
    search_thread_seconds_per_query_per_million_docs: float  # SearchCollection, one thread
    index_bytes_per_doc: float  # positions, no docvectors or raw text


#: The measured rates (``benchmarks/results/bm25_cpu.md``; tests/test_job_resources.py checks that
#: they are that file's).
BM25_RATES = Bm25Rates(
    jvm_start_seconds=2.53,
    python_seconds_per_doc=3.41e-06,
    lucene_thread_seconds_per_doc=7.09e-05,
    search_thread_seconds_per_query_per_million_docs=0.0186,
    index_bytes_per_doc=169.0,
)

#: The JVM's memory beyond its heap (metaspace, code cache, thread stacks, GC structures) and the
#: Python process that starts it, MB.
JVM_NATIVE_MB = 1024

#: The measured CPU-job memory model's margin: its held-out predictions were within 25% of the
#: measured peaks (benchmarks/results/cpu_memory.md), and real texts vary more than synthetic ones.
CPU_MEMORY_MARGIN = 1.5

#: (MB, minutes) of a data-sized CPU job whose counts are unknown at parse time.
CPU_FALLBACK = {
    "training_examples": (4000, 60),
    "merge_metrics": (4000, 30),
    "annotation_examples": (4000, 60),
    "prepare_corpus": (16000, 240),
    "prepare_qrels": (8000, 60),
    "split_texts": (4000, 60),
    "evaluate_bm25": (4000, 30),
}

#: A BM25 job's time limit when the corpus's size is unknown at parse time (minutes, then clamped).
BM25_FALLBACK_MINUTES = 60


@dataclass(frozen=True)
class ClusterSettings(SectionSettings):
    """Config section ``cluster`` (defaults: the schema's, which documents each key)."""

    SECTION: ClassVar[str] = "cluster"

    account: str | None
    gpu_partition: str | None
    cpu_partition: str | None
    gpu_constraint: str | None
    runtime_margin: float
    startup_minutes: int
    min_runtime: int
    max_runtime: int
    min_mem_mb: int
    max_mem_mb: int
    max_setup_share: float | None


def encoder_shape(spec: dict[str, Any], config: dict[str, Any]) -> EncoderShape:
    """The cost model's shape of a ``models[]`` entry from its ``config.json`` (or the Ettin table;
    planning.memory.model_config): a ladder keeps its first ``layers``, ModernBERT's gated FFN and
    local-attention layers (every ``global_attn_every_n_layers``-th layer is global) counted."""
    from rerank_scaling.families.registry import family_of

    layers = family_of(spec).layers_kept(spec)
    depth = int(layers or config["num_hidden_layers"])
    modernbert = config.get("model_type") == "modernbert"
    every = int(config.get("global_attn_every_n_layers", 3)) if modernbert else 1
    local = depth - math.ceil(depth / every) if modernbert else 0
    return EncoderShape(
        layers=depth,
        hidden=int(config["hidden_size"]),
        intermediate=int(config["intermediate_size"]),
        ffn_matrices=3 if modernbert else 2,
        head=spec["head"],
        local_layers=local,
        local_reach=int(config.get("local_attention", 128)) // 2 if local else None,
    )


@dataclass(frozen=True)
class ModelCost:
    """What a model's jobs cost: its shape (FLOPs) and parameters (host memory)."""

    shape: EncoderShape
    params: int


@dataclass(frozen=True)
class JobSizes:
    """Every job's resources for one validated config (module docstring)."""

    config: dict[str, Any]
    cluster: ClusterSettings
    workload: Workload
    models: dict[str, ModelCost | None]  # name -> cost (None: shape unknown before the prefetch)
    checkpointing: dict[tuple[str, str], bool]  # (model, objective) -> the preflight's choice

    @classmethod
    def from_config(
        cls, config: dict[str, Any], workload: Workload, checkpointing: dict[tuple[str, str], bool]
    ) -> JobSizes:
        from rerank_scaling.planning.memory import model_config, model_shape
        from rerank_scaling.settings import settings_from_dict

        models: dict[str, ModelCost | None] = {}
        for spec in config["models"]:
            values, memory = model_config(spec), model_shape(spec)
            models[spec["name"]] = (
                ModelCost(encoder_shape(spec, values), memory.params) if values and memory else None
            )
        cluster = settings_from_dict(ClusterSettings, config["cluster"])
        return cls(config, cluster, workload, models, checkpointing)

    # --- placement -------------------------------------------------------------------------------

    def placement(self, rule: str) -> dict[str, Any]:
        """slurm_partition, slurm_account, gpu and constraint of ``rule`` (only the keys that are set)."""
        model_rule = rule in MODEL_RULES
        partition = self.cluster.gpu_partition if model_rule else self.cluster.cpu_partition
        placed: dict[str, Any] = {}
        if partition:
            placed["slurm_partition"] = partition
        if self.cluster.account:
            placed["slurm_account"] = self.cluster.account
        gpu = model_rule and self.config["device"] == "cuda"
        placed["gpu"] = 1 if gpu else 0
        if gpu and self.cluster.gpu_constraint:
            placed["constraint"] = self.cluster.gpu_constraint  # the plugin's sbatch -C
        return placed

    def runtime(self, minutes: float, attempt: int = 1) -> int:
        """``minutes`` x ``attempt`` clamped to [cluster.min_runtime, cluster.max_runtime], whole minutes."""
        limit = math.ceil(minutes) * attempt
        return int(min(max(limit, self.cluster.min_runtime * attempt), self.cluster.max_runtime))

    def mem_mb(self, mb: float, attempt: int = 1) -> int:
        """``mb`` x ``attempt`` clamped to [cluster.min_mem_mb, cluster.max_mem_mb]."""
        floor = self.cluster.min_mem_mb * attempt
        return int(min(max(math.ceil(mb) * attempt, floor), self.cluster.max_mem_mb))

    # --- model jobs ------------------------------------------------------------------------------

    @property
    def flops_per_second(self) -> float | None:
        """Achieved FLOP/s of the jobs' device: planning.peak_flops x planning.mfu (None: not given)."""
        planning = self.config["planning"]
        if not planning["peak_flops"]:
            return None
        return float(planning["peak_flops"]) * float(planning["mfu"])

    def _minutes(self, flops: float | None, fallback: float, attempt: int = 1) -> int:
        rate = self.flops_per_second
        if flops is None or rate is None:
            return self.runtime(fallback, attempt)
        return self.margin_minutes(flops / rate, attempt)

    def margin_minutes(self, seconds: float, attempt: int = 1) -> int:
        """A job's limit from its modelled ``seconds``: x cluster.runtime_margin + startup_minutes."""
        return self.runtime(
            self.cluster.runtime_margin * seconds / 60 + self.cluster.startup_minutes, attempt
        )

    def train_sequences(self, objective: str) -> float | None:
        """Sequences one training run of ``objective`` passes forward and backward: steps x rows per
        step x sequences per row (:mod:`rerank_scaling.registries.objectives`)."""
        from rerank_scaling.data.training_examples import ExampleSettings
        from rerank_scaling.registries import objectives
        from rerank_scaling.settings import settings_from_dict, settings_of
        from rerank_scaling.training.train_settings import TrainSettings

        training = settings_of(TrainSettings, self.config["training"])
        examples = settings_from_dict(ExampleSettings, self.config["examples"])
        batch, per_row = objectives.rows_per_step(objective, training, examples)
        if training.max_steps is None and self.workload.train_positives is None:
            return None
        rows = (self.workload.train_positives or 0) * objectives.rows_per_positive(objective, examples)
        steps = objectives.total_steps(training, rows, batch, 1.0)
        return float(steps * batch * per_row)

    def train_flops(self, run_id: str) -> float | None:
        """FLOPs of training ``run_id`` (None: the model's shape or the workload unknown)."""
        run = RunSpec.parse(run_id)
        cost, sequences = self.models[run.model], self.train_sequences(run.objective)
        if cost is None or sequences is None:
            return None
        recompute = 4 / 3 if self.checkpointing.get((run.model, run.objective)) else 1.0
        return sequences * cost.shape.train_flops(self.config["training"]["max_length"]) * recompute

    def train_runtime(self, run_id: str, attempt: int = 1) -> int:
        return self._minutes(self.train_flops(run_id), self.config["training"]["runtime"], attempt)

    def evaluation_runtime(self, run_id: str, checkpoints_per_split: dict[str, int], attempt: int = 1) -> int:
        """Time of one evaluation job of ``run_id`` scoring ``checkpoints_per_split[split]``
        checkpoints of each split."""
        flops = self.evaluation_flops(run_id, checkpoints_per_split)
        return self._minutes(flops, self.config["evaluation"]["runtime"], attempt)

    def evaluation_flops(self, run_id: str, checkpoints_per_split: dict[str, int]) -> float | None:
        """FLOPs of scoring ``checkpoints_per_split[split]`` checkpoints of ``run_id`` on each split
        (None: the model's shape or a split's queries unknown)."""
        cost = self.models[RunSpec.parse(run_id).model]
        queries = self.workload.eval_queries
        if cost is None or any(split not in queries for split in checkpoints_per_split):
            return None
        depth = int(self.config["evaluation"]["rerank_depth"])
        pairs = sum(queries[split] * depth * n for split, n in checkpoints_per_split.items())
        return pairs * cost.shape.forward_flops(self.config["training"]["max_length"])

    def bundle_flops(self, runs: list[str], checkpoints_per_split: dict[str, int]) -> float | None:
        """FLOPs of one evaluation job scoring every run of ``runs`` (None: one of them unknown)."""
        flops = [self.evaluation_flops(run, checkpoints_per_split) for run in runs]
        return None if None in flops else sum(flops)  # type: ignore[arg-type]

    def bundle_runtime(self, runs: list[str], checkpoints_per_split: dict[str, int], attempt: int = 1) -> int:
        """Time of one evaluation job scoring every run of ``runs`` (:meth:`evaluation_bundles`)."""
        flops = self.bundle_flops(runs, checkpoints_per_split)
        return self._minutes(flops, self.config["evaluation"]["runtime"] * len(runs), attempt)

    def model_mem_mb(self, stage: str, run_id: str, attempt: int = 1) -> int:
        """Host memory of a ``stage`` (train | evaluate) job of ``run_id``."""
        section = self.config["training" if stage == "train" else "evaluation"]
        cost = self.models[RunSpec.parse(run_id).model]
        weights = HOST_BYTES_PER_PARAM[stage] * cost.params / MB if cost is not None else 0.0
        return self.mem_mb(section["mem_mb"] + weights, attempt)

    # --- BM25 -------------------------------------------------------------------------------------

    @property
    def retrieval(self) -> Bm25Settings:
        """The config's ``retrieval`` section (the heap and threads the BM25 stage uses)."""
        from rerank_scaling.data.bm25 import Bm25Settings
        from rerank_scaling.settings import settings_from_dict

        return settings_from_dict(Bm25Settings, self.config["retrieval"])

    def _bm25_minutes(self, seconds: float | None) -> int:
        if seconds is None:
            return self.runtime(BM25_FALLBACK_MINUTES)
        return self.margin_minutes(BM25_RATES.jvm_start_seconds + seconds)

    def bm25_index_runtime(self) -> int:
        """Time of ``bm25_index``: documents x (the Python passes + Lucene / threads)."""
        documents, rates = self.workload.documents, BM25_RATES
        if documents is None:
            return self._bm25_minutes(None)
        per_doc = rates.python_seconds_per_doc + rates.lucene_thread_seconds_per_doc / self.retrieval.threads
        return self._bm25_minutes(documents * per_doc)

    def bm25_search_runtime(self, split: str) -> int:
        """Time of ``bm25_search`` of ``split``: queries x million documents x the per-query rate /
        threads (a posting list grows with the collection; top-k pruning makes it less: a bound)."""
        documents, queries = self.workload.documents, self.workload.split_queries.get(split)
        if documents is None or queries is None:
            return self._bm25_minutes(None)
        rate = BM25_RATES.search_thread_seconds_per_query_per_million_docs
        return self._bm25_minutes(queries * documents / 1e6 * rate / self.retrieval.threads)

    def bm25_mem_mb(self) -> int:
        """Memory of a BM25 job: the JVM heap, :data:`JVM_NATIVE_MB`, and the index's mapped pages."""
        index = (self.workload.documents or 0) * BM25_RATES.index_bytes_per_doc / MB
        return self.mem_mb(self.retrieval.memory_mb + JVM_NATIVE_MB + index)

    # --- CPU jobs sized from the data (rerank_scaling.workflow.cpu_memory) ------------------------

    def examples_counts(self, split: str | None = None) -> ExamplesCounts | None:
        """What a ``training_examples`` job holds (:func:`rerank_scaling.workflow.cpu_memory.examples_counts`)
        of ``split`` (default: the train split)."""
        return examples_counts(self.config, self.workload, split)

    def merge_counts(self, runs: int, checkpoints: int) -> MergeCounts | None:
        """What ``merge_metrics`` holds (:func:`rerank_scaling.workflow.cpu_memory.merge_counts`)."""
        return merge_counts(self.config, self.workload, runs, checkpoints)

    def data_counts(self, rule: str) -> Counts | None:
        """The counts of a data-sized CPU rule that does not depend on wildcards."""
        return {
            "annotation_examples": lambda: example_table_counts(self.config, self.workload),
            "prepare_corpus": lambda: corpus_counts(self.workload),
            "prepare_qrels": lambda: corpus_counts(self.workload),
            "evaluate_bm25": lambda: run_lines_counts(self.config, self.workload),
        }[rule]()

    def split_texts_counts(self, split: str) -> Counts | None:
        """One split's ``split_texts`` job (:func:`rerank_scaling.workflow.cpu_memory.split_texts_counts`)."""
        return split_texts_counts(self.config, self.workload, split)

    def cpu_job(self, rule: str, counts: Counts | None) -> dict[str, Any]:
        """mem_mb and runtime of a data-sized CPU job (functions of the attempt) from its ``counts``
        and the measured model (:data:`rerank_scaling.workflow.cpu_memory.CPU_MODELS`), or
        :data:`CPU_FALLBACK` when they are unknown."""
        if counts is None:
            return dict(zip(("mem_mb", "runtime"), CPU_FALLBACK[rule], strict=True))
        model = CPU_MODELS[rule]
        mb, seconds = CPU_MEMORY_MARGIN * model.peak_mb(counts), model.seconds(counts)
        return {
            "mem_mb": lambda wildcards, attempt: self.mem_mb(mb, attempt),
            "runtime": lambda wildcards, attempt: self.margin_minutes(seconds, attempt),
        }

    def cpu_job_by_wildcard(
        self, rule: str, counts_of: Callable[[str], Counts | None], wildcard: str = "split"
    ) -> dict[str, Any]:
        """:meth:`cpu_job` of a rule whose counts depend on a wildcard (a split's ``split_texts``, an
        annotation file's examples): ``counts_of(value of the wildcard)``, at each call."""

        def resource(key: str) -> Callable[[Any, int], int]:
            def value(wildcards: Any, attempt: int) -> int:
                job = self.cpu_job(rule, counts_of(getattr(wildcards, wildcard)))
                return _attempt_function(self, key, job[key])(wildcards, attempt)

            return value

        return {"mem_mb": resource("mem_mb"), "runtime": resource("runtime")}


#: The highest priority :func:`longest_first` gives a model job: below the data checks' 50
#: (``rules/data.smk``), which run before anything that trains.
MODEL_PRIORITY_CEILING = 40


def longest_first(costs: Mapping[Hashable, float | None]) -> dict[Hashable, int]:
    """Snakemake priorities that start the costliest model jobs first: longest-processing-time-first
    list scheduling (Graham 1969, "Bounds on multiprocessing timing anomalies": on m cores the
    independent jobs end within 4/3 - 1/(3m) of the shortest schedule), so that a large model's
    evaluation does not start alone at the end of the run while the other core idles. Each known
    cost (modelled FLOPs) gets 1 + its rank among the distinct costs, spread over 1 to
    :data:`MODEL_PRIORITY_CEILING`; equal costs get equal priorities; an unknown cost gets 0."""
    known = sorted({cost for cost in costs.values() if cost is not None})
    if not known:
        return dict.fromkeys(costs, 0)
    steps = max(len(known) - 1, 1)
    rank = {cost: index for index, cost in enumerate(known)}
    return {
        key: 0 if cost is None else 1 + round((MODEL_PRIORITY_CEILING - 1) * rank[cost] / steps)
        for key, cost in costs.items()
    }


def resources_for(sizes: JobSizes, rule: str, **values: Any) -> dict[str, Any]:
    """A rule's resources: its placement plus ``values``: mem_mb and runtime as numbers (MB,
    minutes), which grow with the attempt and are clamped here, or as functions of (wildcards,
    attempt) that do so themselves (the JobSizes methods' ``attempt``)."""
    grown = {key: _attempt_function(sizes, key, value) for key, value in values.items()}
    return {**sizes.placement(rule), **grown}


def _attempt_function(sizes: JobSizes, key: str, value: Any) -> Any:
    """``value`` of resource ``key``; mem_mb and runtime as numbers become functions of (wildcards,
    attempt) that grow with the attempt, clamped (:meth:`JobSizes.mem_mb`, :meth:`JobSizes.runtime`)."""
    if key in ("mem_mb", "runtime") and isinstance(value, int | float):
        return _growing(sizes.mem_mb if key == "mem_mb" else sizes.runtime, value)
    return value


def _growing(limit: Any, value: float) -> Any:
    """A resource function: ``limit(value, attempt)`` (a function, so that each binds its own value)."""
    return lambda wildcards, attempt: limit(value, attempt)
