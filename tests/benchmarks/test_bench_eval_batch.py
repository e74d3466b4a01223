"""The evaluation batch benchmark's training load (``--beside-training``) trains: its steps change
the weights it does not freeze and leave the frozen embeddings as they were."""

from __future__ import annotations

import multiprocessing
import threading

import bench_eval_batch as bench
import pytest
import torch
import yaml


def test_the_training_load_takes_steps_until_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    config = yaml.safe_load(bench.CONFIG.read_text())
    config["training"]["max_length"] = 16  # the default's shapes, shorter: the same code path
    (spec,) = [model for model in config["models"] if model["name"] == "L1"]
    built, build = {}, bench.build_cross_encoder

    def kept(*args, **kwargs):  # the real model, kept to compare its weights after the steps
        built["model"] = build(*args, **kwargs)
        built["before"] = {k: v.detach().clone() for k, v in built["model"].state_dict().items()}
        return built["model"]

    monkeypatch.setattr(bench, "build_cross_encoder", kept)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # the load's one thread: not this process's
    ready, stop, steps = threading.Event(), threading.Event(), multiprocessing.Value("q", 0)
    worker = threading.Thread(target=bench.training_load, args=(spec, config, ready, stop, steps))
    worker.start()
    try:
        assert ready.wait(120)
        while steps.value < 3 and worker.is_alive():
            worker.join(0.05)
    finally:
        stop.set()
        worker.join(60)
    assert not worker.is_alive() and steps.value >= 3
    after, before = built["model"].state_dict(), built["before"]
    embeddings = next(k for k in after if k.endswith("word_embeddings.weight"))
    assert torch.equal(after[embeddings], before[embeddings])  # frozen, as the trainer freezes them
    assert any(not torch.equal(after[k], before[k]) for k in after if k != embeddings)
