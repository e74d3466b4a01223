"""The standard error of a comparison of runs judged on the same queries: paired, query by query.

Two runs scored on the same Q queries share each query's difficulty; the separate SEs of the two
means count that shared part twice. The paired SE is the SE of the mean per-query difference,

    d_q = v_q(a) - v_q(b),    SE = sd(d_q) / sqrt(Q)        (sd with Q - 1 degrees of freedom)

(a paired t comparison: Smucker, Allan & Carterette 2007, "A comparison of statistical significance
tests for information retrieval evaluation"; Sakai 2014, "Statistical reform in information
retrieval?"). It is never larger than sqrt(SE_a^2 + SE_b^2) when the runs' per-query values are
positively correlated, and usually far smaller. A linear combination sum_j w_j M_j of several runs
(a training gain averaged over sizes) has d_q = sum_j w_j v_q(j).

A metric averaged over per-query counts (M = sum_q n_q v_q / sum_q n_q, ``records.PER_QUERY_COLUMNS``;
n = 1 for the trec measures) uses each query's linearised share n_q (v_q - M) / mean(n) in place of
v_q (the delta method for a ratio of means, Cochran 1977 section 6.4), which is v_q - M when n = 1:
the same formula.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Fewer queries than this give no per-query yardstick (the SD of a handful of differences is
#: itself too noisy to judge by, and of one query it is undefined).
MIN_QUERIES = 5


def paired_standard_error(weighted: pd.DataFrame, weights: pd.DataFrame, terms: dict[object, float]) -> float:
    """SE of sum_j w_j M_j over the queries (rows) of ``weighted`` (n_q v_q per column) and ``weights``
    (n_q; 0 where a run lacks the query); ``terms``: column -> w_j. NaN when a term is missing or
    there are fewer than :data:`MIN_QUERIES` queries."""
    if len(weighted) < MIN_QUERIES or any(term not in weighted.columns for term in terms):
        return float("nan")
    share = np.zeros(len(weighted))
    for term, w in terms.items():
        n = weights[term].to_numpy(float)
        total = weighted[term].to_numpy(float)
        mean_n = n.mean()
        if mean_n == 0:
            return float("nan")
        metric = total.sum() / n.sum()
        share += w * (total - n * metric) / mean_n
    return float(np.std(share, ddof=1) / np.sqrt(len(share)))


def paired_difference_se(a: np.ndarray, b: np.ndarray) -> float:
    """SE of mean(a - b) for two runs' per-query values on the same queries (same order, n = 1)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    ones = pd.DataFrame({"a": np.ones(len(a)), "b": np.ones(len(b))})
    return paired_standard_error(pd.DataFrame({"a": a, "b": b}), ones, {"a": 1.0, "b": -1.0})
