# rerank-scaling: measure and forecast how cross-encoder rerankers scale.
# Table of contents: every stage is one rule file; `rule all` asks for the final products.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"


wildcard_constraints:
    split="[A-Za-z0-9_.-]+",
    run="[A-Za-z0-9.-]+__[a-z]+__[a-z0-9]+__s[0-9]+(__d[0-9.e-]+)?(__[a-z][a-z0-9]*)?",
    part=r"ckpt-[0-9]+(\.[A-Za-z0-9_.-]+)?",



include: "rules/prefetch.smk"
include: "rules/data.smk"
include: "rules/retrieve.smk"
include: "rules/data_axes.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/fit.smk"
include: "rules/report.smk"
include: "rules/plan.smk"


onstart:
    start_job_server()


onsuccess:
    stop_job_server()
    timing.record(RESULTS, WORKFLOW_CLOCK, log, workflow.resource_settings.cores)


onerror:
    stop_job_server()


rule all:
    input:
        final_targets(),
    default_target: True
