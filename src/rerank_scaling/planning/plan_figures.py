"""The plan stage's figures: budget curves (Fang et al., Scaling Laws for Dense Retrieval eq. 11) and the ROI
frontier (Scaling Laws for Online Advertisement Retrieval eqs. 5-6)."""

from __future__ import annotations

import textwrap
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from rerank_scaling.laws.registry import ADDITIVE  # noqa: E402
from rerank_scaling.planning.plan_rows import Plan  # noqa: E402
from rerank_scaling.plotting import select_rows  # noqa: E402
from rerank_scaling.registries.measures import metric_direction  # noqa: E402
from rerank_scaling.registries.size_axes import axis_of_column  # noqa: E402

sns.set_theme(context="paper", style="whitegrid", font_scale=1.1)

PANEL_KEYS = ("family", "objective", "attention")


def _panels(table: pd.DataFrame, kind: str, metric: str, split: str) -> list[tuple[str, dict[str, Any]]]:
    """A panel per (family, objective, attention) planned for the metric and split, titled by what varies."""
    rows = table[(table["kind"] == kind) & (table["metric"] == metric) & (table["split"] == split)]
    if rows.empty:
        return []
    groups = rows[list(PANEL_KEYS)].drop_duplicates().sort_values(list(PANEL_KEYS)).to_dict("records")
    varying = [k for k in PANEL_KEYS if rows[k].nunique() > 1] or ["objective"]
    return [(" / ".join(str(g[k]) for k in varying), g) for g in groups]


def _notes(ax: plt.Axes, lines: list[str]) -> None:
    """Why something is not drawn (a failed fit, a budget that is unaffordable or buys only sizes and
    examples beyond the validated range), in the panel's corner."""
    if lines:
        text = "\n".join(line if len(line) <= 72 else line[:69] + "..." for line in lines)
        ax.text(0.02, 0.02, text, transform=ax.transAxes, fontsize=6.5, color="0.3", va="bottom", ha="left")


def _not_identifiable(ax: plt.Axes, rows: pd.DataFrame) -> bool:
    """When no row of a panel is usable (the joint fit is degenerate, failed or missing), say why
    in the middle of the panel, where the curve would be; True when it did."""
    blocked = rows[rows["status"].isin(["missing", "degenerate", "failed"])]
    if rows.empty or len(blocked) < len(rows):
        return False
    lines = sorted({f"{r['law']}: {r['reason']}" for _, r in blocked.iterrows()})
    text = "\n".join(textwrap.fill(line, 44) for line in lines)
    ax.text(0.5, 0.5, text, transform=ax.transAxes, fontsize=8, color="C3", ha="center", va="center")
    return True


def _configured(ax: plt.Axes, configured: dict[str, float], sizes: np.ndarray) -> None:
    """Grey lines at the configured model sizes that lie in the candidate range."""
    for name, size in configured.items():
        if len(sizes) and sizes[0] <= size <= sizes[-1]:
            ax.axvline(size, color="0.75", linewidth=0.8, zorder=0)
            where = {"xycoords": ("data", "axes fraction"), "ha": "center", "va": "bottom"}
            ax.annotate(name, (size, 1.0), fontsize=7, color="0.4", **where)


def _axis_label(plan: Plan) -> str:
    return f"model size N ({axis_of_column(plan.size_label).label})"


def _clip_unaffordable_tails(axes: list[plt.Axes], curves: pd.DataFrame, metric: str) -> None:
    """Where a size can barely pay for serving, D -> 0 and the forecast dives: bound the bad side
    of the y axis by the worst value at the smallest size, so the curves' useful range stays legible."""
    smallest = curves[curves["size"] == curves["size"].min()]["predicted"].dropna() if len(curves) else []
    if not len(smallest):
        return
    low, high = axes[0].get_ylim()
    margin = 0.05 * (high - low)
    if metric_direction(metric) > 0:
        low = max(low, smallest.min() - margin)
    else:
        high = min(high, smallest.max() + margin)
    axes[0].set_ylim(low, high)  # shared y axis: every panel follows


def budget_figure(plan: Plan, table: pd.DataFrame, metric: str, split: str) -> plt.Figure:
    """Predicted metric vs N when each size spends the whole budget; the best size per budget (star)."""
    panels = _panels(table, "budget", metric, split)
    count = max(len(panels), 1)
    fig, axes_grid = plt.subplots(1, count, figsize=(4.4 * count, 3.9), sharey=True, squeeze=False)
    axes = list(axes_grid[0])
    budgets = sorted(plan.settings.budgets or [])
    palette = dict(zip(budgets, sns.color_palette("viridis", len(budgets)), strict=True))
    currency = plan.settings.currency
    drawn = []
    for ax, (title, keys) in zip(axes, panels, strict=False):
        curves = select_rows(plan.curves, metric=metric, split=split, **keys)
        drawn.append(curves)
        for (budget, inference), curve in curves.groupby(["budget", "inference"]) if len(curves) else []:
            style = "-" if inference else "--"
            ax.plot(curve["size"], curve["predicted"], color=palette[budget], linestyle=style, linewidth=1.4)
        rows = select_rows(table, kind="budget", metric=metric, split=split, **keys)
        for _, row in rows[rows["status"] == "ok"].iterrows():
            colour = palette.get(row["budget"], "C3")
            ax.scatter(
                row["size"], row["predicted"], marker="*", s=110, zorder=3, color=colour, edgecolors="k"
            )
        if not _not_identifiable(ax, rows):
            infeasible = rows[rows["status"] == "infeasible"]
            _notes(
                ax,
                [
                    f"{r['budget']:.3g} {currency}, {r['cost_scope']}: "
                    + ("beyond the validated range" if "validated range" in r["reason"] else "unaffordable")
                    for _, r in infeasible.iterrows()
                ],
            )
        _configured(ax, plan.configured, plan.sizes)
        ax.set_xscale("log")
        if len(plan.sizes):
            ax.set_xlim(plan.sizes[0] / 1.3, plan.sizes[-1] * 1.3)
        ax.set_title(title, pad=14)
        ax.set_xlabel(_axis_label(plan))
    drawn = [d for d in drawn if len(d)]
    _clip_unaffordable_tails(axes, pd.concat(drawn) if drawn else pd.DataFrame(), metric)
    if not panels:
        _notes(axes[0], [f"no joint fit for {metric} ({split}): nothing to plan"])
    axes[0].set_ylabel(f"predicted {metric} ({split})")
    handles = [plt.Line2D([], [], color=palette[b], label=f"budget {b:.3g} {currency}") for b in budgets]
    handles += [
        plt.Line2D([], [], color="0.3", linestyle="-", label="incl. inference cost"),
        plt.Line2D([], [], color="0.3", linestyle="--", label="training + data only"),
        plt.Line2D([], [], color="0.3", marker="*", linestyle="", markersize=10, label="optimal size"),
    ]
    axes[-1].legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(
        "Budget allocation: Z = Z_data D + Z_train C_train + Z_infer C_infer "
        "(Fang et al., Scaling Laws for Dense Retrieval, eq. 11)",
        fontsize=10,
    )
    fig.tight_layout()
    return fig


def roi_figure(plan: Plan, table: pd.DataFrame, metric: str, split: str) -> plt.Figure:
    """Top: predicted metric vs N at fixed D (ROI-feasible sizes bold, choice starred); bottom: ROI vs N.

    Without a value per metric point no choice is made: the bottom row shows instead, per size, the
    break-even value per point at which its ROI reaches lambda."""
    panels = _panels(table, "roi", metric, split)
    count = max(len(panels), 1)
    fig, axes = plt.subplots(2, count, figsize=(4.4 * count, 6.4), sharex="col", squeeze=False)
    lam = plan.settings.roi_lambda
    valued = plan.settings.value_per_metric_point is not None
    lower = "roi" if valued else "break_even_value_per_point"
    for col, (title, keys) in enumerate(panels):
        top, bottom = axes[0][col], axes[1][col]
        frontiers = select_rows(plan.frontiers, metric=metric, split=split, **keys)
        rows = select_rows(table, kind="roi", metric=metric, split=split, **keys)
        for index, (law, row) in enumerate(rows.set_index("law").iterrows()):
            colour = f"C{index}"
            label = "additive law M(N, S)" if law == ADDITIVE else f"BNSL over FLOPs ({law})"
            frontier = select_rows(frontiers, law=law)
            if len(frontier):
                top.plot(frontier["size"], frontier["predicted"], color=colour, linewidth=1, label=label)
                feasible = frontier["predicted"].where(frontier["feasible"])
                top.plot(frontier["size"], feasible, color=colour, linewidth=3.5, alpha=0.6)
                bottom.plot(frontier["size"], frontier[lower], color=colour, label=label)
            if row["status"] == "ok":
                for ax, y in ((top, row["predicted"]), (bottom, row["roi"])):
                    ax.scatter(row["size"], y, marker="*", s=130, color=colour, zorder=3, edgecolors="k")
        if not _not_identifiable(top, rows):
            failed = rows[~rows["status"].isin(["ok", "no_choice"])]
            _notes(top, [f"{r['law']}: {r['status']} ({r['reason']})" for _, r in failed.iterrows()])
        if len(frontiers):
            name = "BM25" if plan.settings.value_reference == "bm25" else "M_ref"
            reference = frontiers["reference"].iloc[0]
            top.axhline(reference, color="0.4", linestyle=":", linewidth=1, label=f"{name} (value 0)")
        if valued:
            bottom.axhline(lam, color="C3", linestyle="--", linewidth=1, label=f"lambda = {lam:g}")
        _configured(top, plan.configured, plan.sizes)
        top.set_title(title, pad=14)
        if len(frontiers) and (frontiers[lower] > 0).any():
            bottom.set_yscale("log")
        for ax in (top, bottom):
            ax.set_xscale("log")
            if len(plan.sizes):
                ax.set_xlim(plan.sizes[0] / 1.3, plan.sizes[-1] * 1.3)
        bottom.set_xlabel(_axis_label(plan))
    if not panels:
        _notes(axes[0][0], [f"no joint fit for {metric} ({split}): nothing to plan"])
    d = plan.settings.training_examples or float("nan")
    axes[0][0].set_ylabel(f"predicted {metric} ({split})\nat D = {d:.3g} examples")
    axes[1][0].set_ylabel(
        "ROI = value / cost"
        if valued
        else f"break-even value per point\n({plan.settings.currency}, ROI = {lam:g})"
    )
    if axes[0][-1].get_legend_handles_labels()[0]:  # some law was drawn
        axes[0][-1].legend(
            fontsize=7,
            loc="best",
            title="bold: ROI >= lambda; star: choice" if valued else None,
            title_fontsize=7,
        )
        axes[1][-1].legend(fontsize=7, loc="best")
    title = (
        "ROI-constrained choice: max M s.t. V/Z >= lambda\n"
        "(Scaling Laws for Online Advertisement Retrieval, eqs. 5-6)"
    )
    if not valued:
        title += "\nno value per metric point configured: frontier only, no choice made"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
