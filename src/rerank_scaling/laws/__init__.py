"""Fit stage: the law forms, one fitting routine, fit statistics, held-out protocols, backtests,
compute-optimal allocation and the paper's tables.

Entry point: :mod:`.fit_laws`.
"""
