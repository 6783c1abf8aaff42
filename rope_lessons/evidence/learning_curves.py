"""Learning curves over seeds: a running mean of each seed's loss, then mean and range.

The toy experiments train one configuration with several seeds
(:func:`rope_lessons.evidence.runs.run_seeds`). Their per-step losses are noisy
(a WhichFirst batch scores one token per sequence), so each curve is first
smoothed by a running mean, then summarised across seeds by its mean, minimum
and maximum at every step: the line and the band that the chapters plot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from matplotlib.axes import Axes

from rope_lessons.evidence.runs import PREFIX_STEPS, RunResult
from rope_lessons.evidence.training import running_mean


@dataclass(frozen=True)
class LossBand:
    """Smoothed training loss summarised over seeds, one entry per step.

    Attributes:
        mean, low, high: float64 tensors ``(steps,)``: the mean over seeds and
            the seed-wise minimum and maximum of the smoothed losses.
        n_seeds: how many runs went into it.
    """

    mean: torch.Tensor
    low: torch.Tensor
    high: torch.Tensor
    n_seeds: int


def loss_band(results: Sequence[RunResult], window: int = 20) -> LossBand:
    """Smooth each run's training loss and summarise the runs step by step.

    Args:
        results: runs of one configuration (same number of steps), one per seed.
        window: running-mean window in steps.

    Returns:
        A :class:`LossBand`.

    Raises:
        ValueError: if ``results`` is empty or the runs have different lengths.
    """
    if not results:
        raise ValueError("results must hold at least one run")
    lengths = {len(r.losses) for r in results}
    if len(lengths) != 1:
        raise ValueError(f"results must all have the same number of steps, got {sorted(lengths)}")
    losses = torch.tensor([r.losses for r in results], dtype=torch.float64)  # (seeds, steps)
    smoothed = running_mean(losses, window)
    return LossBand(
        mean=smoothed.mean(dim=0),
        low=smoothed.min(dim=0).values,
        high=smoothed.max(dim=0).values,
        n_seeds=len(results),
    )


def checkpoint_values(
    result: RunResult, length: int, name: str = "loss"
) -> tuple[list[int], list[float]]:
    """One held-out metric of a run at each of its checkpoints and at the end of training
    (:attr:`~rope_lessons.evidence.runs.RunResult.evaluations`): ``(steps, values)``."""
    evaluations = result.evaluations
    steps = sorted(evaluations)
    values = [getattr(evaluations[step][length], name) for step in steps]
    if None in values:
        raise ValueError(f"{result.label!r} has no {name!r} (its task has no answer set)")
    return steps, [float(v) for v in values]


def plot_live_over_stored(
    loss_axes: Axes,
    checkpoint_axes: Axes,
    stored: Sequence[RunResult],
    live: Sequence[RunResult],
    *,
    length: int,
    name: str = "loss",
    color: str = "C0",
    label: str = "",
    window: int = 20,
) -> None:
    """Stored seeds as a band, live re-runs drawn over them.

    On ``loss_axes``: the smoothed training loss (:func:`loss_band`) of the
    stored seeds, mean and range, with each live run dashed and the end of the
    deterministic prefix marked. On ``checkpoint_axes``: the held-out ``name``
    at ``length`` at every checkpoint, each stored seed a thin line and each
    live run a line with stars.
    """
    band = loss_band(stored, window)
    steps = range(1, len(band.mean) + 1)
    loss_axes.fill_between(steps, band.low, band.high, color=color, alpha=0.2)
    loss_axes.plot(steps, band.mean, color=color, label=f"{label} stored ({band.n_seeds} seeds)")
    for run in live:
        smooth = running_mean(torch.tensor(run.losses, dtype=torch.float64), window)
        loss_axes.plot(range(1, len(smooth) + 1), smooth, color=color, ls="--", lw=1)
    loss_axes.axvline(PREFIX_STEPS, color="0.6", lw=0.8, ls=":")
    for run in stored:
        checkpoint_axes.plot(*checkpoint_values(run, length, name), color=color, lw=0.6, alpha=0.5)
    for run in live:
        checkpoint_axes.plot(
            *checkpoint_values(run, length, name),
            color=color,
            marker="*",
            ms=9,
            mec="black",
            mew=0.5,
            label=f"{label} live, seed {run.seed}",
        )
