"""device: cuda on a machine where torch sees no GPU fails at once, saying why it may be so."""

from __future__ import annotations

import pytest
import torch

from rerank_scaling.device import resolve_device


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where torch sees no GPU")
def test_cuda_without_a_visible_gpu_names_the_torch_build_and_the_driver(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(RuntimeError) as raised:
        resolve_device("cuda")
    message = str(raised.value)
    assert f"torch {torch.__version__}" in message
    assert f"torch.version.cuda {torch.version.cuda or 'None'}" in message
    assert "driver" in message and "CUDA_VISIBLE_DEVICES='0'" in message
    assert "TORCH_INDEX=" in message  # the fix: the wheel for the driver
    assert resolve_device("auto") == "cpu"
