"""The config means what it says: checks of values the schema accepts but no stage could honour.

* duplicate keys in a YAML file (YAML loaders keep the last and drop the first silently):
  :func:`duplicate_key_problems`, naming the key and both lines;
* ``run_name`` a plain directory name (``..`` would write into the project's parent);
* the splits' roles: the train split is not evaluated (its metrics would be training fit, not
  generalisation), ``planning.split`` is an evaluated split;
* the maps keyed by split name name configured splits, the price map annotation sources;
* ``fitting.equal_compute`` compares two different models.

Integers (``training.checkpoints: 3.0``) are refused by the schema's validator itself
(:data:`rerank_scaling.workflow.load.STRICT_TYPES`): one rule, "an integer field takes a whole number
written without a decimal point", everywhere.
"""

from __future__ import annotations

import os
from typing import Any

import yaml

from rerank_scaling.settings import Problems, problem


class _DuplicateKeyLoader(yaml.SafeLoader):
    """A SafeLoader that records every mapping key given twice, with both lines."""

    duplicates: list[tuple[str, int, int]]

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in first:
                self.duplicates.append((str(key), first[key], line))
            else:
                first[key] = line
        return super().construct_mapping(node, deep=deep)


def duplicate_key_problems(path: str | os.PathLike[str]) -> Problems:
    """Each key given twice in one mapping of the YAML file ``path``: ``file:line``, the key and the
    line of its first value (which the loaders silently drop)."""
    with open(path, encoding="utf-8") as handle:
        loader = _DuplicateKeyLoader(handle)
        loader.duplicates = []
        try:
            loader.get_single_data()
        finally:
            loader.dispose()
    return [
        f"{path}:{second}: key {key!r} is given twice (first on line {first}); the first value would be "
        "silently dropped: keep one"
        for key, first, second in sorted(loader.duplicates, key=lambda found: found[2])
    ]


def run_name_problems(config: dict[str, Any]) -> Problems:
    """``run_name`` names one directory under results/: not ``.`` or ``..``."""
    name = config["run_name"]
    if set(name) == {"."}:
        return [
            problem(
                "run_name",
                f"{name!r} is not a directory name of its own; outputs would go to "
                f"results/{name}/. Use a plain name such as 'default'",
            )
        ]
    return []


def split_role_problems(config: dict[str, Any]) -> Problems:
    """The train split is not an evaluation split; ``planning.split`` is one."""
    dataset = config["dataset"]
    train, evaluated = dataset["train_split"], dataset["eval_splits"]
    problems = []
    if train in evaluated:
        problems.append(
            problem(
                "dataset.eval_splits",
                f"lists the train split {train!r}: scores on the queries a model was trained on measure "
                "memorisation, not the reranking quality the laws forecast. Evaluate on held-out splits only",
            )
        )
    split = config["planning"]["split"]
    if split is not None and split not in evaluated:
        problems.append(problem("planning.split", f"{split!r} is not evaluated; use one of {evaluated}"))
    return problems


def split_key_problems(config: dict[str, Any]) -> Problems:
    """The maps keyed by split name (``evaluation.max_queries``, ``dataset.ir_datasets.max_queries``)
    name configured splits: a misspelt key (``devv``) would be ignored, and its split run whole."""
    dataset = config["dataset"]
    evaluated = dataset["eval_splits"]
    maps = [("evaluation.max_queries", config["evaluation"]["max_queries"] or {}, evaluated)]
    if "ir_datasets" in dataset:
        splits = [dataset["train_split"], *evaluated]
        maps.append(("dataset.ir_datasets.max_queries", dataset["ir_datasets"]["max_queries"], splits))
    return [
        problem(f"{field}.{key}", f"{key!r} is not a split it applies to; use one of {splits}")
        for field, by_split, splits in maps
        for key in by_split
        if key not in splits
    ]


def price_key_problems(config: dict[str, Any]) -> Problems:
    """``planning.annotation_cost_per_pair`` prices annotation sources: a built-in one or a key of
    ``training.annotation_files`` (a misspelt source would be ignored, its runs priced by z_data)."""
    from rerank_scaling.grid import ANNOTATIONS

    prices = config["planning"]["annotation_cost_per_pair"] or {}
    sources = [*ANNOTATIONS, *config["training"]["annotation_files"]]
    return [
        problem(
            f"planning.annotation_cost_per_pair.{key}",
            f"{key!r} is not an annotation source; use one of {sources}",
        )
        for key in prices
        if key not in sources
    ]


def equal_compute_problems(config: dict[str, Any]) -> Problems:
    """``fitting.equal_compute`` names two different models."""
    pair = config["fitting"]["equal_compute"]
    if pair and len(set(pair)) != len(pair):
        return [
            problem(
                "fitting.equal_compute", f"{pair} compares a model with itself; name two different models"
            )
        ]
    return []


def meaning_problems(config: dict[str, Any]) -> Problems:
    """Every check of this module that reads the config (not the files: see duplicate_key_problems)."""
    return [
        *run_name_problems(config),
        *split_role_problems(config),
        *split_key_problems(config),
        *price_key_problems(config),
        *equal_compute_problems(config),
    ]
