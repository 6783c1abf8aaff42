"""Experiment runner: runs repeat for a seed, summaries are right, lengths are honoured."""

from __future__ import annotations

import pytest

from rope_lessons.experiments import (
    accuracy_by_length,
    order_run,
    run_once,
    run_seeds,
    summarise,
)


def test_summary_statistics() -> None:
    s = summarise([1.0, 2.0, 3.0])
    assert (s.mean, s.low, s.high, s.n) == (2.0, 1.0, 3.0, 3)
    assert s.std == pytest.approx(1.0)
    assert summarise([0.5]).std == 0.0
    with pytest.raises(ValueError, match="at least one"):
        summarise([])


def test_a_run_repeats_exactly_for_the_same_seed() -> None:
    run = order_run("sinusoidal", steps=5)
    a, b = run_once(run, seed=3, progress=False), run_once(run, seed=3, progress=False)
    assert a.losses == b.losses
    assert a.metrics == b.metrics
    assert sorted(a.metrics) == [16, 32, 64]


def test_learned_positions_skip_lengths_beyond_their_table() -> None:
    results = run_seeds(order_run("learned", steps=3), seeds=[0, 1], progress=False)
    assert sorted(accuracy_by_length(results)) == [16]


def test_order_run_overrides_model_fields() -> None:
    run = order_run("rope", causal=True, rope="vo", steps=1)
    assert run.model.rope == "vo" and run.model.causal and run.label == "rope, causal"
