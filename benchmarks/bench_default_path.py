"""Forecast intervals on simulated ladders of the embedded default's own path.

    python benchmarks/bench_default_path.py --replicates 200 --bootstrap 200 --seed 1 \
        --out benchmarks/results/default_path.md

The simulation is ``benchmarks/default_path_simulation.py`` (last_k = 1, four fitted sizes, seeds at the
largest fitted one, the asymptote on its bound, run noise growing with size); the same replicates
are forecast by the bounded power law alone and by the model-form ensemble
(:mod:`rerank_scaling.laws.ensemble`, with its discrepancy term). Reported per method: coverage of
the held-out size with its exact (Clopper-Pearson) 95% interval, the median width over the oracle's
(``tests/laws/test_default_path_calibration.py`` asserts coverage in [0.90, 0.985] and at most 1.5x),
misses above and below the interval, and the mean bias of the point forecast. The slow tests run
the same settings, so the numbers quoted from this file are the ones they assert on.

A second table does the same for the two-step forecast (:mod:`rerank_scaling.laws.two_step`: CE@16
by its ensemble, then nDCG@10 through a linear map) on ``benchmarks/two_step_simulation.py``'s ladders,
at that module's settings (200 replicates, 100 resamples, seed 11), which the slow test in
``tests/laws/test_two_step.py`` asserts on (coverage in [0.90, 0.985], width at most 1.5x).
"""

from __future__ import annotations

import argparse
import time

import pandas as pd
import two_step_simulation
from benchmark_output import emit
from default_path_simulation import oracle_width, simulate
from scipy import stats

from rerank_scaling.precision import cpu_name


def row(method: str, frame: pd.DataFrame, oracle: float) -> dict[str, object]:
    """Coverage with its exact 95% interval, median width over ``oracle``, misses, bias."""
    inside, total = int(frame["covered"].sum()), len(frame)
    low = stats.beta.ppf(0.025, inside, total - inside + 1) if inside else 0.0
    high = stats.beta.ppf(0.975, inside + 1, total - inside) if inside < total else 1.0
    return {
        "method": method,
        "replicates": total,
        "coverage": f"{inside}/{total} = {inside / total:.3f} [{low:.2f}, {high:.2f}]",
        "median width / oracle": round(float(frame["width"].median() / oracle), 3),
        "misses above": int(frame["above"].sum()),
        "misses below": int(frame["below"].sum()),
        "bias": round(float((frame["forecast"] - frame["observed"]).mean()), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", help="write the Markdown report here too")
    args = parser.parse_args()
    start = time.perf_counter()
    runs = {"bounded power law": False, "ensemble": True}
    frames = {name: simulate(args.replicates, args.bootstrap, args.seed, ens) for name, ens in runs.items()}
    table = pd.DataFrame([row(name, frame, oracle_width(frame)) for name, frame in frames.items()])
    two_step_start = time.perf_counter()
    sim = two_step_simulation
    two_step = sim.simulate(sim.REPLICATES, sim.BOOTSTRAP, sim.SEED)
    two_step_table = pd.DataFrame([row("two-step (CE@16 -> nDCG@10)", two_step, oracle_width(two_step))])
    two_step_seconds = time.perf_counter() - two_step_start
    lines = [
        "# Forecast intervals on the default's path (simulated ladders, known truth)",
        "",
        f"`python benchmarks/bench_default_path.py --replicates {args.replicates} --bootstrap "
        f"{args.bootstrap} --seed {args.seed}`; CPU: {cpu_name()}; {time.perf_counter() - start:.0f} s. "
        "Simulation: benchmarks/default_path_simulation.py; the same replicates for both methods.",
        "",
        table.to_markdown(index=False),
        "",
        "## Two-step forecast (simulated, known truth)",
        "",
        f"Simulation: benchmarks/two_step_simulation.py ({sim.REPLICATES} replicates, {sim.BOOTSTRAP} "
        f"resamples, seed {sim.SEED}, the slow test's settings; not the arguments above); "
        f"{two_step_seconds:.0f} s. CE@16 by its ensemble of forms, then nDCG@10 = u + v CE@16 "
        "fitted on every checkpoint of the fitted runs; L6's final value held out.",
        "",
        two_step_table.to_markdown(index=False),
        "",
    ]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
