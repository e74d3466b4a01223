"""The bootstrap refits before and after batching their starts and their Jacobian, in one run with
interleaved repeats, and whether they give the same numbers.

    python benchmarks/bench_refits.py --out benchmarks/results/refits_cpu.md

*Before* is the refit loop as it was (``rerank_scaling.laws.fitting`` until bda6ec1): one
:func:`~rerank_scaling.laws.fitting.refit_batch` call per start and, inside it, one call of the law
per parameter for the forward-difference Jacobian (:func:`per_start_refits` with
:func:`per_parameter_jacobian`); *after* is :func:`~rerank_scaling.laws.fitting.refit_multistart`
(all starts in one batch, the moved parameter sets in one call of the law). Workloads: the default's
own law (the bounded power law in N, :data:`default_path_simulation.LAW`) on a ladder of its
four fitted sizes and its 100 resamples (the fit stage's ``bootstrap``), and the additive joint law
on 4 sizes x 5 checkpoints, as the fit stage refits them. Each repeat times every cell in a new
random order (``interleaved.interleaved_times``); the table gives medians (min-max) and the
speed-up (ratio of medians), and says whether before and after agree bit for bit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from contextlib import contextmanager
from unittest import mock

import numpy as np
from benchmark_output import commit, emit
from default_path_simulation import LAW, SIZES
from interleaved import interleaved_times, span

from rerank_scaling.laws import fitting, forms
from rerank_scaling.precision import cpu_name


def per_parameter_jacobian(law, x, target, params, residual) -> np.ndarray:
    """The forward-difference Jacobian (B, P, n) as it was computed before: one call of the law per
    moved parameter."""
    step = 1e-6 * np.maximum(np.abs(params), 1e-3)
    jacobian = np.empty((params.shape[1], len(params), len(target)))
    for i in range(len(params)):
        moved = params.copy()
        moved[i] += step[i]
        jacobian[:, i, :] = ((fitting._batch_residuals(law, x, target, moved) - residual) / step[i]).T
    return jacobian


@contextmanager
def jacobian_per_parameter():
    with mock.patch.object(fitting, "forward_jacobian", per_parameter_jacobian):
        yield


def per_start_refits(law, x, y, optimum, starts: int = fitting.REFIT_STARTS):
    """:func:`~rerank_scaling.laws.fitting.refit_multistart` as it was: one batch per start, the
    first of equal costs kept."""
    y = np.asarray(y, float)
    lower, upper = np.array(law.lower), np.array(law.upper)
    inside = lower + 1e-9 * np.isfinite(lower), upper - 1e-9 * np.isfinite(upper)
    candidates = [np.asarray(optimum, float)] + [np.clip(s, *inside) for s in law.starts(starts)]
    batch = y.shape[1]
    best, cost, kept_stopped = (
        np.full((batch, len(law.params)), np.nan),
        np.full(batch, np.inf),
        np.zeros(batch, bool),
    )
    target = fitting._batch_target(law, y)
    for start in candidates:
        stopped = np.zeros(batch, bool)
        params, finite = fitting.refit_batch(law, x, y, start, fitting.REFIT_ITERATIONS, stopped)
        residual = fitting._batch_residuals(law, fitting._column(x, law), target, params.T)
        with np.errstate(all="ignore"):
            this = np.where(finite & np.isfinite(residual).all(0), (residual**2).sum(0), np.inf)
        better = this < cost * (1 - 1e-12)
        best[better], cost[better], kept_stopped[better] = params[better], this[better], stopped[better]
    return best, np.isfinite(cost) & kept_stopped


def before(law, x, y, optimum):
    with jacobian_per_parameter():
        return per_start_refits(law, x, y, optimum)


def workloads(bootstrap: int, seed: int) -> dict[str, tuple]:
    """name -> (law, x, y (n, bootstrap), optimum): noisy ladders and their point fits."""
    rng = np.random.default_rng(seed)
    sizes = np.array([SIZES[model] for model in ("L1", "L2", "L3", "L4")])  # the fitted ones
    power = 0.62 - 0.25 * sizes**-0.5
    steps = np.repeat([[0.2, 0.4, 0.6, 0.8, 1.0]], len(sizes), axis=0).ravel()
    n = np.repeat(sizes, 5)
    additive = 0.62 - 0.2 * n**-0.5 - 0.05 * steps**-0.6
    joint = forms.additive_law(1, (0.0, 1.0))
    out = {}
    for name, law, x, mean in (
        ("default law, 4 sizes", LAW, {"N": sizes}, power),
        ("additive, 4 sizes x 5 checkpoints", joint, {"N": n, "S": steps}, additive),
    ):
        y = mean[:, None] + rng.normal(0, 0.006, (len(mean), bootstrap))
        fit = fitting.fit_law(law, x, y.mean(1))
        out[name] = (law, x, y, fit.params)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", type=int, default=100, help="resamples per refit (the fit stage's)")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="also write the Markdown report here")
    args = parser.parse_args()

    started, load_before = time.time(), os.getloadavg()[0]
    cases = workloads(args.bootstrap, args.seed)
    cells, same = {}, {}
    for name, (law, x, y, optimum) in cases.items():
        cells[(name, "before")] = lambda law=law, x=x, y=y, o=optimum: before(law, x, y, o)
        cells[(name, "after")] = lambda law=law, x=x, y=y, o=optimum: fitting.refit_multistart(law, x, y, o)
        old, new = before(law, x, y, optimum), fitting.refit_multistart(law, x, y, optimum)
        same[name] = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(old, new, strict=True))
    seconds = interleaved_times(cells, args.repeats, shuffle=args.seed)

    rows = ["| workload | before ms | after ms | speed-up | same numbers |", "|---|---:|---:|---:|---|"]
    for name in cases:
        old, new = seconds[(name, "before")], seconds[(name, "after")]
        ratio = statistics.median(old) / statistics.median(new)
        rows.append(
            f"| {name} | {span(old, digits=0)} | {span(new, digits=0)} | {ratio:.2f}x | "
            f"{'yes' if same[name] else 'NO'} |"
        )
    header = [
        "# Bootstrap refits: per start and per parameter (before) against one batch (after)",
        "",
        f"`python benchmarks/bench_refits.py --bootstrap {args.bootstrap} --repeats {args.repeats}` at "
        f"commit {commit()}; CPU: **{cpu_name()}**; {os.cpu_count()} CPUs, one process; load average "
        f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after; run time "
        f"{(time.time() - started) / 60:.1f} min; {args.repeats} interleaved repeats.",
        "",
        f"Each cell refits {args.bootstrap} resamples from the point fit and "
        f"{fitting.REFIT_STARTS} grid starts, up to the fit stage's iteration cap; median ms of a call "
        "(min-max). *Same numbers*: before's and after's parameters and convergence flags equal bit for bit.",
        "",
    ]
    emit("\n".join([*header, *rows, ""]), args.out)


if __name__ == "__main__":
    main()
