rule fit_laws:
    input:
        code=stage_code("laws.fit_laws"),
        metrics=rules.merge_metrics.output.parquet,
    output:
        fits=f"{RESULTS}/laws/fits.parquet",
        forecasts=f"{RESULTS}/laws/forecasts.parquet",
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
    threads: config.get("threads", 1)
    resources:
        mem_mb=4000,
        runtime=120,
    log:
        log_path("laws", "fit"),
    benchmark:
        benchmark_path("laws", "fit")
    conda:
        f"{ENVS}/fitting.yaml"
    shell:
        "python -m rerank_scaling.laws.fit_laws --metrics {input.metrics} --settings {params.fitting:q}"
        " --out-dir {params.out} --threads {threads} > {log} 2>&1"
