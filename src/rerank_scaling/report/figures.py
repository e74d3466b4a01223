"""Report figures: observed checkpoints, fitted laws, held-out forecasts with 95% bands, BM25 lines.

Every function returns a matplotlib Figure for one (metric, split); the report stage saves PNG + PDF.
Power laws are drawn on log axes; parameter counts are on the fit's size axis (``fitting.size_axis``).
A fit whose parameters are not identified (status ``degenerate``) is drawn dashed and grey, labelled
"degenerate", with its reason in the panel; no optimum is drawn from one.
"""

from __future__ import annotations

import json
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from rerank_scaling.laws import forms as laws  # noqa: E402
from rerank_scaling.laws import registry  # noqa: E402
from rerank_scaling.plotting import select_rows  # noqa: E402 (also: the backend and the theme)
from rerank_scaling.registries import size_axes  # noqa: E402
from rerank_scaling.report.data_points import (  # noqa: E402
    SOURCE_MARKERS,
    checkpoint_curve,
    fraction_curve,
    of_source,
    sources_present,
)

ROLE_MARKERS = {"fit": "o", "held_out": "X"}


def _law(name: str, metric: str) -> laws.Law:
    return registry.law(name, metric)


def fitted(fits: pd.DataFrame, **equals: object) -> pd.DataFrame:
    """Fits matching ``equals`` that produced parameters (ok or degenerate; failed ones have none).

    Of the joint protocols, the one planning uses (column ``planning``) comes first.
    """
    rows = select_rows(fits, **equals)
    if "params" in rows.columns:
        rows = rows[rows["params"].notna() & (rows["status"] != "failed")]
    if "planning" in rows.columns and len(rows):
        rows = rows.sort_values("planning", ascending=False, kind="stable")
    return rows


def line_style(status: str) -> dict[str, object]:
    """Matplotlib style of a fitted curve: solid when identified, dashed grey when degenerate."""
    return {} if status == "ok" else {"color": "0.5", "linestyle": "--"}


def mark_degenerate(ax: plt.Axes, fit: pd.Series) -> None:
    """Write a degenerate fit's reason into the panel (wrapped, small)."""
    if fit["status"] == "ok":
        return
    text = textwrap.fill(f"{fit['law']} {fit['status']}: {fit['reason']}", 48)
    ax.text(0.02, 0.02, text, transform=ax.transAxes, fontsize=6, color="C3", va="bottom")


def bm25_line(ax: plt.Axes, metrics: pd.DataFrame, metric: str, split: str) -> None:
    rows = metrics[
        (metrics["family"] == "bm25") & (metrics["metric"] == metric) & (metrics["split"] == split)
    ]
    if len(rows):
        ax.axhline(rows["value"].iloc[0], color="0.3", linestyle="--", linewidth=1, label="BM25")


Panel = tuple[str, str]  # (objective, attention variant)


def _panel_keys(rows: pd.DataFrame) -> list[Panel]:
    """One panel per objective and attention variant present in ``rows``."""
    if not len(rows):
        return [("(no additive fit)", "full")]
    return sorted(set(zip(rows["objective"], rows["attention"], strict=True)))


def _title(panel: Panel, panels: list[Panel]) -> str:
    objective, attention = panel
    return objective if {a for _, a in panels} == {"full"} else f"{objective} ({attention})"


def _panels(panels: list[Panel]) -> tuple[plt.Figure, list[plt.Axes]]:
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), sharey=True, squeeze=False)
    return fig, list(axes[0])


def size_column(metrics: pd.DataFrame, forecasts: pd.DataFrame) -> str:
    """The metrics column the fits used as N (``fitting.size_axis``), read off the forecasts' sizes:
    the first other registered axis (:mod:`rerank_scaling.registries.size_axes`) whose column holds the
    forecast's size, else the default axis's."""
    default, *others = size_axes.SIZE_AXES.values()
    if len(forecasts) and "size" in forecasts.columns:
        row = forecasts.iloc[0]
        match = metrics[metrics["model"] == row["model"]]
        for axis in others:
            if len(match) and axis.column in match and np.isclose(match[axis.column].iloc[0], row["size"]):
                return axis.column
    return default.column


def size_axis(ax: plt.Axes, column: str = size_axes.NON_EMBEDDING.column) -> None:
    """Log N axis labelled in millions at 1-2-5 steps (default log labels collide at this range)."""
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value / 1e6:g}M"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(
        "N = total parameters (the fit's size axis)"
        if column == "params"
        else "N = non-embedding parameters (the fit's size axis)"
    )


def _last_checkpoints(rows: pd.DataFrame, k: int) -> pd.DataFrame:
    """Each run's last ``k`` checkpoints (what the model-scaling protocol fits on)."""
    rank = rows.groupby("run")["step"].rank(method="dense", ascending=False)
    return rows[rank <= k]


def model_scaling(
    metrics: pd.DataFrame, fits: pd.DataFrame, forecasts: pd.DataFrame, metric: str, split: str
) -> plt.Figure:
    """Metric against N per objective (Scaling Laws for Cross-Encoder Reranking §5): the last k checkpoints of
    every size (seeds averaged, as fitted), the power law in N, and held-out forecasts with their 95%
    bands."""
    runs = select_rows(metrics[metrics["family"] != "bm25"], metric=metric, split=split)
    panels = _panel_keys(runs)
    fig, axes = _panels(panels)
    last_k = 1
    size = size_column(metrics, forecasts)
    for ax, panel in zip(axes, panels, strict=True):
        objective, attention = panel
        where = {"objective": objective, "attention": attention, "metric": metric, "split": split}
        rows = select_rows(runs, objective=objective, attention=attention)
        fit = fitted(fits, **where, law=registry.POWER_N, protocol="model")
        fit_sizes = rows.loc[rows["role"] == "fit", "model"].nunique()
        last_k = max(1, int(fit["n_fit"].iloc[0]) // fit_sizes) if len(fit) and fit_sizes else 1
        recent = _last_checkpoints(rows, last_k)
        means = recent.groupby(["model", "role", size], as_index=False)["value"].mean()
        ax.scatter(recent[size], recent["value"], s=8, color="0.6", alpha=0.5)
        for role, marker in ROLE_MARKERS.items():
            part = means[means["role"] == role]
            ax.scatter(part[size], part["value"], marker=marker, s=60, label=f"observed ({role})")
        if len(fit):
            status = fit["status"].iloc[0]
            flag = "" if status == "ok" else f" ({status})"
            law, params = (
                _law(registry.POWER_N, metric),
                np.array(list(json.loads(fit["params"].iloc[0]).values())),
            )
            grid = np.geomspace(means[size].min() / 1.5, means[size].max() * 2)
            ax.plot(
                grid,
                law.predict(params, {"N": grid / laws.SCALES["N"]}),
                **({"color": "C2"} | line_style(status)),
                label=f"power law fit{flag}",
            )
            every = select_rows(forecasts, **where, law=registry.POWER_N, protocol="model")
            final = every[every["final"]] if "final" in every.columns else every
            band = final.groupby("size", as_index=False)[["low", "high"]].mean().sort_values("size")
            ax.fill_between(
                band["size"],
                band["low"],
                band["high"],
                color="C2",
                alpha=0.15,
                label="95% PI, final checkpoint",
            )
            held = (
                every[every["held_out"]].groupby("size", as_index=False)[["forecast", "low", "high"]].mean()
            )
            ax.errorbar(
                held["size"],
                held["forecast"],
                yerr=[held["forecast"] - held["low"], held["high"] - held["forecast"]],
                fmt="s" if status == "ok" else "s--",
                color="C3" if status == "ok" else "0.5",
                capsize=4,
                label=f"forecast (95% PI){flag}",
            )
            mark_degenerate(ax, fit.iloc[0])
        bm25_line(ax, metrics, metric, split)
        size_axis(ax, size)
        ax.set_title(_title(panel, panels))
    axes[0].set_ylabel(f"{metric} ({split}), last {last_k} checkpoints")
    axes[-1].legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def data_scaling(metrics: pd.DataFrame, fits: pd.DataFrame, metric: str, split: str) -> plt.Figure:
    """Metric against training steps for every size and annotation source: the full-data run's
    checkpoints (filled) and, with ``training.data_fractions``, each fraction run's end (hollow,
    joined), with the power law in S fitted on the points ``fitting.data_axis`` chose."""
    runs = select_rows(metrics[metrics["family"] != "bm25"], metric=metric, split=split)
    panels = _panel_keys(runs)
    fig, axes = _panels(panels)
    models = sorted(
        runs["model"].unique(), key=lambda m: runs.loc[runs["model"] == m, "non_embedding_params"].iloc[0]
    )
    palette = dict(zip(models, sns.color_palette("viridis", len(models)), strict=True))
    sources = sources_present(runs)
    for ax, panel in zip(axes, panels, strict=True):
        objective, attention = panel
        where = {"objective": objective, "attention": attention, "metric": metric, "split": split}
        for source in sources:
            rows = of_source(select_rows(runs, objective=objective, attention=attention), source)
            marker = SOURCE_MARKERS.get(source, "s")
            checkpoints, ends = checkpoint_curve(rows), fraction_curve(rows)
            for model in models:
                part, end = checkpoints[checkpoints["model"] == model], ends[ends["model"] == model]
                label = model if len(sources) == 1 else f"{model} {source}"
                ax.scatter(
                    part["step"], part["value"], s=14, color=palette[model], marker=marker, label=label
                )
                if len(end):
                    ax.plot(end["step"], end["value"], color=palette[model], marker=marker, mfc="none",
                            linestyle="--", linewidth=0.8)  # fmt: skip
                scope = {**where, "annotations": source} if "annotations" in fits.columns else where
                fit = fitted(fits, **scope, law=registry.POWER_S, split_label=f"data:{model}")
                points = pd.concat([part, end])
                if len(fit) and len(points):
                    law = _law(registry.POWER_S, metric)
                    params = np.array(list(json.loads(fit["params"].iloc[0]).values()))
                    grid = np.geomspace(points["step"].min(), points["step"].max(), 100)
                    ax.plot(
                        grid,
                        law.predict(params, {"S": grid / laws.SCALES["S"]}),
                        color=palette[model],
                        linewidth=1,
                        linestyle="-" if fit["status"].iloc[0] == "ok" else ":",
                    )
        bm25_line(ax, metrics, metric, split)
        ax.set_xscale("log")
        ax.set_title(_title(panel, panels))
        ax.set_xlabel("training steps S (hollow: fraction ends; dotted: degenerate)")
    axes[0].set_ylabel(f"{metric} ({split})")
    axes[-1].legend(fontsize=8, title="size", loc="best")
    fig.tight_layout()
    return fig


def joint_surface(
    metrics: pd.DataFrame, fits: pd.DataFrame, forecasts: pd.DataFrame, metric: str, split: str
) -> plt.Figure:
    """Contours of the additive joint law over (N, S); fit points as dots, held-out points as crosses."""
    runs = select_rows(metrics[metrics["family"] != "bm25"], metric=metric, split=split)
    panels = _panel_keys(runs)
    fig, axes = _panels(panels)
    for ax, panel in zip(axes, panels, strict=True):
        objective, attention = panel
        where = {"objective": objective, "attention": attention, "metric": metric, "split": split}
        fit = fitted(fits, **where, law=registry.ADDITIVE)
        points = select_rows(forecasts, **where, law=registry.ADDITIVE)
        if len(fit) and "split_label" in points.columns:
            points = points[points["split_label"] == fit["split_label"].iloc[0]]
        if len(fit) and len(points):
            law, params = (
                _law(registry.ADDITIVE, metric),
                np.array(list(json.loads(fit["params"].iloc[0]).values())),
            )
            n = np.geomspace(points["size"].min() / 1.2, points["size"].max() * 1.2, 80)
            s = np.geomspace(points["step"].min(), points["step"].max(), 80)
            nn, ss = np.meshgrid(n, s)
            zz = law.predict(params, {"N": nn / laws.SCALES["N"], "S": ss / laws.SCALES["S"]})
            contour = ax.contourf(nn, ss, zz, levels=12, cmap="viridis", alpha=0.8)
            fig.colorbar(contour, ax=ax, label=metric)
            for held, marker in ((False, "o"), (True, "X")):
                part = points[points["held_out"] == held]
                ax.scatter(
                    part["size"],
                    part["step"],
                    marker=marker,
                    c="white" if held else "black",
                    s=18,
                    edgecolors="black",
                    label="held out" if held else "fit",
                )
            mark_degenerate(ax, fit.iloc[0])
        size_axis(ax, size_column(metrics, forecasts))
        ax.set_yscale("log")
        protocol = f" [{fit['protocol'].iloc[0]}, {fit['status'].iloc[0]}]" if len(fit) else ""
        ax.set_title(_title(panel, panels) + protocol, fontsize=9)
    axes[0].set_ylabel("training steps S")
    axes[0].legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig


def compute_frontier(allocation: pd.DataFrame, metric: str, split: str) -> plt.Figure:
    """N / N*(C) of every checkpoint against compute C = N * S (1 = compute-optimal size)."""
    rows = select_rows(allocation, metric=metric, split=split) if len(allocation) else allocation
    panels = _panel_keys(rows)
    fig, axes = _panels(panels)
    for ax, panel in zip(axes, panels, strict=True):
        objective, attention = panel
        part = select_rows(rows, objective=objective, attention=attention) if len(rows) else rows
        if len(part) and "planning" in part.columns:
            part = part[part["planning"].astype(bool)]
        unidentified = part[part["status"] != "ok"] if "status" in part.columns else part.iloc[0:0]
        if len(part) and "status" in part.columns:
            part = part[part["status"] == "ok"]
        if len(unidentified) and not len(part):
            reason = textwrap.fill(str(unidentified["reason"].iloc[0]), 44)
            ax.text(
                0.5,
                0.5,
                f"no compute-optimal size:\n{reason}",
                ha="center",
                va="center",
                fontsize=7,
                transform=ax.transAxes,
            )
        if len(part):
            sns.lineplot(
                data=part, x="compute", y="n_over_n_star", hue="model", marker="o", ax=ax, palette="viridis"
            )
            ax.set_yscale("log")
        ax.axhline(1.0, color="0.3", linestyle="--", linewidth=1)
        ax.set_xscale("log")
        ax.set_title(_title(panel, panels))
        ax.set_xlabel("compute C = N x S (M params x k steps)")
    axes[0].set_ylabel("N / N*(C)")
    fig.tight_layout()
    return fig


def equal_compute_bars(compared: pd.DataFrame) -> plt.Figure:
    """Final checkpoint of the smaller model vs the larger model's checkpoint at equal compute."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    if len(compared):
        long = compared.melt(
            id_vars=["objective", "metric", "split"],
            value_vars=["small_value", "large_value"],
            var_name="model",
            value_name="value",
        )
        long["model"] = long["model"].map(
            {
                "small_value": compared["small"].iloc[0] + " (final)",
                "large_value": compared["large"].iloc[0] + " (same C)",
            }
        )
        long["panel"] = long["objective"] + " / " + long["metric"] + " / " + long["split"]
        sns.barplot(data=long, y="panel", x="value", hue="model", ax=ax)
        ax.set_ylabel("")
    else:
        ax.text(
            0.5, 0.5, "no equal-compute pair configured (fitting.equal_compute)", ha="center", va="center"
        )
    fig.tight_layout()
    return fig
