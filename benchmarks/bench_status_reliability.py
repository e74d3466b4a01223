"""When the engine labels a forecast usable, is the observation inside its interval? Simulated
ladders whose scaling breaks past the fitted sizes (benchmarks/status_simulation.py).

    python benchmarks/bench_status_reliability.py --out benchmarks/results/status_reliability.md

Per ladder, break and headline law: the forecasts (2x and 8x the largest fitted size), how many are
labelled usable (the rate, and at 2x), the misses among them, P(miss | usable) with its exact
(Clopper-Pearson) two-sided 95% interval, and every forecast's coverage at 2x and 8x. The breaks of
one ladder share its fits (a break past the fitted sizes cannot change them), so their rows are not
independent of each other; within a row, replicates are. The labels are the public
``forecast_runs``' own (:mod:`rerank_scaling.laws.forecast_status`), nothing re-judged here.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from benchmark_output import commit, emit
from status_simulation import reliability, simulate

from rerank_scaling.precision import cpu_name


def cell(row) -> str:
    if not row["usable"]:
        return "no usable forecast"
    return (
        f"{row['misses_usable']}/{row['usable']} = {row['p_miss_usable']:.3f} "
        f"[{row['cp_low']:.3f}, {row['cp_high']:.3f}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=100)
    parser.add_argument("--bootstrap", type=int, default=100)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", help="write the Markdown report here too")
    args = parser.parse_args()
    start, load = time.perf_counter(), os.getloadavg()[0]
    rows = simulate(args.replicates, args.bootstrap, args.seed, progress=lambda s: print(s, file=sys.stderr))
    seconds = time.perf_counter() - start
    table = reliability(rows)
    shown = table.assign(**{"P(miss | usable) [exact 95%]": table.apply(cell, axis=1)})[
        ["ladder", "break", "law", "forecasts", "usable_rate", "usable_rate_2x",
         "P(miss | usable) [exact 95%]", "coverage_2x", "coverage_8x"]
    ].round(3)  # fmt: skip
    worst = table.dropna(subset=["p_miss_usable"]).sort_values("cp_high").iloc[-1]
    lines = [
        "# Is a usable forecast inside its interval? (simulated ladders with breaks)",
        "",
        f"`python benchmarks/bench_status_reliability.py --replicates {args.replicates} --bootstrap "
        f"{args.bootstrap} --seed {args.seed}`; commit {commit()}; CPU: {cpu_name()}; "
        f"{seconds:.0f} s for {args.replicates} replicates x 4 ladders (load average {load:.1f} at the "
        "start, on 2 shared cores). Simulation: benchmarks/status_simulation.py (its docstring has the "
        "setup); "
        "rule: src/rerank_scaling/laws/forecast_status.py.",
        "",
        shown.to_markdown(index=False),
        "",
        f"Largest upper bound: {worst['ladder']}, {worst['break']}, {worst['law']}: "
        f"{cell(worst)}. A row shows P(miss | usable) <= 0.10 only where its upper bound is at or "
        "below 0.10; elsewhere the replicates are consistent with 0.10 or more.",
        "",
    ]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
