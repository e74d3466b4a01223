"""The objective registry: one owner of what a training objective (``training.objectives``) means.

Below every floor that reads it: the data jobs (examples, fraction checks), planning (memory), the
trainer and the workflow's parse.

An objective says which examples it trains on (pairs, or groups of 1 positive + n BM25
negatives: :class:`ExampleFormat`, the files the examples job writes), which ``training`` key is
its batch (rows per optimizer step), how many sequences one row passes through the encoder, and
its sentence-transformers cross-encoder loss ("Scaling Laws for Cross-Encoder Reranking",
Section 3: pointwise BCE, pairwise RankNet, listwise ListNet). Every consumer asks here: the
settings' batch (:func:`batch`), the memory plan and job time (:func:`rows_per_step`), the step
count (:func:`total_steps`, :func:`epoch_steps`, :func:`fixed_steps`), the config checks' row
bounds (:func:`rows_per_positive`), the examples and fraction jobs (:func:`examples_of`),
and the trainer's loss (``training.objectives.make_loss``). Torch-free: the workflow imports it at
parse time.

The ``training`` keys that set the steps are :class:`StepSettings`, and
:func:`training_steps_problems` checks that ``training.checkpoints`` fit in them.

A new objective is one :class:`Objective` and one :func:`register` call (plus its name in the
schema's ``training.objectives`` enum); ``tests/test_registries.py`` shows it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from rerank_scaling.settings import Problems, SectionSettings, problem


@dataclass(frozen=True)
class ExampleFormat:
    """``grouped`` False: one row per (query, document) pair, each positive followed by
    ``examples.<negatives_key>`` BM25 negatives; True: one row per positive, a group of 1 positive
    + ``examples.<negatives_key>`` negatives."""

    name: str
    negatives_key: str
    grouped: bool

    def rows_per_positive(self, negatives: int) -> int:
        """Training rows one (query, positive) pair gives."""
        return 1 if self.grouped else 1 + negatives

    def sequences_per_row(self, negatives: int) -> int:
        """(query, document) sequences one row passes forward and backward."""
        return 1 + negatives if self.grouped else 1


PAIRS = ExampleFormat("pointwise", "pointwise_negatives", grouped=False)
GROUPS = ExampleFormat("groups", "group_negatives", grouped=True)

#: file kind -> format
EXAMPLE_FORMATS: dict[str, ExampleFormat] = {f.name: f for f in (PAIRS, GROUPS)}


@dataclass(frozen=True)
class Objective:
    """One training objective: its examples, its batch key in ``training``, its loss.

    ``loss`` names a class of ``sentence_transformers.cross_encoder.losses``; ``label_scaled``
    multiplies the labels by ``training.listnet_label_scale`` (ListNet's target is
    softmax(labels): 0/1 labels give a soft target, scaled ones a nearly one-hot target).
    """

    name: str
    examples: ExampleFormat
    batch_key: str
    loss: str
    label_scaled: bool = False


#: name -> objective, in the order the grid lists them (``grid.OBJECTIVES``).
OBJECTIVES: dict[str, Objective] = {}


def register(objective: Objective) -> Objective:
    """Make ``objective`` known to every consumer (settings, steps, memory, jobs, trainer)."""
    OBJECTIVES[objective.name] = objective
    return objective


POINTWISE = register(Objective("pointwise", PAIRS, "pointwise_batch_size", "BinaryCrossEntropyLoss"))
PAIRWISE = register(Objective("pairwise", GROUPS, "group_queries_per_batch", "RankNetLoss"))
LISTWISE = register(
    Objective("listwise", GROUPS, "group_queries_per_batch", "ListNetLoss", label_scaled=True)
)


def objective(name: str) -> Objective:
    """The registered objective called ``name``; a KeyError naming the config field otherwise."""
    if name not in OBJECTIVES:
        raise KeyError(f"training.objectives: unknown objective {name!r}; use one of {', '.join(OBJECTIVES)}")
    return OBJECTIVES[name]


def examples_of(name: str) -> str:
    """Which example file (``pointwise`` or ``groups``) objective ``name`` trains on."""
    return objective(name).examples.name


def negatives_key(name: str) -> str:
    """The ``examples`` key that sets how many BM25 negatives objective ``name``'s rows hold."""
    return objective(name).examples.negatives_key


def batch(settings: Any, name: str) -> tuple[str, int]:
    """The batch key of objective ``name`` in ``training`` and its value in ``settings``."""
    key = objective(name).batch_key
    return key, int(getattr(settings, key))


def rows_per_step(name: str, training: Any, examples: Any) -> tuple[int, int]:
    """(rows per optimizer step, sequences per row) of objective ``name`` under the ``training``
    and ``examples`` settings."""
    spec = objective(name)
    negatives = int(getattr(examples, spec.examples.negatives_key))
    return batch(training, name)[1], spec.examples.sequences_per_row(negatives)


def rows_per_positive(name: str, examples: Any) -> int:
    """Training rows of objective ``name`` per (query, positive) pair; ``examples`` holds the
    ``examples`` keys (a settings object or the config section)."""
    spec = objective(name).examples
    value = (
        examples[spec.negatives_key] if isinstance(examples, dict) else getattr(examples, spec.negatives_key)
    )
    return spec.rows_per_positive(int(value))


class StepKeys(Protocol):
    """The ``training`` keys that set a run's optimizer steps."""

    max_steps: int | None
    epochs: float


def epoch_steps(rows: int, batch_rows: int, epochs: float) -> int:
    """Optimizer steps of ``epochs`` passes over ``rows`` rows in batches of ``batch_rows``
    (a last, partial batch is a step)."""
    return math.ceil(math.ceil(rows / batch_rows) * epochs)


def fixed_steps(max_steps: int, fraction: float) -> int:
    """Steps of a run on ``fraction`` of the data with ``training.max_steps``: that many times the
    fraction (the same passes over the data as the full run)."""
    return max(1, math.ceil(max_steps * fraction - 1e-9))


def total_steps(settings: StepKeys, rows: int, batch_rows: int, fraction: float) -> int:
    """Optimizer steps of a run, the length its warm-up and linear decay are scaled to: its epochs
    over its own rows; with ``training.max_steps``, :func:`fixed_steps`, so every fraction ends
    its own complete schedule."""
    if settings.max_steps:
        return fixed_steps(settings.max_steps, fraction)
    return max(1, epoch_steps(rows, batch_rows, settings.epochs))


@dataclass(frozen=True)
class StepSettings(SectionSettings):
    """The ``training`` keys that set how many optimizer steps a run has: the examples and fraction
    jobs check them against the examples they see (only these, so that other training changes do
    not re-run those jobs). Defaults: the schema's."""

    SECTION: ClassVar[str] = "training"

    objectives: tuple[str, ...]
    checkpoints: int
    max_steps: int | None
    epochs: float
    pointwise_batch_size: int
    group_queries_per_batch: int

    def batch(self, objective: str) -> tuple[str, int]:
        """The batch key of ``objective`` and its value (:func:`batch`)."""
        return batch(self, objective)


def training_steps_problems(training: StepSettings, rows: dict[str, int], exact: bool) -> Problems:
    """Every objective has at least ``training.checkpoints`` optimizer steps.

    ``rows``: objective -> training rows (pointwise pairs, or groups); ``exact`` False when they are
    an upper bound estimated from the config, so only a sure shortfall is reported. Runs in the
    workflow's parse (rows the config bounds) and in the examples job (the real rows).
    """
    wanted = training.checkpoints
    if training.max_steps is not None:
        if training.max_steps < wanted:
            return [
                problem(
                    "training.max_steps",
                    f"{training.max_steps} steps cannot hold training.checkpoints = {wanted} checkpoints; "
                    f"raise training.max_steps to at least {wanted} or lower training.checkpoints",
                )
            ]
        return []
    problems = []
    for objective in training.objectives:
        if objective not in rows:
            continue
        key, batch_rows = training.batch(objective)
        steps = epoch_steps(rows[objective], batch_rows, training.epochs)
        if steps < wanted:
            bound = "at most " if not exact else ""
            problems.append(
                problem(
                    "training.checkpoints",
                    f"{objective} training has {bound}{steps} optimizer steps ({bound}{rows[objective]} "
                    f"rows / training.{key} {batch_rows} x training.epochs), fewer than the {wanted} "
                    f"checkpoints asked for; lower training.checkpoints or training.{key}, raise "
                    "training.epochs, or set training.max_steps",
                )
            )
    return problems
