"""Stage: one model's tokenized candidate pairs of one evaluation split, written once.

    python -m rerank_scaling.evaluation.split_tokens --model JSON --collection DIR \
        --bm25-run bm25/runs/dev.trec --texts eval/texts/dev.parquet --split dev --settings JSON \
        --max-length 256 --out eval/tokens/<model>/dev.parquet

Every evaluation job of a run tokenizes the (query, passage) pairs of its splits before scoring
(MS MARCO dev/small: 0.7M pairs, minutes on one tokenizer thread), and every checkpoint of every
run of a model uses the same tokenizer: this CPU job tokenizes a split once per model (its base
tokenizer, which training saves into every checkpoint unchanged) and writes the pairs in the
scoring order (:func:`rerank_scaling.evaluation.rerank.tokenize_pairs`: sorted by length) as a
Parquet table ``qid, docid, input_ids[, token_type_ids]``. ``rerank.read_split_tokens`` loads it
without building Python lists; the evaluation job re-tokenizes a sample with the checkpoint's own
tokenizer and tokenizes everything itself if any id differs (``rerank.matches_tokenizer``).
Not for the ``scratch`` family, whose tokenizer each run trains for itself.
"""

from __future__ import annotations

import argparse
import logging

from rerank_scaling.atomic import write_table
from rerank_scaling.evaluation.checkpoints import load_split
from rerank_scaling.evaluation.eval_settings import EvalSettings
from rerank_scaling.evaluation.rerank import candidate_pairs, tokenize_pairs, tokens_table
from rerank_scaling.settings import parse_json_arg, settings_from_dict

log = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> None:
    from transformers import AutoTokenizer

    from rerank_scaling.families.paths import resolve_path

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, help="JSON of the models[] entry")
    parser.add_argument("--collection", required=True)
    parser.add_argument("--bm25-run", required=True)
    parser.add_argument("--texts", required=True, help="the split's split_texts table")
    parser.add_argument("--split", required=True)
    parser.add_argument("--settings", required=True, help="JSON of the config's evaluation section")
    parser.add_argument("--max-length", type=int, required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    spec = parse_json_arg(args.model)
    settings = settings_from_dict(EvalSettings, parse_json_arg(args.settings), "evaluation")
    split = load_split(
        args.collection,
        args.bm25_run,
        args.split,
        settings.rerank_depth,
        (settings.max_queries or {}).get(args.split),
        settings.seed,
        texts_file=args.texts,
    )
    tokenizer = AutoTokenizer.from_pretrained(resolve_path(spec["path"]))
    pairs = candidate_pairs(split.candidates, settings.rerank_depth)
    tokens = tokenize_pairs(tokenizer, pairs, split.queries, split.texts, args.max_length)
    write_table(tokens_table(tokens), args.out)
    log.info("%s: %d pairs tokenized for %s", args.out, len(pairs), spec["name"])


if __name__ == "__main__":
    main()
