# The data axes (docs/data-axes.md). Training examples of the annotation sources other
# than the collection's own qrels (training.annotations; rerank_scaling.data.annotations), built
# from the human examples so that both sources share queries, passages and negatives; and, per
# source and data fraction, the check that the fraction's runs have steps for their checkpoints;
# the examples of generated-query sources (training.annotation_files), from their own files.
rule annotation_examples:
    input:
        code=stage_code_digest("data.annotation_examples"),
        pointwise=rules.training_examples.output.pointwise,
        groups=rules.training_examples.output.groups,
    output:
        pointwise=f"{RESULTS}/examples/{{source}}/pointwise.parquet",
        groups=f"{RESULTS}/examples/{{source}}/groups.parquet",
        provenance=f"{RESULTS}/examples/{{source}}/provenance.json",
    wildcard_constraints:
        source="ict",  # built from the human examples
    params:
        seed=config["examples"]["seed"],
        out=directory_of("output", "pointwise"),
    resources:
        # reads the human example tables (rerank_scaling.workflow.cpu_memory, measured)
        **job_resources(
            "annotation_examples", **SIZES.cpu_job("annotation_examples", SIZES.data_counts("annotation_examples"))
        ),
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
        code=stage_code_digest("data.fraction_check"),
        pointwise=source_examples("pointwise"),
        groups=source_examples("groups"),
    output:
        check=f"{RESULTS}/examples/checks/{{source}}/fraction-{{fraction}}.json",
    wildcard_constraints:
        source="|".join(GRID.annotations),
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


# A generated-query source (training.annotation_files; rerank_scaling.data.annotation_files): its
# files, checked against the corpus, become a split of the run's collection named after the source,
# so bm25_search gives its queries BM25 candidates as for any split; file_examples then builds its
# examples with the human examples' builder and settings (build_examples), same corpus and negatives.
ruleorder: annotation_file > prepare_queries
ruleorder: annotation_file > prepare_qrels


rule annotation_file:
    input:
        code=stage_code_digest("data.annotation_files"),
        queries=annotation_file_input("queries"),
        qrels=annotation_file_input("qrels"),
        corpus=rules.prepare_corpus.output.corpus,
    output:
        queries=f"{RESULTS}/data/collection/queries/{{split}}.tsv",
        qrels=f"{RESULTS}/data/collection/qrels/{{split}}.txt",
        provenance=f"{RESULTS}/examples/{{split}}/provenance.json",
    wildcard_constraints:
        split="|".join(ANNOTATION_FILES) or "(?!)",  # the file sources only; "(?!)" matches nothing
    params:
        provenance=annotation_file_provenance,
        collection=directory_of("input", "corpus"),
    resources:
        **job_resources("annotation_file", mem_mb=4000, runtime=30),
    priority: 50  # a passage not in the corpus fails before training, like the data checks
    log:
        log_path("data", "annotation_file_{split}"),
    benchmark:
        benchmark_path("data", "annotation_file_{split}")
    conda:
        f"{ENVS}/retrieval.yaml"
    shell:
        "rerank_python -m rerank_scaling.data.annotation_files --source {wildcards.split} --queries {input.queries:q}"
        " --qrels {input.qrels:q} --provenance {params.provenance:q} --corpus {input.corpus}"
        " --collection {params.collection} --record {output.provenance} > {log} 2>&1"


rule file_examples:
    input:
        code=stage_code_digest("data.build_examples"),
        collection=rules.prepare_corpus.output.corpus,
        run=f"{RESULTS}/bm25/runs/{{source}}.trec",
        queries=f"{RESULTS}/data/collection/queries/{{source}}.tsv",
        qrels=f"{RESULTS}/data/collection/qrels/{{source}}.txt",
    output:
        pointwise=f"{RESULTS}/examples/{{source}}/pointwise.parquet",
        groups=f"{RESULTS}/examples/{{source}}/groups.parquet",
    wildcard_constraints:
        source="|".join(ANNOTATION_FILES) or "(?!)",
    params:
        examples=section_json("examples"),
        training=training_steps_json(),
        collection=directory_of("input", "collection"),
    resources:
        # the examples model of the file's split (rerank_scaling.workflow.cpu_memory; unknown: the fallback)
        **job_resources("training_examples", **SIZES.cpu_job_by_wildcard("training_examples", SIZES.examples_counts, "source")),
    log:
        log_path("examples", "build_{source}"),
    benchmark:
        benchmark_path("examples", "build_{source}")
    conda:
        f"{ENVS}/retrieval.yaml"
    shell:
        "rerank_python -m rerank_scaling.data.build_examples --collection {params.collection} --split {wildcards.source}"
        " --run {input.run} --settings {params.examples:q} --pointwise {output.pointwise}"
        " --groups {output.groups} --training {params.training:q} > {log} 2>&1"
