"""Which model families can run the sparse (windowed) cross-encoder, checked before any job runs.

:mod:`rerank_scaling.training.sparse_encoder` selects its attention through transformers' attention
registry, so a family supports the pattern when (1) its attention modules call the function
registered in ``ALL_ATTENTION_FUNCTIONS`` (transformers' own test,
``PreTrainedModel._can_set_attn_implementation``: BERT, ModernBERT, ...; not e.g. MPNet or
DeBERTa-v2, which compute attention inline), and (2) the query/document boundary is known: token
type embeddings (``type_vocab_size`` >= 2) or a separator token (``sep_token_id``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rerank_scaling.hub import cached_model, is_hub_id
from rerank_scaling.training.models import resolve_path

VERIFIED = {"bert", "modernbert"}  # covered by the equivalence tests; no transformers import needed


def _model_config(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The ``config.json`` of a models[] entry; None where it cannot be read yet (hub id not prefetched)."""
    if spec["family"] == "scratch":
        return {"model_type": "bert", "type_vocab_size": 2}
    path = spec["path"]
    if is_hub_id(path):
        directory = cached_model(path)
    else:
        try:
            directory = Path(resolve_path(path))
        except FileNotFoundError:  # a package that is not installed: reported where it is loaded
            return None
    if directory is None or not (directory / "config.json").exists():
        return None
    return json.loads((directory / "config.json").read_text())


def _family_problem(model_config: dict[str, Any]) -> str | None:
    """Why this architecture cannot run the windowed pattern, or None."""
    model_type = model_config.get("model_type", "?")
    if model_type not in VERIFIED:
        import transformers
        from transformers.models.auto.modeling_auto import MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES

        class_name = MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES.get(model_type)
        if class_name is None:
            return f"model_type {model_type!r} has no sequence-classification model in transformers"
        if not getattr(transformers, class_name)._can_set_attn_implementation():
            return (
                f"the {model_type!r} family computes attention inline instead of through transformers' "
                "AttentionInterface, so the windowed pattern cannot be selected"
            )
    if int(model_config.get("type_vocab_size") or 0) < 2 and model_config.get("sep_token_id") is None:
        return f"the {model_type!r} config has neither token types nor a sep_token_id to find the document"
    return None


def check_attention_support(config: dict[str, Any]) -> list[str]:
    """Config problems: models that cannot run a windowed ``training.attention`` variant.

    Hub ids not yet in the cache are checked again when the train job applies the pattern.
    """
    windowed = [a for a in config["training"].get("attention", ["full"]) if a != "full"]
    if not windowed:
        return []
    problems = []
    for index, spec in enumerate(config["models"]):
        model_config = _model_config(spec)
        problem = None if model_config is None else _family_problem(model_config)
        if problem:
            problems.append(
                f"config field 'models[{index}]' ({spec['name']}): training.attention asks for "
                f"{', '.join(windowed)}, but {problem}; use training.attention: [full] or another model"
            )
    return problems
