"""The report stage's specification: its per-metric figures by kind and file name, what
:mod:`.write_report` draws and what the workflow's report rule declares as outputs (through
:mod:`rerank_scaling.workflow.stages`). Like the other stages' specifications
(``training.train_settings``, ``evaluation.eval_settings``, ``laws.fit_settings``) it imports no
implementation, so that parsing the Snakefile loads no plotting code."""

PER_METRIC = ("model_scaling", "data_scaling", "joint_surface", "compute_frontier")


def slug(metric: str) -> str:
    """A file-name-safe metric name: nDCG@10 -> nDCG-10."""
    return metric.replace("@", "-").replace("/", "-")
