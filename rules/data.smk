rule prepare_data:
    input:
        code=stage_code("data.prepare_data"),
    output:
        corpus=f"{RESULTS}/data/collection/corpus.jsonl",
        queries=expand(f"{RESULTS}/data/collection/queries/{{split}}.tsv", split=all_splits()),
        qrels=expand(f"{RESULTS}/data/collection/qrels/{{split}}.txt", split=all_splits()),
        checks=f"{RESULTS}/data/checks.json",
    params:
        dataset=section_json("dataset"),
        out=directory_of("output", "corpus"),
    log:
        log_path("data", "prepare_data"),
    benchmark:
        benchmark_path("data", "prepare_data")
    conda:
        f"{ENVS}/retrieval.yaml"
    shell:
        "python -m rerank_scaling.data.prepare_data --dataset {params.dataset:q} --out {params.out}"
        " --checks {output.checks} > {log} 2>&1"
