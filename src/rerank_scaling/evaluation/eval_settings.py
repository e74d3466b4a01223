"""The config's ``evaluation`` section as settings (:class:`EvalSettings`): the evaluation stage's
specification, light and torch-free, so that the workflow's parse (its rules' params, the config
checks) reads it without the scoring stack. Defaults: the schema's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol, TypeVar

from rerank_scaling.evaluation.metric_settings import MetricSettings
from rerank_scaling.settings import RESOURCE_KEYS, SectionSettings


class NamedSplit(Protocol):
    """A split's data (``checkpoints.SplitData``), as far as :meth:`EvalSettings.splits_at` reads it."""

    name: str


Split = TypeVar("Split", bound=NamedSplit)


@dataclass(frozen=True)
class EvalSettings(SectionSettings):
    """Config ``evaluation``; defaults: the schema's."""

    SECTION: ClassVar[str] = "evaluation"
    RESOURCE_KEYS: ClassVar[tuple[str, ...]] = RESOURCE_KEYS
    #: How the work is cut into jobs: changes no result.
    JOB_KEYS: ClassVar[tuple[str, ...]] = ("unit",)
    #: What only concerns scoring checkpoints (BM25's evaluation ignores them).
    SCORING_KEYS: ClassVar[tuple[str, ...]] = ("precision", "final_only_splits", "compile")
    #: What chooses a split's candidate pairs (depth, query subset): all the tokenization reads.
    CANDIDATE_KEYS: ClassVar[tuple[str, ...]] = ("rerank_depth", "max_queries", "seed")

    rerank_depth: int
    relevance_threshold: int
    ce_sizes: tuple[int, ...]
    relative_prob_k: tuple[int, ...]
    rr_m: tuple[int, ...]
    batch_size: int | str  # a number, or auto (compute.cpu_profiles.eval_batch_size); resolved per job
    seed: int
    threads: int
    mem_mb: int
    runtime: int
    unit: str  # "run" | "checkpoint" | "checkpoint_split": one evaluation job per ...
    max_queries: dict[str, int | None] | None  # split -> queries evaluated (None: all)
    precision: str  # auto | fp32 | bf16 (precision.resolve_precision)
    final_only_splits: tuple[str, ...]  # splits scored at the final checkpoint only
    compile: str  # auto | on | off (compiled_graphs.resolve_compile); after resolution on | off

    def splits_at(self, splits: list[Split], final: bool) -> list[Split]:
        """The splits a checkpoint is scored on: all at the final one, the others without
        ``final_only_splits`` (a test split reported once, not fitted along training)."""
        return splits if final else [s for s in splits if s.name not in self.final_only_splits]

    def metric_settings(self) -> MetricSettings:
        """The keys of this section that define the metrics (:class:`MetricSettings` names them)."""
        return MetricSettings.from_settings(self)
