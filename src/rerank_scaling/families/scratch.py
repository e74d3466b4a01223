"""The ``scratch`` family: a BERT of the configured shape from random init, with an uncased
WordPiece tokenizer trained on the collection (``tokenizers``; Devlin et al. 2019's recipe)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rerank_scaling.families.family import BuildInputs, EncoderSource, ModelFamily
from rerank_scaling.settings import model_spec


def train_wordpiece(texts: Iterable[str], vocab_size: int, out_dir: str | os.PathLike[str]) -> Any:
    """Train an uncased BERT WordPiece tokenizer on ``texts`` and save it in ``out_dir``."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    tokenizer = BertWordPieceTokenizer(lowercase=True)
    tokenizer.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=2)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    tokenizer.save_model(str(out_dir))
    fast = BertTokenizerFast(vocab_file=str(Path(out_dir) / "vocab.txt"), do_lower_case=True)
    fast.save_pretrained(str(out_dir))
    return fast


class ScratchFamily(ModelFamily):
    """A randomly initialised BERT whose tokenizer each run trains on the corpus."""

    name = "scratch"
    required = ("layers", "hidden", "heads", "intermediate")
    optional = ("vocab_size",)
    needs_corpus = True

    def encoder_source(self, spec: dict[str, Any], inputs: BuildInputs) -> EncoderSource:
        """Train the tokenizer, save a fresh BERT (initialised from torch's current seed) in
        ``work_dir/scratch-base``."""
        from transformers import BertConfig, BertForSequenceClassification

        if inputs.corpus_texts is None or inputs.work_dir is None:
            raise ValueError("the scratch family needs the corpus texts and a work directory")
        base = Path(inputs.work_dir) / "scratch-base"
        tokenizer = train_wordpiece(inputs.corpus_texts, int(model_spec(spec)["vocab_size"]), base)
        config = BertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=spec["hidden"],
            num_hidden_layers=spec["layers"],
            num_attention_heads=spec["heads"],
            intermediate_size=spec["intermediate"],
            max_position_embeddings=max(512, inputs.max_length),
            num_labels=1,
        )
        BertForSequenceClassification(config).save_pretrained(str(base))
        return EncoderSource(str(base))

    def config_json(self, spec: dict[str, Any]) -> dict[str, Any] | None:
        """The configured shape (the vocabulary the tokenizer is asked for: training may find fewer;
        a spec without one gets the schema's default)."""
        return {
            "model_type": "bert",
            "hidden_size": spec["hidden"],
            "num_hidden_layers": spec["layers"],
            "intermediate_size": spec["intermediate"],
            "vocab_size": model_spec(spec)["vocab_size"],
            "type_vocab_size": 2,
        }


FAMILY = ScratchFamily()
