# Run on the submitting node (internet), never as a cluster job: fills the caches compute jobs read offline.
localrules:
    prefetch,


rule prefetch:
    input:
        code=stage_code_digest("data.prefetch"),
    output:
        manifest=f"{RESULTS}/prefetch/manifest.tsv",
    params:
        models=section_json("models"),
        dataset=section_json("dataset"),
        lock=PIN_FILE,  # written with ./run.sh --prefetch --pin (RERANK_SCALING_PIN), read by common.smk
    log:
        log_path("prefetch", "prefetch"),
    benchmark:
        benchmark_path("prefetch", "prefetch")
    conda:
        f"{ENVS}/training.yaml"
    shell:
        "rerank_python -m rerank_scaling.data.prefetch --models {params.models:q} --dataset {params.dataset:q}"
        " --out {output.manifest} ${{RERANK_SCALING_PIN:+--lock {params.lock}}} > {log} 2>&1"
