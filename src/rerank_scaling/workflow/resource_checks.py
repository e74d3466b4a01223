"""Cross-field checks of what the jobs need: the memory preflight (every run fits
``gpu_memory_gb``, :mod:`rerank_scaling.planning.memory`) and the ``cluster`` section's floors and
caps. Each check returns problems naming the field and the fix."""

from __future__ import annotations

from typing import Any

from rerank_scaling.registries import objectives
from rerank_scaling.settings import Problems, problem, settings_from_dict, settings_of


def memory_plans(config: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """:func:`config_memory_plans` of a validated config (which has no refusal): the workflow passes
    each run's :class:`~rerank_scaling.planning.memory.MemoryPlan` to its training job."""
    from rerank_scaling.planning.memory import MemoryRefused

    plans = config_memory_plans(config)
    refused = [plan for plan in plans.values() if isinstance(plan, MemoryRefused)]
    if refused:
        raise refused[0]
    return plans  # type: ignore[return-value]


def config_memory_plans(config: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """(model name, objective) -> the preflight's plan (or refusal) for every run of a validated
    config (its defaults filled).

    Without ``gpu_memory_gb`` (or on CPU) nothing is checked: checkpointing as configured (``auto``:
    off), one micro-batch. A model whose shape is unknown (a hub id not yet prefetched) gets
    ``micro_batches`` 0: its training job plans from the model it loads, by the same rule."""
    from rerank_scaling.data.training_examples import ExampleSettings
    from rerank_scaling.planning.memory import (
        MemoryPlan,
        MemoryRefused,
        checkpointing_mode,
        model_shape,
        plan_memory,
    )
    from rerank_scaling.training.train_settings import TrainSettings

    training = settings_of(TrainSettings, config["training"])
    examples = settings_from_dict(ExampleSettings, config["examples"])
    gpu = config["gpu_memory_gb"] if config["device"] != "cpu" else None
    plans: dict[tuple[str, str], Any] = {}
    for spec in config["models"]:
        shape = model_shape(spec) if gpu else None
        for objective in config["training"]["objectives"]:
            name = (spec["name"], objective)
            if not gpu:
                plans[name] = MemoryPlan(checkpointing_mode(training.gradient_checkpointing) == "true")
            elif shape is None:
                plans[name] = MemoryPlan(False, 0, None, f"{spec['name']}: shape unknown until prefetched")
            else:
                rows, per_row = objectives.rows_per_step(objective, training, examples)
                try:
                    plans[name] = plan_memory(
                        shape,
                        rows,
                        per_row,
                        training.max_length,
                        "half",
                        float(gpu),
                        training.gradient_checkpointing,
                        f"{spec['name']} {objective}",
                    )
                except MemoryRefused as refused:
                    plans[name] = refused
    return plans


def memory_problems(config: dict[str, Any]) -> Problems:
    """Every run fits ``gpu_memory_gb``, as configured or by micro-batching / gradient checkpointing
    (:func:`config_memory_plans`); else the numbers and the fix."""
    from rerank_scaling.planning.memory import MemoryRefused

    return [
        problem("gpu_memory_gb", f"{plan}")
        for plan in config_memory_plans(config).values()
        if isinstance(plan, MemoryRefused)
    ]


def cluster_problems(config: dict[str, Any]) -> Problems:
    """The cluster section's floors are not above its caps (:mod:`.job_resources` clamps to them)."""
    from rerank_scaling.workflow.job_resources import ClusterSettings

    cluster = settings_from_dict(ClusterSettings, config["cluster"])
    return [
        problem(
            f"cluster.{low}",
            f"{getattr(cluster, low)} is above cluster.{high} = {getattr(cluster, high)}; "
            f"lower cluster.{low} or raise cluster.{high}",
        )
        for low, high in (("min_runtime", "max_runtime"), ("min_mem_mb", "max_mem_mb"))
        if getattr(cluster, low) > getattr(cluster, high)
    ]
