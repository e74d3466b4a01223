"""The config's ``fitting`` section (:class:`FitSettings`) and the names every law module shares: the
group keys a law is fitted per, the held-out protocols (seed paper 000 §5-5.1), the size axes and the
data axes; and the fit stage's tables by name (:data:`TABLES`), which the fit rule declares as
outputs. The lowest floor of :mod:`rerank_scaling.laws`, torch- and scipy-free (the workflow layer
reads it at parse time): it imports none of its siblings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rerank_scaling.settings import SectionSettings

GROUP_KEYS = ["family", "objective", "attention", "metric", "split", "annotations"]
PROTOCOLS = ("model", "data", "joint_text", "joint_code")
JOINT_PROTOCOLS = ("joint_text", "joint_code")
DATA_AXES = ("checkpoints", "fractions")
#: The fit stage's tables: what it writes under ``laws/tables/`` and what the fit rule declares.
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


@dataclass(frozen=True)
class FitSettings(SectionSettings):
    """Config ``fitting``; defaults and allowed values: the schema's."""

    SECTION: ClassVar[str] = "fitting"

    metrics: tuple[str, ...]
    splits: tuple[str, ...] | None
    size_axis: str  # or "total"
    step_axis: str  # or "examples"
    last_k: int
    holdout_last: int
    bootstrap: int
    seed: int
    loss: str  # or "huber_log"
    huber_delta: float
    bnsl_breaks: int
    equal_compute: tuple[str, ...] | None
    uncertainty: str  # or "iid" (the paper's i.i.d. bootstrap)
    joint_protocol: str  # or "text": which joint protocol planning uses
    data_axis: str  # or "fractions": the points of the data and joint laws
    run_sigma: float | None  # run-to-run sd when neither seeds nor spare sizes estimate it
    backtest: bool  # rolling-origin backtests over sizes
    validated_ratio: float | None  # extrapolation a forecast may make (null: the backtests')
    usable_half_width: float  # the widest 95% half-width a usable forecast may have (0: no limit)
    # (split, metric, oracle value of the reranked candidates): set by the fit stage from the BM25
    # runs and qrels (:mod:`rerank_scaling.laws.ceiling`), not a config key
    ceilings: tuple[tuple[str, str, float], ...] = ()

    @property
    def held_points(self) -> int:
        """Points per size the data and joint_text protocols hold out: the largest fraction on the
        fractions axis (a few runs, not a dozen checkpoints), else ``holdout_last``."""
        return 1 if self.data_axis == "fractions" else self.holdout_last

    @property
    def size_points(self) -> int:
        """Points per size the model protocol fits: the full-data run's end on the fractions axis."""
        return 1 if self.data_axis == "fractions" else self.last_k
