"""The config's ``fitting`` section (:class:`FitSettings`) and the names every law module shares: the
group keys a law is fitted per, the held-out protocols (seed paper 000 §5-5.1), the size axes and the
data axes. The lowest floor of :mod:`rerank_scaling.laws`: it imports none of its siblings."""

from __future__ import annotations

from dataclasses import dataclass

from rerank_scaling.size_axis import SIZE_COLUMNS

GROUP_KEYS = ["family", "objective", "attention", "metric", "split", "annotations"]
PROTOCOLS = ("model", "data", "joint_text", "joint_code")
JOINT_PROTOCOLS = ("joint_text", "joint_code")
DATA_AXES = ("checkpoints", "fractions")


@dataclass(frozen=True)
class FitSettings:
    """Config ``fitting``."""

    metrics: tuple[str, ...] = ("nDCG@10",)
    splits: tuple[str, ...] | None = None
    size_axis: str = "non_embedding"  # or "total"
    step_axis: str = "step"  # or "examples"
    last_k: int = 10
    holdout_last: int = 5
    bootstrap: int = 500
    seed: int = 0
    loss: str = "least_squares"  # or "huber_log"
    huber_delta: float = 1e-3
    bnsl_breaks: int = 1
    equal_compute: tuple[str, ...] | None = None
    uncertainty: str = "run"  # or "iid" (the paper's i.i.d. bootstrap)
    joint_protocol: str = "code"  # or "text": which joint protocol planning uses
    data_axis: str = "checkpoints"  # or "fractions": the points of the data and joint laws
    run_sigma: float | None = None  # run-to-run sd when neither seeds nor spare sizes estimate it
    backtest: bool = True  # rolling-origin backtests over sizes
    validated_ratio: float | None = None  # extrapolation a forecast may make (null: the backtests')
    usable_half_width: float = 0.0  # a 95% half-width always narrow enough to decide with
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

    def __post_init__(self) -> None:
        choices = {
            "size_axis": tuple(SIZE_COLUMNS),
            "step_axis": ("step", "examples"),
            "loss": ("least_squares", "huber_log"),
            "uncertainty": ("run", "iid"),
            "joint_protocol": ("code", "text"),
            "data_axis": DATA_AXES,
        }
        for key, allowed in choices.items():
            if getattr(self, key) not in allowed:
                raise ValueError(
                    f"fitting.{key} = {getattr(self, key)!r}: choose one of {', '.join(allowed)}"
                )
