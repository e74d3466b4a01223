"""Forecasts from any table of runs: ``rerank-scaling forecast RUNS.csv --out DIR`` (issue 24, item 6).

``forecast.run.forecast_runs`` is the Python entry point, ``forecast.cli.main`` the console script.
The workflow's fit stage forecasts from its own metrics table with the same core: :mod:`.fit_stage`.
"""
