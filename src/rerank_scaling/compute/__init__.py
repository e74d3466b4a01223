"""How this machine runs the models: measured profiles per CPU kind (:mod:`.cpu_profiles`) and
compiled graphs (:mod:`.compiled_graphs`). One floor above the ground floor: training and
evaluation read it; it reads only the ground floor's CPU detection (:mod:`rerank_scaling.precision`)."""
