"""The stages as the rule files see them: every name the Snakefile needs of a stage or of the
ground floor, from the stage's light, torch-free specification (its settings class, the names of
its outputs, the parse-time parts of its inputs), so that the rule files import only the workflow
layer and parsing the Snakefile loads no stage's implementation (``tests/test_architecture.py``).
"""

from __future__ import annotations

from rerank_scaling.data.annotation_files import annotation_files
from rerank_scaling.data.source_digests import part_section, record_source_digests
from rerank_scaling.evaluation.eval_settings import EvalSettings
from rerank_scaling.grid import Grid, RunSpec
from rerank_scaling.hub.pins import PIN_FILE, pinned_models, read_pins
from rerank_scaling.laws.fit_settings import TABLES as LAW_TABLES
from rerank_scaling.planning.gpu_fit import PLANNED_GPU_ENV, planned_gpu_json
from rerank_scaling.registries.objectives import StepSettings
from rerank_scaling.report.figure_names import PER_METRIC as FIGURE_KINDS
from rerank_scaling.report.figure_names import slug
from rerank_scaling.settings import without
from rerank_scaling.stage_code import record_stage_digest
from rerank_scaling.training.checkpoint_store import check_published
from rerank_scaling.training.train_settings import GRID_KEYS, TrainSettings

__all__ = [
    "FIGURE_KINDS",
    "GRID_KEYS",
    "LAW_TABLES",
    "PIN_FILE",
    "PLANNED_GPU_ENV",
    "EvalSettings",
    "Grid",
    "RunSpec",
    "StepSettings",
    "TrainSettings",
    "annotation_files",
    "check_published",
    "part_section",
    "pinned_models",
    "planned_gpu_json",
    "read_pins",
    "record_source_digests",
    "record_stage_digest",
    "slug",
    "without",
]
