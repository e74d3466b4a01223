"""Cross-field checks of the workflow config: what the JSON schema cannot express.

Each check returns a list of problems, each naming the config field and the fix; they run at
parse time (rules/common.smk, through :func:`rerank_scaling.config.validate_config`), before any
job. Checks that need the data (the number of training examples) run where the data appear:
:func:`training_steps_problems` is called again by the examples job with the real counts.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

Problems = list[str]


def _problem(field: str, text: str) -> str:
    return f"config field '{field}': {text}"


def dataset_problems(config: dict[str, Any]) -> Problems:
    """The chosen source has its section; every split exists; a local collection is complete."""
    from rerank_scaling.data.collection import CollectionDir

    problems = []
    dataset = config["dataset"]
    source = dataset["source"]
    splits = [dataset["train_split"], *dataset["eval_splits"]]
    if source not in dataset:
        return [
            _problem(
                f"dataset.{source}",
                f"missing; dataset.source is {source!r}, so the 'dataset.{source}' section must "
                "describe the dataset (see README, 'Datasets')",
            )
        ]
    if source == "ir_datasets":
        known = set(dataset["ir_datasets"]["splits"])
        for split in splits:
            if split not in known:
                problems.append(_problem("dataset.ir_datasets.splits", f"no entry for split {split!r}"))
    elif source == "builtin":
        for split in splits:
            if split not in ("train", "dev", "test"):
                problems.append(
                    _problem(
                        "dataset.eval_splits", f"the builtin dataset has splits train/dev/test, not {split!r}"
                    )
                )
    elif source == "local":
        root = Path(os.path.expanduser(dataset["local"]["path"]))
        if not root.is_dir():
            problems.append(
                _problem(
                    "dataset.local.path",
                    f"{root} is not a directory; point it to a collection in the local format",
                )
            )
        else:
            try:
                CollectionDir(root).check(splits)
            except FileNotFoundError as err:
                problems.append(_problem("dataset.local.path", f"{err}"))
    return problems


def depth_problems(config: dict[str, Any]) -> Problems:
    """BM25 retrieves ``retrieval.depth`` candidates: nothing may ask for more."""
    depth = config["retrieval"]["depth"]
    problems = []
    rerank = config["evaluation"]["rerank_depth"]
    if rerank > depth:
        problems.append(
            _problem(
                "evaluation.rerank_depth",
                f"{rerank} is more than retrieval.depth {depth}, the candidates BM25 retrieves; "
                f"raise retrieval.depth to at least {rerank} or lower evaluation.rerank_depth",
            )
        )
    for i, size in enumerate(config["evaluation"].get("ce_sizes", [])):
        if size > rerank:
            problems.append(
                _problem(
                    f"evaluation.ce_sizes[{i}]",
                    f"CE@{size} needs {size - 1} non-relevant candidates per relevant one, but only "
                    f"evaluation.rerank_depth = {rerank} candidates are reranked, so every query would be "
                    f"dropped; use a size of at most {rerank} or raise evaluation.rerank_depth",
                )
            )
    negative = config["examples"].get("negative_depth")
    if negative is not None and negative > depth:
        problems.append(
            _problem(
                "examples.negative_depth",
                f"{negative} is more than retrieval.depth {depth}, the BM25 ranking negatives are drawn "
                f"from; raise retrieval.depth to at least {negative} or lower examples.negative_depth",
            )
        )
    return problems


def training_steps_problems(training: dict[str, Any], rows: dict[str, int], exact: bool) -> Problems:
    """Every objective has at least ``training.checkpoints`` optimizer steps.

    ``rows``: objective -> training rows (pointwise pairs, or groups); ``exact`` False when they are
    an upper bound estimated from the config, so only a sure shortfall is reported.
    """
    wanted = training["checkpoints"]
    if training.get("max_steps") is not None:
        if training["max_steps"] < wanted:
            return [
                _problem(
                    "training.max_steps",
                    f"{training['max_steps']} steps cannot hold training.checkpoints = {wanted} checkpoints; "
                    f"raise training.max_steps to at least {wanted} or lower training.checkpoints",
                )
            ]
        return []
    problems = []
    for objective in training["objectives"]:
        if objective not in rows:
            continue
        key = "pointwise_batch_size" if objective == "pointwise" else "group_queries_per_batch"
        batch = training.get(key, 128 if objective == "pointwise" else 16)
        steps = math.ceil(math.ceil(rows[objective] / batch) * training.get("epochs", 1.0))
        if steps < wanted:
            bound = "at most " if not exact else ""
            problems.append(
                _problem(
                    "training.checkpoints",
                    f"{objective} training has {bound}{steps} optimizer steps ({bound}{rows[objective]} "
                    f"rows / training.{key} {batch} x training.epochs), fewer than the {wanted} "
                    f"checkpoints asked for; lower training.checkpoints or training.{key}, raise "
                    "training.epochs, or set training.max_steps",
                )
            )
    return problems


def estimated_rows(config: dict[str, Any]) -> dict[str, int] | None:
    """Upper bound of the training rows per objective, where the config alone tells (builtin data)."""
    dataset = config["dataset"]
    if dataset["source"] != "builtin":
        return None
    from rerank_scaling.data.ict import IctSettings
    from rerank_scaling.data.training_examples import ExampleSettings

    queries = dataset.get("builtin", {}).get("train_queries", IctSettings.train_queries)
    examples = config["examples"]
    if examples.get("max_queries") is not None:
        queries = min(queries, examples["max_queries"])
    negatives = examples.get("pointwise_negatives", ExampleSettings.pointwise_negatives)
    # one positive per ICT query: its own passage
    return {"pointwise": queries * (1 + negatives), "pairwise": queries, "listwise": queries}


def _base_layers(path: str) -> int | None:
    from rerank_scaling.training.models import resolve_path

    config = Path(resolve_path(path)) / "config.json"
    if not config.exists():
        return None
    values = json.loads(config.read_text())
    for key in ("num_hidden_layers", "n_layer", "num_layers"):
        if key in values:
            return int(values[key])
    return None


def _looks_local(path: str) -> bool:
    return path.startswith(("/", "./", "../", "~")) or os.path.isdir(os.path.expanduser(path))


def model_problems(config: dict[str, Any]) -> Problems:
    """Unique names, a model to fit; local and packaged model paths exist; ladders fit their base."""
    from rerank_scaling.hub import is_hub_id
    from rerank_scaling.training.models import resolve_path

    problems = []
    models = config["models"]
    names = [m["name"] for m in models]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        problems.append(_problem("models", f"duplicate model names {duplicates}; names must be unique"))
    if not any(m["role"] == "fit" for m in models):
        problems.append(_problem("models", "no model has role 'fit'; the laws need sizes to fit on"))
    for i, model in enumerate(models):
        path = model.get("path")
        if path is None:
            continue
        field = f"models[{i}].path"
        if is_hub_id(path):  # downloaded by the prefetch rule; a compute job names it if still missing
            continue
        try:
            resolved = resolve_path(path)
        except FileNotFoundError as err:
            problems.append(_problem(field, f"{err}"))
            continue
        local = path.startswith("package:") or model["family"] == "ladder" or _looks_local(path)
        if local and not Path(os.path.expanduser(resolved)).is_dir():
            problems.append(
                _problem(field, f"{resolved} is not a directory; give an existing model directory")
            )
            continue
        if model["family"] == "ladder":
            base = _base_layers(path)
            if base is not None and model["layers"] > base:
                problems.append(
                    _problem(
                        f"models[{i}].layers",
                        f"{model['layers']} layers, but the base checkpoint {path} has {base}; a ladder "
                        f"keeps the first layers of its base, so use at most {base}",
                    )
                )
    extra = config["training"].get("extra_seeds", {})
    for name in extra.get("models", []):
        if name not in names:
            problems.append(_problem("training.extra_seeds.models", f"{name!r} is not a model name"))
    return problems


def attention_problems(config: dict[str, Any]) -> Problems:
    """Every ``training.attention`` variant is supported by every model's architecture
    (:func:`rerank_scaling.training.attention_support.check_attention_support`)."""
    from rerank_scaling.training.attention_support import check_attention_support

    return check_attention_support(config)


def evaluation_metrics(evaluation: dict[str, Any]) -> list[str]:
    """The fittable metric names the evaluation stage writes with these ``evaluation`` settings
    (not the counts of queries CE drops, ``CE@k_dropped``).

    Taken from :func:`rerank_scaling.evaluation.metrics.evaluate` itself (on an empty run), so the list
    cannot drift from what the evaluation produces.
    """
    from rerank_scaling.evaluation.checkpoints import EvalSettings
    from rerank_scaling.evaluation.metrics import DROPPED, evaluate
    from rerank_scaling.settings import settings_from_dict

    known = {f for f in EvalSettings.__dataclass_fields__}
    settings = settings_from_dict(
        EvalSettings, {k: v for k, v in evaluation.items() if k in known}, "evaluation"
    )
    names = evaluate({}, {}, {}, settings.metric_settings())["metric"].tolist()
    return [name for name in names if not name.endswith(DROPPED)]


def fitting_problems(config: dict[str, Any]) -> Problems:
    """Fitted metrics are evaluated ones; fitted splits are evaluated; compared models exist."""
    problems = []
    fitting = config["fitting"]
    produced = evaluation_metrics(config["evaluation"])
    for i, metric in enumerate(fitting.get("metrics", [])):
        if metric not in produced:
            problems.append(
                _problem(
                    f"fitting.metrics[{i}]",
                    f"{metric!r} is not a metric the evaluation produces; with these evaluation settings "
                    f"it writes {produced} (CE@n from evaluation.ce_sizes, RBP@k from evaluation.rbp_k, "
                    "RRstar@m from evaluation.rr_m)",
                )
            )
    eval_splits = config["dataset"]["eval_splits"]
    final_only = config["evaluation"].get("final_only_splits", [])
    for split in fitting.get("splits") or []:
        if split not in eval_splits:
            problems.append(
                _problem("fitting.splits", f"{split!r} is not in dataset.eval_splits {eval_splits}")
            )
    fitted = fitting.get("splits") or eval_splits
    along = [split for split in fitted if split in final_only]
    if along:
        problems.append(
            _problem(
                "fitting.splits",
                f"{along} are evaluated at the final checkpoint only (evaluation.final_only_splits), "
                "too few points to fit along training; list the other splits in fitting.splits, or "
                "take these out of evaluation.final_only_splits",
            )
        )
    names = [m["name"] for m in config["models"]]
    for name in fitting.get("equal_compute") or []:
        if name not in names:
            problems.append(
                _problem("fitting.equal_compute", f"{name!r} is not a model name; use one of {names}")
            )
    metric = (config.get("planning") or {}).get("metric")
    if metric is not None and metric not in fitting.get("metrics", ["nDCG@10"]):
        problems.append(
            _problem("planning.metric", f"{metric!r} is not one of fitting.metrics; add it there")
        )
    return problems


def final_only_problems(config: dict[str, Any]) -> Problems:
    """``evaluation.final_only_splits`` names evaluation splits and leaves one to fit along training."""
    final_only = config["evaluation"].get("final_only_splits", [])
    eval_splits = config["dataset"]["eval_splits"]
    unknown = [split for split in final_only if split not in eval_splits]
    if unknown:
        return [
            _problem(
                "evaluation.final_only_splits",
                f"{unknown} are not in dataset.eval_splits {eval_splits}; name evaluation splits",
            )
        ]
    if final_only and set(eval_splits) <= set(final_only):
        return [
            _problem(
                "evaluation.final_only_splits",
                f"every evaluation split {eval_splits} is final-only, so no checkpoint before the last "
                "is evaluated and no law can be fitted; leave one split (e.g. dev) out of it",
            )
        ]
    return []


def training_problems(config: dict[str, Any]) -> Problems:
    rows = estimated_rows(config)
    return training_steps_problems(config["training"], rows or {}, exact=False)


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
    """(model name, objective) -> the preflight's plan (or refusal) for every run of a config.

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
        rows_per_step,
    )
    from rerank_scaling.settings import settings_from_dict
    from rerank_scaling.training.train_settings import TrainSettings

    training = settings_from_dict(TrainSettings, config["training"], "training")
    examples = settings_from_dict(ExampleSettings, config["examples"], "examples")
    gpu = config.get("gpu_memory_gb") if config["device"] != "cpu" else None
    plans: dict[tuple[str, str], Any] = {}
    for spec in config["models"]:
        shape = model_shape(spec) if gpu else None
        for objective in training.objectives:
            name = (spec["name"], objective)
            if not gpu:
                plans[name] = MemoryPlan(checkpointing_mode(training.gradient_checkpointing) == "true")
            elif shape is None:
                plans[name] = MemoryPlan(False, 0, None, f"{spec['name']}: shape unknown until prefetched")
            else:
                rows, per_row = rows_per_step(
                    objective,
                    training.pointwise_batch_size,
                    training.group_queries_per_batch,
                    1 + examples.group_negatives,
                )
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
        _problem("gpu_memory_gb", f"{plan}")
        for plan in config_memory_plans(config).values()
        if isinstance(plan, MemoryRefused)
    ]


def _fraction_steps(config: dict[str, Any], fraction: float) -> dict[str, int]:
    """Optimizer steps per objective of a run on ``fraction`` of the training queries: exact with
    ``training.max_steps`` (train_settings.total_steps), an upper bound for builtin data, else unknown
    (the train job checks the real count, naming the fraction)."""
    from rerank_scaling.data.subsets import subset_size

    training = config["training"]
    if training.get("max_steps") is not None:
        steps = max(1, math.ceil(training["max_steps"] * fraction - 1e-9))
        return dict.fromkeys(training["objectives"], steps)
    rows = estimated_rows(config)
    if not rows:
        return {}
    queries = rows["listwise"]  # builtin: one group per query
    kept = subset_size(queries, fraction)
    steps = {}
    for objective in training["objectives"]:
        key = "pointwise_batch_size" if objective == "pointwise" else "group_queries_per_batch"
        batch = training.get(key, 128 if objective == "pointwise" else 16)
        fraction_rows = rows[objective] // queries * kept
        steps[objective] = math.ceil(math.ceil(fraction_rows / batch) * training.get("epochs", 1.0))
    return steps


def data_axis_problems(config: dict[str, Any]) -> Problems:
    """``training.data_fractions`` (the schema keeps each in (0, 1]) gives every run room for its
    checkpoints, and ``fitting.data_axis`` has the points it fits on."""
    training = config["training"]
    fractions = training.get("data_fractions", [1.0])
    wanted = training["checkpoints"]
    problems = []
    for i, fraction in enumerate(fractions):
        if not 0.0 < fraction <= 1.0:
            problems.append(
                _problem(
                    f"training.data_fractions[{i}]",
                    f"{fraction} is not a fraction of the training queries in (0, 1]; use e.g. 0.25 "
                    "(a quarter of the queries), and 1.0 for all of them",
                )
            )
            continue
        if fraction == 1.0:  # the full-data runs: training_problems
            continue
        for objective, steps in _fraction_steps(config, fraction).items():
            if steps < wanted:
                bound = "" if training.get("max_steps") is not None else "at most "
                problems.append(
                    _problem(
                        f"training.data_fractions[{i}]",
                        f"fraction {fraction} gives {objective} runs {bound}{steps} optimizer steps, fewer "
                        f"than the training.checkpoints = {wanted} each run keeps; raise the fraction, "
                        f"lower training.checkpoints to at most {steps}, or raise training.max_steps/epochs",
                    )
                )
                break
    axis = config.get("fitting", {}).get("data_axis", "checkpoints")
    if axis == "checkpoints" and 1.0 not in fractions:
        problems.append(
            _problem(
                "training.data_fractions",
                f"{fractions} has no 1.0, but fitting.data_axis 'checkpoints' fits the checkpoints of the "
                "full-data runs; add 1.0 or set fitting.data_axis: fractions",
            )
        )
    if axis == "fractions" and len(fractions) < 2:
        problems.append(
            _problem(
                "fitting.data_axis",
                f"'fractions' fits the data law on one point per training.data_fractions entry, and "
                f"{fractions} has {len(fractions)}; list at least two fractions (e.g. [0.5, 1.0]) or "
                "set fitting.data_axis: checkpoints",
            )
        )
    return problems


def annotation_problems(config: dict[str, Any]) -> Problems:
    """``training.annotations`` names built-in or file sources whose files exist, are priced when
    prices are given, and judge passages of the corpus (:mod:`rerank_scaling.data.annotation_files`)."""
    from rerank_scaling.data.annotation_files import config_problems

    return config_problems(config)


def cluster_problems(config: dict[str, Any]) -> Problems:
    """The cluster section's floors are not above its caps (rerank_scaling.job_resources clamps to them)."""
    from rerank_scaling.job_resources import ClusterSettings
    from rerank_scaling.settings import settings_from_dict

    cluster = settings_from_dict(ClusterSettings, config.get("cluster"), "cluster")
    return [
        _problem(
            f"cluster.{low}",
            f"{getattr(cluster, low)} is above cluster.{high} = {getattr(cluster, high)}; "
            f"lower cluster.{low} or raise cluster.{high}",
        )
        for low, high in (("min_runtime", "max_runtime"), ("min_mem_mb", "max_mem_mb"))
        if getattr(cluster, low) > getattr(cluster, high)
    ]


CHECKS: tuple[Callable[[dict[str, Any]], Problems], ...] = (
    dataset_problems,
    depth_problems,
    model_problems,
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
    """Every cross-field problem of a schema-valid config."""
    return [problem for check in CHECKS for problem in check(config)]
