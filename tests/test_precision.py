"""Precision of positions and angles in float16, bfloat16, float32 and float64."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from helpers import random_features

from rope_lessons.rope.kernels import apply_rope
from rope_lessons.rope.precision import (
    angle_error,
    first_inexact_integer,
    round_to_dtype,
    score_error,
    significand_bits,
    spacing_at,
)
from rope_lessons.rope.spec import Rope


@pytest.mark.parametrize(
    ("dtype", "bits", "first_missing"),
    [
        (torch.float16, 11, 2049),
        (torch.bfloat16, 8, 257),
        (torch.float32, 24, 16_777_217),
        (torch.float64, 53, 2**53 + 1),
    ],
)
def test_significand_bits_and_first_missing_integer(
    dtype: torch.dtype, bits: int, first_missing: int
) -> None:
    assert significand_bits(dtype) == bits
    assert first_inexact_integer(dtype) == first_missing


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_every_integer_below_the_first_missing_one_survives(dtype: torch.dtype) -> None:
    limit = first_inexact_integer(dtype)
    integers = torch.arange(limit + 1, dtype=torch.float64)
    survives = round_to_dtype(integers, dtype) == integers
    assert survives[:limit].all() and not survives[limit]


@pytest.mark.parametrize(
    ("value", "dtype", "stored"),
    [
        (257, torch.bfloat16, 256.0),  # ties round to even
        (4095, torch.bfloat16, 4096.0),
        (15962, torch.bfloat16, 15936.0),  # spacing 64 in [8192, 16384)
        (2049, torch.float16, 2048.0),
        (15962, torch.float16, 15960.0),
        (32769, torch.float16, 32768.0),
        (100_000, torch.float16, math.inf),  # beyond float16's largest, 65504
        (16_777_217, torch.float32, 16_777_216.0),
        (1_000_000, torch.float32, 1_000_000.0),
    ],
)
def test_round_to_dtype_gives_the_stored_value(
    value: int, dtype: torch.dtype, stored: float
) -> None:
    assert round_to_dtype(torch.tensor([value]), dtype).item() == stored


def test_spacing_doubles_every_octave() -> None:
    assert spacing_at(15962, torch.bfloat16) == 64.0
    assert spacing_at(8192, torch.bfloat16) == 64.0 and spacing_at(16384, torch.bfloat16) == 128.0
    assert spacing_at(256, torch.bfloat16) == 2.0 and spacing_at(255, torch.bfloat16) == 1.0
    assert spacing_at(1e6, torch.float32) == 0.0625


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_spacing_is_the_gap_to_the_next_stored_number(dtype: torch.dtype) -> None:
    """Independent of the formula: the gap from each power of two up to its successor."""
    top = 15 if dtype == torch.float16 else 51  # float16 overflows at 2**16; 2**52 - 0.5 rounds
    for exponent in range(0, top):
        low = torch.tensor(2.0**exponent, dtype=dtype)
        gap = (torch.nextafter(low, torch.tensor(math.inf, dtype=dtype)) - low).item()
        for value in (2.0**exponent, 1.5 * 2.0**exponent, 2.0 ** (exponent + 1) - 0.5):
            assert spacing_at(value, dtype) == gap, (dtype, exponent, value)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_rounding_error_is_at_most_half_the_spacing(dtype: torch.dtype) -> None:
    """The stored value is the nearest one: its neighbours (torch.nextafter) are no closer."""
    values = torch.arange(1, 60_000, 7, dtype=torch.float64)
    stored = values.to(dtype)
    up = torch.nextafter(stored, torch.tensor(math.inf, dtype=dtype)).double()
    down = torch.nextafter(stored, torch.tensor(-math.inf, dtype=dtype)).double()
    errors = (round_to_dtype(values, dtype) - values).abs()
    assert torch.equal(round_to_dtype(values, dtype), stored.double())
    assert (errors <= (up - values).abs()).all() and (errors <= (down - values).abs()).all()
    assert (errors <= (up - stored.double()) / 2).all()


def test_float64_angles_are_the_reference() -> None:
    positions = torch.tensor([0, 1, 10**3, 10**6])
    assert (angle_error(positions, 64, torch.float64) == 0).all()


def test_float32_keeps_the_fastest_pair_exact_and_is_off_elsewhere_at_a_million() -> None:
    """theta_0 = 1 and integers below 2**24 are exact in float32, so m * theta_0 is too;
    the other products round to a spacing of 1/16 near 10**6."""
    errors = angle_error(torch.tensor([1_000_000]), 64, torch.float32)[0]  # (d/2,)
    assert errors[0] == 0.0
    assert 1e-3 < errors.max() < 0.1


def test_bfloat16_angle_of_the_fastest_pair_is_off_by_the_position_rounding() -> None:
    """theta_0 = 1, so the angle of pair 0 is the stored position itself: 257 -> 256 and
    4095 -> 4096 are one radian off, 15962 -> 15936 is 26 radians off, 0.87 after folding."""
    positions = torch.tensor([257, 4095, 15962])
    errors = angle_error(positions, 8, torch.bfloat16)[:, 0]
    rounding = round_to_dtype(positions, torch.bfloat16) - positions.double()  # 1, 1, -26
    folded = (torch.remainder(rounding + math.pi, 2 * math.pi) - math.pi).abs()
    torch.testing.assert_close(errors, folded)
    assert errors[:2].tolist() == [1.0, 1.0] and math.isclose(errors[2], 26 - 8 * math.pi)


def test_angle_errors_are_folded_into_a_half_turn_and_overflow_is_inf() -> None:
    positions = torch.arange(0, 1_000_001, 997)
    for dtype in (torch.bfloat16, torch.float32):
        errors = angle_error(positions, 32, dtype)
        assert (errors >= 0).all() and (errors <= math.pi).all()
    half = angle_error(torch.tensor([65_504, 65_536, 10**6]), 32, torch.float16)
    assert half[0].isfinite().all() and half[1:].isinf().all()


def test_score_error_is_zero_in_float64_and_grows_as_the_format_narrows() -> None:
    q, k = random_features(2, 16, 64)  # 16 random pairs
    positions = torch.tensor([10, 1_000, 100_000])
    assert (score_error(q, k, positions, -1, torch.float64) == 0).all()
    f32 = score_error(q, k, positions, -1, torch.float32).mean(0)
    bf16 = score_error(q, k, positions, -1, torch.bfloat16).mean(0)
    assert (f32 < bf16).all() and (f32 < 1e-2).all()
    assert score_error(q, k, positions, -1, torch.float16)[:, 2].isinf().all()


def test_bfloat16_merges_neighbours_into_one_position() -> None:
    """15961 and 15962 both round to 15936 in bfloat16: query and key get the same
    angles, so the score becomes <q, k> (distance 0) instead of <q, R_1 k>."""
    q, k = random_features(2, 32)
    error = score_error(q, k, torch.tensor([15961]), 1, torch.bfloat16).item()
    true_score = q @ apply_rope(k[None], torch.tensor([1]))[0]
    assert math.isclose(error, abs(q @ k - true_score), rel_tol=1e-9)


def test_score_error_uses_the_given_layout() -> None:
    q, k = random_features(2, 32)
    interleaved = score_error(q, k, torch.tensor([20_000]), -3, torch.bfloat16)
    half = score_error(
        q, k, torch.tensor([20_000]), -3, torch.bfloat16, rope=Rope(32, layout="half")
    )
    assert not torch.equal(interleaved, half)


def test_score_error_widens_narrow_integer_positions_before_the_offset() -> None:
    """int8 positions 120 + 10 must be the key at 130, not a wrapped -126."""
    q, k = random_features(2, 16)
    narrow = score_error(q, k, torch.tensor([120], dtype=torch.int8), 10, torch.bfloat16)
    wide = score_error(q, k, torch.tensor([120]), 10, torch.bfloat16)
    wrapped = score_error(q, k, torch.tensor([120]), -246, torch.bfloat16)
    assert torch.equal(narrow, wide)
    assert not torch.equal(narrow, wrapped)


def test_float16_overflows_from_65520_not_above_65504() -> None:
    """65505 .. 65519 round down to the largest float16, 65504; 65520 rounds up to infinity."""
    stored = round_to_dtype(torch.tensor([65_504, 65_519, 65_520]), torch.float16)
    assert stored.tolist() == [65_504.0, 65_504.0, math.inf]


EIGHT, ONE_POSITION, HALF = torch.ones(8), torch.tensor([1]), torch.float16


@pytest.mark.parametrize(
    ("call", "error", "word"),
    [
        (lambda: significand_bits(torch.int32), ValueError, "dtype must be one of"),
        # deliberately ill-typed: the runtime check is under test
        (lambda: round_to_dtype([1.0], HALF), TypeError, "values must be"),  # type: ignore[arg-type]
        (lambda: spacing_at(0.5, HALF), ValueError, "value must be"),
        # deliberately ill-typed: the runtime check is under test
        (lambda: spacing_at("1", HALF), TypeError, "value must be a number"),  # type: ignore[arg-type]
        (lambda: angle_error(torch.tensor([1.0]), 8, HALF), TypeError, "positions"),
        (lambda: angle_error(torch.tensor([1]), 7, HALF), ValueError, "dim"),
        (
            lambda: score_error(EIGHT, torch.ones(6), ONE_POSITION, 1, torch.float16),
            ValueError,
            "same last",
        ),
        (
            # deliberately ill-typed: the runtime check is under test
            lambda: score_error(EIGHT, EIGHT, ONE_POSITION, 1.5, torch.float16),  # type: ignore[arg-type]
            TypeError,
            "offset",
        ),
        (
            lambda: score_error(EIGHT, EIGHT, torch.tensor(1), 1, torch.float16),
            ValueError,
            "positions",
        ),
        (
            lambda: score_error(torch.ones(7), torch.ones(7), ONE_POSITION, 1, torch.float16),
            ValueError,
            "last dimension of q",
        ),
        (
            lambda: score_error(EIGHT, EIGHT, ONE_POSITION, 1, torch.int8),
            ValueError,
            "dtype",
        ),
    ],
)
def test_bad_input_names_the_argument(
    call: Callable[[], object], error: type[Exception], word: str
) -> None:
    with pytest.raises(error, match=word):
        call()
