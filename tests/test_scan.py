"""The associative scan and the FFT form equal the step-by-step recurrence; their timing."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lessons.chapters import recurrence
from rope_lessons.chapters.recurrence import (
    decay_powers,
    linear_recurrence,
    linear_recurrence_parallel,
)
from rope_lessons.chapters.scan import (
    FFT,
    MATRIX,
    RECURRENCE_FORMS,
    SCAN,
    STEP,
    fitted_slopes,
    format_recurrence_timings,
    linear_recurrence_fft,
    linear_recurrence_scan,
    loglog_slope,
    time_recurrence_forms,
)
from rope_lessons.evidence.benchmark import Timing

Recurrence = Callable[[torch.Tensor, torch.Tensor | complex], torch.Tensor]
FAST_FORMS: list[Recurrence] = [linear_recurrence_scan, linear_recurrence_fft]
DTYPES = (torch.float32, torch.complex64, torch.complex128)
HIGH = {torch.float32: torch.float64, torch.complex64: torch.complex128}


def draw_case(
    dtype: torch.dtype,
    lead: list[int],
    seq_len: int,
    channels: int,
    per_channel: bool,
    max_modulus: float,
    seed: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs ``(*lead, T, n)`` and decays strictly inside the unit disc, in ``dtype``.

    Real dtypes get real decays of either sign, complex ones any angle.
    """
    generator = torch.Generator().manual_seed(seed)
    shape = (*lead, seq_len, channels)
    decay_shape = (channels,) if per_channel else ()
    modulus = torch.rand(decay_shape, generator=generator, dtype=torch.float64) * max_modulus
    if dtype.is_complex:
        x = torch.randn(shape, generator=generator, dtype=torch.complex128)
        angle = torch.rand(decay_shape, generator=generator, dtype=torch.float64) * 2 - 1
        decay = torch.polar(modulus, angle * math.pi)
    else:
        x = torch.randn(shape, generator=generator, dtype=torch.float64)
        sign = torch.randint(0, 2, decay_shape, generator=generator) * 2 - 1
        decay = modulus * sign
    return x.to(dtype), decay.to(dtype)


def tolerance(x: torch.Tensor) -> float:
    """Absolute tolerance: rounding of the dtype times the largest possible state's size.

    With ``|decay| < 1`` every state is at most ``sum_t |x_t|`` in its channel,
    and each form's rounding error is a few epsilons of that per ``log2(2T)``
    level (scan) or FFT stage.
    """
    eps = torch.finfo(x.real.dtype if x.is_complex() else x.dtype).eps
    scale = float(x.abs().sum(dim=-2).max())
    return 8 * eps * math.log2(2 * x.shape[-2]) * scale


@settings(max_examples=80)
@given(
    dtype=st.sampled_from(DTYPES),
    lead=st.lists(st.integers(1, 3), max_size=2),
    seq_len=st.integers(1, 300),
    channels=st.integers(1, 4),
    per_channel=st.booleans(),
    max_modulus=st.floats(0.0, 0.9999),
    seed=st.integers(0, 2**16),
)
@pytest.mark.parametrize("form", FAST_FORMS)
def test_fast_forms_equal_the_step_by_step_form(
    form: Recurrence,
    dtype: torch.dtype,
    lead: list[int],
    seq_len: int,
    channels: int,
    per_channel: bool,
    max_modulus: float,
    seed: int,
) -> None:
    """Against the step-by-step reference computed in double precision."""
    x, decay = draw_case(dtype, lead, seq_len, channels, per_channel, max_modulus, seed)
    states = form(x, decay)
    assert states.dtype == dtype and states.shape == x.shape
    high = HIGH.get(dtype, dtype)
    reference = linear_recurrence(x.to(high), decay.to(high))
    torch.testing.assert_close(states.to(high), reference, rtol=0, atol=tolerance(x))


@pytest.mark.parametrize("form", FAST_FORMS)
def test_fast_forms_by_hand_and_with_a_number_decay(form: Recurrence) -> None:
    x = torch.tensor([[1.0], [2.0], [3.0], [4.0], [5.0]], dtype=torch.float64)
    expected = [1.0, 2.5, 4.25, 6.125, 8.0625]
    assert form(x, 0.5)[:, 0].tolist() == pytest.approx(expected, rel=1e-12)
    impulse = torch.zeros(7, 1, dtype=torch.complex128)
    impulse[0] = 1
    turns = form(impulse, 1j)[:, 0]  # |decay| = 1: i^t, the circle itself
    torch.testing.assert_close(
        turns, torch.tensor([1j**t for t in range(7)], dtype=torch.complex128), atol=1e-12, rtol=0
    )


@pytest.mark.parametrize("form", FAST_FORMS)
def test_fast_forms_have_the_step_by_step_gradients(form: Recurrence) -> None:
    """Training back-propagates through them: the gradients must be the reference's."""
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(2, 37, 3, dtype=torch.complex128, generator=generator)
    weights = torch.randn(2, 37, 3, dtype=torch.complex128, generator=generator)
    grads = []
    for run in (linear_recurrence, form):
        modulus = torch.tensor([0.5, 0.9, 0.99], dtype=torch.float64, requires_grad=True)
        angle = torch.tensor([0.1, -2.0, 1.0], dtype=torch.float64, requires_grad=True)
        inputs = x.clone().requires_grad_(True)
        loss = (run(inputs, torch.polar(modulus, angle)) * weights).real.sum()
        grads.append(torch.autograd.grad(loss, (modulus, angle, inputs)))
    for expected, got in zip(*grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-9)


def test_fft_form_is_the_toeplitz_product() -> None:
    """The T x T matrix is Toeplitz: entry (t, u) depends on t - u only."""
    matrix = decay_powers(torch.tensor(0.8 * 1j, dtype=torch.complex128), 9)
    for offset in range(9):
        diagonal = torch.diagonal(matrix, offset=-offset)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal))
    x = torch.randn(9, 2, dtype=torch.complex128)
    torch.testing.assert_close(linear_recurrence_fft(x, 0.8j), matrix @ x)


@pytest.mark.parametrize("form", FAST_FORMS)
def test_fast_forms_refuse_bad_input_like_the_reference(form: Recurrence) -> None:
    with pytest.raises(ValueError, match="at least one step"):
        form(torch.zeros(0, 2), 0.5)
    with pytest.raises(ValueError, match="finite"):
        form(torch.zeros(4, 2), float("nan"))
    with pytest.raises(ValueError, match="decay"):
        form(torch.zeros(4, 2), torch.ones(3))
    with pytest.raises(TypeError, match="x must"):
        form(torch.zeros(4, 2, dtype=torch.long), 0.5)


@pytest.mark.parametrize("name", list(RECURRENCE_FORMS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128])
@pytest.mark.parametrize("shape", [(5, 0), (2, 5, 0), (0, 5, 3)])
def test_every_form_gives_empty_states_for_empty_input(
    name: str, dtype: torch.dtype, shape: tuple[int, ...]
) -> None:
    """No channel (or an empty batch) has no state: every form answers with an empty tensor
    of the input's shape, as the step-by-step form does (the FFT form used to hand it to
    MKL, which failed with its own error)."""
    x = torch.zeros(shape, dtype=dtype)
    decay = torch.full(shape[-1:], 0.5, dtype=dtype)
    expected = linear_recurrence(x, decay)
    states = RECURRENCE_FORMS[name](x, decay)
    assert states.shape == expected.shape == shape and states.dtype == expected.dtype
    assert RECURRENCE_FORMS[name](x, torch.tensor(0.5, dtype=dtype)).shape == shape


def test_fft_form_refuses_a_dtype_the_fft_does_not_compute_in() -> None:
    with pytest.raises(TypeError, match="float16"):
        linear_recurrence_fft(torch.zeros(4, 2, dtype=torch.float16), 0.5)
    assert linear_recurrence_scan(torch.ones(4, 2, dtype=torch.float16), 0.5).dtype == (
        torch.float16
    )


def test_the_forms_are_named_in_order() -> None:
    assert list(RECURRENCE_FORMS) == [STEP, MATRIX, SCAN, FFT]
    assert RECURRENCE_FORMS[MATRIX] is linear_recurrence_parallel


def test_slopes_and_table() -> None:
    """Synthetic timings: T for step by step, T^2 for the matrix, one length only for the FFT."""
    lengths = (64, 128, 256, 512)
    timings = [Timing(STEP, n, (1e-5 * n, 1e-5 * n), (1.0, 1.0, 1.0)) for n in lengths]
    timings += [Timing(MATRIX, n, (1e-7 * n**2,) * 2, (0.0, 0.0, 0.0)) for n in lengths]
    timings.append(Timing(FFT, 64, (1e-4, 1e-4), (1.0, 1.0, 1.0)))
    slopes = fitted_slopes(timings)
    assert slopes == {STEP: pytest.approx(1.0), MATRIX: pytest.approx(2.0)}
    table = format_recurrence_timings(timings)
    assert "all lengths (64 to 512)" in table and FFT in table
    assert table.count("\n") == len(timings) + 1 + len(slopes)


def test_a_table_of_one_length_has_no_slopes_heading() -> None:
    """One length gives no slope: the table ends with its rows, not an empty heading."""
    timings = [
        Timing(STEP, 64, (1e-3, 1e-3), (1.0, 1.0, 1.0)),
        Timing(FFT, 64, (1e-4, 1e-4), (0.1, 0.1, 0.1)),
    ]
    assert fitted_slopes(timings) == {}
    table = format_recurrence_timings(timings)
    assert "slopes" not in table
    assert table.count("\n") == len(timings)  # a header line and one line per timing


def test_loglog_slopes() -> None:
    """The slope lives here, beside fitted_slopes, its one user (not in recurrence)."""
    assert loglog_slope.__module__ == "rope_lessons.chapters.scan"
    assert not hasattr(recurrence, "loglog_slope")
    assert loglog_slope([10, 100, 1000], [2e-3, 2e-1, 20.0]) == pytest.approx(2.0)
    assert loglog_slope((1, 2, 4), [3.0, 6.0, 12.0]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="pairs"):
        loglog_slope([1], [1.0])


def test_loglog_slope_refuses_a_single_length() -> None:
    with pytest.raises(ValueError, match="distinct"):
        loglog_slope([64, 64, 64], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="positive"):
        loglog_slope([1, 2], [1.0, 0.0])


def test_timing_runs_every_form_and_skips_the_matrix_past_its_limit() -> None:
    timings = time_recurrence_forms((4, 8), channels=2, repeats=2, min_time=0.001, matrix_max_len=4)
    assert [(t.seq_len, t.name) for t in timings] == [
        (4, STEP),
        (4, MATRIX),
        (4, SCAN),
        (4, FFT),
        (8, STEP),
        (8, SCAN),
        (8, FFT),
    ]
    assert all(min(t.samples) > 0 and len(t.samples) == 2 for t in timings)
    assert all(t.ratios == (1.0, 1.0, 1.0) for t in timings if t.name == STEP)
    with pytest.raises(ValueError, match="lengths"):
        time_recurrence_forms(())
    with pytest.raises(ValueError, match="min_time"):
        time_recurrence_forms((4,), min_time=0.0)
