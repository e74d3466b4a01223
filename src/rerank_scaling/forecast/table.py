"""A user's table of runs, checked and turned into the engine's metrics table.

Columns (one row per run and evaluation; a long CSV or Parquet file):

* required: ``model`` (a run's size label), ``size`` (its parameter count, on whatever axis the
  user chose: non-embedding or total), ``value`` (the metric);
* optional: ``step`` or ``tokens`` (training progress of the checkpoint; without either, each row is
  a run's final value), ``seed``, ``metric`` (several metrics are fitted apart), ``split``,
  ``objective`` (fitted apart too), ``role`` (``fit`` or ``held_out``; default: the largest size is
  held out), ``queries`` (kept, not used).

Errors name the file, the column and the CSV line (header = line 1) and say the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from rerank_scaling.laws.fit_settings import GROUP_KEYS
from rerank_scaling.registries import measures as metric_registry

REQUIRED = ("model", "size", "value")
OPTIONAL = ("step", "tokens", "seed", "metric", "split", "objective", "role", "queries")
ROLES = ("fit", "held_out")
HEADER_FIX = f"write a header line ({','.join(REQUIRED)}) and a row per run"
#: The columns that name one observation: a run (model, seed) at a checkpoint of one metric group.
OBSERVATION = ["metric", "objective", "split", "model", "seed", "step"]
#: What the engine's group keys hold when the table does not say (one group per metric otherwise).
DEFAULTS = {"family": "table", "objective": "all", "attention": "full", "split": "all"}


class TableError(ValueError):
    """The table cannot be forecast from; the message names the file, column or line and the fix."""


@dataclass(frozen=True)
class Runs:
    """The checked table in the engine's columns, and what the reader should know about it."""

    metrics: pd.DataFrame  # the engine's long metrics table (laws.protocols.prepare reads it)
    notes: tuple[str, ...]  # assumptions the answer states (no noise estimate, default roles)


def read_table(path: str | Path) -> pd.DataFrame:
    """The table at ``path`` (CSV or Parquet); an empty file or a header without rows is an error."""
    path = Path(path)
    if not path.is_file():
        raise TableError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise TableError(f"{path}: the file is empty (0 bytes); {HEADER_FIX}")
    try:
        frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise TableError(f"{path}: no header line (blank file); {HEADER_FIX}") from None
    if frame.empty:
        raise TableError(f"{path}:2: a header and no rows; add a row per run ({', '.join(frame.columns)})")
    return frame


def known_metric(name: str) -> bool:
    """Whether ``name`` is a metric whose direction
    :func:`~rerank_scaling.registries.measures.metric_spec` knows (not a default): a name a
    registered metric writes (light: the fit stage's environment has no ir_measures), at any
    parameter value."""
    try:
        return metric_registry.parse(name) is not None
    except ValueError:  # a registered metric below its parameter's minimum (CE@1): metric_spec says so
        return True


def _line(index: int) -> int:
    return int(index) + 2  # the header is line 1


def _numeric(frame: pd.DataFrame, column: str, source: str) -> pd.Series:
    values = pd.to_numeric(frame[column], errors="coerce")
    bad = values.isna() | ~np.isfinite(values)
    if bad.any():
        first = frame.index[bad][0]
        given = frame.loc[first, column]
        shown = "empty" if pd.isna(given) else f"{given!r}, not a number"
        raise TableError(
            f"{source}:{_line(first)}: column {column!r} is {shown} "
            f"({int(bad.sum())} such rows); fill it in or drop the row"
        )
    return values.astype(float)


def check_columns(frame: pd.DataFrame, source: str) -> None:
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise TableError(
            f"{source}: missing column(s) {', '.join(missing)}; a table of runs needs "
            f"{', '.join(REQUIRED)} (optional: {', '.join(OPTIONAL)})"
        )
    if "step" in frame.columns and "tokens" in frame.columns:
        raise TableError(f"{source}: give 'step' or 'tokens' as the training axis, not both")


def _text(frame: pd.DataFrame, column: str, source: str, fix: str) -> pd.Series:
    """``column`` as text; an empty cell is an error naming its line."""
    values = frame[column].astype("string").str.strip()
    empty = values.isna() | (values == "")
    if empty.any():
        first = frame.index[empty][0]
        raise TableError(
            f"{source}:{_line(first)}: column {column!r} is empty ({int(empty.sum())} such rows); {fix}"
        )
    return values.astype(str)


def distinct_observations(frame: pd.DataFrame, source: str, notes: list[str]) -> pd.DataFrame:
    """Each observation once: a row repeated verbatim is dropped (noted); two values for one
    observation (model, seed, step of a metric group) are an error naming both lines."""
    repeated = frame.duplicated(subset=[*OBSERVATION, "value"])
    if repeated.any():
        notes.append(
            f"{int(repeated.sum())} row(s) repeated verbatim were counted once "
            f"(e.g. line {_line(frame.index[repeated][0])})"
        )
        frame = frame[~repeated]
    clash = frame.duplicated(subset=OBSERVATION, keep=False)
    if clash.any():
        rows = frame[clash]
        first = rows.iloc[0]
        same = rows[(rows[OBSERVATION] == first[OBSERVATION]).all(axis=1)]
        raise TableError(
            f"{source}:{_line(same.index[1])}: model {first['model']!r} (seed {first['seed']}, step "
            f"{first['step']:g}) has {same['value'].iloc[1]:g} here and {same['value'].iloc[0]:g} on line "
            f"{_line(same.index[0])}; keep one row per run and checkpoint, or give reruns their own seed"
        )
    return frame


def _roles(frame: pd.DataFrame, source: str, notes: list[str]) -> pd.Series:
    if "role" in frame.columns:
        unknown = ~frame["role"].isin(ROLES)
        if unknown.any():
            first = frame.index[unknown][0]
            raise TableError(
                f"{source}:{_line(first)}: role {frame.loc[first, 'role']!r}; use one of {', '.join(ROLES)}"
            )
        return frame["role"]
    largest = frame["size"].max()
    notes.append(f"no role column: the largest size ({largest:g}) is held out, the others fitted")
    return np.where(frame["size"] == largest, "held_out", "fit")


def _one_size_per_model(frame: pd.DataFrame, source: str) -> None:
    sizes = frame.groupby("model")["size"].nunique()
    if (sizes > 1).any():
        model = sizes[sizes > 1].index[0]
        lines = [_line(i) for i in frame.index[frame["model"] == model][:3]]
        raise TableError(f"{source}: model {model!r} has several sizes (lines {lines}); one size per model")


def check_sizes(frame: pd.DataFrame, source: str) -> None:
    """Enough fitted sizes for a law in N: two place a log-linear curve, three a power law."""
    for keys, group in frame.groupby(["metric", "objective", "split"]):
        fitted = sorted(group.loc[group["role"] == "fit", "size"].unique())
        if len(fitted) < 2:
            raise TableError(
                f"{source}: {'/'.join(map(str, keys))} has {len(fitted)} fitted size(s); a law in N needs "
                "at least 2 (log-linear; 3 for a power law): add sizes or mark fewer rows held_out"
            )


def noise_note(frame: pd.DataFrame, run_sigma: float | None) -> str | None:
    """What is assumed about run-to-run noise when the table cannot estimate it."""
    if run_sigma is not None:
        return f"run-to-run sd {run_sigma:g} as given (--run-sigma)"
    # checkpoints of one run share its luck: only seed replicates of a size measure run-to-run noise
    fitted = frame[frame["role"] == "fit"]  # held-out replicates estimate nothing (protocols.seed_spread)
    if fitted.groupby(["metric", "objective", "split", "model"])["seed"].nunique().max() > 1:
        return None
    return (
        "no seed replicates: run-to-run noise is estimated only from the "
        "fitted sizes' scatter about each law (n - p degrees of freedom, none for a 3-parameter law on "
        "3 sizes); if you know a run's sd (e.g. from reruns of one size), pass --run-sigma SD"
    )


def checkpoint_numbers(out: pd.DataFrame) -> pd.Series:
    """Each row's checkpoint: the rank of its step among every step any seed of its model measured,
    so seeds share a number only where they share a step (never the rank within a seed: a 0.5x run's
    first checkpoint is no replicate of a rerun's first)."""
    return out.groupby(["metric", "objective", "split", "model"])["step"].rank(method="dense")


def to_metrics(
    frame: pd.DataFrame, source: str, run_sigma: float | None = None, metric: str = "value"
) -> Runs:
    """The user's table as the engine's metrics table (columns ``laws.protocols.prepare`` reads)."""
    check_columns(frame, source)
    frame = frame.reset_index(drop=True)
    notes: list[str] = []
    out = pd.DataFrame(
        {"model": _text(frame, "model", source, "name the run's size (e.g. S1) or drop the row")}
    )
    out["size"] = _numeric(frame, "size", source)
    out["value"] = _numeric(frame, "value", source)
    if (out["size"] <= 0).any():
        first = out.index[out["size"] <= 0][0]
        raise TableError(f"{source}:{_line(first)}: size {out.loc[first, 'size']:g}; sizes are positive")
    axis = "step" if "step" in frame.columns else "tokens" if "tokens" in frame.columns else None
    out["step"] = _numeric(frame, axis, source) if axis else 1.0
    out["seed"] = frame["seed"].astype(str) if "seed" in frame.columns else "0"
    out["metric"] = frame["metric"].astype(str) if "metric" in frame.columns else metric
    for key in ("objective", "split"):
        out[key] = frame[key].astype(str) if key in frame.columns else DEFAULTS[key]
    _one_size_per_model(out, source)
    out = distinct_observations(out, source, notes)
    out["role"] = _roles(frame.loc[out.index].assign(size=out["size"]), source, notes)
    check_sizes(out, source)
    note = noise_note(out, run_sigma)
    if note:
        notes.append(note)
    for key in GROUP_KEYS:
        if key not in out.columns:
            out[key] = DEFAULTS.get(key, "all")
    out["checkpoint"] = checkpoint_numbers(out)
    out["examples"] = out["step"]
    out["tokens"] = out["step"]
    out["flops"] = 6.0 * out["size"] * out["step"]
    out["params"] = out["non_embedding_params"] = out["size"]
    out["run"] = out["model"] + "__" + out["objective"] + "__s" + out["seed"]
    return Runs(out, tuple(notes))
