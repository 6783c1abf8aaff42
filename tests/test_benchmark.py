"""The speed benchmark: Hugging Face's form written out, the timed forms, the table."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from helpers import random_features

from rope_lessons.evidence import benchmark
from rope_lessons.evidence.benchmark import (
    COPY,
    HALF,
    HF,
    LOOP,
    REFERENCE,
    Timing,
    format_targets,
    format_timings,
    hf_apply_rotary,
    hf_cos_sin,
    hf_rotate_half,
    target_row,
    time_in_turn,
    time_rope_forms,
)
from rope_lessons.rope.kernels import apply_rope


def test_hf_rotate_half_matches_transformers() -> None:
    pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import rotate_half

    x = random_features(3, 5, 16, dtype=torch.float32)
    torch.testing.assert_close(hf_rotate_half(x), rotate_half(x), rtol=0, atol=0)


def test_hf_rotate_half_golden_values() -> None:
    assert hf_rotate_half(torch.tensor([1.0, 2.0, 3.0, 4.0])).tolist() == [-3.0, -4.0, 1.0, 2.0]


def test_hf_tables_repeat_each_angle_by_concatenation() -> None:
    cos, sin = hf_cos_sin(7, 8)
    assert cos.shape == sin.shape == (7, 8) and cos.dtype == torch.float32
    torch.testing.assert_close(cos[:, :4], cos[:, 4:], rtol=0, atol=0)
    assert float(cos[3, 0]) == pytest.approx(torch.cos(torch.tensor(3.0)).item())
    assert float(sin[3, 1]) == pytest.approx(torch.sin(torch.tensor(0.3)).item(), rel=1e-6)


def test_hf_form_matches_transformers_and_apply_rope_half() -> None:
    x = random_features(2, 3, 10, 16, dtype=torch.float32)
    cos, sin = hf_cos_sin(10, 16)
    ours = hf_apply_rotary(x, cos, sin)
    torch.testing.assert_close(ours, apply_rope(x, layout="half"), rtol=1e-5, atol=1e-5)
    pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    theirs, _ = apply_rotary_pos_emb(x, x, cos[None], sin[None])
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


def test_benchmark_times_every_form_at_every_length() -> None:
    timings = time_rope_forms(
        (8, 16), batch=1, heads=1, dim=8, repeats=2, min_time=1e-4, loop_max_len=8
    )
    by_length = {t.seq_len: [x.name for x in timings if x.seq_len == t.seq_len] for t in timings}
    assert list(by_length) == [8, 16]
    assert by_length[8][0] == REFERENCE and LOOP in by_length[8] and LOOP not in by_length[16]
    assert {HF, COPY} <= set(by_length[16])
    for t in timings:
        low, mid, high = t.ratios
        assert 0 < low <= mid <= high and 0 < t.seconds[0] <= t.seconds[1] <= t.seconds[2]
    table = format_timings(timings)
    assert table.count(REFERENCE) == 2 and LOOP in table
    assert table.splitlines()[0].split()[-3:] == ["copy", "x", "HF"]


def test_table_ratios_to_copy_and_hf_are_medians_of_same_repeat_ratios() -> None:
    """The copy and HF columns divide within each repeat, then take the median."""
    timings = [
        Timing(REFERENCE, 4, (2.0, 4.0, 9.0), (1.0, 1.0, 1.0)),
        Timing(HF, 4, (4.0, 2.0, 3.0), (0.33, 0.5, 2.0)),
        Timing(COPY, 4, (1.0, 1.0, 1.0), (0.11, 0.25, 0.5)),
    ]
    assert timings[0].median_ratio(timings[1]) == 2.0  # 0.5, 2, 3
    assert timings[0].seconds == (2.0, 4.0, 9.0)
    row = format_timings(timings).splitlines()[1].split()
    assert row[-2:] == ["4.00", "2.00"]  # x copy: 2, 4, 9; x HF: 0.5, 2, 3
    assert format_timings(timings[:2]).splitlines()[1].split()[-2:] == ["nan", "2.00"]


def test_the_targets_divide_within_each_repeat_and_judge_the_median() -> None:
    timings = [
        Timing(REFERENCE, 512, (2.0, 4.0, 9.0), (1.0, 1.0, 1.0)),
        Timing(HALF, 512, (4.0, 4.0, 4.0), (0.44, 1.0, 2.0)),
        Timing(HF, 512, (4.0, 2.0, 3.0), (0.33, 0.5, 2.0)),
        Timing(COPY, 512, (1.0, 1.0, 1.0), (0.11, 0.25, 0.5)),
    ]
    row = target_row(timings, (1, 8, 512, 64))
    assert row.interleaved_vs_hf == (0.5, 2.0, 3.0)
    assert row.half_vs_hf == (1.0, 4 / 3, 2.0)
    assert row.interleaved_vs_copy == (2.0, 4.0, 9.0)
    table = format_targets([row, target_row(timings, (1, 8, 512, 64))]).splitlines()
    assert table[2].split()[-12:] == ["2.00", "[0.50,", "3.00]", "NO", "1.33", "[1.00,", "2.00]",
                                      "NO", "4.00", "[2.00,", "9.00]", "NO"]  # fmt: skip
    short = [Timing(t.name, 128, t.samples, t.ratios) for t in timings]
    assert format_targets([target_row(short, (1, 8, 128, 64))]).splitlines()[2].endswith("-")
    with pytest.raises(ValueError, match="lack"):
        target_row(timings[:2], (1, 8, 512, 64))


def test_benchmark_refuses_a_form_that_computes_something_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The agreement check before timing can fail: a wrong form is caught by name."""
    forms = benchmark.rope_forms

    def with_a_wrong_form(x: torch.Tensor, **kwargs: bool) -> dict[str, Callable[[], torch.Tensor]]:
        return {**forms(x, **kwargs), "wrong: the input itself": lambda: x}

    monkeypatch.setattr(benchmark, "rope_forms", with_a_wrong_form)
    with pytest.raises(AssertionError, match="wrong: the input itself"):
        time_rope_forms((8,), batch=1, heads=1, dim=8, repeats=1, min_time=1e-4)


def test_benchmark_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="seq_lens"):
        time_rope_forms(())
    with pytest.raises(ValueError, match="repeats"):
        time_rope_forms((8,), repeats=0)
    with pytest.raises(ValueError, match="min_time"):
        time_rope_forms((8,), min_time=0.0)


def test_time_in_turn_measures_on_its_clock_and_divides_within_each_repeat() -> None:
    """A clock that only the forms move: each call costs a known time, so the results are exact.

    The cost of ``slow`` doubles after its first repeat (its eighth call),
    which the ratio to ``fast`` in the same repeat must follow. The call
    counts include the two warm-up calls torch's ``Timer.timeit`` makes.
    """
    now = [0.0]
    calls = {"fast": 0, "slow": 0}

    def form(name: str, cost: Callable[[int], float]) -> Callable[[], None]:
        def call() -> None:
            calls[name] += 1
            now[0] += cost(calls[name])

        return call

    forms = {
        "fast": form("fast", lambda _: 1e-3),
        "slow": form("slow", lambda n: 3e-3 if n <= 3 + 2 + 3 else 6e-3),
    }
    timings = time_in_turn(forms, "fast", 7, repeats=2, min_time=0.01, clock=lambda: now[0])
    assert [(t.name, t.seq_len) for t in timings] == [("fast", 7), ("slow", 7)]
    fast, slow = timings
    assert fast.samples == pytest.approx((1e-3, 1e-3)) and fast.ratios == (1.0, 1.0, 1.0)
    # calibration: 2 warm-ups + 1 timed call; each repeat: 2 warm-ups + round(0.01 / cost) calls
    assert calls["fast"] == 3 + 2 * (2 + 10) and calls["slow"] == 3 + 2 * (2 + 3)
    assert slow.samples == pytest.approx((3e-3, 6e-3))
    assert slow.ratios == pytest.approx((3.0, 4.5, 6.0))
    with pytest.raises(ValueError, match="reference"):
        time_in_turn(forms, "absent", 7, clock=lambda: now[0])
    with pytest.raises(ValueError, match="min_time"):
        time_in_turn(forms, "fast", 7, min_time=0.0)
