rule report_figures:
    input:
        code=stage_code_digest("report.write_report"),
        metrics=rules.merge_metrics.output.parquet,
        per_query=rules.merge_metrics.output.per_query,
        fits=rules.fit_laws.output.fits,
        forecasts=rules.fit_laws.output.forecasts,
        allocation=rules.fit_laws.output.allocation,
        equal_compute=rules.fit_laws.output.equal_compute,
        data_checks=rules.prepare_data.output.checks,
        example_counts=rules.training_examples.output.counts,
        decisions=f"{RESULTS}/planning/decisions.csv",  # rule plan: what to train, in summary.md's answer
    output:
        figures=figure_reports("png"),
        pdfs=figure_files("pdf"),
        equal_compute=report(
            f"{RESULTS}/figures/equal_compute.png",
            caption="../report/equal_compute.rst",
            category="Figures",
        ),
        summary=report(f"{RESULTS}/summary.md", caption="../report/summary.rst", category="Tables"),
    params:
        laws=directory_of("input", "fits"),
        planning=directory_of("input", "decisions"),
        figures=directory_of("output", "figures"),
        metrics=fitted_metrics(),
        splits=fitted_splits(),
    resources:
        **job_resources("report_figures", mem_mb=4000, runtime=30),
    log:
        log_path("report", "figures"),
    benchmark:
        benchmark_path("report", "figures")
    conda:
        f"{ENVS}/fitting.yaml"
    shell:
        "rerank_python -m rerank_scaling.report.write_report --metrics {input.metrics} --per-query {input.per_query}"
        " --laws {params.laws}"
        " --metric {params.metrics:q} --split {params.splits} --figures {params.figures}"
        " --summary {output.summary} --data-checks {input.data_checks}"
        " --example-counts {input.example_counts} --planning {params.planning} > {log} 2>&1"


rule advise_next:
    input:
        code=stage_code_digest("forecast.advise_stage"),
        metrics=rules.merge_metrics.output.parquet,
        fits=rules.fit_laws.output.fits,
        plan=f"{RESULTS}/planning/plan.parquet",  # rule plan (plan.smk): the cost profiles
    output:
        advice=f"{RESULTS}/planning/advice.csv",
    params:
        fitting=section_json("fitting"),
        split=fitted_splits()[0],
        objective=config["training"]["objectives"][0],
    threads: config["threads"]  # the candidates' simulations run side by side
    resources:
        **job_resources("advise_next", mem_mb=2000, runtime=10),
    log:
        log_path("planning", "advise"),
    benchmark:
        benchmark_path("planning", "advise")
    conda:
        f"{ENVS}/fitting.yaml"
    shell:
        "rerank_python -m rerank_scaling.forecast.advise_stage --metrics {input.metrics} --fits {input.fits}"
        " --plan {input.plan} --fitting {params.fitting:q} --split {params.split}"
        " --objective {params.objective} --workers {threads} --out {output.advice} > {log} 2>&1"


rule report_answer:
    input:
        code=stage_code_digest("report.answer_page"),
        advice=rules.advise_next.output.advice,
        metrics=rules.merge_metrics.output.parquet,
        per_query=rules.merge_metrics.output.per_query,
        forecasts=rules.fit_laws.output.forecasts,
        tables=rules.fit_laws.output.tables,
        plan=f"{RESULTS}/planning/plan.parquet",  # rule plan (plan.smk, included after this file)
        example_counts=rules.training_examples.output.counts,
    output:
        markdown=f"{RESULTS}/answer.md",
        page=report(f"{RESULTS}/answer.html", caption="../report/answer.rst", category="Answer"),
        section=f"{RESULTS}/answer_section.html",
        figure=f"{RESULTS}/figures/answer.png",
        figure_pdf=f"{RESULTS}/figures/answer.pdf",
    params:
        laws=directory_of("input", "forecasts"),
        planning=directory_of("input", "plan"),
        out=directory_of("output", "markdown"),
        fitting=section_json("fitting"),
        split=fitted_splits()[0],
    resources:
        **job_resources("report_answer", mem_mb=2000, runtime=10),
    log:
        log_path("report", "answer"),
    benchmark:
        benchmark_path("report", "answer")
    conda:
        f"{ENVS}/fitting.yaml"
    shell:
        "rerank_python -m rerank_scaling.report.answer_page --metrics {input.metrics} --laws {params.laws}"
        " --planning {params.planning} --fitting {params.fitting:q} --split {params.split}"
        " --out-dir {params.out} --example-counts {input.example_counts} --per-query {input.per_query}"
        " > {log} 2>&1"
