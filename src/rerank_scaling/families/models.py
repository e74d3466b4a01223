"""Cross-encoders of every model family, and their sizes.

A ``models[]`` entry's family (:mod:`rerank_scaling.families`: ``hf``, ``ladder``, ``scratch``)
says which encoder to start from (:meth:`~rerank_scaling.families.family.ModelFamily.encoder_source`);
here it gets its relevance head and becomes a directory-backed ``sentence_transformers.CrossEncoder``,
described by :class:`ModelStats` (Kaplan et al. 2020 count non-embedding parameters).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from rerank_scaling.families.family import BuildInputs
from rerank_scaling.families.registry import family_of
from rerank_scaling.settings import model_spec

__all__ = ["ModelStats", "attention_implementation", "build_cross_encoder", "model_stats"]


@dataclass(frozen=True)
class ModelStats:
    """Size of a model: total and non-embedding parameters, depth and width."""

    params: int
    non_embedding_params: int
    layers: int
    hidden: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def model_stats(model: Any) -> ModelStats:
    """Count parameters of a Hugging Face encoder; embeddings = the ``embeddings`` submodule."""
    total = sum(p.numel() for p in model.parameters())
    embedding = sum(p.numel() for name, p in model.named_parameters() if ".embeddings." in f".{name}")
    config = model.config
    return ModelStats(total, total - embedding, int(config.num_hidden_layers), int(config.hidden_size))


def freeze_input_embeddings(model: Any) -> None:
    """Stop training a ``CrossEncoder``'s input (word) embeddings (``training.freeze_embeddings``):
    what the trainer and the cost profiles' measured step both do."""
    model.model.get_input_embeddings().weight.requires_grad_(False)


def attention_implementation(device: str, half: bool) -> str | None:
    """The fastest attention transformers offers on ``device``: FlashAttention-2 (its varlen kernel
    drops padding; needs the ``flash-attn`` package, a GPU of compute capability >= 8.0 and
    half-precision autocast, ``half``: it computes in bf16/fp16 only), else None: transformers'
    default, PyTorch's SDPA for the architectures that have it (fused kernels, padded). Training
    records what was used in each checkpoint's sidecar (``attn_implementation``)."""
    import torch
    from transformers.utils import is_flash_attn_2_available

    if half and device.startswith("cuda") and torch.cuda.is_available() and is_flash_attn_2_available():
        if torch.cuda.get_device_capability()[0] >= 8:
            return "flash_attention_2"
    return None


def _with_head(
    path: str,
    head: str,
    max_length: int,
    config_kwargs: dict[str, Any] | None = None,
    model_kwargs: dict[str, Any] | None = None,
) -> Any:
    """A CrossEncoder over the encoder at ``path`` with a [CLS] or a mean-pooling relevance head.

    ``cls``: the standard ``BertForSequenceClassification`` head (pooler + linear on [CLS]).
    ``mean``: mean-pool the joint (query, passage) token states, then a linear layer to one score.
    Sentence-embedding checkpoints (MiniLM) were trained with mean pooling; their shallow [CLS]
    state barely depends on the input, so the mean head is the matching-friendly initialisation.
    """
    from sentence_transformers.base.modules import Dense, Transformer
    from sentence_transformers.cross_encoder import CrossEncoder
    from sentence_transformers.sentence_transformer.modules import Pooling

    if head == "cls":
        return CrossEncoder(
            path, num_labels=1, max_length=max_length, config_kwargs=config_kwargs, model_kwargs=model_kwargs
        )
    if head != "mean":
        raise ValueError(f"models[].head: unknown head {head!r}; use cls or mean")
    encoder = Transformer(
        path,
        transformer_task="feature-extraction",
        config_kwargs=config_kwargs,
        model_kwargs=model_kwargs,
        max_seq_length=max_length,
    )
    width = encoder.get_embedding_dimension()
    score = Dense(width, 1, activation_function=None, module_output_name="scores")
    return CrossEncoder(modules=[encoder, Pooling(width, pooling_mode="mean"), score])


def build_cross_encoder(
    spec: dict[str, Any],
    max_length: int,
    seed: int,
    corpus_texts: Iterable[str] | None = None,
    work_dir: str | os.PathLike[str] | None = None,
    attn_implementation: str | None = None,
) -> Any:
    """A fresh ``CrossEncoder`` (one relevance logit) for a config ``models[]`` entry.

    ``corpus_texts`` and ``work_dir`` are needed by a family that trains on the corpus
    (:attr:`~rerank_scaling.families.family.ModelFamily.needs_corpus`: ``scratch``'s tokenizer);
    ``attn_implementation`` (:func:`attention_implementation`) is passed to transformers.
    """
    kwargs = {"attn_implementation": attn_implementation} if attn_implementation else None
    import torch

    torch.manual_seed(seed)
    source = family_of(spec).encoder_source(spec, BuildInputs(max_length, corpus_texts, work_dir))
    return _with_head(source.directory, model_spec(spec)["head"], max_length, source.config_kwargs, kwargs)
