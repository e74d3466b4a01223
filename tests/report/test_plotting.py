"""The shared figure saving: one tight-box measurement for both files, the PNG unchanged by it."""

from __future__ import annotations

import io

import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np

from rerank_scaling.plotting import DPI, save_figure, tight_box


def _figure() -> plt.Figure:
    """Log-scaled panels with labels that stick out, and every kind of artist the stages' figures
    hold (titles, legends placed by ``best`` and outside, annotations offset in points, text past
    the axes, a filled contour with its colour bar), laid out by ``tight_layout`` as they are."""
    fig, axes = plt.subplots(1, 3, figsize=(10, 2.5))
    sizes = np.geomspace(1.9e6, 1.1e7, 5)
    for axis in axes[:2]:
        axis.plot(sizes, 0.6 - 0.2 * (sizes / 1e6) ** -0.5, marker="o", label="a rather long legend label")
        axis.fill_between(sizes, 0.3, 0.5, alpha=0.2)
        axis.axhline(0.55, linestyle=":")
        axis.set_xscale("log")
        axis.set_xlabel("non-embedding parameters")
        axis.set_title("a panel's title")
    axes[0].legend(loc="upper left", bbox_to_anchor=(0.6, 1.3))
    axes[1].legend(loc="best")
    axes[1].annotate("held out", (sizes[-1], 0.5), xytext=(30, 20), textcoords="offset points")
    axes[1].text(1.02, -0.3, "a note past the axes", transform=axes[1].transAxes)
    grid = np.meshgrid(np.linspace(0, 1, 20), np.linspace(0, 1, 20))
    fig.colorbar(axes[2].contourf(*grid, grid[0] * grid[1]), ax=axes[2], label="a colour bar's label")
    fig.suptitle("a title above the panels")
    fig.tight_layout()
    return fig


def _png(fig: plt.Figure, **savefig) -> np.ndarray:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, **savefig)
    buffer.seek(0)
    return matplotlib.image.imread(buffer, format="png")


def test_the_tight_box_crops_the_png_as_savefigs_tight_does():
    fig = _figure()
    try:
        np.testing.assert_array_equal(_png(fig, bbox_inches=tight_box(fig)), _png(fig, bbox_inches="tight"))
    finally:
        plt.close(fig)


def test_save_figure_writes_both_files_and_closes_the_figure(tmp_path):
    fig = _figure()
    save_figure(fig, tmp_path / "panel")
    assert (tmp_path / "panel.png").stat().st_size > 1000
    assert (tmp_path / "panel.pdf").read_bytes().startswith(b"%PDF")
    assert not plt.fignum_exists(fig.number)
