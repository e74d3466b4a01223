"""How calibrated planning's P(best) is, on simulated ladders with known truth.

python benchmarks/bench_decisions.py --replicates 400 --ties 200 \
    --out benchmarks/results/decisions_calibration.md

The simulation (benchmarks/decision_simulation.py) has the default's joint path: four fitted sizes with
five checkpoints each, the additive law with its asymptote on the bound, per-run offsets and
checkpoint noise growing with size, two seeds at L4, 100 run-bootstrap refits per fit (the fit
stage's). The decision reads the draws planning reads (``--forms planning``, the default): the
equal mixture of the joint forms it pools for nDCG@10 (``planning/forecast.py`` ``FormMixture``:
the additive and the multiplicative law), or the additive law's alone (``--forms additive``, how
planning decided before it mixed forms). Question 1 (truths drawn from a spread): the four sizes
at one compute N x S; how often is the candidate with the highest P(best) the true best, per band
of P(best)? Question 2 (an exact tie between two candidates): how often does the 0.8 rule still
decide? Rates come with exact (Clopper-Pearson) 95% intervals.

``--hard R`` asks where planning is hard instead (R replicates per truth,
``benchmarks/results/decisions_hard.md``): L3, L4, L6 and L8 at L4's full-epoch compute, so that
three of the four candidates lie beyond the fitted sizes or steps (``beyond_range``), under truths
that are not planning's primary form (``TRUTHS``: the N gains flattening past L4, an N term linear
in ln N) and the additive law itself as the control; the train verdicts' accuracy is reported per
band of the true gap in units of the run noise's sd at the true best's size.
"""

from __future__ import annotations

import argparse
from itertools import pairwise

import numpy as np
import pandas as pd
from benchmark_output import emit
from decision_simulation import PLANNING_FORMS, TRUTHS, beyond_range, equal_compute, simulate, tied
from scipy import stats

from rerank_scaling.precision import cpu_name

BANDS = [0.0, 0.5, 0.8, 0.9, 1.0 + 1e-9]


def exact(k: int, n: int) -> str:
    """k of n with its two-sided exact 95% interval."""
    if n == 0:
        return "0 of 0"
    low = stats.beta.ppf(0.025, k, n - k + 1) if k else 0.0
    high = stats.beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return f"{k} of {n} ({k / n:.2f}; 95% CI [{low:.2f}, {high:.2f}])"


FORMS = {"planning": PLANNING_FORMS, "additive": ("additive",)}


def report(result: pd.DataFrame, ties: pd.DataFrame, seed: int, forms: str) -> str:
    right = result["chosen"] == result["best"]
    mixed = pd.concat([result["forms"], ties["forms"]]).value_counts()
    lines = [
        "# Calibration of planning's P(best) (simulated ladders, known truth)",
        "",
        f"`python benchmarks/bench_decisions.py --replicates {len(result)} --ties {len(ties)} --seed {seed} "
        f"--forms {forms}`; draws per decision: median {int(result['draws'].median())} (each form's "
        "converged refits of 100, cut to the fewest any form has, times the forms mixed); forms mixed: "
        + ", ".join(f"{name} in {count} of {len(result) + len(ties)}" for name, count in mixed.items())
        + f". CPU: {cpu_name()} (the outcomes are simulated; the CPU sets only the run time).",
        "",
        "## Four sizes at one compute: is the top candidate the true best?",
        "",
        "| P(best) of the top candidate | replicates | true best chosen | mean P(best) | mean true regret |",
        "|---|---|---|---|---|",
    ]
    bands = pd.cut(result["p_best"], BANDS, right=False)
    for band, part in result.groupby(bands, observed=False):
        hits = int(right[part.index].sum())
        lines.append(
            f"| [{band.left:.1f}, {min(band.right, 1.0):.1f}) | {len(part)} | {exact(hits, len(part))} | "
            f"{part['p_best'].mean():.2f} | {part['regret'].mean():.4f} |"
        )
    decided = result["verdict"].str.startswith("train ")
    lines += [
        "",
        f"`train` verdicts (P(best) >= 0.8): {exact(int(right[decided].sum()), int(decided.sum()))} right; "
        f"their mean P(best) {result.loc[decided, 'p_best'].mean():.2f}. True gap between the best two "
        f"candidates: median {result['gap'].median():.4f}.",
        "",
        "## An exact tie between two candidates",
        "",
        f"not `train` (`prefer` or `cannot decide`): "
        f"{exact(int((~ties['verdict'].str.startswith('train ')).sum()), len(ties))}; `cannot decide`: "
        f"{exact(int((ties['verdict'] == 'cannot decide').sum()), len(ties))}. With draws "
        "whose spread is right, the 0.8 rule decides when the estimated gap exceeds 0.84 of its standard "
        "error: about 40% of ties (any such choice has zero true regret).",
        "",
    ]
    return "\n".join(lines)


GAP_BANDS = [0.0, 0.5, 1.0, 2.0, np.inf]


def hard_report(results: dict[str, pd.DataFrame], seed: int, forms: str) -> str:
    """Per truth: the train verdicts' accuracy (overall and per band of true gap / run sd), how
    often planning would not decide, and the true regret of its choices."""
    replicates = len(next(iter(results.values())))
    lines = [
        "# Planning where it is hard: candidates beyond the fitted range, truths not its primary form",
        "",
        f"`python benchmarks/bench_decisions.py --hard {replicates} --seed {seed} --forms {forms}`; "
        "candidates L3, L4, L6 and L8 at L4's full-epoch compute (N x S = 7.08 x 2.1: L3 past the "
        "fitted steps, L6 and L8 past the fitted sizes); the ladder is the default's (four sizes, five "
        "checkpoints, run offsets and checkpoint noise growing with size, two seeds at L4). "
        f"CPU: {cpu_name()} (the outcomes are simulated; the CPU sets only the run time).",
        "",
        "| truth | replicates | `train` verdicts right | their mean P(best) | chose beyond the fitted range "
        "| `cannot decide` | mean true regret of `train` (run sd) | true gap < run sd |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for truth, result in results.items():
        right = result["chosen"] == result["best"]
        decided = result["verdict"].str.startswith("train ")
        regret = (result.loc[decided, "regret"] / result.loc[decided, "run_sd"]).mean()
        lines.append(
            f"| {truth} | {len(result)} | {exact(int(right[decided].sum()), int(decided.sum()))} | "
            f"{result.loc[decided, 'p_best'].mean():.2f} | "
            f"{int(result.loc[decided, 'chosen_beyond'].sum())} of {int(decided.sum())} | "
            f"{exact(int((result['verdict'] == 'cannot decide').sum()), len(result))} | {regret:.2f} | "
            f"{exact(int((result['gap'] < result['run_sd']).sum()), len(result))} |"
        )
    lines += [
        "",
        "## `train` verdicts right, per band of the true gap between the best two (in run sd)",
        "",
        "| truth | " + " | ".join(f"[{a:g}, {b:g})" for a, b in pairwise(GAP_BANDS)) + " |",
        "|---|" + "---|" * (len(GAP_BANDS) - 1),
    ]
    for truth, result in results.items():
        right = result["chosen"] == result["best"]
        decided = result["verdict"].str.startswith("train ")
        band = pd.cut(result["gap"] / result["run_sd"], GAP_BANDS, right=False)
        cells = [
            exact(int(right[decided & (band == level)].sum()), int((decided & (band == level)).sum()))
            for level in band.cat.categories
        ]
        lines.append(f"| {truth} | " + " | ".join(cells) + " |")
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--replicates", type=int, default=400)
    parser.add_argument("--ties", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--forms", default="planning", choices=tuple(FORMS), help="whose draws decide")
    parser.add_argument("--hard", type=int, default=0, help="replicates per truth of the hard cases")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    np.seterr(all="ignore")
    if args.hard:
        forms = FORMS[args.forms]
        results = {
            truth: simulate(args.hard, beyond_range, args.seed + 2 + i, forms=forms, truth_form=truth)
            for i, truth in enumerate(TRUTHS)
        }
        emit(hard_report(results, args.seed, args.forms), args.out)
        return
    result = simulate(args.replicates, equal_compute, args.seed, forms=FORMS[args.forms])
    ties = simulate(args.ties, tied, args.seed + 1, forms=FORMS[args.forms])
    emit(report(result, ties, args.seed, args.forms), args.out)


if __name__ == "__main__":
    main()
