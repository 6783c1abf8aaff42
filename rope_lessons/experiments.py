"""Toy experiments: train one configuration on one task for several seeds, and summarise.

A :class:`Run` fixes everything but the seed: the model configuration, the
task, the training length and budget, and the lengths to evaluate at (longer
than the training length to test extrapolation). :func:`run_seeds` trains one
model per seed; :func:`summarise` reports mean, standard deviation and range
over seeds, which is what the chapters print.

The chapter-2 task, reused by chapter 3, is :func:`order_run`: the
:class:`~rope_lessons.synthetic.WhichFirst` task on a bidirectional model, trained
at length 16 and evaluated at 16, 32 and 64.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field

import torch

from rope_lessons.model import ModelConfig, PositionKind, TinyTransformer
from rope_lessons.runtime import seed_everything
from rope_lessons.synthetic import Task, WhichFirst, batch_sampler
from rope_lessons.training import Metrics, evaluate, train

EVAL_SEED_OFFSET = 10_000  # evaluation batches never share a seed with training batches


@dataclass(frozen=True)
class Run:
    """One trainable configuration; the seed is chosen when it is run.

    Attributes:
        label: the name printed in tables and legends.
        model: the model configuration (its vocabulary must fit the task).
        task: the data.
        train_len: sequence length during training.
        eval_lens: sequence lengths to evaluate at.
        steps, batch_size, lr: the training budget.
        eval_batches: batches of 256 sequences per evaluation length.
    """

    label: str
    model: ModelConfig
    task: Task
    train_len: int
    eval_lens: tuple[int, ...]
    steps: int
    batch_size: int = 32
    lr: float = 3e-3
    eval_batches: int = 4


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run with one seed.

    Attributes:
        label, seed: which run.
        losses: training loss at every step.
        metrics: held-out loss and accuracy at each evaluation length; a length
            the model cannot encode (beyond a learned table) is missing.
        wall_seconds: training time.
    """

    label: str
    seed: int
    losses: list[float]
    metrics: dict[int, Metrics] = field(default_factory=dict)
    wall_seconds: float = 0.0


def run_once(
    run: Run, seed: int, device: torch.device | str = "cpu", progress: bool = True
) -> RunResult:
    """Train ``run`` from scratch with ``seed`` and evaluate it at every length."""
    seed_everything(seed)
    model = TinyTransformer(run.model).to(device)
    sampler = batch_sampler(run.task, run.batch_size, run.train_len, seed=seed, device=device)
    result = train(
        model,
        sampler,
        steps=run.steps,
        lr=run.lr,
        progress=progress,
        desc=f"{run.label}, seed {seed}",
    )
    metrics = {}
    for length in run.eval_lens:
        if run.model.position == "learned" and length > run.model.max_len:
            continue
        held_out = batch_sampler(
            run.task, 256, length, seed=EVAL_SEED_OFFSET + length, device=device
        )
        metrics[length] = evaluate(model, held_out, batches=run.eval_batches)
    return RunResult(run.label, seed, result.losses, metrics, result.wall_seconds)


def run_seeds(
    run: Run, seeds: list[int], device: torch.device | str = "cpu", progress: bool = True
) -> list[RunResult]:
    """:func:`run_once` for every seed."""
    return [run_once(run, seed, device, progress) for seed in seeds]


@dataclass(frozen=True)
class Summary:
    """A statistic over seeds: mean, sample standard deviation, min, max, count."""

    mean: float
    std: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        return f"{self.mean:.3f} ± {self.std:.3f} [{self.low:.3f}, {self.high:.3f}] (n={self.n})"


def summarise(values: list[float]) -> Summary:
    """Mean, sample standard deviation (0 for one value), minimum and maximum."""
    if not values:
        raise ValueError("summarise needs at least one value")
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return Summary(statistics.fmean(values), std, min(values), max(values), len(values))


def accuracy_by_length(results: list[RunResult]) -> dict[int, Summary]:
    """Accuracy at each evaluation length, summarised over the seeds of one run."""
    lengths = sorted({length for r in results for length in r.metrics})
    return {
        length: summarise([r.metrics[length].accuracy for r in results if length in r.metrics])
        for length in lengths
    }


def order_run(
    position: PositionKind,
    *,
    causal: bool = False,
    steps: int = 300,
    batch_size: int = 32,
    label: str | None = None,
    **model_fields: object,
) -> Run:
    """The chapter-2 order task for one position encoding.

    :class:`~rope_lessons.synthetic.WhichFirst` with 8 filler tokens, a two-layer
    model of width 64 with 4 heads, bidirectional unless ``causal``; trained at
    length 16 and evaluated at 16, 32 and 64. ``model_fields`` override fields
    of :class:`~rope_lessons.model.ModelConfig` (e.g. ``rope="vo"``).
    """
    task = WhichFirst(n_fillers=8)
    config = ModelConfig(
        vocab_size=task.vocab_size,
        dim=64,
        n_layers=2,
        n_heads=4,
        causal=causal,
        position=position,
        max_len=16,
    )
    config = dataclasses.replace(config, **model_fields)  # type: ignore[arg-type]
    return Run(
        label=label or f"{position}{', causal' if causal else ''}",
        model=config,
        task=task,
        train_len=16,
        eval_lens=(16, 32, 64),
        steps=steps,
        batch_size=batch_size,
    )
