"""The workflow layer, the top floor: what the Snakefile reads at parse time. Loading and checking
the config (:mod:`.load`, :mod:`.checks` and its concern modules), what each job asks the cluster
for (:mod:`.job_resources`, :mod:`.cpu_memory`, :mod:`.workload`, :mod:`.eval_bundles`), the
workflow's clock (:mod:`.timing`) and the stages as the rule files see them (:mod:`.stages`).

The rule files import only this package; it imports the ground floor and the stages' light,
torch-free specifications, never a stage's implementation, and no stage imports it
(``tests/test_architecture.py`` keeps the floors).
"""
