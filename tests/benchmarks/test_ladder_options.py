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
import pytest
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
    _bm25_folder(run_dir, {str(q): 1 for q in range(QUERIES)})
    fresh = {"wall_min": 3.0, "fresh": True}
    (run_dir / "workflow_time.json").write_text(json.dumps({"last_run": fresh, "last_fresh_run": fresh}))
    (run_dir / "benchmarks" / "train").mkdir(parents=True)
    for model in SIZES:
        path = run_dir / "benchmarks" / "train" / f"{model}__pointwise__full__s13.tsv"
        path.write_text("s\tcpu_time\n60\t30\n")
    return run_dir, values


def _bm25_folder(run_dir: Path, own_rank: dict[str, int], depth: int = 30) -> None:
    """BM25's dev run of ``depth`` documents per query and its qrels: the query's own passage
    (grade 2) at BM25 rank ``own_rank[qid]`` (1-based), one same-article passage (grade 1) last."""
    (run_dir / "bm25" / "runs").mkdir(parents=True)
    (run_dir / "data" / "collection" / "qrels").mkdir(parents=True)
    run, qrels = [], []
    for qid, rank in own_rank.items():
        docs = [f"{qid}-d{i}" for i in range(1, depth + 1)]
        docs[rank - 1] = f"{qid}-own"
        run += [f"{qid} Q0 {d} {i + 1} {depth - i} bm25" for i, d in enumerate(docs)]
        qrels += [f"{qid} 0 {qid}-own 2", f"{qid} 0 {docs[-1]} 1"]
    (run_dir / "bm25" / "runs" / "dev.trec").write_text("\n".join(run) + "\n")
    (run_dir / "data" / "collection" / "qrels" / "dev.txt").write_text("\n".join(qrels) + "\n")


def test_oracle_reranks_only_bm25s_top_depth(tmp_path: Path) -> None:
    """Known truth: a perfect depth-20 reranker puts the own passage (gain 2, trec_eval's linear
    gains) first where BM25 has it in its top 20 (nDCG@10 = 2 / (2 + 1 / log2 3), the same-article
    passage at BM25 rank 30 being out of reach), and cannot reach it at BM25 rank 21; at depth 30
    both queries are perfect."""
    _bm25_folder(tmp_path, {"a": 15, "b": 21})
    ideal = 2 + 1 / np.log2(3)
    assert ladder_options.oracle_ndcg(tmp_path, 20) == pytest.approx((2 / ideal + 0) / 2)
    assert ladder_options.oracle_ndcg(tmp_path, 30) == pytest.approx((1 + 1) / 2)


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
    # own passage at BM25 rank 1, the same-article one at 30, past config.yaml's rerank_depth 20
    assert first["BM25 / depth oracle"] == f"{values['bm25'].mean():.3f} / {2 / (2 + 1 / np.log2(3)):.3f}"


def test_an_unfinished_run_is_tabulated_from_the_sizes_evaluated_so_far(tmp_path: Path) -> None:
    """Before merge_metrics: each evaluated run's eval/<run>/ tables; a held-out size still training
    reads ``not run``, the BM25 comparison uses the sizes there are."""
    run_dir, values = _run_folder(tmp_path)
    metrics = pd.read_parquet(run_dir / "metrics" / "all.parquet")
    per_query = pd.read_parquet(run_dir / "metrics" / "per_query.parquet")
    for run, rows in metrics[metrics["model"] != "L6"].groupby("run"):
        (run_dir / "eval" / run).mkdir(parents=True)
        rows.to_parquet(run_dir / "eval" / run / "metrics.parquet")
        per_query[per_query["run"] == run].to_parquet(run_dir / "eval" / run / "per_query.parquet")
    for name in ("metrics/all.parquet", "metrics/per_query.parquet"):  # workflow_time.json stays:
        (run_dir / name).unlink()  # an invocation that ran only some sizes writes one too
    overlay = tmp_path / "ladder_x.yaml"
    models = [{"name": m, "role": "held_out" if m == "L6" else "fit"} for m in SIZES]
    overlay.write_text(yaml.safe_dump({"run_name": "opt", "models": models}))
    first = ladder_options.option_rows(overlay, tmp_path / "results")[0]
    assert first["final dev nDCG@10 per size"].endswith(f"L4 {values['L4'].mean():.3f}, L6 not run")
    assert first["held out - largest fitted (paired SE)"] == first["held out > 2 SE"] == "not run"
    assert first["best - BM25 (paired SE)"].startswith("L4 ")
    assert first["run CPU-min / wall-min"].endswith("/ unfinished")


def test_a_folder_its_own_jobs_wrote_is_tabulated_with_their_summed_wall_minutes(tmp_path: Path) -> None:
    """benchmarks/distill_ladder.py: no Snakemake run (no workflow_time.json, no merged metrics),
    each job's eval/<run>/ tables and benchmark file; wall minutes are the jobs' sum, marked."""
    run_dir, values = _run_folder(tmp_path)
    metrics = pd.read_parquet(run_dir / "metrics" / "all.parquet")
    per_query = pd.read_parquet(run_dir / "metrics" / "per_query.parquet")
    for run, rows in metrics.groupby("run"):
        (run_dir / "eval" / run).mkdir(parents=True)
        rows.to_parquet(run_dir / "eval" / run / "metrics.parquet")
        per_query[per_query["run"] == run].to_parquet(run_dir / "eval" / run / "per_query.parquet")
    for name in ("metrics/all.parquet", "metrics/per_query.parquet", "workflow_time.json"):
        (run_dir / name).unlink()
    overlay = tmp_path / "ladder_x.yaml"
    models = [{"name": m, "role": "held_out" if m == "L6" else "fit"} for m in SIZES]
    overlay.write_text(yaml.safe_dump({"run_name": "opt", "models": models}))
    first = ladder_options.option_rows(overlay, tmp_path / "results")[0]
    assert first["held out - largest fitted (paired SE)"].startswith(
        f"{(values['L6'] - values['L4']).mean():+.3f}"
    )
    assert first["run CPU-min / wall-min"] == "2.5 / 5.0 (its jobs' sum)"  # five 60 s jobs


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


def test_an_overlay_whose_run_folder_is_gone_is_named_not_tabulated(tmp_path: Path) -> None:
    _run_folder(tmp_path)
    kept, deleted = tmp_path / "ladder_kept.yaml", tmp_path / "ladder_deleted.yaml"
    kept.write_text(yaml.safe_dump({"run_name": "opt"}))
    deleted.write_text(yaml.safe_dump({"run_name": "deleted-since"}))
    assert ladder_options.run_folders([kept, deleted], tmp_path / "results") == ([kept], [deleted])


def test_a_distillation_folder_says_its_teacher_and_mix(tmp_path: Path) -> None:
    """Only a folder benchmarks/distill_ladder.py made (examples/teacher.json) gets a note."""
    run_dir, _ = _run_folder(tmp_path)
    plain, distilled = tmp_path / "ladder_plain.yaml", tmp_path / "ladder_distill_x.yaml"
    plain.write_text(yaml.safe_dump({"run_name": "opt"}))
    assert ladder_options.distill_notes([plain], tmp_path / "results") == []
    (run_dir / "examples").mkdir()
    made = {"teacher": "T6", "label_weight": 0.1, "source": "src"}
    (run_dir / "examples" / "teacher.json").write_text(json.dumps(made))
    distilled.write_text(yaml.safe_dump({"run_name": "opt"}))
    (note,) = ladder_options.distill_notes([distilled], tmp_path / "results")[1:]
    assert note.startswith("ladder_distill_x: ") and "(T6; label_weight 0.1 x the ICT label" in note
