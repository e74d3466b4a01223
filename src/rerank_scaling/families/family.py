"""What every model family says about its ``models[]`` entries (issue 31: a new family is one module).

A family turns an entry (a dict of the config's ``models[]`` list) into:

* the encoder a cross-encoder is built from (:meth:`ModelFamily.encoder_source`: a directory that
  transformers loads, and config overrides); :func:`rerank_scaling.families.models.build_cross_encoder`
  puts the relevance head on it;
* its ``config.json`` without loading the model (:meth:`ModelFamily.config_json`) and the depth it
  keeps (:meth:`ModelFamily.layers_kept`), from which planning counts parameters and FLOPs
  (:class:`rerank_scaling.planning.memory.MemoryShape`,
  :func:`rerank_scaling.workflow.job_resources.encoder_shape`)
  and the windowed-attention check reads the architecture
  (:mod:`rerank_scaling.training.attention_support`);
* its rules: the keys an entry must give (:attr:`ModelFamily.required`, the schema's ``if/then``),
  whether a path that is not a hub id must be an existing directory, and its own cross-field
  problems (:meth:`ModelFamily.problems`), for the parse-time config checks.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BuildInputs:
    """What a build may use besides the entry: the sequence length, and for a family that trains
    on the collection (:attr:`ModelFamily.needs_corpus`) its texts and a work directory."""

    max_length: int
    corpus_texts: Iterable[str] | None = None
    work_dir: str | os.PathLike[str] | None = None


@dataclass(frozen=True)
class EncoderSource:
    """What a cross-encoder is built from: a directory transformers loads, and config overrides."""

    directory: str
    config_kwargs: dict[str, Any] | None = None


#: keys of every ``models[]`` entry, whatever its family (``head``: the relevance head on the encoder)
COMMON_KEYS = ("name", "family", "role", "head")


class ModelFamily(ABC):
    """One model family (the value of ``models[].family``); subclasses set the class attributes."""

    #: the ``models[].family`` value
    name: str = ""
    #: keys an entry of this family must give besides name, family and role
    required: tuple[str, ...] = ()
    #: keys an entry of this family may give besides :data:`COMMON_KEYS` and :attr:`required`; any
    #: other key of the schema's ``models[]`` properties is one the family never reads (a ladder's
    #: ``hidden``), refused by :meth:`problems` rather than ignored
    optional: tuple[str, ...] = ()
    #: the build trains on the collection's texts (a tokenizer of its own): the train job reads the corpus
    needs_corpus: bool = False
    #: a ``path`` that is not a hub id must be an existing directory (not only when it looks local)
    path_is_local: bool = False

    @abstractmethod
    def encoder_source(self, spec: dict[str, Any], inputs: BuildInputs) -> EncoderSource:
        """The encoder an entry's cross-encoder is built from (the caller has seeded torch)."""

    @abstractmethod
    def config_json(self, spec: dict[str, Any]) -> dict[str, Any] | None:
        """The entry's ``config.json`` as transformers would read it, before :meth:`layers_kept`
        applies; None where it cannot be read yet (a hub id not prefetched)."""

    def layers_kept(self, spec: dict[str, Any]) -> int | None:
        """The depth the entry keeps when it differs from its ``config.json`` (None: the config's)."""
        return None

    def problems(self, spec: dict[str, Any]) -> list[tuple[str, str]]:
        """(field of the entry, what is wrong and the fix) for every problem of one entry: missing
        required keys and keys the family does not read here, a family's own cross-field rules in
        its override."""
        found = [
            (key, f"a {self.name} model needs '{key}'; give it") for key in self.required if key not in spec
        ]
        read = (*COMMON_KEYS, *self.required, *self.optional)
        found += [
            (key, f"a {self.name} model does not read '{key}' (its keys: {', '.join(read)}); remove it")
            for key in spec
            if key not in read
        ]
        return found
