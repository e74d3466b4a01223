"""Cross-field checks of ``models`` and ``training``: names, paths and ladders, attention support,
and room for ``training.checkpoints`` in every run (full data and each data fraction). Each returns
problems naming the field and the fix;
:func:`~rerank_scaling.registries.objectives.training_steps_problems` runs again in the examples
job, with the real row counts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rerank_scaling.registries import objectives
from rerank_scaling.registries.objectives import StepSettings, training_steps_problems
from rerank_scaling.settings import Problems, problem, settings_of
from rerank_scaling.workflow.data_checks import estimated_queries, estimated_rows


def training_problems(config: dict[str, Any]) -> Problems:
    """:func:`training_steps_problems` on the rows the config alone bounds (builtin data)."""
    rows = estimated_rows(config)
    return training_steps_problems(settings_of(StepSettings, config["training"]), rows or {}, exact=False)


def _fraction_steps(config: dict[str, Any], fraction: float) -> dict[str, int]:
    """Optimizer steps per objective of a run on ``fraction`` of the training queries: exact with
    ``training.max_steps`` (objectives.total_steps), an upper bound for builtin data, else unknown
    (the train job checks the real count, naming the fraction)."""
    from rerank_scaling.data.subsets import subset_size

    training = settings_of(StepSettings, config["training"])
    if training.max_steps is not None:
        steps = objectives.fixed_steps(training.max_steps, fraction)
        return dict.fromkeys(training.objectives, steps)
    rows, queries = estimated_rows(config), estimated_queries(config)
    if not rows or not queries:
        return {}
    kept = subset_size(queries, fraction)
    steps = {}
    for objective in training.objectives:
        _, batch = training.batch(objective)
        fraction_rows = rows[objective] // queries * kept
        steps[objective] = objectives.epoch_steps(fraction_rows, batch, training.epochs)
    return steps


def data_axis_problems(config: dict[str, Any]) -> Problems:
    """``training.data_fractions`` (the schema keeps each in (0, 1]) gives every run room for its
    checkpoints, and ``fitting.data_axis`` has the points it fits on."""
    training = config["training"]
    fractions = training["data_fractions"]
    wanted = training["checkpoints"]
    problems = []
    for i, fraction in enumerate(fractions):
        if not 0.0 < fraction <= 1.0:
            problems.append(
                problem(
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
                bound = "" if training["max_steps"] is not None else "at most "
                problems.append(
                    problem(
                        f"training.data_fractions[{i}]",
                        f"fraction {fraction} gives {objective} runs {bound}{steps} optimizer steps, fewer "
                        f"than the training.checkpoints = {wanted} each run keeps; raise the fraction, "
                        f"lower training.checkpoints to at most {steps}, or raise training.max_steps/epochs",
                    )
                )
                break
    axis = config["fitting"]["data_axis"]
    if axis == "checkpoints" and 1.0 not in fractions:
        problems.append(
            problem(
                "training.data_fractions",
                f"{fractions} has no 1.0, but fitting.data_axis 'checkpoints' fits the checkpoints of the "
                "full-data runs; add 1.0 or set fitting.data_axis: fractions",
            )
        )
    if axis == "fractions" and len(fractions) < 2:
        problems.append(
            problem(
                "fitting.data_axis",
                f"'fractions' fits the data law on one point per training.data_fractions entry, and "
                f"{fractions} has {len(fractions)}; list at least two fractions (e.g. [0.5, 1.0]) or "
                "set fitting.data_axis: checkpoints",
            )
        )
    return problems


def _looks_local(path: str) -> bool:
    return path.startswith(("/", "./", "../", "~")) or os.path.isdir(os.path.expanduser(path))


def model_problems(config: dict[str, Any]) -> Problems:
    """Unique names, a model to fit; each family's own checks
    (:meth:`rerank_scaling.families.family.ModelFamily.problems`: the keys it needs and only keys it
    reads, a ladder fits its base); then local and packaged model paths exist."""
    from rerank_scaling.families.paths import resolve_path
    from rerank_scaling.families.registry import family_of
    from rerank_scaling.hub.cache import is_hub_id

    problems = []
    models = config["models"]
    names = [m["name"] for m in models]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        problems.append(problem("models", f"duplicate model names {duplicates}; names must be unique"))
    if not any(m["role"] == "fit" for m in models):
        problems.append(problem("models", "no model has role 'fit'; the laws need sizes to fit on"))
    for i, model in enumerate(models):
        found = family_of(model).problems(model)  # keys it lacks or does not read, its own rules
        problems += [problem(f"models[{i}].{key}", message) for key, message in found]
        # scratch models have no path (the schema's if/then); a hub id is downloaded by the prefetch
        # rule, and a compute job names it if still missing
        path = model.get("path")
        if found or path is None or is_hub_id(path):
            continue
        field = f"models[{i}].path"
        try:
            resolved = resolve_path(path)
        except FileNotFoundError as err:
            problems.append(problem(field, f"{err}"))
            continue
        local = path.startswith("package:") or family_of(model).path_is_local or _looks_local(path)
        if local and not Path(os.path.expanduser(resolved)).is_dir():
            problems.append(
                problem(field, f"{resolved} is not a directory; give an existing model directory")
            )
    for name in config["training"]["extra_seeds"]["models"]:
        if name not in names:
            problems.append(problem("training.extra_seeds.models", f"{name!r} is not a model name"))
    return problems


#: model types whose position ids start after the padding index (RoBERTa's
#: ``create_position_ids_from_input_ids``): ``pad_token_id + 1`` of their positions hold no token
PADDING_OFFSET_TYPES = frozenset(
    {"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "mpnet", "longformer", "data2vec-text"}
)


def usable_positions(config: dict[str, Any]) -> int | None:
    """Tokens a sequence of the model whose ``config.json`` is ``config`` can hold: its
    ``max_position_embeddings``, less RoBERTa's padding offset; None where the config sets no limit
    (a scratch model is built with ``training.max_length`` positions)."""
    if "max_position_embeddings" not in config:
        return None
    positions = int(config["max_position_embeddings"])
    if config.get("model_type") in PADDING_OFFSET_TYPES:
        positions -= int(config.get("pad_token_id", 1)) + 1
    return positions


def max_length_problems(config: dict[str, Any]) -> Problems:
    """``training.max_length`` fits every model's positions (read from its ``config.json`` where it
    can be read before any job: local, packaged and prefetched models). A longer sequence indexes
    past the position embeddings: a bare tensor-size error at the first long batch of training."""
    from rerank_scaling.families.registry import family_of

    max_length = config["training"]["max_length"]
    short: dict[int, list[str]] = {}  # positions -> the models with them, where fewer than max_length
    for model in config["models"]:
        model_config = family_of(model).config_json(model)
        positions = None if model_config is None else usable_positions(model_config)
        if positions is not None and max_length > positions:
            short.setdefault(positions, []).append(model["name"])
    if not short:
        return []
    named = "; ".join(
        f"the {positions} positions of {', '.join(names)}" for positions, names in sorted(short.items())
    )
    return [
        problem(
            "training.max_length",
            f"{max_length} tokens, more than {named} (max_position_embeddings in config.json); a longer "
            f"sequence would crash training. Use training.max_length: {min(short)} or less, or models "
            "with more positions",
        )
    ]


def attention_problems(config: dict[str, Any]) -> Problems:
    """Every ``training.attention`` variant is supported by every model's architecture
    (:func:`rerank_scaling.training.attention_support.check_attention_support`)."""
    from rerank_scaling.training.attention_support import check_attention_support

    return check_attention_support(config)
