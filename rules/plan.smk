rule plan:
    input:
        code=stage_code_digest("planning.plan"),
        metrics=rules.merge_metrics.output.parquet,
        fits=rules.fit_laws.output.fits,
    output:
        parquet=f"{RESULTS}/planning/plan.parquet",
        table=report(
            f"{RESULTS}/planning/plan.csv", caption="../report/planning.rst", category="Planning"
        ),
        markdown=f"{RESULTS}/planning/plan.md",
        decisions=f"{RESULTS}/planning/decisions.csv",
        profiles=f"{RESULTS}/planning/profiles.json",
        budget_curves=report(
            f"{RESULTS}/figures/budget_curves.png", caption="../report/planning.rst", category="Planning"
        ),
        budget_curves_pdf=f"{RESULTS}/figures/budget_curves.pdf",
        roi_frontier=report(
            f"{RESULTS}/figures/roi_frontier.png", caption="../report/planning.rst", category="Planning"
        ),
        roi_frontier_pdf=f"{RESULTS}/figures/roi_frontier.pdf",
    params:
        planning=section_json("planning"),
        fitting=section_json("fitting"),
        models=section_json("models"),
        training=section_json("training", TrainSettings.RESOURCE_KEYS),
        evaluation=section_json("evaluation", EvalSettings.RESOURCE_KEYS),
        device=config["device"],
        cache="results/profiles",  # per device and code, shared by runs; not an output, so re-runs keep it
        out=directory_of("output", "parquet"),
        figures=directory_of("output", "budget_curves"),
    threads: config["threads"]
    resources:
        **job_resources("plan", mem_mb=8000, runtime=30),
    log:
        log_path("planning", "plan"),
    benchmark:
        benchmark_path("planning", "plan")
    conda:
        f"{ENVS}/training.yaml"
    shell:
        "HF_HUB_OFFLINE=1 rerank_python -m rerank_scaling.planning.plan --metrics {input.metrics} --fits {input.fits}"
        " --models {params.models:q} --planning {params.planning:q} --fitting {params.fitting:q}"
        " --training {params.training:q} --evaluation {params.evaluation:q} --device {params.device}"
        " --cache {params.cache} --out-dir {params.out} --figures {params.figures} --threads {threads}"
        " > {log} 2>&1"
