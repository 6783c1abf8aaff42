"""Learning curves: the running mean is the mean of each window, and the band spans the seeds."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rope_lessons.experiments import RunResult
from rope_lessons.learning_curves import loss_band, running_mean
from rope_lessons.training import TrainResult


@given(
    losses=st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=60),
    window=st.integers(1, 25),
)
def test_running_mean_is_the_mean_of_each_window(losses: list[float], window: int) -> None:
    expected = [
        sum(losses[max(0, i + 1 - window) : i + 1]) / min(i + 1, window) for i in range(len(losses))
    ]
    got = running_mean(torch.tensor(losses, dtype=torch.float64), window)
    torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float64))
    smoothed = TrainResult(losses=losses, wall_seconds=0.0).smoothed(window)
    torch.testing.assert_close(
        torch.tensor(smoothed, dtype=torch.float64), torch.tensor(expected, dtype=torch.float64)
    )


def test_band_spans_the_seeds() -> None:
    runs = [RunResult("x", seed, [float(seed)] * 5) for seed in (1, 2, 6)]
    band = loss_band(runs, window=3)
    assert band.n_seeds == 3
    assert band.mean.tolist() == [3.0] * 5
    assert band.low.tolist() == [1.0] * 5 and band.high.tolist() == [6.0] * 5


def test_band_refuses_empty_or_ragged_input() -> None:
    with pytest.raises(ValueError, match="at least one"):
        loss_band([])
    with pytest.raises(ValueError, match="same number of steps"):
        loss_band([RunResult("x", 0, [1.0, 2.0]), RunResult("x", 1, [1.0])])
    with pytest.raises(ValueError, match="window"):
        running_mean(torch.ones(3), 0)
