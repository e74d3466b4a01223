rule fit_laws:
    input:
        code=stage_code_digest("forecast.fit_stage"),
        metrics=rules.merge_metrics.output.parquet,
        # the reranking ceiling (oracle value of BM25's candidates) bounds rank-metric asymptotes
        runs=expand(f"{RESULTS}/bm25/runs/{{split}}.trec", split=fitted_splits()),
        qrels=expand(f"{RESULTS}/data/collection/qrels/{{split}}.txt", split=fitted_splits()),
        queries=expand(f"{RESULTS}/data/collection/queries/{{split}}.tsv", split=fitted_splits()),
    output:
        fits=f"{RESULTS}/laws/fits.parquet",
        forecasts=f"{RESULTS}/laws/forecasts.parquet",
        # what `rerank-scaling forecast` writes for a table of runs (the same core, forecast.run)
        forecasts_csv=f"{RESULTS}/laws/forecasts.csv",
        answer=f"{RESULTS}/laws/answer.md",
        allocation=f"{RESULTS}/laws/allocation.parquet",
        equal_compute=f"{RESULTS}/laws/equal_compute.parquet",
        backtests=f"{RESULTS}/laws/backtests.parquet",
        tables=law_table_files(),
        calibration=report(
            f"{RESULTS}/laws/figures/calibration.png",
            caption="../report/calibration.rst",
            category="Figures",
        ),
        calibration_pdf=f"{RESULTS}/laws/figures/calibration.pdf",
    params:
        fitting=section_json("fitting"),
        out=directory_of("output", "fits"),
        collection=directory_of("input", "qrels", levels=2),
        evaluation=evaluation_json(model_free=True),
    threads: config["threads"]
    resources:
        **job_resources("fit_laws", mem_mb=4000, runtime=120),
    log:
        log_path("laws", "fit"),
    benchmark:
        benchmark_path("laws", "fit")
    conda:
        f"{ENVS}/fitting.yaml"
    shell:
        "rerank_python -m rerank_scaling.forecast.fit_stage --metrics {input.metrics} --settings {params.fitting:q}"
        " --out-dir {params.out} --threads {threads} --collection {params.collection}"
        " --bm25-runs {input.runs} --evaluation {params.evaluation:q} > {log} 2>&1"
