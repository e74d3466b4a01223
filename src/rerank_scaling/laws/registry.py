"""The law registry: one owner for every law name.

A law's name appears in fits.parquet, forecasts.parquet, the tables, the figures and planning; each
of them turns the name back into a :class:`~rerank_scaling.laws.forms.Law` here, with
:func:`law`, and the fit stage asks :func:`laws_for` which laws a protocol fits. Adding a law form
means adding its function to :mod:`.forms`, its name below and one :class:`Entry` in
:data:`REGISTRY`; every other module names a law by these constants.

Bounds rule: a law's asymptote (a loss law's floor) is bounded by the metric's range
(:func:`rerank_scaling.registries.measures.metric_spec`), narrowed for rank metrics to the reranking ceiling
when one is known (the oracle value of the candidates a reranker reorders: :mod:`.ceiling`).
Predictions do not depend on the bounds, so readers of stored parameters (planning, figures) may
call :func:`law` without them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rerank_scaling.laws import forms
from rerank_scaling.registries import measures as metric_registry
from rerank_scaling.registries.measures import metric_spec

Range = forms.Range


@dataclass(frozen=True)
class Entry:
    """How to build one law: ``build(sign, bounds, breaks)``, which protocols fit it, for which metrics."""

    build: Callable[[int, Range, int], forms.Law]
    protocols: tuple[str, ...]
    losses_only: bool = False  # Fang et al.'s laws describe losses (CE)
    measure: str = ""  # fitted only for this metric (metric_registry NAME; relative law: RelP@k)


JOINT = ("joint_text", "joint_code")

# Law names: the only place they are written (fits.parquet's and forecasts.parquet's ``law`` column;
# :mod:`.forms` builds each form under its name).
POWER_N = "power_N"
FANG_N = "fang_N"
RELATIVE = "relative"
POWER_S = "power_S"
FANG_S = "fang_S"
ADDITIVE = "additive"
MULTIPLICATIVE = "multiplicative"
BNSL = "bnsl"  # fitted as ``bnsl<breaks>`` (:func:`bnsl_name`)
FANG_JOINT = "fang_joint"
LOG_LINEAR_N = "log_linear_N"
POWER_N_CEILING = "power_N_ceiling"
#: The model-form ensemble (:mod:`.ensemble`): a mixture of registered forms, not a form itself.
ENSEMBLE = "ensemble"
#: The two-step forecast through CE (:mod:`.two_step`): a map of a mixture, not a form either.
TWO_STEP = "two_step"

#: name -> entry; ``bnsl`` stands for ``bnsl<breaks>``. Order is the order the fit stage fits them.
REGISTRY: dict[str, Entry] = {
    POWER_N: Entry(lambda s, b, _: forms.power_law("N", s, b), ("model",)),
    FANG_N: Entry(lambda s, b, _: forms.fang_law("N", b), ("model",), losses_only=True),
    RELATIVE: Entry(lambda s, b, _: forms.relative_law(), ("model",), measure=metric_registry.RELP.NAME),
    POWER_S: Entry(lambda s, b, _: forms.power_law("S", s, b), ("data",)),
    FANG_S: Entry(lambda s, b, _: forms.fang_law("S", b), ("data",), losses_only=True),
    ADDITIVE: Entry(lambda s, b, _: forms.additive_law(s, b), JOINT),
    MULTIPLICATIVE: Entry(lambda s, b, _: forms.multiplicative_law(b), JOINT),
    BNSL: Entry(lambda s, b, k: forms.bnsl_law(k, s, b), JOINT),
    FANG_JOINT: Entry(lambda s, b, _: forms.fang_joint_law(b), JOINT, losses_only=True),
    # members of the model-form ensemble (:mod:`.ensemble`), not fitted on their own
    LOG_LINEAR_N: Entry(lambda s, b, _: forms.log_linear_law("N"), ()),
    POWER_N_CEILING: Entry(lambda s, b, _: forms.ceiling_power_law("N", s, b[1] if s > 0 else b[0]), ()),
}


#: Laws whose held-out forecasts Table 8 (final checkpoints) shows: the paper's model and joint
#: laws, the model-form ensemble and the two-step forecast through CE
HEADLINE = (POWER_N, ADDITIVE, ENSEMBLE, TWO_STEP)
#: The joint forms planning decides between (:mod:`rerank_scaling.planning.forecast`).
DECISION_FORMS = (ADDITIVE, MULTIPLICATIVE, FANG_JOINT)


def register(name: str, entry: Entry) -> Entry:
    """Make law ``name`` known to the fit stage (:func:`laws_for`) and its readers (:func:`law`)."""
    REGISTRY[name] = entry
    return entry


def bnsl_name(breaks: int) -> str:
    """The name of the BNSL with ``breaks`` breaks (``bnsl1``)."""
    return f"{BNSL}{breaks}"


def is_bnsl(name: str) -> bool:
    """Whether ``name`` is a fitted BNSL law (``bnsl<breaks>``)."""
    return name.startswith(BNSL) and name.removeprefix(BNSL).isdigit()


def _key(name: str) -> tuple[str, int]:
    """Registry key and BNSL breaks of a law name (``bnsl2`` -> ("bnsl", 2))."""
    if is_bnsl(name):
        return BNSL, int(name.removeprefix(BNSL))
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


def _is_measure(metric: str, measure: str) -> bool:
    parsed = metric_registry.parse(metric)
    return parsed is not None and parsed.measure.NAME == measure and not parsed.suffix


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
        if entry.measure and not _is_measure(metric, entry.measure):
            continue
        chosen.append(entry.build(spec.direction, bounds, bnsl_breaks))
    return chosen
