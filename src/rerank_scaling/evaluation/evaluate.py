"""Stage: evaluate a run's checkpoints, or the BM25 first stage, on the evaluation splits.

    python -m rerank_scaling.evaluation.evaluate run --checkpoints DIR --collection DIR --bm25-dir DIR \
        --splits dev test --settings JSON --max-length 64 --device auto --out metrics.parquet \
        --per-query per_query.parquet --work DIR
    python -m rerank_scaling.evaluation.evaluate bm25 --collection DIR --bm25-dir DIR --splits dev test \
        --settings JSON --out bm25.parquet --per-query per_query.parquet

--out gets the long metric table (records.METRIC_COLUMNS), --per-query every metric per query
(records.PER_QUERY_COLUMNS), which the summary's noise yardsticks resample.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from rerank_scaling.atomic import write_table
from rerank_scaling.device import resolve_device
from rerank_scaling.evaluation.checkpoints import bm25_tables, evaluate_checkpoints, load_split
from rerank_scaling.evaluation.eval_settings import EvalSettings
from rerank_scaling.evaluation.rerank import read_split_tokens
from rerank_scaling.parent_process import die_with_parent
from rerank_scaling.planning.gpu_fit import report_gpu
from rerank_scaling.settings import parse_json_arg, settings_from_dict


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["run", "bm25"])
    parser.add_argument("--collection", required=True)
    parser.add_argument("--bm25-dir", required=True, help="directory of <split>.trec BM25 runs")
    parser.add_argument("--splits", nargs="+", required=True)
    parser.add_argument("--settings", required=True, help="JSON of the config's evaluation section")
    parser.add_argument("--out", required=True)
    parser.add_argument("--per-query", required=True, help="per-query metric table (parquet)")
    parser.add_argument(
        "--checkpoints", help="run mode: directory of ckpt-XX/ checkpoints, or one ckpt-XX (evaluation.unit)"
    )
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--work", help="run mode: cache and reranked runs")
    parser.add_argument(
        "--texts-dir",
        help="run mode: directory of <split>.parquet candidate texts (evaluation.split_texts); "
        "without it the corpus is scanned",
    )
    parser.add_argument(
        "--tokens-dir",
        help="run mode: directory of <split>.parquet tokenized pairs (evaluation.split_tokens), if any",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = settings_from_dict(EvalSettings, parse_json_arg(args.settings), "evaluation")
    limits = settings.max_queries or {}
    splits = [
        load_split(
            args.collection,
            str(Path(args.bm25_dir) / f"{s}.trec"),
            s,
            settings.rerank_depth,
            limits.get(s),
            settings.seed,
            texts_file=str(Path(args.texts_dir) / f"{s}.parquet") if args.texts_dir else None,
            with_texts=args.mode == "run",
        )
        for s in args.splits
    ]
    if args.mode == "bm25":
        table, per_query = bm25_tables(splits, settings)
    else:
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        single = Path(args.checkpoints) / "checkpoint.json"  # one checkpoint (evaluation.unit)
        checkpoints = (
            [single] if single.exists() else sorted(Path(args.checkpoints).glob("ckpt-*/checkpoint.json"))
        )
        work = Path(args.work)
        ready = [(s, Path(args.tokens_dir or "") / f"{s}.parquet") for s in args.splits]
        pretokenized = {s: read_split_tokens(path) for s, path in ready if args.tokens_dir and path.exists()}
        report_gpu(resolve_device(args.device))  # the card against the planned one (planning.gpu_fit)
        table, per_query = evaluate_checkpoints(
            [c.parent for c in checkpoints],
            splits,
            settings,
            args.max_length,
            resolve_device(args.device),
            work / "runs",
            work / "cache",
            pretokenized,
        )
    write_table(per_query, args.per_query)
    write_table(table.astype({"model_commit": "str"}), args.out)  # text even where every row's is null


if __name__ == "__main__":
    die_with_parent()  # Snakemake killed, even by SIGKILL, leaves no scoring job: evaluate_run execs this
    main()
