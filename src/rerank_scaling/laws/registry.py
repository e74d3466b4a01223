"""The law registry: one owner for every law name.

A law's name appears in fits.parquet, forecasts.parquet, the tables, the figures and planning; each
of them turns the name back into a :class:`~rerank_scaling.laws.forms.Law` here, with
:func:`law`, and the fit stage asks :func:`laws_for` which laws a protocol fits. Adding a law form
means adding its function to :mod:`.forms` and one :class:`Entry` below.

Bounds rule: a law's asymptote (a loss law's floor) is bounded by the metric's range
(:func:`rerank_scaling.records.metric_spec`), narrowed for rank metrics to the reranking ceiling
when one is known (the oracle value of the candidates a reranker reorders: :mod:`.ceiling`).
Predictions do not depend on the bounds, so readers of stored parameters (planning, figures) may
call :func:`law` without them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rerank_scaling.laws import forms
from rerank_scaling.records import metric_spec

Range = forms.Range


@dataclass(frozen=True)
class Entry:
    """How to build one law: ``build(sign, bounds, breaks)``, which protocols fit it, for which metrics."""

    build: Callable[[int, Range, int], forms.Law]
    protocols: tuple[str, ...]
    losses_only: bool = False  # Fang et al.'s laws describe losses (CE)
    metric_prefix: str = ""  # fitted only for metrics starting with this (relative law: RBP@k)


JOINT = ("joint_text", "joint_code")

#: name -> entry; ``bnsl`` stands for ``bnsl<breaks>``. Order is the order the fit stage fits them.
REGISTRY: dict[str, Entry] = {
    "power_N": Entry(lambda s, b, _: forms.power_law("N", s, b), ("model",)),
    "fang_N": Entry(lambda s, b, _: forms.fang_law("N", b), ("model",), losses_only=True),
    "relative": Entry(lambda s, b, _: forms.relative_law(), ("model",), metric_prefix="RBP@"),
    "power_S": Entry(lambda s, b, _: forms.power_law("S", s, b), ("data",)),
    "fang_S": Entry(lambda s, b, _: forms.fang_law("S", b), ("data",), losses_only=True),
    "additive": Entry(lambda s, b, _: forms.additive_law(s, b), JOINT),
    "multiplicative": Entry(lambda s, b, _: forms.multiplicative_law(b), JOINT),
    "bnsl": Entry(lambda s, b, k: forms.bnsl_law(k, s, b), JOINT),
    "fang_joint": Entry(lambda s, b, _: forms.fang_joint_law(b), JOINT, losses_only=True),
    # members of the model-form ensemble (:mod:`.ensemble`), not fitted on their own
    "log_linear_N": Entry(lambda s, b, _: forms.log_linear_law("N"), ()),
    "power_N_ceiling": Entry(lambda s, b, _: forms.ceiling_power_law("N", s, b[1] if s > 0 else b[0]), ()),
}


#: Laws whose held-out forecasts Table 8 (final checkpoints) shows: the paper's model and joint
#: laws, the model-form ensemble (:mod:`.ensemble`, a mixture, not a registered form) and the
#: two-step forecast through CE (:mod:`.two_step`, a map of a mixture, not a registered form either)
HEADLINE = ("power_N", "additive", "ensemble", "two_step")


def _key(name: str) -> tuple[str, int]:
    """Registry key and BNSL breaks of a law name (``bnsl2`` -> ("bnsl", 2))."""
    if name.startswith("bnsl") and name.removeprefix("bnsl").isdigit():
        return "bnsl", int(name.removeprefix("bnsl"))
    if name not in REGISTRY:
        raise KeyError(f"unknown law {name!r}: registered laws are {', '.join(sorted(REGISTRY))}")
    return name, 1


def bounds_for(metric: str, ceiling: float | None = None) -> Range:
    """The bounds rule: the metric's range, its upper end lowered to ``ceiling`` for a rank metric."""
    spec = metric_spec(metric)
    lo, hi = spec.range
    if ceiling is not None and spec.direction > 0:
        hi = min(hi, float(ceiling))
    return lo, hi


def law(name: str, metric: str, bounds: Range | None = None) -> forms.Law:
    """The :class:`~rerank_scaling.laws.forms.Law` called ``name`` for ``metric``."""
    key, breaks = _key(name)
    return REGISTRY[key].build(metric_spec(metric).direction, bounds or bounds_for(metric), breaks)


def laws_for(
    protocol: str, metric: str, bnsl_breaks: int = 1, ceiling: float | None = None
) -> list[forms.Law]:
    """The laws ``protocol`` fits for ``metric``, asymptotes bounded by :func:`bounds_for`."""
    spec, bounds = metric_spec(metric), bounds_for(metric, ceiling)
    chosen = []
    for entry in REGISTRY.values():
        if protocol not in entry.protocols or (entry.losses_only and spec.direction > 0):
            continue
        if entry.metric_prefix and not metric.startswith(entry.metric_prefix):
            continue
        chosen.append(entry.build(spec.direction, bounds, bnsl_breaks))
    return chosen
