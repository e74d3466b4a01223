"""Which model families can run the sparse (windowed) cross-encoder, checked before any job runs.

:mod:`rerank_scaling.training.sparse_encoder` selects its attention through transformers' attention
registry, so a family supports the pattern when (1) its attention modules call the function
registered in ``ALL_ATTENTION_FUNCTIONS`` (transformers' own test,
``PreTrainedModel._can_set_attn_implementation``: BERT, ModernBERT, ...; not e.g. MPNet or
DeBERTa-v2, which compute attention inline), and (2) the query/document boundary is known: token
type embeddings (``type_vocab_size`` >= 2) or a separator token (``sep_token_id``). The
architecture is read from the entry's ``config.json`` as its family gives it
(:meth:`~rerank_scaling.families.family.ModelFamily.config_json`).
"""

from __future__ import annotations

from typing import Any

from rerank_scaling.families.registry import family_of

VERIFIED = {"bert", "modernbert"}  # covered by the equivalence tests; no transformers import needed


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
    """Config problems: models that cannot run a windowed ``training.attention`` variant (a key
    the schema requires) of a validated ``config``.

    Hub ids not yet in the cache are checked again when the train job applies the pattern.
    """
    windowed = [a for a in config["training"]["attention"] if a != "full"]
    if not windowed:
        return []
    problems = []
    for index, spec in enumerate(config["models"]):
        model_config = family_of(spec).config_json(spec)
        problem = None if model_config is None else _family_problem(model_config)
        if problem:
            problems.append(
                f"config field 'models[{index}]' ({spec['name']}): training.attention asks for "
                f"{', '.join(windowed)}, but {problem}; use training.attention: [full] or another model"
            )
    return problems
