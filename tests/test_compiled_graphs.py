"""Compiled graphs (compiled_graphs): compiled scoring equals eager within bf16's own error on a tiny
model, one graph serves every checkpoint, batch size and length of an architecture, a second
process finds the compiled code in inductor's cache, and ``auto`` follows the measured break-even."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from rerank_scaling.compute.compiled_graphs import (
    CACHE_ENV,
    architecture_key,
    compiled_forward,
    resolve_compile,
)
from rerank_scaling.evaluation.rerank import TokenizedPairs, model_scores
from rerank_scaling.precision import to_bf16_weights

torch_dynamo = pytest.importorskip("torch._dynamo")


class Pooled(torch.nn.Module):
    """A tiny scorer with the element-wise work a compiled graph fuses (mask, tanh, mean)."""

    def __init__(self, seed: int, width: int = 16) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.embed = torch.nn.Embedding(100, width)
        self.hidden = torch.nn.Linear(width, width)
        self.score = torch.nn.Linear(width, 1)

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        mask = batch["attention_mask"].unsqueeze(-1).to(self.embed.weight.dtype)
        pooled = (torch.tanh(self.hidden(self.embed(batch["input_ids"]))) * mask).sum(1) / mask.sum(1)
        return {"scores": self.score(pooled)}


def _tokens(pairs: int, seed: int = 0) -> TokenizedPairs:
    rows = [[(seed + 7 * i + j) % 99 + 1 for j in range(3 + (i * 5) % 17)] for i in range(pairs)]
    rows.sort(key=len)
    return TokenizedPairs([("q", f"d{i}") for i in range(pairs)], rows, None)


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path_factory.getbasetemp() / "inductor"))


def test_compiled_bf16_scores_equal_eager_within_bf16_error() -> None:
    fp32 = Pooled(0).eval()
    tokens = _tokens(40)
    reference = model_scores(fp32, tokens, 8, 0, "cpu")
    low = to_bf16_weights(copy.deepcopy(fp32))
    eager = model_scores(low, tokens, 8, 0, "cpu")
    torch_dynamo.reset()
    before = torch_dynamo.utils.counters["stats"]["unique_graphs"]
    compiled = model_scores(low, tokens, 8, 0, "cpu", compiled=True)
    bf16_error = max(abs(e - r) for e, r in zip(eager, reference, strict=True))
    assert max(abs(c - e) for c, e in zip(compiled, eager, strict=True)) <= 2 * bf16_error + 1e-6
    # another checkpoint of the same architecture, other batch sizes and lengths: the same graph
    other = to_bf16_weights(Pooled(1).eval())
    assert architecture_key(other) == architecture_key(low)
    again = model_scores(other, _tokens(13, seed=3), 5, 0, "cpu", compiled=True)
    assert torch_dynamo.utils.counters["stats"]["unique_graphs"] - before == 1, "one graph, no recompile"
    expected = model_scores(other, _tokens(13, seed=3), 5, 0, "cpu")
    assert max(abs(a - b) for a, b in zip(again, expected, strict=True)) <= 2 * bf16_error + 1e-6
    shell, _ = compiled_forward(other)
    assert shell is not other and torch.equal(shell.hidden.weight, other.hidden.weight)


def test_length_buckets_score_as_unpadded_pairs() -> None:
    """Batches of similar lengths padded to their longest pair score each pair as alone (fp32)."""
    model = Pooled(2).eval()
    tokens = _tokens(30)
    bucketed = model_scores(model, tokens, 8, 0, "cpu")
    alone = model_scores(model, tokens, 1, 0, "cpu")
    assert bucketed == pytest.approx(alone, abs=1e-6)


COMPILE_ONCE = textwrap.dedent(
    """
    import sys, torch
    sys.path.insert(0, sys.argv[1])
    from test_compiled_graphs import Pooled, _tokens
    from torch._dynamo.utils import counters
    from rerank_scaling.evaluation.rerank import model_scores
    model_scores(Pooled(0).eval(), _tokens(9), 4, 0, "cpu", compiled=True)
    print(counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"])
    """
)


def test_a_second_process_finds_the_graph_in_inductors_cache(tmp_path) -> None:
    env = {**os.environ, CACHE_ENV: str(tmp_path / "inductor")}
    here = os.path.dirname(__file__)
    runs = [
        subprocess.run(
            [sys.executable, "-c", COMPILE_ONCE, here], env=env, capture_output=True, text=True, check=True
        ).stdout.split()
        for _ in range(2)
    ]
    (hit1, miss1), (hit2, miss2) = ([int(v) for v in run[-2:]] for run in runs)
    assert miss1 >= 1 and hit1 == 0, "the first process compiles"
    assert hit2 >= 1 and miss2 == 0, "the second finds every graph in the cache"
    assert any((tmp_path / "inductor").rglob("*")), "the cache lives where the variable points"


# Where a job's compiled graphs are cached, after its model library was imported (as in a job).
WHERE = """
import sentence_transformers
from rerank_scaling.compute.compiled_graphs import use_cache_dir
print(use_cache_dir())
"""


def test_the_cache_is_the_users_directory_else_the_workflows_not_torchs_default(tmp_path) -> None:
    """Importing sentence_transformers sets TORCHINDUCTOR_CACHE_DIR to torch's default under /tmp (a
    node's local disk under SLURM): a plain job (a SLURM job, a run without the job server) then
    cached its graphs there instead of under results/.cache/inductor as documented."""
    env = {key: value for key, value in os.environ.items() if key != CACHE_ENV}
    where = [sys.executable, "-c", WHERE]
    found = subprocess.run(where, env=env, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert found.stdout.split()[-1] == str(tmp_path / "results" / ".cache" / "inductor")
    mine = str(tmp_path / "mine")
    found = subprocess.run(
        where, env={**env, CACHE_ENV: mine}, cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert found.stdout.split()[-1] == mine


@pytest.mark.parametrize(
    ("requested", "device", "work", "threshold", "expected"),
    [
        ("on", "cpu", 1, None, True),
        ("off", "cpu", 10**9, 1, False),
        ("auto", "cpu", 999, 1000, False),
        ("auto", "cpu", 1000, 1000, True),
        ("auto", "cpu", 10**9, None, False),
        ("auto", "cuda", 10**9, 1, False),
    ],
)
def test_auto_compiles_where_the_work_reaches_the_measured_break_even(
    requested, device, work, threshold, expected
) -> None:
    assert resolve_compile(requested, device, "evaluation.compile", work, threshold) is expected


def test_an_unknown_request_names_the_field() -> None:
    with pytest.raises(ValueError, match="evaluation.compile: unknown value 'yes'"):
        resolve_compile("yes", "cpu", "evaluation.compile", 1, 1)
