"""The answer's one figure: what each law forecasts at every size, how sure, and what was observed.

One panel per objective (and attention variant): the observed final-checkpoint value of every size
(fitted sizes as dots, held-out sizes as large crosses), each law's forecast at the final checkpoint
of every trained size joined into a line with its 95% prediction interval as a band (the laws the
answer's table shows), and BM25 as a dashed line. N is on the fit's size axis, named on the axis.
Colours are the Okabe-Ito colour-blind-safe set (Okabe & Ito 2008, "Color Universal Design").
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from rerank_scaling.plotting import select_rows
from rerank_scaling.report.figures import bm25_line, size_axis

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#F0E442")
HELD_OUT_COLOUR, FITTED_COLOUR = "#D55E00", "#000000"


def _observed(ax: plt.Axes, rows: pd.DataFrame) -> None:
    """Each size's observed final value once (the same for every law): fitted dots, held-out crosses
    (the size's ``role``; a row's ``held_out`` also marks the checkpoints a joint protocol holds out)."""
    sizes = rows.groupby(["model", "size", "role"], as_index=False)["observed"].mean()
    fitted, held = sizes[sizes["role"] != "held_out"], sizes[sizes["role"] == "held_out"]
    ax.scatter(
        fitted["size"], fitted["observed"], color=FITTED_COLOUR, s=30, zorder=3, label="observed (fitted)"
    )
    ax.scatter(
        held["size"],
        held["observed"],
        color=HELD_OUT_COLOUR,
        marker="X",
        s=110,
        zorder=4,
        label="observed (held out)",
    )
    for r in held.itertuples():
        ax.annotate(r.model, (r.size, r.observed), textcoords="offset points", xytext=(6, -12), fontsize=8)


def forecast_figure(
    metrics: pd.DataFrame, forecasts: pd.DataFrame, shown: pd.DataFrame, metric: str, split: str, column: str
) -> plt.Figure:
    """The figure for the (protocol, law) pairs of ``shown`` (the answer's forecast rows) on
    ``metric``/``split``; ``column`` is the metrics column of the fit's size axis (for its label)."""
    laws = list(dict.fromkeys(zip(shown.get("protocol", []), shown.get("law", []), strict=True)))
    rows = select_rows(forecasts, metric=metric, split=split)
    if "final" in rows.columns:
        rows = rows[rows["final"]]
    panels = sorted(set(zip(shown["objective"], shown["attention"], strict=True))) if len(shown) else []
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(4.4 * max(1, len(panels)), 3.8), sharey=True)
    axes = list(axes) if len(panels) > 1 else [axes]
    if not panels:
        axes[0].text(0.5, 0.5, "no forecast to show", ha="center", va="center", transform=axes[0].transAxes)
    for ax, (objective, attention) in zip(axes, panels, strict=False):
        group = select_rows(rows, objective=objective, attention=attention)
        for colour, (protocol, law) in zip(OKABE_ITO, laws, strict=False):
            line = (
                select_rows(group, protocol=protocol, law=law)
                .groupby("size", as_index=False)[["forecast", "low", "high"]]
                .mean()
            )
            if line.empty:
                continue
            label = law if protocol == law else f"{law} ({protocol})"
            ax.plot(line["size"], line["forecast"], color=colour, linewidth=1.5, label=f"{label} forecast")
            ax.fill_between(
                line["size"], line["low"], line["high"], color=colour, alpha=0.18, label="its 95% PI"
            )
        if len(group):
            _observed(ax, group)
        bm25_line(ax, metrics, metric, split)
        size_axis(ax, column)
        variants = {a for _, a in panels}
        ax.set_title(objective if variants == {"full"} else f"{objective} ({attention})")
    axes[0].set_ylabel(f"{metric} ({split}), final checkpoint")
    if panels:
        axes[-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig
