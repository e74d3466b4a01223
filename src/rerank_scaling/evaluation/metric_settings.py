"""The evaluation's metric settings: the config ``evaluation`` keys that define which metrics are
computed and how (CE@n sizes, RelP@k, R/R*(m), the relevance threshold, the sampling seed).

Apart from :mod:`.metrics` (which computes them with ir_measures, numpy and pandas) because the
Snakefile reads these settings while it parses (through ``EvalSettings``): a module that only
holds settings keeps those imports out of the parse (a dry run of a fresh folder 0.75 s sooner on
an AMD EPYC Zen 1; where outputs have recorded params, Snakemake's own check imports pandas).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from rerank_scaling.registries import measures as metric_registry
from rerank_scaling.settings import SectionSettings, settings_from_dict


@dataclass(frozen=True)
class MetricSettings(SectionSettings):
    """Config ``evaluation`` keys that define the metrics; defaults: the schema's
    (``MetricSettings.of(ce_sizes=(16,))``), or picked from the evaluation's settings
    (:meth:`from_settings`)."""

    SECTION: ClassVar[str] = "evaluation"

    relevance_threshold: int
    ce_sizes: tuple[int, ...]  # n of CE@n: one positive + n - 1 negatives
    relative_prob_k: tuple[int, ...]  # k of RelP@k
    rr_m: tuple[int, ...]  # m of R/R*(m)
    seed: int

    def __post_init__(self) -> None:
        if self.relevance_threshold < 1:
            raise ValueError(f"evaluation.relevance_threshold must be >= 1, got {self.relevance_threshold}")
        problems = metric_registry.parameter_problems(self)
        if problems:
            raise ValueError("; ".join(problems))

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None) -> MetricSettings:
        """Build from a config section; an unknown key raises a ValueError naming it."""
        return settings_from_dict(cls, values, "evaluation")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The ``evaluation`` keys that define the metrics (and nothing else a job does)."""
        return tuple(field.name for field in dataclasses.fields(cls))

    @classmethod
    def from_settings(cls, settings: Any) -> MetricSettings:
        """The metric keys of a settings object that holds them all (``EvalSettings``), by the
        names this dataclass declares: one list of them, here."""
        return cls(**{name: getattr(settings, name) for name in cls.names()})
