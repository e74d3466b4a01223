"""ModernBERT (the Ettin architecture) as a first-class family: the seed-002 windowed attention
through transformers' attention registry, with rotary positions, alternating local/global layers
and segments from the separator token (the tokenizer emits no token types)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from tiny_modernbert import save_tiny_modernbert

from rerank_scaling.families.models import build_cross_encoder
from rerank_scaling.training.sparse_encoder import (
    AttentionVariant,
    apply_window_attention,
    attention_variant_from_name,
    segments_from_separator,
)
from rerank_scaling.training.window_attention import dense_pattern_mask
from rerank_scaling.workflow.load import ConfigError, validate_config

PAIRS = [
    (
        "what is a cross encoder",
        "A cross-encoder reads query and document together and outputs one relevance score.",
    ),
    ("sparse attention windows", "Windowed attention restricts each document token to its neighbours only."),
    ("what is a cross encoder", "short doc"),
    ("sparse attention windows on long documents", "another document, a bit longer than the short one"),
]


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_modernbert(tmp_path_factory.mktemp("modernbert") / "tiny")


def _cross_encoder(path: Path, head: str):
    return build_cross_encoder({"family": "hf", "path": str(path), "head": head}, 64, 0).eval()


def _features(model) -> dict[str, torch.Tensor]:
    features = model.preprocess(PAIRS)
    return {k: v for k, v in features.items() if isinstance(v, torch.Tensor)}


def _scores(model, features: dict[str, torch.Tensor]) -> torch.Tensor:
    return model({**features})["scores"].view(-1)


def _encoder(model):
    return model.model.model if hasattr(model.model, "classifier") else model.model


def test_tiny_model_is_what_the_tests_need(tiny_path: Path) -> None:
    model = _cross_encoder(tiny_path, "cls")
    features = _features(model)
    assert "token_type_ids" not in features  # as Ettin's tokenizer
    assert features["attention_mask"].min() == 0  # padded batch
    config = model.model.config
    assert config.layer_types == ["full_attention", "sliding_attention", "full_attention"]
    assert features["attention_mask"].sum(1).max() > 2 * config.sliding_window + 1  # local layers matter


def test_segments_from_separator() -> None:
    ids = torch.tensor([[101, 5, 6, 102, 7, 8, 102, 0], [101, 5, 102, 7, 102, 0, 0, 0]])
    mask = (ids != 0).long()
    expected = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 0, 0, 0]])
    assert torch.equal(segments_from_separator(ids, mask, 102), expected)


@pytest.mark.parametrize("head", ["cls", "mean"])
def test_full_window_equals_full_attention(tiny_path: Path, head: str) -> None:
    model = _cross_encoder(tiny_path, head)
    features = _features(model)
    with torch.inference_mode():
        full_states = _encoder(model)(**features).last_hidden_state
        full = _scores(model, features)
    keys = list(model.model.state_dict())

    apply_window_attention(model.model, AttentionVariant(10_000, query_sees_document=True))
    assert model.model.config._attn_implementation == "rerank_window"
    with torch.inference_mode():
        states = _encoder(model)(**features).last_hidden_state
        scores = _scores(model, features)
    valid = features["attention_mask"].bool()
    torch.testing.assert_close(states[valid], full_states[valid], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(scores, full, rtol=1e-4, atol=1e-5)
    assert list(model.model.state_dict()) == keys

    apply_window_attention(model.model, AttentionVariant(4))  # re-applying replaces the variant
    with torch.inference_mode():
        windowed = _encoder(model)(**features).last_hidden_state
    assert not torch.allclose(windowed[valid], full_states[valid], atol=1e-3)


def test_full_window_gradients_match(tiny_path: Path) -> None:
    features = None
    grads = []
    for patch in (False, True):
        model = _cross_encoder(tiny_path, "cls").train()
        features = features or _features(model)
        if patch:
            apply_window_attention(model.model, AttentionVariant(10_000, query_sees_document=True))
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            _scores(model, features), torch.tensor([1.0, 1.0, 0.0, 0.0])
        )
        loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 10
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, rtol=1e-4, atol=1e-6, msg=name)


def _additive(allowed: torch.Tensor) -> torch.Tensor:
    return torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))[:, None]


def test_window_pattern_intersects_the_local_layers(tiny_path: Path) -> None:
    """window2 through the registry equals the model's own eager attention given explicit masks:
    the seed pattern on global layers, pattern AND the local window on local layers."""
    model = _cross_encoder(tiny_path, "mean")
    features = _features(model)
    encoder = _encoder(model)
    types = segments_from_separator(
        features["input_ids"], features["attention_mask"], encoder.config.sep_token_id
    )
    pattern = dense_pattern_mask(types, features["attention_mask"], 2)
    positions = torch.arange(types.shape[1])
    distance = (positions[:, None] - positions[None, :]).abs()
    local = (pattern & (distance <= encoder.config.sliding_window)) | (distance == 0)  # padding rows: self
    masks = {"full_attention": _additive(pattern), "sliding_attention": _additive(local)}
    encoder.set_attn_implementation("eager")
    with torch.inference_mode():
        expected = encoder(input_ids=features["input_ids"], attention_mask=masks).last_hidden_state
        unrestricted = encoder(**features).last_hidden_state
    apply_window_attention(model.model, attention_variant_from_name("window2"))
    with torch.inference_mode():
        states = encoder(**features).last_hidden_state
    valid = features["attention_mask"].bool()
    torch.testing.assert_close(states[valid], expected[valid], rtol=1e-4, atol=1e-5)
    assert not torch.allclose(states[valid], unrestricted[valid], atol=1e-3)


@pytest.mark.parametrize("head", ["cls", "mean"])
def test_patched_model_saves_a_plain_checkpoint(tiny_path: Path, head: str, tmp_path: Path) -> None:
    from sentence_transformers.cross_encoder import CrossEncoder

    model = _cross_encoder(tiny_path, head)
    apply_window_attention(model.model, attention_variant_from_name("window2"))
    features = _features(model)
    with torch.inference_mode():
        expected = _scores(model, features)
    model.save(str(tmp_path / "ckpt"))
    saved = json.loads(next((tmp_path / "ckpt").rglob("config.json")).read_text())
    assert "rerank_window" not in json.dumps(saved)  # loadable without this package

    loaded = CrossEncoder(str(tmp_path / "ckpt"), max_length=64).eval()
    assert loaded.model.config._attn_implementation != "rerank_window"
    apply_window_attention(loaded.model, attention_variant_from_name("window2"))
    with torch.inference_mode():
        torch.testing.assert_close(_scores(loaded, features), expected)


def _config_with(model_path: Path, attention: list[str]) -> dict:
    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml").read_text())
    config["models"] = [{"name": "m", "family": "hf", "path": str(model_path), "head": "mean", "role": "fit"}]
    config["training"]["attention"] = attention
    return config


def test_config_check_accepts_modernbert_and_rejects_families_without_the_registry(
    tiny_path: Path, tmp_path: Path
) -> None:
    validate_config(_config_with(tiny_path, ["full", "window4"]))
    mpnet = tmp_path / "mpnet"  # computes attention inline: no registry, no pattern
    mpnet.mkdir()
    (mpnet / "config.json").write_text(json.dumps({"model_type": "mpnet", "sep_token_id": 2}))
    validate_config(_config_with(mpnet, ["full"]))  # full attention needs nothing
    with pytest.raises(ConfigError, match=r"models\[0\]' \(m\).*window4.*'mpnet' family.*AttentionInterface"):
        validate_config(_config_with(mpnet, ["full", "window4"]))
    no_separator = tmp_path / "nosep"
    no_separator.mkdir()
    settings = json.loads((tiny_path / "config.json").read_text())
    (no_separator / "config.json").write_text(json.dumps({**settings, "sep_token_id": None}))
    with pytest.raises(ConfigError, match="neither token types nor a sep_token_id to find"):
        validate_config(_config_with(no_separator, ["window2"]))
