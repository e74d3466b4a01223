# The collection, one job per part (rerank_scaling.data.prepare_data --part): an edit of one file
# re-runs only the jobs that read it (a dev qrels fix re-evaluates; it retrains nothing). Their
# priority runs every split's checks before the chain that leads to training (corpus, BM25,
# examples) gets far: bad data in any split stop the workflow before a training job starts.
rule prepare_corpus:
    input:
        code=stage_code_digest("data.prepare_data"),
        source=source_digest("corpus.jsonl"),
    output:
        corpus=f"{RESULTS}/data/collection/corpus.jsonl",
    params:
        dataset=dataset_part_json("corpus"),
        out=directory_of("output", "corpus"),
    resources:
        # ir_datasets streams MS MARCO's 8.8M passages through it; its ids are checked: sized per
        # passage (rerank_scaling.workflow.cpu_memory, measured)
        **job_resources("prepare_corpus", **SIZES.cpu_job("prepare_corpus", SIZES.data_counts("prepare_corpus"))),
    priority: 50
    log:
        log_path("data", "corpus"),
    benchmark:
        benchmark_path("data", "corpus")
    conda:
        f"{ENVS}/retrieval.yaml"
    shell:
        "rerank_python -m rerank_scaling.data.prepare_data --dataset {params.dataset:q} --out {params.out}"
        " --part corpus > {log} 2>&1"


rule prepare_queries:
    input:
        code=stage_code_digest("data.prepare_data"),
        source=source_digest("queries/{split}.tsv"),
    output:
        queries=f"{RESULTS}/data/collection/queries/{{split}}.tsv",
    params:
        dataset=dataset_part_json("queries"),
        out=directory_of("output", "queries", levels=2),
    resources:
        **job_resources("prepare_queries", mem_mb=4000, runtime=60),
    priority: 50
    log:
        log_path("data", "queries_{split}"),
    benchmark:
        benchmark_path("data", "queries_{split}")
    conda:
        f"{ENVS}/retrieval.yaml"
    shell:
        "rerank_python -m rerank_scaling.data.prepare_data --dataset {params.dataset:q} --out {params.out}"
        " --part queries --split {wildcards.split} > {log} 2>&1"


rule prepare_qrels:
    input:
        code=stage_code_digest("data.prepare_data"),
        source=source_digest("qrels/{split}.txt"),
        corpus=rules.prepare_corpus.output.corpus,
        queries=rules.prepare_queries.output.queries,
    output:
        qrels=f"{RESULTS}/data/collection/qrels/{{split}}.txt",
        checks=f"{RESULTS}/data/checks/{{split}}.json",
    params:
        dataset=dataset_part_json("qrels"),
        threshold=relevance_threshold_arg,
        out=directory_of("output", "qrels", levels=2),
    resources:
        # the corpus's ids (MS MARCO: 8.8M)
        # the corpus's ids indexed, then the split's judgements checked (rerank_scaling.workflow.cpu_memory)
        **job_resources("prepare_qrels", **SIZES.cpu_job("prepare_qrels", SIZES.data_counts("prepare_qrels"))),
    priority: 50
    log:
        log_path("data", "qrels_{split}"),
    benchmark:
        benchmark_path("data", "qrels_{split}")
    conda:
        f"{ENVS}/retrieval.yaml"
    shell:
        "rerank_python -m rerank_scaling.data.prepare_data --dataset {params.dataset:q} --out {params.out}"
        " --part qrels --split {wildcards.split} {params.threshold} --checks {output.checks} > {log} 2>&1"


# Every split's queries against every other's (data/split_overlap.py): a query in two splits stops
# the workflow. No training job reads its output, so that adding or editing a split re-trains
# nothing; its priority runs it, like the checks above, long before the chain to training gets far.
rule check_splits:
    input:
        code=stage_code_digest("data.prepare_data"),
        queries=expand(f"{RESULTS}/data/collection/queries/{{split}}.tsv", split=all_splits()),
    output:
        checks=f"{RESULTS}/data/checks/splits.json",
    params:
        dataset=section_json("dataset"),
        out=directory_of("input", "queries", levels=2),
    resources:
        **job_resources("check_splits", mem_mb=4000, runtime=10),
    priority: 50
    log:
        log_path("data", "splits"),
    benchmark:
        benchmark_path("data", "splits")
    conda:
        f"{ENVS}/retrieval.yaml"
    shell:
        "rerank_python -m rerank_scaling.data.prepare_data --dataset {params.dataset:q} --out {params.out}"
        " --check-splits --checks {output.checks} > {log} 2>&1"


rule prepare_data:
    input:
        code=stage_code_digest("data.prepare_data"),
        checks=expand(f"{RESULTS}/data/checks/{{split}}.json", split=all_splits()),
        splits=rules.check_splits.output.checks,
    output:
        checks=f"{RESULTS}/data/checks.json",
    resources:
        **job_resources("prepare_data", mem_mb=1000, runtime=10),
    log:
        log_path("data", "checks"),
    benchmark:
        benchmark_path("data", "checks")
    conda:
        f"{ENVS}/retrieval.yaml"
    shell:
        "rerank_python -m rerank_scaling.data.prepare_data --merge-checks {input.checks} {input.splits}"
        " --checks {output.checks}"
        " > {log} 2>&1"
