"""Which forward scores a model: its compiled graph, its fused oneDNN encoder, or the eager one --
one choice, read by the evaluation's scoring and by the planner's measured cost profiles, so that
plan.md prices a pair as the evaluation scores it."""

from __future__ import annotations

from typing import Any


def scoring_forward(
    model: Any, device: str, compiled: bool = False, fused: bool = True
) -> tuple[Any, Any, str]:
    """``(model, forward, path)``: the forward the evaluation scores ``model`` with
    (:func:`rerank_scaling.evaluation.rerank.model_scores`), and its path's name: ``compiled``, the
    process's compiled graph of its architecture (the model it returns is the one to run it on);
    ``fused``, its fused oneDNN encoder where one applies
    (:func:`rerank_scaling.compute.fused_encoder.fused_forward`: bf16 weights on a CPU, fp32 ones
    where the CPU kind's profile says it pays); else ``eager``. The planner's measured cost profiles
    time the same path (:mod:`rerank_scaling.planning.measured_profiles`)."""
    from rerank_scaling.compute.compiled_graphs import compiled_forward
    from rerank_scaling.compute.fused_encoder import fused_forward

    if compiled:
        model, forward = compiled_forward(model)
        return model, forward, "compiled"
    forward = fused_forward(model, device) if fused else None
    return (model, model, "eager") if forward is None else (model, forward, "fused")
