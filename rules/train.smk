from rerank_scaling.workflow.stages import check_published

# A published checkpoint whose file sizes are not what its sidecar records (a truncated file) stops
# the workflow here, before any job, naming the file and the repair (evaluation checks the SHA-256).
check_published(Path(f"{RESULTS}/checkpoints"), GRID.run_ids())


rule train:
    input:
        code=stage_code_digest("training.train"),
        pointwise=run_examples("pointwise"),
        groups=run_examples("groups"),
        fraction_check=run_fraction_check,
        corpus=rules.prepare_corpus.output.corpus,
    output:
        checkpoints=expand(
            f"{RESULTS}/checkpoints/{{{{run}}}}/ckpt-{{k:02d}}/checkpoint.json",
            k=GRID.checkpoint_indices(),
        ),
    params:
        model=model_json,
        training=run_training_json(),
        memory=memory_plan_json,
        device=config["device"],
        checkpoints=lambda wildcards: run_dir("checkpoints", wildcards),
        work=lambda wildcards: run_dir("work/train", wildcards),
    threads: config["training"]["threads"]
    priority: model_priority("train")
    resources:
        **train_resources(),
    log:
        log_path("train", "{run}"),
    benchmark:
        benchmark_path("train", "{run}")
    conda:
        f"{ENVS}/training.yaml"
    shell:
        "HF_HUB_OFFLINE=1 rerank_python_exec -m rerank_scaling.training.train --run {wildcards.run} --model {params.model:q}"
        " --training {params.training:q} --memory {params.memory:q} --device {params.device} --threads {threads}"
        " --pointwise {input.pointwise}"
        " --groups {input.groups} --corpus {input.corpus} --checkpoints {params.checkpoints}"
        " --work {params.work} > {log} 2>&1"
