"""Does following the advisor (:mod:`rerank_scaling.forecast.advise`) buy a narrower and more accurate
target forecast than the obvious rules? Known truth, real ladders, and its speed.

    python benchmarks/bench_advisor.py --out benchmarks/results/advisor.md

1. Simulation (known truth): ``--ladders`` ladders (200) of four fitted sizes (10M-80M, one run
   each) from laws with the noise structure of real runs: a per-run offset whose sd grows with size
   (tau0 (N / 10M)^0.2, tau0 in [0.003, 0.008]) plus evaluation noise 0.002; a quarter with the
   asymptote on its bound (the ceiling the fit is told, as the fit stage is told the reranking
   ceiling); a quarter with a break at 250M (between the fitted sizes and the 1.28B target: the
   reducible term decays three times slower beyond it). Candidates: another seed of 40M and 80M,
   new sizes 160M and 320M, priced N (1 unit = a 10M run); budget 32. Three rules spend it, each
   buying a candidate at most once, while one is affordable: the advisor's ranking (one call; its
   candidates in ranked order), the largest affordable size, and a random affordable run. Each
   run's outcome is drawn from the truth; the ensemble is then fitted as the fit stage fits it and
   the target's 95% interval width and |error| (to the true mean) are compared. The ratios
   advisor / baseline are ratios of means over ladders with a paired bootstrap 95% interval.
   Calibration: the advisor's expected width after its first pick against the width realised when
   that run is added alone.
2. Replay on the public ladders (``../shared/data/ladders``): slices with at least two sizes between
   the three smallest and the largest (Gadre et al. 2024, token multiplier 1; the OLMo ladder at
   1x Chinchilla, whose seed reruns are candidates too). From the three smallest sizes, the advisor
   picks each next run from those the ladder trained (6 N D its cost); the baseline adds sizes in
   increasing order. At each budget the baseline's k-th addition spends, the target's |error| and
   width of each rule's last state within that budget.
3. Speed: the advisor on a table of the default grid's sizes (L1-L4 fitted, L6 the target: 1.77M
   non-embedding parameters per MiniLM layer) at the fit stage's resample count (100), its default
   candidates (8) and outcomes; wall time, 2 cores.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from benchmark_output import emit
from scipy import stats

from rerank_scaling.forecast.advise import OUTCOMES, Candidate, Group, advise, ensemble_at
from rerank_scaling.forecast.advise_table import advise_runs, one_group
from rerank_scaling.forecast.run import checked_runs, table_settings
from rerank_scaling.precision import cpu_name
from rerank_scaling.registries.measures import MetricSpec

LADDERS = Path(__file__).resolve().parents[2] / "shared" / "data" / "ladders"
SCORE = MetricSpec("nDCG@10", 1, (0.0, 1.0))
FITTED = (1e7, 2e7, 4e7, 8e7)
TARGET = 1.28e9
BREAK = 2.5e8
CANDIDATES = ((4e7, "40M (another seed)"), (8e7, "80M (another seed)"), (1.6e8, "160M"), (3.2e8, "320M"))
BUDGET = 32.0
RULES = ("advisor", "largest affordable", "random affordable")


@dataclass(frozen=True)
class Truth:
    """M(N) = E - A (N / 1e6)^-alpha, slower beyond ``BREAK`` when ``broken``; run sd tau0 (N/1e7)^0.2."""

    e: float
    a: float
    alpha: float
    tau0: float
    ceiling: float | None
    broken: bool

    def mean(self, n: float) -> float:
        if self.broken and n > BREAK:
            at_break = self.a * (BREAK / 1e6) ** -self.alpha
            return self.e - at_break * (n / BREAK) ** (-self.alpha / 3)
        return self.e - self.a * (n / 1e6) ** -self.alpha

    def run(self, n: float, rng: np.random.Generator) -> float:
        sd = np.hypot(self.tau0 * (n / 1e7) ** 0.2, 0.002)
        return float(np.clip(self.mean(n) + rng.normal(0, sd), 0, 1))


def draw_truth(rng: np.random.Generator, kind: int) -> Truth:
    """Kind 0: asymptote on its bound (the ceiling); 1: a break; 2, 3: a plain power law."""
    alpha = rng.uniform(0.2, 0.5)
    e = rng.uniform(0.6, 0.8) if kind == 0 else rng.uniform(0.45, 0.7)
    m10 = rng.uniform(0.2, 0.3)
    return Truth(
        e, (e - m10) * 10**alpha, alpha, rng.uniform(0.003, 0.008), e if kind == 0 else None, kind == 1
    )


def runs_table(points: list[tuple[float, float, int]]) -> pd.DataFrame:
    """(size, value, seed) points as a table of runs (every one fitted)."""
    return pd.DataFrame(
        {"model": [f"N{n:g}" for n, _, _ in points], "size": [n for n, _, _ in points],
         "value": [v for _, v, _ in points], "seed": [str(s) for _, _, s in points], "role": "fit"}
    )  # fmt: skip


def group_of(
    points: list[tuple[float, float, int]], bootstrap: int, ceiling: float | None, metric=SCORE
) -> Group:
    checked = checked_runs(runs_table(points), None, metric)
    group = one_group(checked.metrics, table_settings(checked.metrics, bootstrap, 0, None), "simulation")
    return Group(group.metric, group.fit_rows, group.settings, group.spread, ceiling)


def target_forecast(group: Group, target: float, seed: int) -> tuple[float, float]:
    """(width, point forecast) of the ensemble at ``target``."""
    held = group.held([("target", target)])
    done = ensemble_at(group, group.fit_rows, held, seed)
    if done is None:
        return np.nan, np.nan
    return done.width, float(np.median(done.draws[:, 0]))


def buy(order: list[int], costs: list[float], budget: float) -> list[int]:
    """Candidates bought in ``order`` while affordable (each once)."""
    bought, left = [], budget
    for i in order:
        if costs[i] <= left:
            bought.append(i)
            left -= costs[i]
    return bought


def one_ladder(args: tuple[int, int, int, int]) -> dict:
    index, bootstrap, outcomes, seed = args
    rng = np.random.default_rng([seed, index])
    truth = draw_truth(rng, index % 4)
    start = [(n, truth.run(n, rng), 0) for n in FITTED]
    costs = [n / 1e7 for n, _ in CANDIDATES]
    candidates = [Candidate(label, n, c) for (n, label), c in zip(CANDIDATES, costs, strict=True)]
    group = group_of(start, bootstrap, truth.ceiling)
    advice = advise(group, TARGET, candidates, outcomes, seed=index)
    ranked = [next(i for i, c in enumerate(candidates) if c.label == label) for label in advice["candidate"]]
    affordable = [i for i, c in enumerate(costs) if c <= BUDGET]
    orders = {
        "advisor": ranked,
        "largest affordable": sorted(affordable, key=lambda i: -CANDIDATES[i][0]),
        "random affordable": list(rng.permutation(affordable)),
    }
    outcomes_of = {i: truth.run(CANDIDATES[i][0], rng) for i in range(len(CANDIDATES))}  # one per run
    row = {"ladder": index, "kind": ["bound", "break", "plain", "plain"][index % 4]}
    width0, point0 = target_forecast(group, TARGET, index)
    row.update(width_start=width0, error_start=abs(point0 - truth.mean(TARGET)))
    fitted: dict[tuple[int, ...], tuple[float, float]] = {}  # one fit per set of runs bought

    def after(bought: list[int]) -> tuple[float, float]:
        key = tuple(sorted(bought))
        if key not in fitted:
            points = start + [(CANDIDATES[i][0], outcomes_of[i], 1) for i in key]
            fitted[key] = target_forecast(group_of(points, bootstrap, truth.ceiling), TARGET, index)
        return fitted[key]

    for rule, order in orders.items():
        bought = buy(order, costs, BUDGET)
        width, point = after(bought)
        row[f"width {rule}"], row[f"error {rule}"] = width, abs(point - truth.mean(TARGET))
        row[f"bought {rule}"] = "+".join(CANDIDATES[i][1].split()[0] for i in bought)
    row["expected_width_first"] = float(advice["expected_width"].iloc[0])
    row["width_now_advisor"] = float(advice["width_now"].iloc[0])
    row["realised_width_first"] = after([ranked[0]])[0]
    return row


def ratio_ci(a: np.ndarray, b: np.ndarray, rng: np.random.Generator, resamples: int = 4000) -> str:
    """mean(a) / mean(b) with a paired percentile-bootstrap 95% interval over ladders."""
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    picks = rng.integers(0, len(a), (resamples, len(a)))
    ratios = a[picks].mean(axis=1) / b[picks].mean(axis=1)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return f"{a.mean() / b.mean():.3f} [{low:.3f}, {high:.3f}]"


def simulation_report(rows: pd.DataFrame, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    lines = [
        "## Simulation: the advisor against two baselines at equal budget",
        "",
        f"{len(rows)} ladders ({', '.join(f'{k}: {v}' for k, v in rows['kind'].value_counts().items())}); "
        f"budget {BUDGET:g} units (a 10M run = 1). Ratio = mean over ladders of the advisor's value / "
        "the baseline's, paired bootstrap 95% interval; below 1: the advisor's is smaller.",
        "",
        "| quantity at the target | advisor | largest affordable | random affordable | "
        "advisor / largest [95% CI] | advisor / random [95% CI] |",
        "|---|---|---|---|---|---|",
    ]
    for quantity in ("width", "error"):
        a, big, rnd = (rows[f"{quantity} {r}"].to_numpy(float) for r in RULES)
        lines.append(
            f"| mean {'95% interval width' if quantity == 'width' else '|error|'} (start "
            f"{np.nanmean(rows[f'{quantity}_start']):.4f}) | {np.nanmean(a):.4f} | {np.nanmean(big):.4f} | "
            f"{np.nanmean(rnd):.4f} | {ratio_ci(a, big, rng)} | {ratio_ci(a, rnd, rng)} |"
        )
    lines += [
        "",
        "Per kind of ladder (mean width / mean |error|):",
        "",
        "| kind | " + " | ".join(RULES) + " |",
    ]
    lines.append("|---|" + "---|" * len(RULES))
    for kind, part in rows.groupby("kind"):
        cells = [f"{part[f'width {r}'].mean():.4f} / {part[f'error {r}'].mean():.4f}" for r in RULES]
        lines.append(f"| {kind} ({len(part)}) | " + " | ".join(cells) + " |")
    bought = rows["bought advisor"].value_counts().head(6)
    lines += [
        "",
        "What the advisor bought (most frequent): " + "; ".join(f"{k} ({v})" for k, v in bought.items()),
    ]
    expected = rows["width_now_advisor"] - rows["expected_width_first"]
    realised = rows["width_now_advisor"] - rows["realised_width_first"]
    keep = np.isfinite(expected) & np.isfinite(realised)
    slope = stats.linregress(expected[keep], realised[keep])
    lines += [
        "",
        "### Calibration of the advice (its first pick alone)",
        "",
        "Expected reduction: the advisor's width now minus its expected width after its first pick; "
        "realised: width now minus the width when that run's drawn outcome is added and the ensemble "
        "refitted.",
        "",
        "| expected-reduction quartile | ladders | mean expected reduction | mean realised reduction |",
        "|---|---|---|---|",
    ]
    quartile = pd.qcut(expected[keep], 4, labels=False, duplicates="drop")
    for q, part in pd.DataFrame({"e": expected[keep], "r": realised[keep], "q": quartile}).groupby("q"):
        lines.append(f"| {int(q) + 1} | {len(part)} | {part['e'].mean():.4f} | {part['r'].mean():.4f} |")
    lines += [
        f"| all | {int(keep.sum())} | {expected[keep].mean():.4f} | {realised[keep].mean():.4f} |",
        "",
        f"Realised on expected: slope {slope.slope:.2f} (SE {slope.stderr:.2f}), "
        f"correlation {slope.rvalue:.2f}.",
        "",
    ]
    return lines


# ---- replay on the public ladders -------------------------------------------------------------


@dataclass(frozen=True)
class Slice:
    name: str
    metric: MetricSpec
    runs: pd.DataFrame  # model, size, value, seed, cost (6 N D)


def slices(root: Path) -> list[Slice]:
    found = []
    gadre = pd.read_csv(root / "gadre2024" / "gadre2024_104models.csv")
    for column in ("loss_c4_val", "err_avg17_subset"):
        bounds = (0.0, 10.0) if column.startswith("loss") else (0.0, 1.0)
        for (dataset, multiple), part in gadre.groupby(["dataset", "chinchilla_multiplier"]):
            if part["N_params"].nunique() >= 6:
                runs = pd.DataFrame(
                    {"model": part["model_shape"], "size": part["N_params"].astype(float),
                     "value": part[column], "seed": "0", "cost": 6 * part["N_params"] * part["D_tokens"]}
                )  # fmt: skip
                name = f"Gadre {dataset} M={multiple:g} {column}"
                found.append(Slice(name, MetricSpec(column, -1, bounds), runs))
    olmo = pd.read_csv(root / "olmo_ladder" / "ladder_final_summary.csv")
    one = olmo[olmo["xC"].str.startswith("1xC")]
    metrics = {
        "CrossEntropyLoss": (-1, (0.0, 10.0)), "hellaswag_val_rc_5shot_bpb": (-1, (0.0, 10.0)),
        "hellaswag_val_rc_5shot_len_norm": (1, (0.0, 1.0)), "piqa_val_rc_5shot_len_norm": (1, (0.0, 1.0)),
        "arc_challenge_test_rc_5shot_len_norm": (1, (0.0, 1.0)),
    }  # fmt: skip
    sizes = (one["tokens"].astype(float) / 20).groupby(one["size"]).transform("median")
    for column, (direction, bounds) in metrics.items():
        runs = pd.DataFrame(
            {"model": one["size"], "size": sizes, "value": one[column], "cost": 6 * sizes * one["tokens"],
             "seed": np.where(one["xC"].str.endswith("rerun"), "rerun", "0")}
        ).dropna(subset=["value"])  # fmt: skip
        found.append(Slice(f"OLMo 1xC {column}", MetricSpec(column, direction, bounds), runs))
    return found


def replay_state(slice_: Slice, rows: pd.DataFrame, target: pd.Series, bootstrap: int) -> tuple[float, float]:
    points = [(float(r["size"]), float(r["value"]), r["seed"]) for _, r in rows.iterrows()]
    group = group_of(points, bootstrap, None, slice_.metric)
    width, point = target_forecast(group, float(target["size"]), 0)
    return width, abs(point - float(target["value"]))


def replay(slice_: Slice, bootstrap: int, outcomes: int) -> list[dict]:
    runs = slice_.runs.sort_values(["size", "seed"]).reset_index(drop=True)
    sizes = sorted(runs["size"].unique())
    target = runs[(runs["size"] == sizes[-1]) & (runs["seed"] == "0")].iloc[0]
    start = runs[runs["size"].isin(sizes[:3]) & (runs["seed"] == "0")]
    pool = runs[(runs["size"] < sizes[-1]) & ~runs.index.isin(start.index)]
    unit = float(start["cost"].sum())

    def path(choose) -> list[tuple[float, float, float]]:
        have, left, spent = start, pool, 0.0
        states = [(0.0, *replay_state(slice_, have, target, bootstrap))]
        while len(left):
            pick = choose(have, left)
            spent += float(left.loc[pick, "cost"])
            have, left = pd.concat([have, left.loc[[pick]]]), left.drop(index=pick)
            states.append((spent / unit, *replay_state(slice_, have, target, bootstrap)))
        return states

    def by_advisor(have: pd.DataFrame, left: pd.DataFrame) -> int:
        cands = [Candidate(str(i), float(r["size"]), float(r["cost"]) / unit) for i, r in left.iterrows()]
        table = have.drop(columns="cost")
        advice = advise_runs(table, float(target["size"]), cands, None, slice_.metric, bootstrap, 0, outcomes)
        return int(advice["candidate"].iloc[0])

    def in_order(have: pd.DataFrame, left: pd.DataFrame) -> int:
        """The smallest size not yet trained; once every size is, the smallest size's rerun."""
        new = left[~left["size"].isin(have["size"])]
        return int((new if len(new) else left).sort_values("size").index[0])

    advisor, ordered = path(by_advisor), path(in_order)
    rows = []
    for k, (budget, width, error) in enumerate(ordered[1:], start=1):
        reached = [s for s in advisor if s[0] <= budget + 1e-9][-1]
        rows.append(
            {"slice": slice_.name, "step": k, "budget": budget, "width in order": width,
             "error in order": error, "width advisor": reached[1], "error advisor": reached[2],
             "advisor spent": reached[0]}
        )  # fmt: skip
    return rows


def replay_report(rows: pd.DataFrame) -> list[str]:
    lines = [
        "## Replay on the public ladders",
        "",
        "From the three smallest sizes; the target is the largest size (its observed value the truth). "
        "Budget in units of the three starting runs' cost (6 N D); at the budget the in-order rule's k-th "
        "addition spends, each rule's last state within it.",
        "",
        "| slice | k | budget | in order: width | advisor: width | in order: abs error | advisor: abs error "
        "| advisor spent |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for _, r in rows.iterrows():
        lines.append(
            f"| {r['slice']} | {r['step']} | {r['budget']:.2f} | {r['width in order']:.4g} "
            f"| {r['width advisor']:.4g} "
            f"| {r['error in order']:.4g} | {r['error advisor']:.4g} | {r['advisor spent']:.2f} |"
        )
    first = rows[rows["step"] == 1]
    better_w = int((first["width advisor"] < first["width in order"]).sum())
    better_e = int((first["error advisor"] < first["error in order"]).sum())
    lines += [
        "",
        f"At the first budget: the advisor's width is smaller in {better_w} of {len(first)} slices, "
        "its |error| "
        f"in {better_e} of {len(first)}; median width ratio (advisor / in order) "
        f"{np.median(first['width advisor'] / first['width in order']):.3f}, median |error| ratio "
        f"{np.median(first['error advisor'] / first['error in order']):.3f}.",
        "",
    ]
    return lines


def speed(bootstrap: int) -> list[str]:
    """The advisor on the default grid's sizes at the fit stage's resample count (module docstring)."""
    per_layer = 12 * 384**2  # MiniLM: 4 d^2 attention + 8 d^2 feed-forward per layer
    rng = np.random.default_rng(3)
    runs = pd.DataFrame(
        {"model": [f"L{k}" for k in (1, 2, 3, 4)], "size": [k * per_layer for k in (1, 2, 3, 4)],
         "value": [0.30 + 0.05 * np.log(k) + rng.normal(0, 0.005) for k in (1, 2, 3, 4)]}
    )  # fmt: skip
    started, cpu = time.perf_counter(), time.process_time()
    advice = advise_runs(runs, 6 * per_layer, None, None, SCORE, bootstrap, 0, OUTCOMES)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return [
        "## Speed",
        "",
        f"The default grid's sizes (L1-L4 fitted, L6 the target), its {len(advice)} default candidates, "
        f"{OUTCOMES} outcomes each, {bootstrap} resamples (the fit stage's), one process: CPU time "
        f"{cpu:.1f} s, wall {wall:.1f} s on the shared machine (load average {os.getloadavg()[0]:.1f} at "
        "the end; one run). Goal: at most 60 s on 2 cores: "
        f"{'met' if cpu <= 60 else 'not met'} on CPU time (one core's worth; the wall time of a loaded "
        "machine is not the stage's).",
        "",
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ladders", type=int, default=200)
    parser.add_argument(
        "--bootstrap", type=int, default=40, help="resamples per fit in simulation and replay"
    )
    parser.add_argument("--outcomes", type=int, default=2, help="simulated outcomes per candidate")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=LADDERS)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    started = time.perf_counter()
    jobs = [(i, args.bootstrap, args.outcomes, args.seed) for i in range(args.ladders)]
    with ProcessPoolExecutor(args.workers) as pool:
        rows = pd.DataFrame(list(pool.map(one_ladder, jobs)))
    simulated = time.perf_counter() - started
    with ProcessPoolExecutor(args.workers) as pool:
        done = pool.map(replay, slices(args.data), [args.bootstrap] * 99, [args.outcomes] * 99)
        replayed = pd.DataFrame([row for part in done for row in part])
    elapsed = time.perf_counter() - started
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    lines = [
        "# The advisor: simulation, replay on real ladders, speed",
        "",
        f"`python benchmarks/bench_advisor.py --ladders {args.ladders} --bootstrap {args.bootstrap} "
        f"--outcomes {args.outcomes} --workers {args.workers}` at commit {commit}, on {cpu_name()} "
        f"({os.cpu_count()} CPUs, shared); simulation {simulated / 60:.1f} min, replay "
        f"{(elapsed - simulated) / 60:.1f} min. Resamples per fit {args.bootstrap} and {args.outcomes} "
        "simulated "
        "outcomes per candidate (fewer than the fit stage's 100 and the command's default, to fit 2 shared "
        "cores); the speed section uses the fit stage's.",
        "",
        *simulation_report(rows, args.seed),
        *replay_report(replayed),
        *speed(100),
    ]
    emit("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
