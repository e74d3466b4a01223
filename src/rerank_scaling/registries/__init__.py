"""The registries: each owns one concept that selects behaviour, once, in a light module (standard
library only) that every floor above may read, the workflow's parse included.

* :mod:`.objectives`: training objectives (example file, batch key, rows per step, step count, loss);
* :mod:`.measures`: metrics, registered as ir_measures does, with typed parameters;
* :mod:`.size_axes`: what N is (``fitting.size_axis``).

Law names and forms have their registry beside the forms they build, :mod:`rerank_scaling.laws.registry`.
A new objective, metric or size axis is one definition and one ``register`` line (plus its schema
enum or key); ``tests/test_registries.py`` shows each.
"""
