"""Learning curves: the running mean is the mean of each window, and the band spans the seeds."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rope_lessons.evidence.learning_curves import (
    checkpoint_values,
    loss_band,
    plot_live_over_stored,
)
from rope_lessons.evidence.runs import RunResult
from rope_lessons.evidence.training import Metrics, TrainResult, running_mean


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


def test_checkpoint_values_read_a_metric_at_every_checkpoint_or_the_end() -> None:
    from rope_lessons.evidence.runs import RunResult
    from rope_lessons.evidence.training import Metrics

    with_checkpoints = RunResult(
        "x",
        0,
        [1.0] * 10,
        {8: Metrics(0.5, 0.9)},
        {5: {8: Metrics(0.7, 0.6)}, 10: {8: Metrics(0.5, 0.9)}},
    )
    assert checkpoint_values(with_checkpoints, 8) == ([5, 10], [0.7, 0.5])
    assert checkpoint_values(with_checkpoints, 8, "accuracy") == ([5, 10], [0.6, 0.9])
    without = RunResult("x", 0, [1.0] * 10, {8: Metrics(0.5, 0.9)})
    assert checkpoint_values(without, 8) == ([10], [0.5])
    with pytest.raises(ValueError, match="has no 'answer_accuracy'"):
        checkpoint_values(without, 8, "answer_accuracy")


def test_plot_live_over_stored_draws_a_band_the_seeds_and_the_live_runs() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def result(seed: int, loss: float) -> RunResult:
        return RunResult(
            "x",
            seed,
            [loss] * 30,
            {8: Metrics(loss, 0.5)},
            {25: {8: Metrics(loss, 0.5)}, 30: {8: Metrics(loss, 0.5)}},
        )

    figure, (left, right) = plt.subplots(1, 2)
    stored = [result(0, 1.0), result(1, 1.2), result(2, 1.1)]
    plot_live_over_stored(left, right, stored, [result(0, 1.0)], length=8, label="x")
    assert len(left.lines) == 1 + 1 + 1  # stored mean, live run, the prefix marker
    assert len(left.collections) == 1  # the band
    assert len(right.lines) == 3 + 1  # every stored seed, the live run
    plt.close(figure)
