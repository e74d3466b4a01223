"""Cross-field checks of the workflow config: what the JSON schema cannot express, one module per
concern (:mod:`.data_checks`, :mod:`.training_checks`, :mod:`.resource_checks`,
:mod:`.result_checks`).

Each check returns a list of problems, each naming the config field and the fix; they run at
parse time (rules/common.smk, through :func:`rerank_scaling.workflow.load.validate_config`), on the config
with the schema's defaults, before any job. Checks that need the data (the number of training
examples) run where the data appear: :func:`rerank_scaling.registries.objectives.training_steps_problems` is
called again by the examples job with the real counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rerank_scaling.settings import Problems
from rerank_scaling.workflow.data_checks import annotation_problems, dataset_problems, depth_problems
from rerank_scaling.workflow.resource_checks import cluster_problems, memory_problems
from rerank_scaling.workflow.result_checks import final_only_problems, fitting_problems
from rerank_scaling.workflow.training_checks import (
    attention_problems,
    data_axis_problems,
    max_length_problems,
    model_problems,
    training_problems,
)

CHECKS: tuple[Callable[[dict[str, Any]], Problems], ...] = (
    dataset_problems,
    depth_problems,
    model_problems,
    max_length_problems,
    attention_problems,
    training_problems,
    data_axis_problems,
    annotation_problems,
    memory_problems,
    cluster_problems,
    final_only_problems,
    fitting_problems,
)


def cross_field_problems(config: dict[str, Any]) -> Problems:
    """Every cross-field problem of a schema-valid config with its defaults."""
    return [problem for check in CHECKS for problem in check(config)]
