"""Device and preset choice, seeding and the learning-rate schedule."""

from __future__ import annotations

import itertools

import pytest
import torch

from rope_lessons.evidence.runtime import (
    PRESET_ENV,
    THREADS_ENV,
    choose_preset,
    seed_everything,
    setup,
)
from rope_lessons.evidence.training import TrainResult, learning_rate


def test_preset_follows_the_device_unless_overridden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PRESET_ENV, raising=False)
    assert choose_preset(torch.device("cpu")) == "cpu"
    assert choose_preset(torch.device("cuda")) == "gpu"
    monkeypatch.setenv(PRESET_ENV, "gpu")
    assert choose_preset(torch.device("cpu")) == "gpu"
    monkeypatch.setenv(PRESET_ENV, "large")
    with pytest.raises(ValueError, match=PRESET_ENV):
        choose_preset(torch.device("cpu"))


def test_setup_returns_the_chosen_settings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(PRESET_ENV, "cpu")
    settings, device = setup({"cpu": {"steps": 1}, "gpu": {"steps": 2}}, seed=3)
    assert settings == {"steps": 1} and isinstance(device, torch.device)
    assert "preset: cpu" in capsys.readouterr().out
    with pytest.raises(ValueError, match="missing"):
        setup({"cpu": 1})


def test_setup_uses_one_cpu_thread_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    before = torch.get_num_threads()
    try:
        monkeypatch.delenv(THREADS_ENV, raising=False)
        setup({"cpu": 0, "gpu": 0})
        assert torch.get_num_threads() == 1
        monkeypatch.setenv(THREADS_ENV, "2")
        setup({"cpu": 0, "gpu": 0})
        assert torch.get_num_threads() == 2
        monkeypatch.setenv(THREADS_ENV, "many")
        with pytest.raises(ValueError, match=THREADS_ENV):
            setup({"cpu": 0, "gpu": 0})
    finally:
        torch.set_num_threads(before)


def test_seed_everything_repeats_random_draws() -> None:
    seed_everything(7)
    a = torch.rand(3)
    seed_everything(7)
    assert torch.equal(a, torch.rand(3))


def test_learning_rate_warms_up_then_decays_to_a_tenth() -> None:
    rates = [learning_rate(s, 100, 1.0, 10) for s in range(100)]
    assert rates[0] == pytest.approx(0.1) and rates[9] == pytest.approx(1.0)
    assert rates[10] == pytest.approx(1.0) and rates[-1] == pytest.approx(0.1, abs=1e-3)
    assert all(a >= b for a, b in itertools.pairwise(rates[10:]))


def test_smoothed_losses_are_running_means() -> None:
    result = TrainResult(losses=[4.0, 2.0, 0.0, 2.0], wall_seconds=1.0)
    assert result.smoothed(2) == [4.0, 3.0, 1.0, 1.0]
