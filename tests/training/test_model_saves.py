"""What a Hugging Face model's save writes under :func:`model_saves.save_frozen_apart`, on a small
BERT built from its config: the two shards with frozen parameters, and one whole file where the
frozen parameters are not state-dict names or there are none."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rerank_scaling.training.model_saves import (
    FROZEN_SHARD,
    INDEX,
    SINGLE_FILE,
    TRAINED_SHARD,
    save_frozen_apart,
)


def small_bert() -> torch.nn.Module:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    return BertModel(config)


def prefixed_state(module: torch.nn.Module, state: dict, prefix: str, local_metadata: dict) -> dict:
    """A state-dict hook that renames every key, as a wrapper or conversion layer may: the
    parameters' names then are not the state dict's."""
    for key in list(state):
        state[f"renamed.{key}"] = state.pop(key)
    return state


def saved_files(directory: Path) -> set[str]:
    return {path.name for path in directory.iterdir() if path.suffix in {".safetensors", ".json"}} - {
        "config.json"
    }


def test_two_saves_of_frozen_embeddings_write_them_once(tmp_path: Path) -> None:
    model = small_bert()
    model.get_input_embeddings().weight.requires_grad_(False)
    save_frozen_apart(model)
    model.save_pretrained(tmp_path / "a")
    torch.nn.init.normal_(model.pooler.dense.weight)  # a trained parameter changes between saves
    model.save_pretrained(tmp_path / "b")
    for name in ("a", "b"):
        assert saved_files(tmp_path / name) == {FROZEN_SHARD, TRAINED_SHARD, INDEX}
        assert set(load_file(tmp_path / name / FROZEN_SHARD)) == {"embeddings.word_embeddings.weight"}
    assert (tmp_path / "a" / FROZEN_SHARD).stat().st_ino == (tmp_path / "b" / FROZEN_SHARD).stat().st_ino
    trained = load_file(tmp_path / "b" / TRAINED_SHARD)["pooler.dense.weight"]
    assert torch.equal(trained, model.pooler.dense.weight)
    assert not torch.equal(trained, load_file(tmp_path / "a" / TRAINED_SHARD)["pooler.dense.weight"])


def test_frozen_parameters_the_state_dict_names_otherwise_save_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = small_bert()
    model.get_input_embeddings().weight.requires_grad_(False)
    model._register_state_dict_hook(prefixed_state)
    save_frozen_apart(model)
    with caplog.at_level(logging.WARNING, logger="rerank_scaling.training.model_saves"):
        model.save_pretrained(tmp_path)
    assert saved_files(tmp_path) == {SINGLE_FILE}
    assert "saving whole" in caplog.text and "embeddings.word_embeddings.weight" in caplog.text
    saved = load_file(tmp_path / SINGLE_FILE)
    for name, tensor in model.state_dict().items():
        assert torch.equal(saved[name], tensor), name


def test_a_model_that_trains_everything_saves_one_file(tmp_path: Path) -> None:
    model = small_bert()
    save_frozen_apart(model)
    model.save_pretrained(tmp_path)
    assert saved_files(tmp_path) == {SINGLE_FILE}
    saved = load_file(tmp_path / SINGLE_FILE)
    assert saved.keys() == model.state_dict().keys()
