"""The law registry and the metric spec: one owner per name."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rerank_scaling.laws import registry
from rerank_scaling.laws.forms import metric_range as law_range
from rerank_scaling.registries.measures import metric_spec

PROTOCOLS = ("model", "data", "joint_text", "joint_code")


@pytest.mark.parametrize("metric", ["nDCG@10", "CE@64", "RelP@10"])
def test_every_fitted_law_name_turns_back_into_the_same_law(metric: str) -> None:
    for protocol in PROTOCOLS:
        for fitted in registry.laws_for(protocol, metric, bnsl_breaks=2):
            again = registry.law(fitted.name, metric)
            assert (again.name, again.params, again.variables) == (
                fitted.name,
                fitted.params,
                fitted.variables,
            )
            x = {v: np.array([[3.0], [30.0]]) for v in fitted.variables}
            start = fitted.starts(1)[0][:, None]
            np.testing.assert_allclose(again.function(start, x), fitted.function(start, x))


def test_losses_get_fang_laws_and_rank_metrics_do_not() -> None:
    assert "fang_N" in [law.name for law in registry.laws_for("model", "CE@64")]
    assert "fang_N" not in [law.name for law in registry.laws_for("model", "nDCG@10")]
    assert "relative" in [law.name for law in registry.laws_for("model", "RelP@10")]


def test_unknown_law_names_the_registered_ones() -> None:
    with pytest.raises(KeyError, match="power_N"):
        registry.law("power_X", "nDCG@10")


def test_one_metric_range_for_laws_and_planning() -> None:
    """Laws and planning (planning/forecast.py clips with registry.bounds_for) read one range."""
    assert law_range("CE@64") == registry.bounds_for("CE@64") == (0.0, math.log(64))
    assert law_range("nDCG@10") == registry.bounds_for("nDCG@10") == (0.0, 1.0)
    assert metric_spec("CE@64").k == 64 and metric_spec("CE@64").direction == -1


def test_the_ceiling_lowers_the_asymptote_bound_of_rank_metrics_only() -> None:
    (power,) = [law for law in registry.laws_for("model", "nDCG@10", ceiling=0.53) if law.name == "power_N"]
    assert power.upper[0] == pytest.approx(0.53)
    assert registry.bounds_for("CE@64", ceiling=0.53) == (0.0, math.log(64))
