"""The report's per-metric figures by name: what :mod:`.write_report` draws and what the workflow's
report rule declares as outputs. A module of its own so that the Snakefile reads the names without
importing the plotting code (matplotlib) at every start."""

PER_METRIC = ("model_scaling", "data_scaling", "joint_surface", "compute_frontier")


def slug(metric: str) -> str:
    """A file-name-safe metric name: nDCG@10 -> nDCG-10."""
    return metric.replace("@", "-").replace("/", "-")
