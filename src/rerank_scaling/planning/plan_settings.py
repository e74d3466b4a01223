"""Config ``planning``: prices, budgets, the value map of the ROI choice, profiling; every key optional."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rerank_scaling.settings import SectionSettings


@dataclass(frozen=True)
class PlanSettings(SectionSettings):
    """Config ``planning``; every key optional (defaults: the schema's; ``null``: derived from the run)."""

    SECTION: ClassVar[str] = "planning"

    metric: str | None  # figures: metric (default: the first fitted metric)
    split: str | None  # figures: split (default: the first fitted split)
    currency: str
    gpu_hour_price: float  # per device-hour when the profiled device is a GPU
    cpu_hour_price: float  # per device-hour on CPU
    budgets: tuple[float, ...] | None  # null: reference cost x (1/4, 1, 4, 16)
    z_data: float  # price of one training example (query-document pair)
    # price of one annotated (query, relevant passage) pair per source; a priced source's Z_data
    # follows from it (annotation_prices.data_price)
    annotation_cost_per_pair: dict[str, float] | None
    inference_queries: float  # queries served over the model's life
    candidates_per_query: int | None  # null: evaluation.rerank_depth
    query_tokens: int  # query segment length G of windowed attention
    training_examples: float | None  # ROI's D; null: the most examples any run saw
    roi_lambda: float
    decision_p_best: float  # train the best candidate when its P(best) reaches this
    value_per_metric_point: float | None  # null: no ROI choice; the frontier and break-even v
    value_reference: str | float  # M_ref: "bm25" (its value on the split) or a number
    size_range: tuple[float, float] | None  # null: [smallest / 4, largest x 32] configured
    size_count: int
    profile: bool
    profile_steps: int
    profile_batch: int
    nominal_flops_per_second: float  # when profile is false
    gpu_name: str | None  # the GPU of the paper-grid estimate (benchmarks/paper_grid_cost.py)
    peak_flops: float | None  # its peak dense BF16 FLOP/s
    mfu: float  # achieved / peak FLOP/s assumed for that estimate
