"""Counting the sequences and non-padding tokens a training run feeds its model (the ``examples``,
``tokens`` and ``flops`` ~= 6 N tokens of each checkpoint's sidecar, :mod:`.trainer`)."""

from __future__ import annotations

from typing import Any


class TokenCounter:
    """Counts the sequences and non-padding tokens the model is fed, from the attention masks of the
    batches the loss has already tokenized (a forward pre-hook: no second tokenization). The count
    stays on the device until read, so it adds no synchronisation to the step."""

    def __init__(self, model: Any) -> None:
        self._base_tokens, self.examples = 0, 0
        self._tokens: Any = 0
        model.register_forward_pre_hook(self._count)

    def restore(self, tokens: int, examples: int) -> None:
        """Continue the counts of a resumed run."""
        self._base_tokens, self.examples, self._tokens = tokens, examples, 0

    def _count(self, module: Any, args: tuple[Any, ...]) -> None:
        import torch

        if not torch.is_grad_enabled():  # inference (no gradients): not a training step
            return
        features = args[0]
        if "attention_mask" in features:
            self._tokens = self._tokens + features["attention_mask"].sum()
            self.examples += int(features["attention_mask"].shape[0])
        else:  # flattened (unpadded) inputs for FlashAttention's varlen kernels: no padding at all
            self._tokens = self._tokens + features["input_ids"].numel()
            self.examples += len(features["cu_seq_lens_q"]) - 1

    @property
    def tokens(self) -> int:
        return self._base_tokens + int(self._tokens)
