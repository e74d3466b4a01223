"""Simulated ladders with known truth for planning's decisions (tests/planning/test_decisions.py and
benchmarks/bench_decisions.py).

The default's joint path: four fitted sizes (L1-L4 of MiniLM, 1.77 M non-embedding parameters per
layer), five checkpoints each over 2,100 examples, the additive joint law with its asymptote on the
bound (a = 1) and the other parameters drawn per replicate so that values lie near the default's
0.13-0.30; a per-run offset shared by a run's checkpoints (sd 0.012 at L1) and per-checkpoint noise
(sd 0.004 at L1), both growing with size as N^0.25; two seeds at L4; the seed spread of three L4
seed pairs (3 dof), as the fit stage pools it. The fit is the fit stage's own (run bootstrap, 100
refits); the decision is planning's (:func:`rerank_scaling.planning.decisions.decide`) on the draws
of ``forms``: the additive law's alone (the default), or, as planning decides, the equal mixture
of every joint form it pools for a rank metric (:data:`PLANNING_FORMS`,
:class:`rerank_scaling.planning.forecast.FormMixture`), a form whose fit fails left out.

The hard cases (``bench_decisions.py --hard``): candidates beyond the fitted sizes and steps
(:func:`beyond_range`), and truths that are not planning's primary form (:data:`TRUTHS`): the
additive law whose gains in N flatten past L4, and one whose N term is linear in ln N (no
saturation), both equal to the additive law from L1 to L4 up to its curvature.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from rerank_scaling.laws import forms as laws
from rerank_scaling.laws import registry
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.protocols import fit_split
from rerank_scaling.planning.decisions import decide
from rerank_scaling.planning.forecast import DECISION_FORMS, FormMixture, MetricForecast

SIZES = {"L1": 1.77, "L2": 3.54, "L3": 5.31, "L4": 7.08}  # the default's fitted sizes (millions)
STEPS = np.array([0.42, 0.84, 1.26, 1.68, 2.1])  # its five checkpoints (thousand examples)
LAW = laws.additive_law(+1, laws.metric_range("nDCG@10"))
#: The joint forms the fit stage fits for nDCG@10 (no ceiling: the truth's asymptote is 1), by name
JOINT = {law.name: law for law in registry.laws_for("joint_code", "nDCG@10")}
#: The forms planning mixes for nDCG@10's decisions, the additive law first (FormMixture's primary)
PLANNING_FORMS = tuple(name for name in DECISION_FORMS if name in JOINT)


def noise_sd(size: float, base: float) -> float:
    """Noise growing with size, as the default's per-query paired SEs imply (0.012 -> 0.017 per run)."""
    return base * (size / SIZES["L1"]) ** 0.25


def random_truth(rng: np.random.Generator) -> np.ndarray:
    """a on its bound (1), the rest spread so that values lie near the default's 0.13-0.30."""
    return np.array(
        [1.0, rng.uniform(0.6, 0.85), rng.uniform(0.05, 0.2), rng.uniform(0.08, 0.25), rng.uniform(0.1, 0.5)]
    )


def _n_term(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    return p[1] * n ** (-p[2])


def flatten_beyond_l4(p: np.ndarray, x: dict[str, np.ndarray]) -> np.ndarray:
    """The additive law up to L4; past it the N term's gains shrink to a quarter."""
    n, edge = np.asarray(x["N"], float), SIZES["L4"]
    past = _n_term(p, np.full_like(n, edge)) - 0.25 * (_n_term(p, np.full_like(n, edge)) - _n_term(p, n))
    term = np.where(n <= edge, _n_term(p, n), past)
    return p[0] - term - p[3] * np.asarray(x["S"], float) ** (-p[4])


def linear_in_log_n(p: np.ndarray, x: dict[str, np.ndarray]) -> np.ndarray:
    """The N term linear in ln N with the additive law's gain from L1 to L4 (no saturation)."""
    n, low, high = np.asarray(x["N"], float), SIZES["L1"], SIZES["L4"]
    slope = (_n_term(p, np.array(low)) - _n_term(p, np.array(high))) / np.log(high / low)
    term = _n_term(p, np.array(low)) - slope * np.log(n / low)
    return p[0] - term - p[3] * np.asarray(x["S"], float) ** (-p[4])


#: Truth generators, name -> (params, {"N", "S"}) -> value; "additive" is planning's primary form.
TRUTHS: dict[str, Callable[[np.ndarray, dict[str, np.ndarray]], np.ndarray]] = {
    "additive": LAW.predict,
    "flatten past L4": flatten_beyond_l4,
    "linear in ln N": linear_in_log_n,
}


def ladder(
    rng: np.random.Generator, truth: np.ndarray, form: str = "additive"
) -> tuple[pd.DataFrame, tuple[float, float]]:
    """Every checkpoint of the four fitted sizes: a per-run offset shared by its checkpoints and
    per-checkpoint noise, both growing with size; two seeds at L4; the seed spread of three L4 pairs."""
    rows = []
    for model, size in SIZES.items():
        seeds = 2 if model == "L4" else 1
        offset = rng.normal(0, noise_sd(size, 0.012), seeds).mean()
        noise = rng.normal(0, noise_sd(size, 0.004), (seeds, len(STEPS))).mean(axis=0)
        clean = TRUTHS[form](truth, {"N": np.full(len(STEPS), size), "S": STEPS})
        for s, value in zip(STEPS, clean + offset + noise, strict=True):
            rows.append({"model": model, "N": size, "S": s, "seeds": seeds, "value": value})
    pairs = rng.normal(0, noise_sd(SIZES["L4"], 0.012), (3, 2))
    return pd.DataFrame(rows), (float(pairs.var(axis=1, ddof=1).mean()), 3.0)


def form_draws(
    table: pd.DataFrame,
    spread: tuple[float, float],
    x: dict[str, np.ndarray],
    seed: int,
    forms: tuple[str, ...],
) -> tuple[np.ndarray, tuple[str, ...]]:
    """(B, m) draws at the candidates ``x`` (law scale) of the mixture of ``forms`` fitted to the
    ladder (the fit stage's run bootstrap, 100 refits each), and the forms mixed."""
    settings = FitSettings.of(bootstrap=100, last_k=1)
    members, names = [], []
    for name in forms:
        law = LAW if name == "additive" else JOINT[name]
        done = fit_split(law, table, table.iloc[:0], settings, seed, spread)
        if done.intervals is None:  # a failed fit: planning leaves the form out (unusable_fit)
            continue
        members.append(MetricForecast(law, done.result.params, +1, draws=done.intervals.params))
        names.append(name)
    mixture = FormMixture(tuple(members), tuple(names))
    return mixture.sample(x["N"] * laws.SCALES["N"], x["S"] * laws.SCALES["S"]), mixture.names


def extrapolation(x: dict[str, np.ndarray]) -> np.ndarray:
    """Each candidate's ratio to the fitted range (planning's ``extrapolation``): its size over the
    largest fitted size or its steps over the last checkpoint's, whichever is larger; 1 inside."""
    return np.maximum.reduce([x["N"] / max(SIZES.values()), x["S"] / STEPS[-1], np.ones(len(x["N"]))])


def simulate(
    replicates: int,
    candidates,
    seed: int,
    threshold: float = 0.8,
    forms: tuple[str, ...] = ("additive",),
    truth_form: str = "additive",
) -> pd.DataFrame:
    """Per replicate: the verdict among ``candidates(truth) -> (labels, x)`` (None: draw another
    truth) on the draws of ``forms`` (:func:`form_draws`) fitted to a ladder of ``truth_form``
    (:data:`TRUTHS`), the true best, the true gap between the best two, the run noise's sd at the
    true best's size and the true regret of the choice."""
    rng = np.random.default_rng(seed)
    rows = []
    while len(rows) < replicates:
        truth = random_truth(rng)
        asked = candidates(truth)
        if asked is None:
            continue
        labels, x = asked
        true = TRUTHS[truth_form](truth, x)
        table, spread = ladder(rng, truth, truth_form)
        draws, mixed = form_draws(table, spread, x, len(rows), forms)
        ratios = extrapolation(x)
        decision = decide(labels, draws, ratios, 1.0, +1, threshold)
        chosen = labels.index(decision.candidate) if decision.candidate else None
        rows.append(
            {
                "verdict": decision.verdict,
                "chosen": decision.candidate,
                "p_best": decision.p_best,
                "best": labels[int(np.argmax(true))],
                "gap": float(np.sort(true)[-1] - np.sort(true)[-2]),
                "run_sd": noise_sd(float(x["N"][int(np.argmax(true))]), 0.012),
                "regret": float(true.max() - true[chosen]) if chosen is not None else np.nan,
                "draws": len(draws),
                "chosen_beyond": chosen is not None and bool(ratios[chosen] > 1),
                "forms": "+".join(mixed),
            }
        )
    return pd.DataFrame(rows)


def equal_compute(truth: np.ndarray) -> tuple[list[str], dict[str, np.ndarray]]:
    """The four sizes at one compute N x S = 3.7 (every S inside the fitted checkpoints)."""
    n = np.array(list(SIZES.values()))
    return list(SIZES), {"N": n, "S": 3.7 / n}


def tied(truth: np.ndarray) -> tuple[list[str], dict[str, np.ndarray]] | None:
    """L2 at S = 1.5 and L4 at the S where the true metric is exactly the same (a tie); None when
    that S lies outside the fitted checkpoints."""
    _, b, alpha, c, beta = truth
    inner = 1.5**-beta + b / c * (SIZES["L2"] ** -alpha - SIZES["L4"] ** -alpha)
    s_tied = inner ** (-1 / beta)
    if not STEPS[0] <= s_tied <= STEPS[-1]:
        return None
    return ["L2", "L4"], {"N": np.array([SIZES["L2"], SIZES["L4"]]), "S": np.array([1.5, s_tied])}


#: Sizes past the fitted ones (millions of non-embedding parameters: 6 and 8 layers of MiniLM).
BEYOND = {"L6": 6 * 1.77, "L8": 8 * 1.77}


def beyond_range(truth: np.ndarray) -> tuple[list[str], dict[str, np.ndarray]]:
    """L3, L4, L6 and L8 at one compute, L4's full epoch (N x S = 7.08 x 2.1): L3 trains past the
    fitted steps, L6 and L8 are larger than any fitted size and train for fewer steps."""
    labels = ["L3", "L4", *BEYOND]
    n = np.array([SIZES["L3"], SIZES["L4"], *BEYOND.values()])
    return labels, {"N": n, "S": SIZES["L4"] * STEPS[-1] / n}
