"""Train one cross-encoder run (size x objective x attention x seed) with checkpoints across the epoch.

The objective (pointwise, pairwise, listwise) gives the run its examples and its loss
(:mod:`.objectives`).

Checkpoints: at K steps (:func:`schedule.checkpoint_steps`) the model is exported to
``<checkpoints>/ckpt-XX/`` (safetensors, loadable by ``CrossEncoder(path)``) with a
``checkpoint.json`` sidecar written last (step, examples, tokens, FLOPs ~= 6*N*tokens, wall time,
loss). The trainer's own state (optimizer, scheduler, RNG) is kept only for the latest step, and a
copy of every exported checkpoint is kept, both in ``<work>`` (:mod:`.checkpoint_store`), so a job
killed at any moment and re-run with the same arguments resumes from its latest state, re-publishes
the checkpoints Snakemake removed, and ends with the same checkpoint steps as an uninterrupted run
and, on CPU, bit-identical tensors (CUDA kernels are not bit-reproducible between executions).
SIGTERM (SLURM's notice before a time-limit kill or a preemption) saves the state at the end of
the current step, then the job exits non-zero, so a retry loses at most one step.

Without waste: batches are length-bucketed (:mod:`.batching`), tokens are counted from the
attention masks of the batches the loss tokenized (:mod:`.token_counter`), ModernBERT runs with
FlashAttention-2 where it can (:func:`.models.attention_implementation`), and the workflow's memory
plan (:mod:`rerank_scaling.planning.memory`) turns on micro-batching (gradient accumulation over
slices of one bucketed batch) and gradient checkpointing where a run would not fit the GPU.

Points of the fault-injection hook (``RERANK_SCALING_FAULT=<point>:<k>[:kill|term|hold]``, tests
only; :func:`.checkpoint_store.fault_point`): ``state:k`` trainer state of checkpoint k written but
not marked complete; ``export:k`` inside the export of checkpoint k; ``exported:k`` exported, state
not marked complete; ``completed:k`` state complete, checkpoint not yet published; ``published:k``
between checkpoints k and k+1; ``step:s`` the end of optimizer step s.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

from rerank_scaling.compute.compiled_graphs import compile_in_place, resolve_compile
from rerank_scaling.compute.cpu_profiles import cpu_profile
from rerank_scaling.device import resolve_device
from rerank_scaling.families.models import (
    ModelStats,
    attention_implementation,
    build_cross_encoder,
    freeze_input_embeddings,
    model_stats,
)
from rerank_scaling.grid import RunSpec
from rerank_scaling.hub.pins import model_commit
from rerank_scaling.planning.gpu_fit import checked_plan
from rerank_scaling.planning.memory import MemoryPlan, MemoryShape, plan_memory
from rerank_scaling.precision import fp32_score_layer, resolve_precision
from rerank_scaling.registries.objectives import batch as objective_batch
from rerank_scaling.registries.objectives import objective as objective_spec
from rerank_scaling.registries.objectives import total_steps
from rerank_scaling.settings import without
from rerank_scaling.stage_code import running_code_digest
from rerank_scaling.training.batching import LengthBucketBatchSampler, row_lengths
from rerank_scaling.training.checkpoint_store import (
    PROGRESS,
    SIDECAR,
    RunStore,
    checkpoint_name,
    fault_point,
    file_digest,
    file_records,
)
from rerank_scaling.training.model_saves import save_frozen_apart, without_model_card
from rerank_scaling.training.objectives import load_examples, make_loss
from rerank_scaling.training.schedule import checkpoint_steps
from rerank_scaling.training.token_counter import TokenCounter
from rerank_scaling.training.train_settings import TrainSettings

log = logging.getLogger(__name__)


#: Characters per token beyond which a pair is truncated anyway (English WordPiece/BPE: ~4).
CHARS_PER_TOKEN = 5


def enable_checkpointing(hf_model: Any) -> None:
    """Non-reentrant activation checkpointing of every layer of a transformers model (the name
    transformers >= 5.2x gives it; ``gradient_checkpointing_enable`` before)."""
    kwargs = {"use_reentrant": False}
    if hasattr(hf_model, "activation_checkpointing_enable"):
        hf_model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        hf_model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def run_memory_plan(
    memory: dict[str, Any] | None,
    model_config: Any,
    dataset: Any,
    objective: str,
    batch: int,
    settings: TrainSettings,
    half: bool,
    run: str,
) -> MemoryPlan:
    """The workflow's plan for this run; planned here from the loaded model when the workflow could
    not (its shape unknown at parse time: ``micro_batches`` 0)."""
    plan = MemoryPlan(**{k: v for k, v in (memory or {}).items() if k != "gpu_memory_gb"})
    if plan.micro_batches:
        if batch % plan.micro_batches:
            raise ValueError(f"{run}: batch {batch} cannot be cut into {plan.micro_batches} micro-batches")
        return plan
    per_row = max(len(d) for d in dataset["documents"]) if objective_spec(objective).examples.grouped else 1
    plan = plan_memory(
        MemoryShape.from_hf_config(model_config.to_dict()),
        batch,
        per_row,
        settings.max_length,
        "half" if half else "fp32",
        float(memory["gpu_memory_gb"]),  # type: ignore[index]
        settings.gradient_checkpointing,
        run,
    )
    if plan.note:
        log.warning("memory preflight: %s", plan.note)
    return plan


class TrainingStopped(RuntimeError):
    """Training stopped early on request (SIGTERM); the state is saved for a resume."""


class SaveFailed(RuntimeError):
    """Saving a trainer state, or exporting or publishing its checkpoint, failed (a full disk)."""


class StopRequest:
    """Set by SIGTERM: save the trainer state at the end of the current step, then stop."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: Any) -> None:
        log.warning("SIGTERM: saving the trainer state after this step, then exiting to be resumed")
        self.requested = True


def run_fingerprint(
    spec: dict[str, Any], run: str, settings: TrainSettings, device: str, data: list[str]
) -> dict[str, Any]:
    """What a saved trainer state belongs to: the run, model, settings, a digest of its examples and
    the training stage's code digest (:func:`~rerank_scaling.stage_code.running_code_digest`: a
    loss edit trains afresh, a docstring edit resumes).

    Only the settings that change what this run trains count: not the grid keys (a seed added to
    the grid) nor the job's resources, which may change between attempts without discarding it."""
    trained = without(dataclasses.asdict(settings), settings.RESOURCE_KEYS)
    return {
        "run": run,
        "model": spec,
        "training": json.loads(json.dumps(trained, default=list)),
        "device": device,
        "examples_sha256": file_digest(data),
        "code_sha256": running_code_digest("training.train"),
    }


def train_run(
    spec: dict[str, Any],
    objective: str,
    attention: str,
    seed: int,
    settings: TrainSettings,
    pointwise: str,
    groups: str,
    checkpoints_dir: str | os.PathLike[str],
    work_dir: str | os.PathLike[str],
    device: str = "auto",
    corpus_texts: list[str] | None = None,
    memory: dict[str, Any] | None = None,
    data_fraction: float = 1.0,
    annotations: str = "human",
) -> list[dict[str, Any]]:
    """Train one run and export its checkpoints; returns their sidecars. Resumes if interrupted.

    ``memory``: the run's :class:`~rerank_scaling.planning.memory.MemoryPlan` as a dict (gradient
    checkpointing, micro-batches; with ``micro_batches`` 0 and ``gpu_memory_gb``, planned here from
    the loaded model by the same rule). Micro-batches of one optimizer step are consecutive slices of
    its bucketed batch (:mod:`.batching`), so the step sees the same rows as one full batch.
    ``data_fraction`` < 1: the run trains on the seed's nested subset of the training queries, with
    a schedule of its own length (:func:`total_steps`). ``annotations``: the source the examples
    were built from (:mod:`rerank_scaling.data.annotations`), recorded in the sidecars."""
    import torch
    from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments
    from transformers import TrainerCallback

    device = resolve_device(device)
    precision = resolve_precision(settings.precision, device, "training.precision")
    if settings.threads:
        torch.set_num_threads(settings.threads)
    run = RunSpec(spec["name"], objective, attention, seed, data_fraction, annotations).run_id
    store = RunStore(Path(work_dir), Path(checkpoints_dir))
    store.prepare(run_fingerprint(spec, run, settings, device, [pointwise, groups]))

    half = precision != "fp32"
    attn = attention_implementation(device, half) if attention == "full" else None
    model = build_cross_encoder(spec, settings.max_length, seed, corpus_texts, store.work, attn)
    if attention != "full":
        from rerank_scaling.training.sparse_encoder import apply_window_attention, attention_variant_from_name

        apply_window_attention(model.model, attention_variant_from_name(attention))
    if settings.freeze_embeddings:
        freeze_input_embeddings(model)
    save_frozen_apart(model.model)  # frozen weights written once, not at every checkpoint
    stats: ModelStats = model_stats(model.model)

    dataset, pairs = load_examples(
        objective, pointwise, groups, settings.listnet_label_scale, data_fraction, seed
    )
    _, batch = objective_batch(settings, objective)
    plan = run_memory_plan(memory, model.model.config, dataset, objective, batch, settings, half, run)
    plan = checked_plan(
        plan, device, run_memory_plan, (model.model.config, dataset, objective, batch, settings, half, run)
    )
    if plan.gradient_checkpointing:
        enable_checkpointing(model.model)
    total = total_steps(settings, len(dataset), batch, data_fraction)
    save_at = checkpoint_steps(total, settings.checkpoints, settings.checkpoint_spacing)
    if len(save_at) != settings.checkpoints:
        fraction = f" on data fraction {data_fraction!r}" if data_fraction != 1.0 else ""
        raise ValueError(
            f"training.checkpoints: {settings.checkpoints} checkpoints need at least as many optimizer "
            f"steps, but {run} has {total}{fraction} ({len(dataset)} {objective} rows / batch {batch}); "
            "lower training.checkpoints, raise training.max_steps or epochs, raise the smallest "
            "training.data_fractions, or add examples"
        )
    indices = range(1, len(save_at) + 1)
    threshold = cpu_profile().train_compile_steps
    compiled = resolve_compile(settings.compile, device, "training.compile", total, threshold)
    if compiled:  # the encoder's forward, and its backward through AOT autograd, as inductor graphs
        compile_in_place(model[0])  # the encoder module, which calls the Hugging Face model
    attn_used = str(getattr(model.model.config, "_attn_implementation", None))
    log.info(
        "%s: %d rows, batch %d (%d micro-batches%s), %d steps, checkpoints at %s, %s, %s, attention %s%s",
        run,
        len(dataset),
        batch,
        plan.micro_batches,
        ", gradient checkpointing" if plan.gradient_checkpointing else "",
        total,
        save_at,
        stats,
        precision,
        attn_used,
        ", compiled" if compiled else "",
    )

    loss = make_loss(objective, model)
    store.discard_damaged()
    resume_from = store.latest_state()
    clock = {"start": time.perf_counter(), "offset": 0.0, "loss": float("nan")}
    counter = TokenCounter(model)
    if resume_from is not None:
        previous = json.loads((resume_from / PROGRESS).read_text())
        counter.restore(previous["tokens"], previous["examples"])
        clock["offset"] = previous["wall_s"]
        log.info("resuming from %s (step %d)", resume_from, previous["step"])
    store.republish_missing(indices)

    stop = StopRequest()
    saving: dict[str, int | None] = {"step": None}  # the step whose state is being saved, if any

    class CheckpointCallback(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            fault_point("step", state.global_step)
            control.should_save = state.global_step in save_at or stop.requested
            saving["step"] = state.global_step if control.should_save else None
            if stop.requested:
                control.should_training_stop = True
            return control

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            if logs and "loss" in logs:
                clock["loss"] = float(logs["loss"])

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            step = state.global_step
            scheduler = kwargs.get("lr_scheduler")
            saved = store.trainer_dir / f"checkpoint-{step}"
            index = save_at.index(step) + 1 if step in save_at else None
            progress = {
                "run": run,
                "model": spec["name"],
                "family": spec["family"],
                "role": spec["role"],
                "objective": objective,
                "attention": attention,
                "seed": seed,
                "checkpoint": index,
                "step": step,
                "total_steps": total,
                # the rate the step just taken was scheduled at the end of (0 at a linear schedule's end)
                "learning_rate": float(scheduler.get_last_lr()[0]) if scheduler is not None else None,
                "data_fraction": data_fraction,
                "annotations": annotations,
                "annotated_pairs": pairs,
                "examples": counter.examples,
                "tokens": counter.tokens,
                "flops": 6.0 * stats.non_embedding_params * counter.tokens,
                "wall_s": clock["offset"] + time.perf_counter() - clock["start"],
                "loss": clock["loss"],
                "device": device,
                "model_commit": model_commit(spec),  # the hub snapshot's commit (None: not a hub model)
                "train_precision": precision,
                "train_compiled": compiled,
                "attn_implementation": attn_used,
                "gradient_checkpointing": plan.gradient_checkpointing,
                "micro_batches": plan.micro_batches,
                **stats.as_dict(),
            }
            if index is None:  # a state saved on SIGTERM between checkpoints
                store.complete_state(saved, progress)
                saving["step"] = None
                return
            # The order keeps every kill recoverable (see checkpoint_store's invariants).
            fault_point("state", index)
            records = file_records(saved)  # hashed once: the export's model files are copies of these
            store.export(saved, index, progress, records)
            fault_point("exported", index)
            store.complete_state(saved, progress, records)
            fault_point("completed", index)
            store.publish(index)
            log.info("checkpoint %d/%d at step %d (loss %.4f)", index, len(save_at), step, clock["loss"])
            saving["step"] = None
            fault_point("published", index, released=lambda: stop.requested)

    # Length-bucketed steps save padding FLOPs but change which rows share a step, so they are
    # opt-in. Without them every row counts as one length: the same sampler then cuts random steps
    # (the stable sort keeps the permutation), so micro-batches still slice one step.
    if settings.length_bucketing:
        lengths = row_lengths(dataset, CHARS_PER_TOKEN * settings.max_length)
    else:
        lengths = [0] * len(dataset)
    args = CrossEncoderTrainingArguments(
        output_dir=str(store.trainer_dir),
        num_train_epochs=settings.epochs,
        max_steps=total,
        per_device_train_batch_size=batch // plan.micro_batches,
        gradient_accumulation_steps=plan.micro_batches,
        batch_sampler=functools.partial(LengthBucketBatchSampler, lengths=lengths, step_rows=batch),
        learning_rate=settings.lr,
        warmup_ratio=settings.warmup_ratio,
        weight_decay=settings.weight_decay,
        # One AdamW kernel over all parameters (transformers' default since torch 2.8, pinned here):
        # per step it differs from the for-loop AdamW by float rounding only; it is faster on a CPU
        # (benchmarks/results/cpu_peak_amx.md, "bf16 autocast" against "for-loop AdamW")
        optim="adamw_torch_fused",
        seed=seed,
        data_seed=seed,
        save_strategy="steps",
        save_steps=10**9,
        save_total_limit=None,  # the store removes old states, only once a newer one is complete
        logging_steps=max(1, min(save_at[0], 10)),
        report_to="none",
        use_cpu=device == "cpu",
        bf16=precision == "bf16",  # autocast (fp32 weights and optimizer state): bench_cpu_peak.py
        fp16=precision == "fp16",  # CUDA without native bf16: autocast with the Trainer's GradScaler
        dataloader_drop_last=False,
        disable_tqdm=False,
    )
    without_model_card(model)
    trainer = CrossEncoderTrainer(
        model=model, args=args, train_dataset=dataset, loss=loss, callbacks=[CheckpointCallback()]
    )
    previous_handler = signal.signal(signal.SIGTERM, stop)
    log.info("training: SIGTERM from now on saves the trainer state and exits")
    try:
        with fp32_score_layer(model, "cuda" if device.startswith("cuda") else "cpu"):  # logits in fp32
            trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    except Exception as error:  # torch, safetensors and the OS each say "disk full" their own way
        if saving["step"] is None:
            raise
        state = store.trainer_dir / f"checkpoint-{saving['step']}"
        raise SaveFailed(
            f"{run}: saving the trainer state {state} (or exporting it to {store.exports_dir}, or "
            f"publishing it to {store.checkpoints}) failed: {type(error).__name__}: {error}. Free space "
            "there (df -h on those folders) and run the job again: it resumes from its last complete state"
        ) from error
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
    if stop.requested and trainer.state.global_step < total:
        raise TrainingStopped(
            f"{run}: stopped by SIGTERM at step {trainer.state.global_step} of {total}; its state is saved "
            f"in {store.trainer_dir}, and re-running the job resumes from it"
        )
    store.republish_missing(indices)
    return [json.loads((store.checkpoints / checkpoint_name(k) / SIDECAR).read_text()) for k in indices]
