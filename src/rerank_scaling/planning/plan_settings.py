"""Config ``planning``: prices, budgets, the value map of the ROI choice, profiling; every key optional."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlanSettings:
    """Config ``planning``; every key optional (``null``: derived from the run, see the docs)."""

    metric: str | None = None  # figures: metric (default: the first fitted metric)
    split: str | None = None  # figures: split (default: the first fitted split)
    currency: str = "USD"
    gpu_hour_price: float = 2.5  # per device-hour when the profiled device is a GPU
    cpu_hour_price: float = 0.1  # per device-hour on CPU
    budgets: tuple[float, ...] | None = None  # null: reference cost x (1/4, 1, 4, 16)
    z_data: float = 1e-5  # price of one training example (query-document pair)
    # price of one annotated (query, relevant passage) pair per source; a priced source's Z_data
    # follows from it (annotation_prices.data_price)
    annotation_cost_per_pair: dict[str, float] | None = None
    inference_queries: float = 10_000.0  # queries served over the model's life
    candidates_per_query: int | None = None  # null: evaluation.rerank_depth
    query_tokens: int = 16  # query segment length G of windowed attention
    training_examples: float | None = None  # ROI's D; null: the most examples any run saw
    roi_lambda: float = 1.0
    decision_p_best: float = 0.8  # train the best candidate when its P(best) reaches this
    value_per_metric_point: float | None = None  # null: no ROI choice; the frontier and break-even v
    value_reference: str | float = "bm25"  # M_ref: "bm25" (its value on the split) or a number
    size_range: tuple[float, float] | None = None  # null: [smallest / 4, largest x 32] configured
    size_count: int = 200
    profile: bool = True
    profile_steps: int = 2
    profile_batch: int = 16
    nominal_flops_per_second: float = 1e10  # when profile is false
    gpu_name: str | None = None  # the GPU of the paper-grid estimate (scripts/paper_grid_cost.py)
    peak_flops: float | None = None  # its peak dense BF16 FLOP/s
    mfu: float = 0.4  # achieved / peak FLOP/s assumed for that estimate
