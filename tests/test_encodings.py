"""Absolute encodings: shapes, values, the sinusoidal shift identity, bad input."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rope_lessons.rope.encodings import (
    SLOW_STRETCH,
    absolute_encoding,
    binary,
    changed_components,
    direction,
    integer,
    normalised_integer,
    shift_fit_residual,
    signal_to_noise_ratio,
    sinusoidal,
    sinusoidal_dot_product,
    sinusoidal_shift_matrix,
)


def test_integer_rows_are_the_position_everywhere() -> None:
    table = integer(5, 3)
    assert table.shape == (5, 3)
    assert table[:, 0].tolist() == [0, 1, 2, 3, 4]
    assert (table == table[:, :1]).all()


def test_normalised_integer_depends_on_the_length() -> None:
    assert normalised_integer(4, 2)[2, 0] == 0.5
    assert normalised_integer(8, 2)[2, 0] == 0.25  # same position, other code


def test_binary_holds_the_digits_least_significant_first() -> None:
    table = binary(8, 3)
    assert table[6].tolist() == [0, 1, 1]  # 6 = 0b110
    weights = 2 ** torch.arange(3)
    assert (table @ weights.float()).tolist() == list(range(8))
    # 7 -> 8 flips four bits at once.
    assert int((binary(9, 4)[7] != binary(9, 4)[8]).sum()) == 4


def test_binary_refuses_too_few_bits() -> None:
    with pytest.raises(ValueError, match="bits hold positions up to 7"):
        binary(9, 3)


def test_sinusoidal_puts_sine_at_even_and_cosine_at_odd_columns() -> None:
    table = sinusoidal(50, 8, base=10_000.0)
    p = torch.arange(50, dtype=torch.float64)
    for k in range(4):
        omega = 10_000.0 ** (-2 * k / 8)
        torch.testing.assert_close(table[:, 2 * k].double(), (p * omega).sin(), atol=1e-6, rtol=0)
        torch.testing.assert_close(
            table[:, 2 * k + 1].double(), (p * omega).cos(), atol=1e-6, rtol=0
        )


@given(
    offset=st.integers(-500, 500),
    half_dim=st.integers(1, 16),
    base=st.sampled_from([10.0, 10_000.0]),
)
def test_a_shift_is_one_matrix_for_every_position(offset: int, half_dim: int, base: float) -> None:
    """PE(p + k) = M_k PE(p) for all p, with M_k independent of p."""
    dim = 2 * half_dim
    table = sinusoidal(1200, dim, base).double()
    start = max(0, -offset)
    p = torch.arange(start, start + 100)
    shifted = sinusoidal_shift_matrix(offset, dim, base) @ table[p].T  # (dim, 100)
    torch.testing.assert_close(shifted.T, table[p + offset], atol=1e-5, rtol=0)


def test_shift_matrix_is_a_clockwise_rotation_per_pair() -> None:
    m = sinusoidal_shift_matrix(1, 2, base=10_000.0)
    c, s = math.cos(1.0), math.sin(1.0)  # omega_0 = 1
    torch.testing.assert_close(m, torch.tensor([[c, s], [-s, c]], dtype=torch.float64))
    torch.testing.assert_close(m @ m.T, torch.eye(2, dtype=torch.float64))


def test_dot_product_of_sinusoidal_codes_depends_only_on_the_offset() -> None:
    table = sinusoidal(400, 32).double()
    for k in (1, 5, 50):
        dots = (table[:-k] * table[k:]).sum(-1)
        torch.testing.assert_close(dots, dots[:1].expand_as(dots), atol=1e-5, rtol=0)


def test_dispatcher_returns_the_named_encoding() -> None:
    """Golden rows, not the builders themselves: the dispatcher must pick the right one."""
    assert absolute_encoding("binary", 7, 4)[6].tolist() == [0, 1, 1, 0]
    assert absolute_encoding("integer", 7, 4)[6].tolist() == [6, 6, 6, 6]
    assert absolute_encoding("normalised_integer", 8, 2)[6].tolist() == [0.75, 0.75]
    row = absolute_encoding("sinusoidal", 7, 4)[1].double()
    golden = [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)]  # omega = 1, 10000^-0.5
    torch.testing.assert_close(row, torch.tensor(golden, dtype=torch.float64), atol=1e-7, rtol=0)
    slow = absolute_encoding("slow_sinusoidal", 7, 4)[1].double()
    golden = [math.sin(1 / SLOW_STRETCH), math.cos(1 / SLOW_STRETCH)]
    torch.testing.assert_close(
        slow[:2], torch.tensor(golden, dtype=torch.float64), atol=1e-7, rtol=0
    )
    step = absolute_encoding("direction", 3, 8)[1:].double()
    torch.testing.assert_close(step[1], 2 * step[0])  # row p is p u
    with pytest.raises(ValueError, match="name must be one of"):
        absolute_encoding("learned", 7, 4)  # type: ignore[arg-type]


def test_direction_code_is_p_times_a_centred_vector_of_norm_sqrt_d() -> None:
    table = direction(50, 64).double()
    u = table[1]
    assert abs(u.mean().item()) < 1e-7 and u.norm().item() == pytest.approx(8.0, rel=1e-6)
    p = torch.arange(50, dtype=torch.float64)[:, None]
    torch.testing.assert_close(table, p * u, rtol=1e-6, atol=1e-5)
    # LayerNorm's mean subtraction leaves it, unlike the integer code
    e = torch.randn(4, 64, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    moved = torch.nn.functional.layer_norm(e + table[10], (64,))
    assert (moved - torch.nn.functional.layer_norm(e, (64,))).abs().max() > 0.1
    with pytest.raises(ValueError, match="dim must be at least 2"):
        direction(4, 1)


def test_stretch_slows_every_pair_down() -> None:
    """sin(p omega / s): position s * p of the stretched code is position p of the original."""
    plain = sinusoidal(10, 8, dtype=torch.float64)
    stretched = sinusoidal(28, 8, stretch=3.0, dtype=torch.float64)
    torch.testing.assert_close(stretched[::3], plain, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="stretch"):
        sinusoidal(4, 4, stretch=0.0)


def test_shift_fit_residual_is_zero_exactly_for_affine_shifts() -> None:
    for table in (sinusoidal(64, 8, dtype=torch.float64), integer(64, 5)):
        assert shift_fit_residual(table).abs().max() < 1e-12
        assert shift_fit_residual(table, offset=5).abs().max() < 1e-12
    # p u is stored in float32: exact up to its rounding (entries up to about 200)
    assert shift_fit_residual(direction(64, 6)).abs().max() < 1e-4
    binary_miss = shift_fit_residual(binary(64, 6)).abs()
    # bit 0 of p + 1 is 1 - bit 0 of p, an affine map; every carry bit is missed
    assert binary_miss[:, 0].max() < 1e-9
    assert (binary_miss[:, 1:].max(dim=0).values > 0.5).all()
    with pytest.raises(ValueError, match="offset"):
        shift_fit_residual(integer(3, 2), offset=3)
    with pytest.raises(TypeError, match="table"):
        shift_fit_residual(torch.zeros(4, 2, dtype=torch.long))


@given(bits=st.integers(3, 10), start=st.integers(0, 100))
def test_no_affine_map_shifts_binary_codes(bits: int, start: int) -> None:
    """Affine maps keep a + d = b + c; the codes of 4q .. 4q+3 satisfy it, their successors
    do not (the carry from 4q+3 to 4q+4), so no affine map sends every code to the next."""
    q = start % (2 ** (bits - 2) - 1)  # 4q + 4 must still fit in the bits
    code = binary(2**bits, bits)
    a, b, c, d = (code[4 * q + i] for i in range(4))
    assert torch.equal(a + d, b + c)
    assert not torch.equal(code[4 * q + 1] + code[4 * q + 4], code[4 * q + 2] + code[4 * q + 3])


@pytest.mark.parametrize(
    ("call", "error", "word"),
    [
        (lambda: integer(0, 4), ValueError, "n_positions"),
        # deliberately ill-typed: the runtime check is under test
        (lambda: integer(4, 2.0), TypeError, "dim"),  # type: ignore[arg-type]
        (lambda: sinusoidal(4, 5), ValueError, "dim must be a positive even"),
        (lambda: sinusoidal(4, 4, base=-1.0), ValueError, "base"),
        # deliberately ill-typed: the runtime check is under test
        (lambda: sinusoidal_shift_matrix(0.5, 4), TypeError, "offset"),  # type: ignore[arg-type]
    ],
)
def test_bad_input_names_the_argument(
    call: Callable[[], object], error: type[Exception], word: str
) -> None:
    with pytest.raises(error, match=word):
        call()


def test_sinusoidal_dtype_option_rounds_the_float64_angles_once() -> None:
    """float64 entries equal math.sin / math.cos; float32 ones are those values correctly
    rounded: within half the float32 spacing, which torch.nextafter gives."""
    assert sinusoidal(5, 4).dtype == torch.float32
    wide = sinusoidal(300, 16, dtype=torch.float64)
    narrow = sinusoidal(300, 16)
    exact = torch.tensor(
        [
            [f(p * 10_000.0 ** (-2 * k / 16)) for k in range(8) for f in (math.sin, math.cos)]
            for p in range(300)
        ],
        dtype=torch.float64,
    )
    torch.testing.assert_close(wide, exact, rtol=0, atol=4e-16)
    spacing = torch.nextafter(narrow.abs(), torch.tensor(math.inf)) - narrow.abs()
    assert ((narrow.double() - exact).abs() <= spacing.double() / 2).all()
    with pytest.raises(TypeError, match="dtype"):
        sinusoidal(5, 4, dtype=torch.int64)


@given(
    offset=st.integers(-300, 300),
    half_dim=st.integers(1, 16),
    base=st.sampled_from([10.0, 10_000.0]),
)
def test_sinusoidal_dot_product_is_the_closed_form_at_every_position(
    offset: int, half_dim: int, base: float
) -> None:
    """PE(p) . PE(p + k) = sum_j cos(k omega_j) for every p."""
    dim = 2 * half_dim
    table = sinusoidal(800, dim, base, dtype=torch.float64)
    p = torch.arange(max(0, -offset), max(0, -offset) + 200)
    dots = (table[p] * table[p + offset]).sum(-1)  # (200,)
    expected = sinusoidal_dot_product(offset, dim, base)
    torch.testing.assert_close(dots, expected.expand_as(dots), rtol=0, atol=1e-10)


def test_sinusoidal_dot_product_takes_tensors_and_peaks_at_zero() -> None:
    values = sinusoidal_dot_product(torch.arange(-5, 6), 16)
    assert values.shape == (11,)
    assert values[5] == 8.0 and (values[:5] < 8.0).all()
    torch.testing.assert_close(values, values.flip(0))  # even in the offset
    with pytest.raises(TypeError, match="offset"):
        sinusoidal_dot_product(torch.tensor([0.5]), 16)


def test_signal_to_noise_of_the_classic_codes_against_unit_variance_rows() -> None:
    generator = torch.Generator().manual_seed(0)
    signal = torch.nn.functional.layer_norm(
        torch.randn(500, 64, generator=generator, dtype=torch.float64), (64,), eps=0.0
    )  # every row: mean 0, variance 1, squared norm exactly 64
    p = torch.arange(1, 16, dtype=torch.float64)
    torch.testing.assert_close(signal_to_noise_ratio(signal, integer(16, 64))[1:], 1 / p**2)
    assert signal_to_noise_ratio(signal, integer(16, 64))[0] == math.inf
    torch.testing.assert_close(
        signal_to_noise_ratio(signal, sinusoidal(100, 64)),
        torch.full((100,), 2.0, dtype=torch.float64),
        rtol=1e-6,
        atol=0,
    )
    ones = binary(16, 64).sum(-1).double()[1:]  # set bits of 1..15
    torch.testing.assert_close(signal_to_noise_ratio(signal, binary(16, 64))[1:], 64 / ones)


def test_signal_to_noise_refuses_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="same dim"):
        signal_to_noise_ratio(torch.zeros(3, 4), torch.ones(2, 5))
    with pytest.raises(ValueError, match="signal"):
        signal_to_noise_ratio(torch.zeros(4), torch.ones(2, 4))


@given(bits=st.integers(2, 12))
def test_binary_neighbours_differ_in_the_bits_of_p_xor_p_plus_one(bits: int) -> None:
    n = 2**bits
    changes = changed_components(binary(n, bits))
    expected = [bin(p ^ (p + 1)).count("1") for p in range(n - 1)]
    assert changes.tolist() == expected
    # mean over all neighbours: 2 - bits / (2**bits - 1), which tends to 2
    assert changes.double().mean().item() == pytest.approx(2 - bits / (n - 1))


def test_changed_components_needs_two_rows() -> None:
    with pytest.raises(ValueError, match="table"):
        changed_components(torch.zeros(1, 4))


def test_rmsnorm_keeps_the_integer_code_and_layernorm_erases_it() -> None:
    """For tokens of mean 0 and squared norm d, RMSNorm(e + p 1) keeps the share
    1 / sqrt(1 + p^2) of the token's direction; LayerNorm gives back LN(e) exactly."""
    e = torch.nn.functional.layer_norm(
        torch.randn(50, 64, generator=torch.Generator().manual_seed(2), dtype=torch.float64),
        (64,),
        eps=0.0,
    )
    for p in (1, 7, 63):
        shifted = e + p
        share = torch.nn.functional.cosine_similarity(
            torch.nn.functional.rms_norm(shifted, (64,)), e, dim=-1
        )
        torch.testing.assert_close(
            share, torch.full((50,), 1 / math.sqrt(1 + p**2), dtype=torch.float64)
        )
        torch.testing.assert_close(
            torch.nn.functional.layer_norm(shifted, (64,)),
            torch.nn.functional.layer_norm(e, (64,)),
            rtol=0,
            atol=1e-12,
        )


@given(bits=st.integers(1, 12))
def test_each_binary_column_is_the_sign_of_a_sine(bits: int) -> None:
    """Bit j of p is 1 exactly when sin(pi (p + 1/2) / 2^j) < 0: wavelength 2^(j+1)."""
    p = torch.arange(2**bits, dtype=torch.float64)[:, None]
    j = torch.arange(bits, dtype=torch.float64)
    signs = (torch.sin(math.pi * (p + 0.5) / 2**j) < 0).double()
    assert torch.equal(signs, binary(2**bits, bits).double())


WIDE_TABLE = sinusoidal(20_000, 64, dtype=torch.float64)  # (20000, 64), built once


@given(pair=st.integers(0, 31), angle=st.floats(0, 2 * math.pi, allow_nan=False, exclude_max=True))
def test_a_read_out_of_one_pair_that_grows_on_0_to_15_turns_back_by_half_a_turn(
    pair: int, angle: float
) -> None:
    """f(p) = a sin(p w) + b cos(p w) (a, b on the unit circle): if f grows over positions
    0-15, it falls again at some position below pi / w + 1 (half a wavelength)."""
    table = WIDE_TABLE
    read_out = math.sin(angle) * table[:, 2 * pair] + math.cos(angle) * table[:, 2 * pair + 1]
    steps = torch.diff(read_out)  # entry p: f(p + 1) - f(p)
    if not (steps[:15] > 0).all():
        return  # this read-out does not order the trained positions
    half_turn = math.pi / (10000.0 ** (-pair / 32))
    if half_turn + 1 >= len(steps):
        return  # beyond the table
    assert (steps[: math.floor(half_turn) + 1] < 0).any()
