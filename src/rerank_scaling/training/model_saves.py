"""What a training checkpoint's save writes: no model card, and the frozen weights once per process.

:func:`without_model_card`: sentence-transformers renders a model card (README.md) at every save by
running the model on example pairs; nothing reads it (``cache_keys.NOT_SCORING_FILES``).
benchmarks/results/checkpoint_save_zen3.md times it.

:func:`save_frozen_apart`: with ``training.freeze_embeddings`` the input embeddings do not train: a
MiniLM ladder model's 30522 x 384 word embeddings are 47 MB of its 55-91 MB checkpoint. Saved
whole, every trainer state writes them again, and so does every published copy
(:mod:`.checkpoint_store`), although their bytes never change. The hook makes a Hugging Face model
save its weights in the library's sharded layout instead of one ``model.safetensors``:
:data:`FROZEN_SHARD` holds the parameters that do not train, :data:`TRAINED_SHARD` the rest, and
:data:`INDEX` maps each tensor to its file, as ``save_pretrained`` writes a model too large for one
file. ``from_pretrained``, ``CrossEncoder(path)`` and the trainer's resume load it as they load any
sharded checkpoint. A frozen shard whose tensors (names, dtypes, shapes and bytes:
:func:`tensors_digest`) equal those of the last one this process saved is a hard link to that file
rather than a second copy of it; publishing then links it to the previous published checkpoint's
identical file (:meth:`.checkpoint_store.RunStore.publish`). What that saves:
benchmarks/results/checkpoint_writes_zen3.md (one run's checkpoints) and tiny_dag_ab_zen3.md (a
whole small workflow run).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FROZEN_SHARD = "model-00001-of-00002.safetensors"
TRAINED_SHARD = "model-00002-of-00002.safetensors"
INDEX = "model.safetensors.index.json"
#: What ``save_pretrained`` names the weights of a model saved in one file.
SINGLE_FILE = "model.safetensors"


def without_model_card(model: Any) -> None:
    """``model``'s saves (a sentence-transformers model) without the generated model card."""
    model.save_pretrained = functools.partial(model.save_pretrained, create_model_card=False)


def frozen_names(hf_model: Any) -> list[str]:
    """State-dict names of the parameters of ``hf_model`` that do not train (``requires_grad``
    off), tied names included, sorted; buffers train never and stay with the trained shard."""
    return sorted(
        name
        for name, parameter in hf_model.named_parameters(remove_duplicate=False)
        if not parameter.requires_grad
    )


def tensors_digest(tensors: dict[str, Any]) -> str:
    """SHA-256 over each tensor's name, dtype, shape and bytes, in name order (no copy of a CPU
    tensor's bytes: they are hashed where they lie)."""
    import torch

    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].detach().contiguous().cpu()
        digest.update(json.dumps([name, str(tensor.dtype), list(tensor.shape)]).encode())
        digest.update(memoryview(tensor.reshape(-1).view(torch.uint8).numpy()))
    return digest.hexdigest()


class FrozenShardWriter:
    """Writes a model's frozen tensors to a shard file, or links the last identical one it wrote."""

    def __init__(self) -> None:
        self.last: tuple[str, Path] | None = None  # (digest, the file holding those tensors)

    def place(self, tensors: dict[str, Any], target: Path) -> None:
        """Put ``tensors`` into the safetensors file ``target``: a link to the last file of
        identical tensors, else written."""
        from safetensors.torch import save_file

        digest = tensors_digest(tensors)
        if self.last is not None and self.last[0] == digest and self.last[1].is_file():
            try:
                os.link(self.last[1], target)
                self.last = (digest, target)
                return
            except OSError as error:  # no hard links on this file system: write it
                log.info("writing %s: could not link %s (%s)", target, self.last[1], error)
        save_file(
            {name: tensor.detach().contiguous() for name, tensor in tensors.items()}, target, {"format": "pt"}
        )
        self.last = (digest, target)


def save_frozen_apart(hf_model: Any) -> None:
    """Make ``hf_model.save_pretrained`` write its frozen parameters (:func:`frozen_names`, taken at
    each save) as :data:`FROZEN_SHARD`, through one :class:`FrozenShardWriter` for all its saves, and
    the rest as :data:`TRAINED_SHARD` with the :data:`INDEX` of both; a model without frozen
    parameters saves as before."""
    original = hf_model.save_pretrained
    writer = FrozenShardWriter()

    @functools.wraps(original)
    def save_pretrained(save_directory: str | os.PathLike[str], *args: Any, **kwargs: Any) -> Any:
        frozen = frozen_names(hf_model)
        if not frozen or kwargs.get("state_dict") is not None:
            return original(save_directory, *args, **kwargs)
        state = hf_model.state_dict(keep_vars=False)
        unknown = [name for name in frozen if name not in state]
        if unknown:  # a parameter the state dict names otherwise: save whole rather than guess
            log.warning("saving whole: frozen parameters %s are not state-dict names", unknown[:3])
            return original(save_directory, *args, **kwargs)
        frozen_set = set(frozen)
        trained = {name: tensor for name, tensor in state.items() if name not in frozen_set}
        result = original(save_directory, *args, state_dict=trained, **kwargs)
        directory = Path(save_directory)
        os.replace(directory / SINGLE_FILE, directory / TRAINED_SHARD)
        writer.place({name: state[name] for name in frozen}, directory / FROZEN_SHARD)
        weight_map = {name: FROZEN_SHARD for name in frozen} | {name: TRAINED_SHARD for name in trained}
        index = {
            "metadata": {"total_size": _total_bytes(state)},
            "weight_map": weight_map,  # sorted as written (sort_keys)
        }
        (directory / INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
        return result

    hf_model.save_pretrained = save_pretrained


def _total_bytes(state: dict[str, Any]) -> int:
    return sum(tensor.numel() * tensor.element_size() for tensor in state.values())


def checkpoint_tensors(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """Every tensor of a checkpoint folder's weights: the encoder's at its top level (one
    ``model.safetensors``, or the shards its :data:`INDEX` names) and those of the
    sentence-transformers modules saved in its sub-folders (a mean head's ``2_Dense/model.safetensors``),
    named ``<folder>/<tensor>``."""
    from safetensors.torch import load_file

    directory = Path(directory)
    if (directory / SINGLE_FILE).is_file():
        tensors = load_file(directory / SINGLE_FILE)
    else:
        shards = sorted(set(json.loads((directory / INDEX).read_text())["weight_map"].values()))
        tensors = {name: tensor for shard in shards for name, tensor in load_file(directory / shard).items()}
    for module in sorted(directory.glob(f"*/{SINGLE_FILE}")):
        tensors.update({f"{module.parent.name}/{name}": tensor for name, tensor in load_file(module).items()})
    return tensors
