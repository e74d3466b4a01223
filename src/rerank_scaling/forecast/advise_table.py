"""The advisor on a table of runs (``rerank-scaling advise``): the checked table as one metric group
(:class:`~rerank_scaling.forecast.advise.Group`), the candidate runs (a file, or the default ones)
and ``advice.csv``.

Candidates file: columns ``model`` (the run's label), ``size``, ``cost`` required; ``steps``,
``seed`` optional. A candidate at a size the table already has is another seed of it.

Default candidates (no file): every fitted size of the table again (another seed) and the geometric
midpoints sqrt(N_i N_{i+1}) between consecutive fitted sizes and between the largest fitted size and
the target. Their cost is the training compute rule C = 6 N D (Kaplan et al. 2020) at the table's
final step: cost = N x steps, in units of the smallest fitted size's run (that run costs 1).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rerank_scaling.atomic import write_text
from rerank_scaling.forecast.advise import OUTCOMES, Candidate, Group, advise
from rerank_scaling.forecast.advise_plan import MOST_CANDIDATES, PLAN_COLUMNS, advise_budget, first_of_plan
from rerank_scaling.forecast.run import checked_runs, table_settings
from rerank_scaling.forecast.table import TableError, read_table
from rerank_scaling.laws.protocols import last_checkpoints, prepare, seed_spread
from rerank_scaling.registries.measures import MetricSpec

CANDIDATE_COLUMNS = ("model", "size", "cost")
#: advice.csv's columns, in order (the first five are the ranking's; then its Monte Carlo noise:
#: :func:`.advise.advise`; the rest say why).
ADVICE_COLUMNS = [
    "candidate", "cost", "expected_width", "expected_width_reduction", "reduction_per_cost",
    "reduction_margin", "tied_with_best", "outcomes",
    "size", "steps", "seed", "width_now", "form_spread_now", "expected_form_spread",
]  # fmt: skip


def one_group(metrics: pd.DataFrame, settings, source: str) -> Group:
    """The table's fitted points as one metric group (the advisor forecasts one target)."""
    points = prepare(metrics, settings)
    keys = ["metric", "objective", "split"]
    groups = points[keys].drop_duplicates()
    if len(groups) > 1:
        shown = ", ".join("/".join(map(str, row)) for row in groups.itertuples(index=False))
        raise TableError(
            f"{source}: {len(groups)} metric groups ({shown}); advise on one: keep its rows only"
        )
    fitted = last_checkpoints(points[points["role"] == "fit"], settings.size_points)
    metric = str(groups["metric"].iloc[0])
    return Group(
        metric,
        fitted.reset_index(drop=True),
        settings,
        seed_spread(metrics, settings).get(metric, (0.0, 0.0)),
    )


def final_steps(group: Group) -> float:
    """The fitted runs' final step (median over sizes): the steps a default candidate trains."""
    return float(group.fit_rows.groupby("model")["step"].max().median())


def default_candidates(group: Group, target: float) -> list[Candidate]:
    """Module docstring: every fitted size again and the geometric midpoints, priced N x steps."""
    sizes = group.fit_rows.groupby("model", as_index=False)["size"].first().sort_values("size")
    steps = final_steps(group)
    unit = float(sizes["size"].iloc[0]) * steps
    found = [(f"{m} (another seed)", float(n)) for m, n in zip(sizes["model"], sizes["size"], strict=True)]
    edges = [*sizes["size"].astype(float), *([target] if target > sizes["size"].max() else [])]
    midpoints = [float(np.sqrt(a * b)) for a, b in zip(edges, edges[1:], strict=False)]
    found += [(f"new size {n / 1e6:.3g}M", n) for n in midpoints]
    return [Candidate(label, n, n * steps / unit, steps) for label, n in found]


def read_candidates(path: Path) -> list[Candidate]:
    """The candidates file (module docstring), checked: errors name the file and line and the fix."""
    frame = read_table(path)
    missing = [c for c in CANDIDATE_COLUMNS if c not in frame.columns]
    if missing:
        raise TableError(
            f"{path}: missing column(s) {', '.join(missing)}; candidates need "
            f"{', '.join(CANDIDATE_COLUMNS)} (optional: steps, seed)"
        )
    labels = frame["model"].astype("string").str.strip()
    for column in ("size", "cost", *(["steps"] if "steps" in frame.columns else [])):
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = ~(values > 0) | ~np.isfinite(values)
        if bad.any():
            line = int(frame.index[bad][0]) + 2
            raise TableError(
                f"{path}:{line}: {column} {frame[column].iloc[line - 2]}; give a positive number"
            )
    empty = labels.isna() | (labels == "")
    if empty.any():
        raise TableError(
            f"{path}:{int(frame.index[empty][0]) + 2}: column 'model' is empty; name the candidate run"
        )
    repeated = labels.duplicated()
    if repeated.any():
        line = int(frame.index[repeated][0]) + 2
        raise TableError(
            f"{path}:{line}: candidate {labels.iloc[line - 2]!r} is listed twice; keep one row per candidate"
        )
    return [
        Candidate(
            str(labels.iloc[i]),
            float(frame["size"].iloc[i]),
            float(frame["cost"].iloc[i]),
            float(frame["steps"].iloc[i]) if "steps" in frame.columns else None,
            str(frame["seed"].iloc[i]) if "seed" in frame.columns else None,
        )
        for i in range(len(frame))
    ]


def advice_problem(
    runs: pd.DataFrame | str | Path,
    target: float,
    candidates: list[Candidate] | str | Path | None,
    run_sigma: float | None,
    metric: MetricSpec | None,
    bootstrap: int | None,
    seed: int,
) -> tuple[Group, list[Candidate]]:
    """The table's metric group and the candidates (a list, a file or the defaults), checked."""
    if not (np.isfinite(target) and target > 0):
        raise TableError(f"--target {target:g}: a size is a positive parameter count; give e.g. 1e9")
    frame = runs if isinstance(runs, pd.DataFrame) else read_table(runs)
    if "role" not in frame.columns:
        frame = frame.assign(role="fit")  # every run is data: nothing is held out to check
    source = str(runs) if not isinstance(runs, pd.DataFrame) else "the table"
    checked = checked_runs(frame, run_sigma, metric)
    settings = table_settings(checked.metrics, bootstrap, seed, run_sigma)
    group = one_group(checked.metrics, settings, source)
    if isinstance(candidates, (str, Path)):
        candidates = read_candidates(Path(candidates))
    return group, candidates if candidates is not None else default_candidates(group, target)


def advise_runs(
    runs: pd.DataFrame | str | Path,
    target: float,
    candidates: list[Candidate] | str | Path | None = None,
    run_sigma: float | None = None,
    metric: MetricSpec | None = None,
    bootstrap: int | None = None,
    seed: int = 0,
    outcomes: int = OUTCOMES,
    budget: float | None = None,
    workers: int = 1,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(advice.csv's rows, plans.csv's rows) for a table of runs: every run of the table is fitted
    (a ``role`` column's held-out rows are left out), the target is ``target``. advice.csv: one row
    per candidate (:data:`ADVICE_COLUMNS`), best reduction per cost first; with a ``budget``, the
    best affordable plan's runs first (:func:`.advise_plan.first_of_plan`) and plans.csv the
    maximal affordable plans (:data:`.advise_plan.PLAN_COLUMNS`, best first; empty without one)."""
    if budget is not None and not (np.isfinite(budget) and budget > 0):
        raise TableError(f"--budget {budget:g}: give a positive cost, in the candidates' cost unit")
    group, chosen = advice_problem(runs, target, candidates, run_sigma, metric, bootstrap, seed)
    if budget is not None and len(chosen) > MOST_CANDIDATES:
        raise TableError(
            f"--budget with {len(chosen)} candidates: plans are enumerated for at most "
            f"{MOST_CANDIDATES}; give a --candidates file with fewer"
        )
    advice = advise(group, target, chosen, outcomes, seed, workers=workers)
    if budget is None:
        return advice[ADVICE_COLUMNS], pd.DataFrame(columns=PLAN_COLUMNS)
    plans = advise_budget(group, target, chosen, budget, outcomes, seed)
    return first_of_plan(advice, plans)[[*ADVICE_COLUMNS, "in_best_plan"]], plans[PLAN_COLUMNS]


def write_advice(advice: pd.DataFrame, out: Path, plans: pd.DataFrame | None = None) -> Path:
    """``out/advice.csv`` (and ``out/plans.csv`` when there are plans), each written whole."""
    out.mkdir(parents=True, exist_ok=True)
    if plans is not None and not plans.empty:
        write_text(out / "plans.csv", plans.to_csv(index=False))
    write_text(out / "advice.csv", advice.to_csv(index=False))
    return out / "advice.csv"
