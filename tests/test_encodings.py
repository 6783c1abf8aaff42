"""Absolute encodings: shapes, values, the sinusoidal shift identity, bad input."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rope_lessons.encodings import (
    absolute_encoding,
    binary,
    changed_components,
    integer,
    normalised_integer,
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
    torch.testing.assert_close(absolute_encoding("sinusoidal", 7, 4), sinusoidal(7, 4))
    torch.testing.assert_close(absolute_encoding("binary", 7, 4), binary(7, 4))
    with pytest.raises(ValueError, match="name must be one of"):
        absolute_encoding("learned", 7, 4)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "error", "word"),
    [
        (lambda: integer(0, 4), ValueError, "n_positions"),
        (lambda: integer(4, 2.0), TypeError, "dim"),
        (lambda: sinusoidal(4, 5), ValueError, "dim must be a positive even"),
        (lambda: sinusoidal(4, 4, base=-1.0), ValueError, "base"),
        (lambda: sinusoidal_shift_matrix(0.5, 4), TypeError, "offset"),
    ],
)
def test_bad_input_names_the_argument(call, error: type[Exception], word: str) -> None:
    with pytest.raises(error, match=word):
        call()


def test_sinusoidal_dtype_option_keeps_the_float32_default() -> None:
    assert sinusoidal(5, 4).dtype == torch.float32
    wide = sinusoidal(300, 16, dtype=torch.float64)
    assert wide.dtype == torch.float64
    torch.testing.assert_close(wide.float(), sinusoidal(300, 16))
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
