"""Model families: how a ``models[]`` entry of each family is built, counted and checked.

One module per family (:mod:`.hf`, :mod:`.ladder`, :mod:`.scratch`), each holding one
:class:`~rerank_scaling.families.family.ModelFamily` object, and :mod:`.registry`, the one place a
family name is turned back into behaviour (:func:`~rerank_scaling.families.registry.family_of`).
"""
