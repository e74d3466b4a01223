rule evaluate_bm25:
    input:
        code=stage_code_digest("evaluation.evaluate"),
        runs=expand(f"{RESULTS}/bm25/runs/{{split}}.trec", split=eval_splits()),
        qrels=expand(f"{RESULTS}/data/collection/qrels/{{split}}.txt", split=eval_splits()),
        queries=expand(f"{RESULTS}/data/collection/queries/{{split}}.tsv", split=eval_splits()),
    output:
        metrics=f"{RESULTS}/eval/bm25/metrics.parquet",
        per_query=f"{RESULTS}/eval/bm25/per_query.parquet",
    params:
        evaluation=evaluation_json(model_free=True),
        collection=directory_of("input", "qrels", levels=2),
        bm25_dir=directory_of("input", "runs"),
        splits=eval_splits(),
    resources:
        # every evaluated split's run read (rerank_scaling.workflow.cpu_memory, measured)
        **job_resources("evaluate_bm25", **SIZES.cpu_job("evaluate_bm25", SIZES.data_counts("evaluate_bm25"))),
    log:
        log_path("eval", "bm25"),
    benchmark:
        benchmark_path("eval", "bm25")
    conda:
        f"{ENVS}/training.yaml"
    shell:
        "rerank_python -m rerank_scaling.evaluation.evaluate bm25 --collection {params.collection}"
        " --bm25-dir {params.bm25_dir} --splits {params.splits} --settings {params.evaluation:q}"
        " --out {output.metrics} --per-query {output.per_query} > {log} 2>&1"


# One CPU job per split writes the texts of the documents its candidates name, so that the GPU jobs
# read a small table instead of scanning the whole corpus each (rerank_scaling.evaluation.split_texts).
rule split_texts:
    input:
        code=stage_code_digest("evaluation.split_texts"),
        corpus=rules.prepare_corpus.output.corpus,
        run=f"{RESULTS}/bm25/runs/{{split}}.trec",
    output:
        texts=f"{RESULTS}/eval/texts/{{split}}.parquet",
    params:
        depth=config["evaluation"]["rerank_depth"],
    resources:
        # the split's run and its candidates' texts held, the corpus scanned (rerank_scaling.workflow.cpu_memory)
        **job_resources("split_texts", **SIZES.cpu_job_by_wildcard("split_texts", SIZES.split_texts_counts)),
    log:
        log_path("eval", "texts/{split}"),
    benchmark:
        benchmark_path("eval", "texts/{split}")
    conda:
        f"{ENVS}/training.yaml"
    shell:
        "rerank_python -m rerank_scaling.evaluation.split_texts --corpus {input.corpus} --run {input.run}"
        " --depth {params.depth} --out {output.texts} > {log} 2>&1"


# One CPU job per (model, split) tokenizes the split's candidate pairs with the model's tokenizer,
# so evaluation jobs do not each re-tokenize them (rerank_scaling.evaluation.split_tokens).
rule split_tokens:
    input:
        code=stage_code_digest("evaluation.split_tokens"),
        texts=rules.split_texts.output.texts,
        run=f"{RESULTS}/bm25/runs/{{split}}.trec",
        queries=f"{RESULTS}/data/collection/queries/{{split}}.tsv",
        qrels=f"{RESULTS}/data/collection/qrels/{{split}}.txt",
    output:
        tokens=f"{RESULTS}/eval/tokens/{{model}}/{{split}}.parquet",
    params:
        model=lambda wildcards: model_spec_json(wildcards.model),
        evaluation=candidate_selection_json(),
        collection=directory_of("input", "qrels", levels=2),
        max_length=config["training"]["max_length"],
    resources:
        # what an evaluation job needed to tokenize
        **job_resources("split_tokens", mem_mb=config["evaluation"]["mem_mb"], runtime=120),
    log:
        log_path("eval", "tokens/{model}/{split}"),
    benchmark:
        benchmark_path("eval", "tokens/{model}/{split}")
    conda:
        f"{ENVS}/training.yaml"
    shell:
        "HF_HUB_OFFLINE=1 rerank_python -m rerank_scaling.evaluation.split_tokens --model {params.model:q}"
        " --collection {params.collection} --bm25-run {input.run} --texts {input.texts}"
        " --split {wildcards.split} --settings {params.evaluation:q} --max-length {params.max_length}"
        " --out {output.tokens} > {log} 2>&1"


# The scoring job's shell execs Python, which dies with its parent (parent_process.die_with_parent):
# Snakemake killed, even by SIGKILL, leaves no scoring job running on the GPU.
rule evaluate_run:
    input:
        code=stage_code_digest("evaluation.evaluate"),
        checkpoints=checkpoint_sidecars,
        runs=expand(f"{RESULTS}/bm25/runs/{{split}}.trec", split=eval_splits()),
        texts=expand(f"{RESULTS}/eval/texts/{{split}}.parquet", split=eval_splits()),
        tokens=split_token_files(lambda wildcards: eval_splits()),
        qrels=expand(f"{RESULTS}/data/collection/qrels/{{split}}.txt", split=eval_splits()),
        queries=expand(f"{RESULTS}/data/collection/queries/{{split}}.tsv", split=eval_splits()),
    output:
        metrics=f"{RESULTS}/eval/{{run}}/metrics.parquet",
        per_query=f"{RESULTS}/eval/{{run}}/per_query.parquet",
    params:
        evaluation=evaluation_json(),
        collection=directory_of("input", "qrels", levels=2),
        bm25_dir=directory_of("input", "runs"),
        texts_dir=directory_of("input", "texts"),
        tokens_dir=run_tokens_dir,
        splits=eval_splits(),
        max_length=config["training"]["max_length"],
        device=config["device"],
        checkpoints=lambda wildcards: run_dir("checkpoints", wildcards),
        work=lambda wildcards: run_dir("work/eval", wildcards),
    threads: config["evaluation"]["threads"]
    priority: model_priority("evaluate_run")  # evaluate_part (use rule) keeps it: its run's rank
    resources:
        **evaluation_resources("evaluate_run", run_checkpoints_per_split),
    log:
        log_path("eval", "{run}"),
    benchmark:
        benchmark_path("eval", "{run}")
    conda:
        f"{ENVS}/training.yaml"
    shell:
        "HF_HUB_OFFLINE=1 rerank_python_exec -m rerank_scaling.evaluation.evaluate run --checkpoints {params.checkpoints}"
        " --collection {params.collection} --bm25-dir {params.bm25_dir} --splits {params.splits}"
        " --settings {params.evaluation:q} --texts-dir {params.texts_dir} --tokens-dir {params.tokens_dir}"
        " --max-length {params.max_length} --device {params.device}"
        " --threads {threads} --work {params.work} --out {output.metrics}"
        " --per-query {output.per_query} > {log} 2>&1"


rule merge_metrics:
    input:
        code=stage_code_digest("evaluation.merge_metrics"),
        runs=run_metric_tables,
        bm25=rules.evaluate_bm25.output.metrics,
        per_query_runs=run_per_query_tables,
        per_query_bm25=rules.evaluate_bm25.output.per_query,
    output:
        parquet=report(
            f"{RESULTS}/metrics/all.parquet",
            caption="../report/metrics.rst",
            category="Tables",
        ),
        csv=f"{RESULTS}/metrics/all.csv",
        per_query=f"{RESULTS}/metrics/per_query.parquet",
    resources:
        # streamed run by run: one file and one run's rows (rerank_scaling.workflow.cpu_memory, measured)
        **job_resources(
            "merge_metrics",
            **SIZES.cpu_job(
                "merge_metrics", SIZES.merge_counts(len(GRID.run_ids()), len(GRID.checkpoint_indices()))
            ),
        ),
    log:
        log_path("eval", "merge"),
    benchmark:
        benchmark_path("eval", "merge")
    conda:
        f"{ENVS}/fitting.yaml"
    shell:
        "rerank_python -m rerank_scaling.evaluation.merge_metrics --inputs {input.bm25} {input.runs}"
        " --out {output.parquet} --csv {output.csv}"
        " --per-query-inputs {input.per_query_bm25} {input.per_query_runs}"
        " --per-query-out {output.per_query} > {log} 2>&1"


# evaluation.unit checkpoint | checkpoint_split: one job per checkpoint, or per (checkpoint, split),
# so a cluster spreads a large model's evaluation over many GPUs. Same program and cache as
# evaluate_run (the cache key ignores the unit); merge_metrics takes the parts (run_metric_tables).
use rule evaluate_run as evaluate_part with:
    input:
        code=stage_code_digest("evaluation.evaluate"),
        checkpoints=part_sidecar,
        runs=part_split_files("bm25/runs/{split}.trec"),
        texts=part_split_files("eval/texts/{split}.parquet"),
        tokens=split_token_files(part_splits),
        qrels=part_split_files("data/collection/qrels/{split}.txt"),
        queries=part_split_files("data/collection/queries/{split}.tsv"),
    output:
        metrics=f"{RESULTS}/eval/{{run}}/parts/{{part}}.parquet",
        per_query=f"{RESULTS}/eval/{{run}}/parts/{{part}}.per_query.parquet",
    params:
        evaluation=evaluation_json(),
        collection=directory_of("input", "qrels", levels=2),
        bm25_dir=directory_of("input", "runs"),
        texts_dir=directory_of("input", "texts"),
        tokens_dir=run_tokens_dir,
        splits=part_splits,
        max_length=config["training"]["max_length"],
        device=config["device"],
        checkpoints=directory_of("input", "checkpoints"),
        work=lambda wildcards: run_dir("work/eval", wildcards),
    resources:
        **evaluation_resources("evaluate_part", part_checkpoints_per_split),
    log:
        log_path("eval", "{run}/{part}"),
    benchmark:
        benchmark_path("eval", "{run}/{part}")


# Runs whose evaluation.unit jobs would mostly pay set-up (BUNDLES, rerank_scaling.workflow.eval_bundles) are
# scored whole, several a job: one process, one Snakefile parse, the same cache as evaluate_run.
rule evaluate_bundle:
    input:
        code=stage_code_digest("evaluation.evaluate_bundle"),
        checkpoints=bundle_sidecars,
        runs=expand(f"{RESULTS}/bm25/runs/{{split}}.trec", split=eval_splits()),
        texts=expand(f"{RESULTS}/eval/texts/{{split}}.parquet", split=eval_splits()),
        tokens=bundle_token_files,
        qrels=expand(f"{RESULTS}/data/collection/qrels/{{split}}.txt", split=eval_splits()),
        queries=expand(f"{RESULTS}/data/collection/queries/{{split}}.tsv", split=eval_splits()),
    output:
        metrics=f"{RESULTS}/eval/bundles/{{bundle}}/metrics.parquet",
        per_query=f"{RESULTS}/eval/bundles/{{bundle}}/per_query.parquet",
    wildcard_constraints:
        bundle="b[0-9]+",
    params:
        bundle_runs=lambda wildcards: " ".join(BUNDLES[wildcards.bundle]),
        evaluation=evaluation_json(),
        collection=directory_of("input", "qrels", levels=2),
        bm25_dir=directory_of("input", "runs"),
        texts_dir=directory_of("input", "texts"),
        splits=eval_splits(),
        max_length=config["training"]["max_length"],
        device=config["device"],
        results=directory_of("output", "metrics", levels=4),
    threads: config["evaluation"]["threads"]
    priority: model_priority("evaluate_bundle", "bundle")
    resources:
        **bundle_resources(),
    log:
        log_path("eval", "bundles/{bundle}"),
    benchmark:
        benchmark_path("eval", "bundles/{bundle}")
    conda:
        f"{ENVS}/training.yaml"
    shell:
        "HF_HUB_OFFLINE=1 rerank_python -m rerank_scaling.evaluation.evaluate_bundle --runs {params.bundle_runs}"
        " --results {params.results} --collection {params.collection} --bm25-dir {params.bm25_dir}"
        " --splits {params.splits} --settings {params.evaluation:q} --texts-dir {params.texts_dir}"
        " --max-length {params.max_length} --device {params.device} --threads {threads}"
        " --out {output.metrics} --per-query {output.per_query} > {log} 2>&1"
