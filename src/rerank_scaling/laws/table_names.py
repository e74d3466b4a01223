"""The fit stage's tables by name: what :mod:`.fit_laws` writes under ``tables/`` and what the
workflow's fit rule declares as outputs. A module of its own so that the Snakefile reads the names
without importing the fitting code (scipy) at every start."""

TABLES = (
    "forecast_errors",
    "exponents",
    "equal_compute",
    "table01_02_model_errors",
    "table03_allocation_exponents",
    "table04_n_over_n_star",
    "table06_07_joint_errors",
    "table08_final_checkpoint",
    "table09_10_goodness_of_fit",
    "table11_12_multiplicative_errors",
    "table13_14_data_errors",
    "backtests",
    "calibration",
)
