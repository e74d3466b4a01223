"""The ladder-options table: candidate wheels are searched for weight files; its differences are
paired over the same queries (the bootstrap SE of a difference matches the textbook paired SE, sd of
per-query differences / sqrt(n), and is far below the unpaired one when two runs share the queries'
difficulty), and each overlay gives a row for its own ladder split and one with the largest fitted
size dropped."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import ladder_options
import numpy as np
import pandas as pd
import yaml

QUERIES = 400
SIZES = {"L1": 0.10, "L2": 0.15, "L3": 0.20, "L4": 0.22, "L6": 0.30}  # mean gain over BM25


def _run_folder(root: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """A finished pointwise run: BM25 and five sizes whose per-query values share each query's
    difficulty (so paired differences are much less noisy than either run)."""
    rng = np.random.default_rng(0)
    difficulty = rng.uniform(0.0, 0.6, QUERIES)
    values = {"bm25": difficulty}
    for model, gain in SIZES.items():
        values[model] = np.clip(difficulty + gain + rng.normal(0, 0.05, QUERIES), 0, 1)
    metrics, per_query = [], []
    for model, v in values.items():
        run = "bm25" if model == "bm25" else f"{model}__pointwise__full__s13"
        family = "bm25" if model == "bm25" else "ladder"
        objective = "" if model == "bm25" else "pointwise"
        final = {"run": run, "checkpoint": 2, "split": "dev", "metric": "nDCG@10"}
        metrics.append(final | {"model": model, "family": family, "objective": objective, "seed": 13})
        metrics[-1] |= {"step": 100, "value": v.mean()}
        per_query += [final | {"qid": str(q), "value": x, "n": 1} for q, x in enumerate(v)]
    run_dir = root / "results" / "opt"
    (run_dir / "metrics").mkdir(parents=True)
    pd.DataFrame(metrics).to_parquet(run_dir / "metrics" / "all.parquet")
    pd.DataFrame(per_query).to_parquet(run_dir / "metrics" / "per_query.parquet")
    fresh = {"wall_min": 3.0, "fresh": True}
    (run_dir / "workflow_time.json").write_text(json.dumps({"last_run": fresh, "last_fresh_run": fresh}))
    (run_dir / "benchmarks" / "train").mkdir(parents=True)
    for model in SIZES:
        path = run_dir / "benchmarks" / "train" / f"{model}__pointwise__full__s13.tsv"
        path.write_text("s\tcpu_time\n60\t30\n")
    return run_dir, values


def test_rows_are_paired_over_queries_and_cover_both_ladder_splits(tmp_path: Path) -> None:
    _, values = _run_folder(tmp_path)
    overlay = tmp_path / "ladder_x.yaml"
    models = [{"name": m, "role": "held_out" if m == "L6" else "fit"} for m in SIZES]
    overlay.write_text(yaml.safe_dump({"run_name": "opt", "models": models}))
    rows = ladder_options.option_rows(overlay, tmp_path / "results")
    assert [r["fit / held out"] for r in rows] == ["L1-L4 / L6", "L1-L3 / L6"]
    diff = values["L6"] - values["L4"]
    paired = diff.std(ddof=1) / np.sqrt(QUERIES)
    unpaired = np.hypot(values["L6"].std(ddof=1), values["L4"].std(ddof=1)) / np.sqrt(QUERIES)
    per_query = pd.read_parquet(tmp_path / "results" / "opt" / "metrics" / "per_query.parquet")
    bootstrap = ladder_options.QueryTable.build(per_query, "nDCG@10", "dev")
    held_out, largest = (
        pd.Series({"run": f"{m}__pointwise__full__s13", "checkpoint": 2, "value": values[m].mean()})
        for m in ("L6", "L4")
    )
    gap, se = ladder_options.paired_gap(bootstrap, held_out, largest)
    assert abs(gap - diff.mean()) < 1e-12
    assert abs(se - paired) < 0.15 * paired and se < unpaired / 3
    first = rows[0]
    assert first["held out - largest fitted (paired SE)"].startswith(f"{diff.mean():+.3f}")
    assert first["held out > 2 SE"] == "yes" and first["beats BM25 > 2 SE"] == "yes"
    assert first["best - BM25 (paired SE)"].startswith("L6 ")
    assert first["training CPU-min"] == "2.5"  # five 30 s training jobs
    assert first["run CPU-min / wall-min"] == "2.5 / 3.0"


def test_wheels_are_listed_with_the_weight_files_they_ship(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "empty-0.1-py3-none-any.whl", "w") as wheel:
        wheel.writestr("empty/__init__.py", "")
    with zipfile.ZipFile(tmp_path / "model-0.1-py3-none-any.whl", "w") as wheel:
        wheel.writestr("model/ckpt/model.safetensors", b"0" * 2**20)
        wheel.writestr("model/ckpt/config.json", "{}")
    rows = {r["wheel"]: r for r in ladder_options.wheel_rows(tmp_path)}
    assert rows["empty-0.1-py3-none-any.whl"]["weight files"] == "none"
    assert rows["model-0.1-py3-none-any.whl"]["weight files"] == "model/ckpt/model.safetensors"
    assert rows["model-0.1-py3-none-any.whl"]["weights (MB)"] == 1.0
