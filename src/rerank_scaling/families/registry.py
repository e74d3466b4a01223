"""The model-family registry: one owner for every ``models[].family`` name.

Training, planning, the job resources and the config checks turn an entry's family back into
behaviour here, with :func:`family_of`, never by testing the name. Adding a family means one module
in this package holding a :class:`~rerank_scaling.families.family.ModelFamily` object, one line in
:data:`REGISTRY` below (an import the stage-code inputs can see: ``rerank_scaling.stage_code``), and
its name in the schema's ``models[].family`` enum (``tests/families/test_family_registry.py``
checks the schema and this registry agree). A family defined outside the package can be added
with :func:`register`.
"""

from __future__ import annotations

from typing import Any

from rerank_scaling.families import hf, ladder, scratch
from rerank_scaling.families.family import ModelFamily

#: name -> family, in the schema's order
REGISTRY: dict[str, ModelFamily] = {
    family.name: family
    for family in (
        hf.FAMILY,
        scratch.FAMILY,
        ladder.FAMILY,
    )
}


def register(family: ModelFamily) -> ModelFamily:
    """Add ``family`` under its name (a family the package does not ship); returns it."""
    REGISTRY[family.name] = family
    return family


def family(name: str) -> ModelFamily:
    """The family called ``name``."""
    if name not in REGISTRY:
        raise KeyError(f"models[].family: unknown family {name!r}; registered: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def family_of(spec: dict[str, Any]) -> ModelFamily:
    """The family of a ``models[]`` entry."""
    return family(spec["family"])
