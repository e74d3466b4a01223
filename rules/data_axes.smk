# The data axes (README 'Data as a grid axis'). Training examples of the annotation sources other
# than the collection's own qrels (training.annotations; rerank_scaling.data.annotations), built
# from the human examples so that both sources share queries, passages and negatives; and, per
# source and data fraction, the check that the fraction's runs have steps for their checkpoints.
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
        **job_resources("annotation_examples", mem_mb=4000, runtime=60),
    log:
        log_path("examples", "{source}"),
    benchmark:
        benchmark_path("examples", "{source}")
    conda:
        f"{ENVS}/retrieval.yaml"
    shell:
        "rerank_python -m rerank_scaling.data.annotation_examples --source {wildcards.source} --seed {params.seed}"
        " --pointwise {input.pointwise} --groups {input.groups} --out {params.out} > {log} 2>&1"


rule fraction_check:
    input:
        code=stage_code("data.fraction_check"),
        pointwise=source_examples("pointwise"),
        groups=source_examples("groups"),
    output:
        check=f"{RESULTS}/examples/checks/{{source}}/fraction-{{fraction}}.json",
    wildcard_constraints:
        source="|".join(ANNOTATIONS),
        fraction="[0-9.e-]+",
    params:
        training=training_steps_json(),
    resources:
        **job_resources("fraction_check", mem_mb=4000, runtime=30),
    priority: 50  # fails before the fraction's training jobs, like the data checks
    log:
        log_path("examples", "fraction_{source}_{fraction}"),
    benchmark:
        benchmark_path("examples", "fraction_{source}_{fraction}")
    conda:
        f"{ENVS}/training.yaml"
    shell:
        "rerank_python -m rerank_scaling.data.fraction_check --fraction {wildcards.fraction} --pointwise {input.pointwise}"
        " --groups {input.groups} --training {params.training:q} --out {output.check} > {log} 2>&1"
