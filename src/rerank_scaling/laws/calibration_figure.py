"""The laws stage's figure: calibration of the rolling-origin backtests' prediction intervals.

The fit stage (:mod:`rerank_scaling.forecast.fit_stage`) draws it with :func:`calibration` and saves it with
:func:`rerank_scaling.plotting.save_figure`; nothing of the report stage is imported.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd


def calibration(table: pd.DataFrame) -> plt.Figure:
    """Nominal vs empirical coverage of prediction intervals over the rolling-origin backtests'
    independent units (one per group and origin, at the final checkpoint).

    A calibrated method lies on the diagonal; below it, intervals are too narrow. With a handful of
    units each point is coarse: the table's exact binomial bounds say what it supports.
    """
    fig, ax = plt.subplots(figsize=(4.4, 4.0))
    ax.plot([0, 1], [0, 1], color="0.4", linestyle="--", linewidth=1, label="calibrated")
    if len(table):
        for (protocol, law, metric), part in table.groupby(["protocol", "law", "metric"]):
            n = int(part["n_units"].iloc[0])
            ax.plot(
                part["nominal"],
                part["empirical"],
                marker="o",
                label=f"{metric} {law} ({protocol}, {part['uncertainty'].iloc[0]}; {n} units)",
            )
    else:
        ax.text(0.5, 0.5, "no backtest: fewer than 3 sizes", ha="center", va="center")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("nominal coverage")
    ax.set_ylabel("empirical coverage (final checkpoints)")
    ax.set_title("calibration of rolling-origin backtests", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig
