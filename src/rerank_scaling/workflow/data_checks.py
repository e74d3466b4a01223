"""Cross-field checks of the data sections (``dataset``, ``retrieval``, ``examples``, the annotation
sources): what the JSON schema cannot express. Each returns problems naming the field and the fix."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rerank_scaling.registries import objectives
from rerank_scaling.settings import Problems, problem


def dataset_problems(config: dict[str, Any]) -> Problems:
    """The chosen source has its section; every split exists; a local collection is complete."""
    from rerank_scaling.data.collection import CollectionDir

    problems = []
    dataset = config["dataset"]
    source = dataset["source"]
    splits = [dataset["train_split"], *dataset["eval_splits"]]
    if source not in dataset:
        return [
            problem(
                f"dataset.{source}",
                f"missing; dataset.source is {source!r}, so the 'dataset.{source}' section must "
                "describe the dataset (see docs/configuration.md, 'Datasets')",
            )
        ]
    if source == "ir_datasets":
        known = set(dataset["ir_datasets"]["splits"])
        for split in splits:
            if split not in known:
                problems.append(problem("dataset.ir_datasets.splits", f"no entry for split {split!r}"))
    elif source == "builtin":
        for split in splits:
            if split not in ("train", "dev", "test"):
                problems.append(
                    problem(
                        "dataset.eval_splits", f"the builtin dataset has splits train/dev/test, not {split!r}"
                    )
                )
    elif source == "local":
        root = Path(os.path.expanduser(dataset["local"]["path"]))
        if not root.is_dir():
            problems.append(
                problem(
                    "dataset.local.path",
                    f"{root} is not a directory; point it to a collection in the local format",
                )
            )
        else:
            try:
                CollectionDir(root).check(splits)
            except FileNotFoundError as err:
                problems.append(problem("dataset.local.path", f"{err}"))
    return problems


def depth_problems(config: dict[str, Any]) -> Problems:
    """BM25 retrieves ``retrieval.depth`` candidates: nothing may ask for more."""
    depth = config["retrieval"]["depth"]
    rerank = config["evaluation"]["rerank_depth"]
    problems = _beyond_depth("evaluation.rerank_depth", rerank, depth, "the candidates BM25 retrieves")
    for i, size in enumerate(config["evaluation"]["ce_sizes"]):
        if size > rerank:
            problems.append(
                problem(
                    f"evaluation.ce_sizes[{i}]",
                    f"CE@{size} needs {size - 1} non-relevant candidates per relevant one, but only "
                    f"evaluation.rerank_depth = {rerank} candidates are reranked, so every query would be "
                    f"dropped; use a size of at most {rerank} or raise evaluation.rerank_depth",
                )
            )
    negative = config["examples"]["negative_depth"]
    return problems + _beyond_depth(
        "examples.negative_depth", negative, depth, "the BM25 ranking negatives are drawn from"
    )


def _beyond_depth(field: str, value: int, depth: int, what: str) -> Problems:
    """A problem when ``field`` (``value``) asks for more than ``retrieval.depth``, which is ``what``."""
    if value <= depth:
        return []
    return [
        problem(
            field,
            f"{value} is more than retrieval.depth {depth}, {what}; "
            f"raise retrieval.depth to at least {value} or lower {field}",
        )
    ]


def estimated_queries(config: dict[str, Any]) -> int | None:
    """Upper bound of the training queries (one positive each: an ICT query's own passage), where
    the config alone tells (builtin data)."""
    dataset = config["dataset"]
    if dataset["source"] != "builtin" or "builtin" not in dataset:  # no section: dataset_problems
        return None
    queries = dataset["builtin"]["train_queries"]
    if config["examples"]["max_queries"] is not None:
        queries = min(queries, config["examples"]["max_queries"])
    return queries


def estimated_rows(config: dict[str, Any]) -> dict[str, int] | None:
    """Upper bound of the training rows per objective (:func:`estimated_queries` x the objective's
    rows per positive), where the config alone tells."""
    queries = estimated_queries(config)
    if queries is None:
        return None
    return {
        name: queries * objectives.rows_per_positive(name, config["examples"])
        for name in objectives.OBJECTIVES
    }


def annotation_problems(config: dict[str, Any]) -> Problems:
    """``training.annotations`` names built-in or file sources whose files exist, are priced when
    prices are given, and judge passages of the corpus (:mod:`rerank_scaling.data.annotation_files`)."""
    from rerank_scaling.data.annotation_files import config_problems

    return config_problems(config)
