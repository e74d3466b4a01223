"""Stage: evaluate several runs' checkpoints in one process (rule ``evaluate_bundle``), so that the
job pays its imports and Snakefile parse once (:mod:`rerank_scaling.workflow.eval_bundles` picks the runs).

    python -m rerank_scaling.evaluation.evaluate_bundle --runs RUN1 RUN2 ... --results results/NAME \\
        --collection DIR --bm25-dir DIR --splits dev test --settings JSON --texts-dir DIR \\
        --max-length 256 --device cuda --threads 8 --out metrics.parquet --per-query per_query.parquet

Each run is scored by :func:`rerank_scaling.evaluation.evaluate.main` as ``evaluate_run`` scores it
(its checkpoints under ``<results>/checkpoints/<run>``, its model's token tables under
``<results>/eval/tokens/<model>``, its cache under ``<results>/work/eval/<run>``, shared with
``evaluate_run`` and ``evaluate_part``), and the runs' tables are merged into ``--out`` and
``--per-query`` (:func:`rerank_scaling.evaluation.merge_metrics.write_merged`).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rerank_scaling.evaluation import evaluate
from rerank_scaling.evaluation.merge_metrics import write_merged
from rerank_scaling.grid import RunSpec
from rerank_scaling.records import METRIC_COLUMNS, PER_QUERY_COLUMNS


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", nargs="+", required=True)
    parser.add_argument("--results", required=True, help="the workflow's results/<run_name> directory")
    parser.add_argument("--out", required=True)
    parser.add_argument("--per-query", required=True)
    args, passed_on = parser.parse_known_args(argv)
    results = Path(args.results)
    metrics, per_query = [], []
    (results / "work" / "eval").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".bundle-", dir=results / "work" / "eval") as tmp:
        for run in args.runs:
            metrics.append(str(Path(tmp) / f"{run}.parquet"))
            per_query.append(str(Path(tmp) / f"{run}.per_query.parquet"))
            evaluate.main(
                ["run", *passed_on, "--checkpoints", str(results / "checkpoints" / run)]
                + ["--tokens-dir", str(results / "eval" / "tokens" / RunSpec.parse(run).model)]
                + [
                    "--work",
                    str(results / "work" / "eval" / run),
                    "--out",
                    metrics[-1],
                    "--per-query",
                    per_query[-1],
                ]
            )
        write_merged(metrics, [args.out], METRIC_COLUMNS)
        write_merged(per_query, [args.per_query], PER_QUERY_COLUMNS)


if __name__ == "__main__":
    main()
