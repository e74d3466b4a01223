"""The ``hf`` family: a Hugging Face id (pinned: ``org/name@<commit sha>``) or a local directory,
loaded as is (paper: the Ettin encoders, 17M-1B, and ModernBERT; hub ids from the cache the
prefetch step fills, :mod:`rerank_scaling.hub.cache`)."""

from __future__ import annotations

from typing import Any

from rerank_scaling.families.family import BuildInputs, EncoderSource, ModelFamily
from rerank_scaling.families.paths import config_at, resolve_path


class HfFamily(ModelFamily):
    """A pretrained encoder used whole."""

    name = "hf"
    required = ("path",)

    def encoder_source(self, spec: dict[str, Any], inputs: BuildInputs) -> EncoderSource:
        return EncoderSource(resolve_path(spec["path"]))

    def config_json(self, spec: dict[str, Any]) -> dict[str, Any] | None:
        return config_at(spec["path"])


FAMILY = HfFamily()
