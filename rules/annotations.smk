# Training examples of the annotation sources other than the collection's own qrels
# (training.annotations; rerank_scaling.data.annotations): built from the human examples, so both
# sources share queries, passages and negatives.
rule annotation_examples:
    input:
        code=stage_code("data.annotation_examples"),
        pointwise=rules.training_examples.output.pointwise,
        groups=rules.training_examples.output.groups,
    output:
        pointwise=f"{RESULTS}/examples/{{source}}/pointwise.parquet",
        groups=f"{RESULTS}/examples/{{source}}/groups.parquet",
        provenance=f"{RESULTS}/examples/{{source}}/provenance.json",
    wildcard_constraints:
        source="|".join(s for s in ANNOTATIONS if s != "human"),  # built from the human examples
    params:
        seed=config["examples"]["seed"],
        out=directory_of("output", "pointwise"),
    resources:
        mem_mb=4000,
        runtime=60,
    log:
        log_path("examples", "{source}"),
    benchmark:
        benchmark_path("examples", "{source}")
    conda:
        f"{ENVS}/retrieval.yaml"
    shell:
        "python -m rerank_scaling.data.annotation_examples --source {wildcards.source} --seed {params.seed}"
        " --pointwise {input.pointwise} --groups {input.groups} --out {params.out} > {log} 2>&1"
