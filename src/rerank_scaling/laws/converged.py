"""The broken neural scaling law over converged models' FLOPs, as "Scaling Laws for Online Advertisement
Retrieval" fits it (its eq. 4).

That paper's x axis is the training compute of a *converged* model: one point per model size, its FLOPs C = 6
N D at the end of its training, against that model's metric. Fitting the BNSL to every checkpoint of every
size instead mixes two curves: the metric of one size along its own training (an under-trained model at C) and
the metric of the compute-optimal frontier; at C ~ 0.9e12 the default's runs take 0.223, 0.153 and 0.140 at
the same x. So the joint protocols fit the BNSL on the final checkpoint of each fitted size (the run's end of
schedule, the converged model here) and forecast the final checkpoints of the held-out sizes, under either
joint protocol (the paper text's protocol holds out late checkpoints of fitted sizes, which would leave no
converged point). With no more points than the law has parameters (the default: 4 sizes for the 6 parameters
of a one-break BNSL) the fit is refused and says so, instead of fitting a curve through the wrong x.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from rerank_scaling.laws.forms import Law
from rerank_scaling.laws.registry import is_bnsl


def over_converged_flops(law: Law) -> bool:
    """Whether ``law`` is fitted on one converged point per size (the BNSL over FLOPs)."""
    return is_bnsl(law.name) and law.variables == ("C",)


def converged_split(
    law: Law, group: pd.DataFrame, fit_rows: pd.DataFrame, held_rows: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(fit rows, held-out rows) of ``law`` on a joint split: the BNSL gets the final checkpoint of
    each fitted size and of each held-out size of ``group`` (column ``final``); any other law the
    protocol's own rows."""
    if not over_converged_flops(law):
        return fit_rows, held_rows
    final = group[group["final"]]
    fitted = set(fit_rows["model"])
    return final[final["model"].isin(fitted)], final[final["role"] == "held_out"]


def explain_refusal(law: Law, record: dict[str, Any]) -> dict[str, Any]:
    """The fits row of a BNSL refused for too few converged points, with the reason stated."""
    if not over_converged_flops(law) or record["status"] != "failed":
        return record
    if record["n_fit"] > len(law.params):
        return record
    reason = (
        "refused: the BNSL over converged models' FLOPs (Scaling Laws for Online Advertisement "
        f"Retrieval, eq. 4) has {record['n_fit']} converged points (the final checkpoint of each "
        f"fitted size) for {len(law.params)} "
        "parameters; it needs more fitted sizes, not more checkpoints"
    )
    return {**record, "reason": reason}
