"""The experiment grid: which training runs exist and how their ids are spelled.

A run is one (model size, objective, attention variant, seed, data fraction). Its id joins them
with ``__`` (model names may not contain ``__``): ``L2__listwise__full__s13``; a run on a fraction
f < 1 of the training queries (``training.data_fractions``) ends in ``__d<f>``
(``L2__listwise__full__s13__d0.25``), so the full-data runs keep the ids they had before the axis
existed and adding a fraction adds runs without renaming (or re-training) any. A run trained on
annotations other than the collection's own (``training.annotations``) ends in ``__<source>``
(``L2__listwise__full__s13__d0.25__ict``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: The built-in annotation sources a run can train on (Fang et al., Scaling Laws for Dense
#: Retrieval §4.3), built by
#: :mod:`rerank_scaling.data.annotations`: ``human`` the collection's own training qrels, ``ict``
#: Inverse-Cloze pseudo-queries built from their relevant passages. A generated-query source is
#: named by its key in ``training.annotation_files`` (:mod:`rerank_scaling.data.annotation_files`).
ANNOTATIONS = ("human", "ict")

#: A data-fraction part of a run id (``d0.25``); any other last part names the annotation source.
FRACTION_PART = re.compile(r"d[0-9.e-]+")


@dataclass(frozen=True)
class RunSpec:
    model: str
    objective: str
    attention: str
    seed: int
    data_fraction: float = 1.0  # of the training queries, a nested subset (data.subsets)
    annotations: str = "human"  # the source of its training annotations (ANNOTATIONS)

    @property
    def run_id(self) -> str:
        run_id = f"{self.model}__{self.objective}__{self.attention}__s{self.seed}"
        if self.data_fraction != 1.0:
            run_id += f"__d{self.data_fraction!r}"
        return run_id if self.annotations == "human" else f"{run_id}__{self.annotations}"

    @classmethod
    def parse(cls, run_id: str) -> RunSpec:
        model, objective, attention, seed, *rest = run_id.split("__")
        annotations = rest.pop() if rest and not FRACTION_PART.fullmatch(rest[-1]) else "human"
        fraction = float(rest[0].removeprefix("d")) if rest else 1.0
        return cls(model, objective, attention, int(seed.removeprefix("s")), fraction, annotations)


@dataclass(frozen=True)
class Grid:
    models: tuple[dict[str, Any], ...]
    objectives: tuple[str, ...]
    attention: tuple[str, ...]
    seeds: tuple[int, ...]
    extra_seed_models: tuple[str, ...]
    extra_seeds: tuple[int, ...]
    checkpoints: int
    data_fractions: tuple[float, ...]
    annotations: tuple[str, ...]

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Grid:
        """The grid of a validated config (defaults filled:
        :func:`rerank_scaling.workflow.load.validate_config`)."""
        training = config["training"]
        return cls(
            models=tuple(config["models"]),
            objectives=tuple(training["objectives"]),
            attention=tuple(training["attention"]),
            seeds=tuple(training["seeds"]),
            extra_seed_models=tuple(training["extra_seeds"]["models"]),
            extra_seeds=tuple(training["extra_seeds"]["seeds"]),
            checkpoints=int(training["checkpoints"]),
            data_fractions=tuple(float(f) for f in training["data_fractions"]),
            annotations=tuple(training["annotations"]),
        )

    def runs(self) -> list[RunSpec]:
        """Every training run: models x objectives x attention x seeds x data fractions x annotation
        sources, plus the extra-seed runs."""
        specs = []
        for model in self.models:
            name = model["name"]
            seeds = self.seeds + (self.extra_seeds if name in self.extra_seed_models else ())
            for objective in self.objectives:
                for attention in self.attention:
                    specs.extend(
                        RunSpec(name, objective, attention, seed, fraction, source)
                        for seed in dict.fromkeys(seeds)
                        for fraction in self.data_fractions
                        for source in self.annotations
                    )
        return specs

    def run_ids(self) -> list[str]:
        return [spec.run_id for spec in self.runs()]

    def model(self, name: str) -> dict[str, Any]:
        for model in self.models:
            if model["name"] == name:
                return model
        raise KeyError(f"no model named {name!r} in the config's models")

    def checkpoint_indices(self) -> list[int]:
        return list(range(1, self.checkpoints + 1))
