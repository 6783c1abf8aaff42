"""Learning curves over seeds: a running mean of each seed's loss, then mean and range.

The toy experiments train one configuration with several seeds
(:func:`rope_lessons.experiments.run_seeds`). Their per-step losses are noisy
(a WhichFirst batch scores one token per sequence), so each curve is first
smoothed by a running mean, then summarised across seeds by its mean, minimum
and maximum at every step: the line and the band that the chapters plot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rope_lessons.experiments import RunResult
from rope_lessons.training import running_mean


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
