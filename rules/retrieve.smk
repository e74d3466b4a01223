rule bm25_index:
    input:
        code=stage_code_digest("data.bm25_retrieve"),
        corpus=rules.prepare_corpus.output.corpus,
    output:
        index=directory(f"{RESULTS}/bm25/index"),
    params:
        retrieval=section_json("retrieval"),
    threads: config["retrieval"]["threads"]
    resources:
        # sized from the corpus's documents (rerank_scaling.workflow.job_resources, BM25 rates measured on CPU)
        **job_resources("bm25_index", mem_mb=SIZES.bm25_mem_mb(), runtime=SIZES.bm25_index_runtime()),
    log:
        log_path("bm25", "index"),
    benchmark:
        benchmark_path("bm25", "index")
    conda:
        f"{ENVS}/retrieval.yaml"
    shell:
        "rerank_python -m rerank_scaling.data.bm25_retrieve index --corpus {input.corpus} --index {output.index}"
        " --settings {params.retrieval:q} --log {log} > {log} 2>&1"


rule bm25_search:
    input:
        code=stage_code_digest("data.bm25_retrieve"),
        index=rules.bm25_index.output.index,
        queries=f"{RESULTS}/data/collection/queries/{{split}}.tsv",
    output:
        run=f"{RESULTS}/bm25/runs/{{split}}.trec",
    params:
        retrieval=section_json("retrieval"),
    threads: config["retrieval"]["threads"]
    resources:
        # sized from the split's queries and the corpus's documents (rerank_scaling.workflow.job_resources)
        **job_resources(
            "bm25_search",
            mem_mb=SIZES.bm25_mem_mb(),
            runtime=lambda wildcards, attempt: SIZES.runtime(SIZES.bm25_search_runtime(wildcards.split), attempt),
        ),
    priority: 50  # a split whose queries BM25 cannot run fails before training starts
    log:
        log_path("bm25", "search_{split}"),
    benchmark:
        benchmark_path("bm25", "search_{split}")
    conda:
        f"{ENVS}/retrieval.yaml"
    shell:
        "rerank_python -m rerank_scaling.data.bm25_retrieve search --index {input.index} --queries {input.queries}"
        " --run {output.run} --settings {params.retrieval:q} > {log} 2>&1"


rule training_examples:
    input:
        code=stage_code_digest("data.build_examples"),
        collection=rules.prepare_corpus.output.corpus,
        run=f"{RESULTS}/bm25/runs/{config['dataset']['train_split']}.trec",
        queries=f"{RESULTS}/data/collection/queries/{config['dataset']['train_split']}.tsv",
        qrels=f"{RESULTS}/data/collection/qrels/{config['dataset']['train_split']}.txt",
    output:
        pointwise=f"{RESULTS}/examples/pointwise.parquet",
        groups=f"{RESULTS}/examples/groups.parquet",
        counts=f"{RESULTS}/examples/counts.json",  # queries that give examples: the summary's warning
    params:
        examples=section_json("examples"),
        training=training_steps_json(),
        collection=directory_of("input", "collection"),
        split=config["dataset"]["train_split"],
    resources:
        # sized from the train queries, the corpus and the negatives (rerank_scaling.workflow.cpu_memory, measured)
        **job_resources("training_examples", **SIZES.cpu_job("training_examples", SIZES.examples_counts())),
    log:
        log_path("examples", "build"),
    benchmark:
        benchmark_path("examples", "build")
    conda:
        f"{ENVS}/retrieval.yaml"
    shell:
        "rerank_python -m rerank_scaling.data.build_examples --collection {params.collection} --split {params.split}"
        " --run {input.run} --settings {params.examples:q} --pointwise {output.pointwise}"
        " --groups {output.groups} --training {params.training:q} --counts {output.counts} > {log} 2>&1"
