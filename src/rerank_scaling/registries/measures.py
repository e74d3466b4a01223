"""The metric registry: one owner of every metric's name, parameter, direction, range and code.

As in ir_measures (``measures.register``), each metric is a small object: its ``NAME``, its typed
parameter (the value after ``@``: nDCG's cutoff, CE's candidate count n, RelP's k), where the
evaluation takes that parameter's values from (a key of ``evaluation``, or fixed values), whether
larger is better, the range a trained reranker's expected value lies in, and the function that
computes it per query. Every consumer asks here: the evaluation (``evaluation.metrics``:
which names, in which order, computed by which function), the laws' bounds and directions
(:func:`metric_spec`), the forecast CLI's known names (``forecast.table.known_metric``) and the
config checks (which ``evaluation`` keys define metrics).

A new metric is one module holding its per-query function and one :func:`register` line (plus
its ``evaluation`` key in the schema when its values come from the config);
``tests/test_registries.py`` shows it. Light (standard library only): the workflow's parse and
the fit stage's environment (which has no ir_measures) import it; the computing modules are
imported only when a metric is computed.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Suffix of a count companion ("CE@n_dropped": judged queries without any CE@n instance); its table
#: value is the count (a sum), not a mean.
DROPPED = "_dropped"

_NAME = re.compile(r"(?P<name>[A-Za-z]+)(@(?P<value>\d+)(?P<suffix>_[a-z]+)?)?")


@dataclass(frozen=True)
class Param:
    """A metric's typed parameter (ir_measures' ``SUPPORTED_PARAMS``): the integer after ``@``.

    ``settings_key``: the ``evaluation`` key listing the values the evaluation computes (None:
    ``default``, fixed values); ``minimum``: the smallest valid value.
    """

    name: str
    settings_key: str | None = None
    default: tuple[int, ...] = ()
    minimum: int = 1
    dtype: type = int


@dataclass(frozen=True)
class Measure:
    """One metric. ``compute`` is ``"module:function"``, called as
    ``function(run, qrels, candidates, settings, name, value)`` and returning per-query rows
    ``(metric, qid, value, n)`` (``n``: the query's weight in the table's mean); ``log_range``:
    the expected value lies in [0, ln value] (a loss over ``value`` candidates), else [0, 1];
    ``counts``: suffixes of count companions the function also writes (:data:`DROPPED`);
    ``over_candidates``: defined over the first stage's candidates (a reranker measure: CE, RelP,
    R/R*), not over the ranked run alone by trec_eval's rules (:func:`run_measures`)."""

    NAME: str
    compute: str
    param: Param | None = None
    direction: int = 1
    log_range: bool = False
    counts: tuple[str, ...] = ()
    description: str = ""
    over_candidates: bool = False

    def values(self, settings: Any) -> tuple[int | None, ...]:
        """The parameter values the evaluation computes under ``settings`` (``MetricSettings``)."""
        if self.param is None:
            return (None,)
        if self.param.settings_key is None:
            return self.param.default
        return tuple(getattr(settings, self.param.settings_key))

    def name_at(self, value: int | None) -> str:
        """The table name of this metric at ``value`` (``nDCG@10``; ``AP`` without a parameter)."""
        return self.NAME if value is None else f"{self.NAME}@{value}"

    def names(self, value: int | None) -> list[str]:
        """The table names one value gives: the metric, then its count companions."""
        name = self.name_at(value)
        return [name, *(name + suffix for suffix in self.counts)]

    def function(self) -> Callable[..., list[tuple[str, str, float, int]]]:
        """The per-query function named by ``compute`` (imported now, not at registration)."""
        module, _, attribute = self.compute.partition(":")
        return getattr(importlib.import_module(module), attribute)


#: NAME -> measure, in the order the evaluation writes them.
MEASURES: dict[str, Measure] = {}


def register(measure: Measure) -> Measure:
    """Make ``measure`` known to the evaluation, the laws and the checks."""
    MEASURES[measure.NAME] = measure
    return measure


_METRICS = "rerank_scaling.evaluation.metrics"
CUTOFF_10 = Param("cutoff", default=(10,))

NDCG = register(Measure("nDCG", f"{_METRICS}:ndcg_rows", CUTOFF_10, description="nDCG (trec_eval ndcg_cut)"))
AP = register(Measure("AP", f"{_METRICS}:ap_rows", description="average precision"))
RR = register(Measure("RR", f"{_METRICS}:rr_rows", CUTOFF_10, description="reciprocal rank"))
RECALL = register(Measure("R", f"{_METRICS}:recall_rows", CUTOFF_10, description="recall"))
PRECISION = register(Measure("P", f"{_METRICS}:precision_rows", CUTOFF_10, description="precision"))
CE = register(
    Measure(
        "CE",
        f"{_METRICS}:contrastive_rows",
        Param("n", "ce_sizes", minimum=2),
        direction=-1,
        log_range=True,
        counts=(DROPPED,),
        description="contrastive entropy over 1 positive + n - 1 negatives",
        over_candidates=True,
    )
)
RELP = register(
    Measure(
        "RelP",
        f"{_METRICS}:relative_probability_rows",
        Param("k", "relative_prob_k"),
        description='relative probability ("Relative-Based Scaling Law for Neural Language Models")',
        over_candidates=True,
    )
)
RRSTAR = register(
    Measure(
        "RRstar",
        f"{_METRICS}:relative_gain_rows",
        Param("m", "rr_m"),
        description="R/R*(m)",
        over_candidates=True,
    )
)


def run_measures() -> tuple[Measure, ...]:
    """The registered measures of the ranked run alone (trec_eval's: nDCG, AP, RR, R, P), in table order."""
    return tuple(m for m in MEASURES.values() if not m.over_candidates)


@dataclass(frozen=True)
class Parsed:
    """A metric name split into its registered measure, parameter value and companion suffix."""

    measure: Measure
    value: int | None
    suffix: str


def parse(name: str) -> Parsed | None:
    """``name`` as a registered metric (``CE@64_dropped`` -> CE, 64, ``_dropped``); None when no
    registered metric writes that name. A value below the parameter's minimum is a ValueError."""
    match = _NAME.fullmatch(name)
    if not match or match["name"] not in MEASURES:
        return None
    measure = MEASURES[match["name"]]
    value = None if match["value"] is None else int(match["value"])
    suffix = match["suffix"] or ""
    if (value is None) != (measure.param is None) or (suffix and suffix not in measure.counts):
        return None
    if measure.param is not None and value is not None and value < measure.param.minimum:
        raise ValueError(
            f"metric {name!r}: {measure.NAME}@{measure.param.name} needs {measure.param.name} >= "
            f"{measure.param.minimum}"
        )
    return Parsed(measure, value, suffix)


def direction_and_range(name: str) -> tuple[int, tuple[float, float], int | None] | None:
    """(direction, range, parameter value) of a registered metric name; a count companion is
    (-1, [0, 1], None), as is any other non-numeric suffix of a metric with count companions
    (``CE@64_kept``). None for a name no registered metric writes."""
    parsed = parse(name)
    if parsed is None:
        measure, _, rest = name.partition("@")
        if rest and not rest.isdigit() and measure in MEASURES and MEASURES[measure].counts:
            return -1, (0.0, 1.0), None
        return None
    if parsed.suffix:
        return -1, (0.0, 1.0), None
    measure, value = parsed.measure, parsed.value
    high = math.log(value) if measure.log_range and value is not None else 1.0
    return measure.direction, (0.0, high), value


def settings_keys() -> tuple[str, ...]:
    """The ``evaluation`` keys that list metric parameter values."""
    return tuple(m.param.settings_key for m in MEASURES.values() if m.param and m.param.settings_key)


def parameter_problems(settings: Any) -> list[str]:
    """Parameter values in ``settings`` below their metric's minimum, naming the key."""
    problems = []
    for measure in MEASURES.values():
        param = measure.param
        if param is None or param.settings_key is None:
            continue
        values = getattr(settings, param.settings_key)
        if any(value < param.minimum for value in values):
            problems.append(
                f"evaluation.{param.settings_key}: every {param.name} of {measure.NAME}@{param.name} must be "
                f">= {param.minimum}, got {tuple(values)}"
            )
    return problems


def metric_names(settings: Any) -> list[str]:
    """Every metric name the evaluation writes under ``settings`` (``MetricSettings``), in table order."""
    return [name for m in MEASURES.values() for value in m.values(settings) for name in m.names(value)]


@dataclass(frozen=True)
class MetricSpec:
    """What a metric is: the one definition every stage reads (laws, backtests, tables, planning).

    ``direction`` is +1 when larger is better, -1 for losses; ``range`` is the interval a trained
    reranker's *expected* value lies in, which bounds a law's asymptote and the forecasts planning
    accepts; ``k`` is the candidate count of CE@k.

    CE@k's range is [0, ln k], not [0, inf): ln k is the contrastive entropy of a uniform scorer
    over k candidates, and a law whose floor or forecast lies above it predicts a model
    that gets *worse than chance* as it grows -- a failed extrapolation, not a scaling regime.
    Single observations above ln k (noise at an untrained checkpoint) are data and are kept; only
    the law's asymptote and planning's accepted forecasts are held to the range.
    """

    name: str
    direction: int
    range: tuple[float, float]
    k: int | None = None


#: Metrics a user declared (``rerank-scaling forecast --lower-is-better --range``): looked up first.
DECLARED: dict[str, MetricSpec] = {}


def register_metric(spec: MetricSpec) -> None:
    """Declare a metric the naming rules below do not know (a language model's loss, an accuracy)."""
    DECLARED[spec.name] = spec


def metric_spec(metric: str) -> MetricSpec:
    """The :class:`MetricSpec` of ``metric`` ("nDCG@10", "CE@64", "AP", ...): a declared one, else
    its registered measure's (:func:`direction_and_range`), else larger-is-better in [0, 1]."""
    if metric in DECLARED:
        return DECLARED[metric]
    known = direction_and_range(metric)
    if known is not None:
        direction, bounds, k = known
        return MetricSpec(metric, direction, bounds, k)
    k = int(metric.split("@", 1)[1]) if "@" in metric and metric.split("@", 1)[1].isdigit() else None
    return MetricSpec(metric, 1, (0.0, 1.0), k)


def metric_direction(metric: str) -> int:
    """Return +1 when larger values of ``metric`` are better, -1 for losses (contrastive entropy)."""
    return metric_spec(metric).direction
