"""Cross-field checks of what is evaluated and fitted (``evaluation``, ``fitting``,
``planning.metric``): fitted metrics are ones the evaluation writes, fitted splits are evaluated
along training. Each returns problems naming the field and the fix."""

from __future__ import annotations

from typing import Any

from rerank_scaling.registries import measures
from rerank_scaling.settings import Problems, problem


def evaluation_metrics(evaluation: dict[str, Any]) -> list[str]:
    """The fittable metric names the evaluation stage writes with these ``evaluation`` settings
    (not the counts of queries CE drops, ``CE@k_dropped``).

    The registry's :func:`~rerank_scaling.registries.measures.metric_names`, the list
    :func:`rerank_scaling.evaluation.metrics.evaluate` writes one row per, so it cannot drift from
    what the evaluation produces; read here without importing the metrics' computation (ir_measures,
    pandas), which the Snakefile's parse, run by every Snakemake start, does not need.
    """
    from rerank_scaling.evaluation.eval_settings import EvalSettings
    from rerank_scaling.settings import settings_of

    settings = settings_of(EvalSettings, evaluation)
    names = measures.metric_names(settings.metric_settings())
    return [name for name in names if not name.endswith(measures.DROPPED)]


def fitting_problems(config: dict[str, Any]) -> Problems:
    """Fitted metrics are evaluated ones; fitted splits are evaluated; compared models exist."""
    problems = []
    fitting = config["fitting"]
    produced = evaluation_metrics(config["evaluation"])
    from_settings = ", ".join(
        f"{m.NAME}@{m.param.name} from evaluation.{m.param.settings_key}"
        for m in measures.MEASURES.values()
        if m.param and m.param.settings_key
    )
    for i, metric in enumerate(fitting["metrics"]):
        if metric not in produced:
            problems.append(
                problem(
                    f"fitting.metrics[{i}]",
                    f"{metric!r} is not a metric the evaluation produces; with these evaluation settings "
                    f"it writes {produced} ({from_settings})",
                )
            )
    eval_splits = config["dataset"]["eval_splits"]
    final_only = config["evaluation"]["final_only_splits"]
    for split in fitting["splits"] or []:
        if split not in eval_splits:
            problems.append(
                problem("fitting.splits", f"{split!r} is not in dataset.eval_splits {eval_splits}")
            )
    fitted = fitting["splits"] or eval_splits
    along = [split for split in fitted if split in final_only]
    if along:
        problems.append(
            problem(
                "fitting.splits",
                f"{along} are evaluated at the final checkpoint only (evaluation.final_only_splits), "
                "too few points to fit along training; list the other splits in fitting.splits, or "
                "take these out of evaluation.final_only_splits",
            )
        )
    names = [m["name"] for m in config["models"]]
    for name in fitting["equal_compute"] or []:
        if name not in names:
            problems.append(
                problem("fitting.equal_compute", f"{name!r} is not a model name; use one of {names}")
            )
    metric = config["planning"]["metric"]
    if metric is not None and metric not in fitting["metrics"]:
        problems.append(problem("planning.metric", f"{metric!r} is not one of fitting.metrics; add it there"))
    return problems


def final_only_problems(config: dict[str, Any]) -> Problems:
    """``evaluation.final_only_splits`` names evaluation splits and leaves one to fit along training."""
    final_only = config["evaluation"]["final_only_splits"]
    eval_splits = config["dataset"]["eval_splits"]
    unknown = [split for split in final_only if split not in eval_splits]
    if unknown:
        return [
            problem(
                "evaluation.final_only_splits",
                f"{unknown} are not in dataset.eval_splits {eval_splits}; name evaluation splits",
            )
        ]
    if final_only and set(eval_splits) <= set(final_only):
        return [
            problem(
                "evaluation.final_only_splits",
                f"every evaluation split {eval_splits} is final-only, so no checkpoint before the last "
                "is evaluated and no law can be fitted; leave one split (e.g. dev) out of it",
            )
        ]
    return []
