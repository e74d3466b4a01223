"""A toy objective, law, metric and size axis, each defined once here and made known by one registry line
(:func:`register_toys`); ``tests/test_registries.py`` checks the pipeline's consumers pick them up
with no other edit (the schema's enum aside)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rerank_scaling.evaluation.metrics import ranking
from rerank_scaling.laws import forms
from rerank_scaling.laws import registry as law_registry
from rerank_scaling.registries import measures as metric_registry
from rerank_scaling.registries import objectives as objective_registry
from rerank_scaling.registries import size_axes
from rerank_scaling.registries.measures import Measure, Param
from rerank_scaling.registries.objectives import PAIRS, Objective
from rerank_scaling.registries.size_axes import SizeAxis

#: Pointwise pairs scored by a regression loss (sentence-transformers' cross-encoder ``MSELoss``).
TOY_OBJECTIVE = Objective("pointwise_mse", PAIRS, "pointwise_batch_size", "MSELoss")

TOY_LAW = "log_N_toy"


def toy_law(sign: int, bounds: forms.Range, breaks: int) -> forms.Law:
    """M = a + b ln N under its own name (the log-linear form, fitted on its own)."""
    return replace(forms.log_linear_law("N"), name=TOY_LAW)


def hit_rows(run: Any, qrels: Any, candidates: Any, settings: Any, name: str, cutoff: int) -> list:
    """Hit@cutoff per query: 1 when a document judged >= ``relevance_threshold`` is in the top
    ``cutoff``, else 0 (queries of the run with judgements)."""
    rows = []
    for qid in run:
        if qid in qrels:
            top = ranking(run[qid])[:cutoff]
            hit = any(qrels[qid].get(d, 0) >= settings.relevance_threshold for d in top)
            rows.append((name, qid, float(hit), 1))
    return rows


TOY_METRIC = Measure("Hit", f"{__name__}:hit_rows", Param("cutoff", default=(3,)), description="hit rate")


#: N read as the encoder's depth (a column of the metrics table and a field of ModelStats).
TOY_AXIS = SizeAxis("depth", "layers", "encoder layers")


def register_toys() -> None:
    """One registry line each."""
    objective_registry.register(TOY_OBJECTIVE)
    law_registry.register(TOY_LAW, law_registry.Entry(toy_law, ("model",)))
    metric_registry.register(TOY_METRIC)
    size_axes.register(TOY_AXIS)
