"""The shared figure saving: one tight-box measurement for both files, the PNG unchanged by it."""

from __future__ import annotations

import io

import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np

from rerank_scaling.plotting import DPI, save_figure, tight_box


def _figure() -> plt.Figure:
    """Two log-scaled panels with labels that stick out: what the stages draw."""
    fig, axes = plt.subplots(1, 2, figsize=(7, 2.5))
    sizes = np.geomspace(1.9e6, 1.1e7, 5)
    for axis in axes:
        axis.plot(sizes, 0.6 - 0.2 * (sizes / 1e6) ** -0.5, marker="o", label="a rather long legend label")
        axis.set_xscale("log")
        axis.set_xlabel("non-embedding parameters")
        axis.legend(loc="upper left", bbox_to_anchor=(0.6, 1.3))
    fig.suptitle("a title above the panels")
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
