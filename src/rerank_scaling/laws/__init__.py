"""Fit stage: the law forms, one fitting routine, fit statistics, held-out protocols, backtests,
compute-optimal allocation and the paper's tables.

The library of the fit stage, whose entry point is :mod:`rerank_scaling.forecast.fit_stage`.
"""
