"""The config's ``training`` section as settings: torch-free, so the workflow's
parse (job resources, config checks) reads them without importing the trainer's torch stack.

The section holds three kinds of key: which runs exist (:data:`GRID_KEYS`, read by
:class:`rerank_scaling.grid.Grid`; a run's id carries its own), how one run trains
(:class:`TrainSettings`), and what sizes its job (``RESOURCE_KEYS``). The part that sets how many
optimizer steps a run has is :class:`rerank_scaling.registries.objectives.StepSettings`, below
the data floor: the data jobs check it too. Defaults: the schema's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rerank_scaling.settings import RESOURCE_KEYS, SectionSettings

#: Keys of ``training`` that say which runs exist, not how one run trains (a run's id carries its
#: objective, attention variant, seed, data fraction and annotation source): adding a seed must not
#: re-train, or discard the saved state of, the runs that were there.
GRID_KEYS = (
    "objectives",
    "attention",
    "seeds",
    "extra_seeds",
    "data_fractions",
    "annotations",
    "annotation_files",  # the files of the generated-query sources (data.annotation_files)
)


@dataclass(frozen=True)
class TrainSettings(SectionSettings):
    """How one run trains: config ``training`` without its :data:`GRID_KEYS` (its run id says which
    run it is)."""

    SECTION: ClassVar[str] = "training"
    RESOURCE_KEYS: ClassVar[tuple[str, ...]] = RESOURCE_KEYS

    lr: float
    warmup_ratio: float
    weight_decay: float
    max_length: int
    epochs: float
    max_steps: int | None
    freeze_embeddings: bool
    gradient_checkpointing: str | bool  # auto | true | false (planning.memory.plan_memory)
    length_bucketing: bool  # length-bucketed steps (.batching); changes what a step sees
    pointwise_batch_size: int
    group_queries_per_batch: int
    listnet_label_scale: float
    checkpoints: int
    checkpoint_spacing: str
    precision: str  # auto | fp32 | bf16 (precision.resolve_precision)
    compile: str  # auto | on | off (compiled_graphs.resolve_compile)
    threads: int
    mem_mb: int
    runtime: int
