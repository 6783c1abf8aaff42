r"""The parallel forms of the linear recurrence used in practice: associative scan and FFT.

The states :math:`h_t = \lambda h_{t-1} + x_t` (:math:`h_{-1} = 0`) of chapter 7
have four forms in the package. Two are in :mod:`rope_lessons.chapters.recurrence`:
:func:`~rope_lessons.chapters.recurrence.linear_recurrence`, step by step, the
reference (``T`` sequential steps, ``O(Tn)`` work), and
:func:`~rope_lessons.chapters.recurrence.linear_recurrence_parallel`, one ``T x T``
weighted sum (``O(T^2 n)`` work, no loop). This module adds the two that
models train with:

* :func:`linear_recurrence_scan`: a parallel *associative scan*. The step
  :math:`h \mapsto a h + b` composes with the next one into another step of the
  same kind, :math:`(a_2, b_2) \circ (a_1, b_1) = (a_2 a_1, a_2 b_1 + b_2)`, and
  composition is associative, so all prefixes can be combined in
  :math:`\lceil \log_2 T \rceil` rounds of elementwise work: ``O(Tn)`` work,
  ``O(log T)`` depth. LRU trains this way (Orvieto et al. 2023,
  arXiv:2303.06349, with ``jax.lax.associative_scan``); so does any diagonal
  recurrence, even one whose decay depends on the input (Mamba's selective
  scan).
* :func:`linear_recurrence_fft`: a decay that does not depend on the data makes
  the ``T x T`` matrix of :func:`~rope_lessons.chapters.recurrence.decay_powers`
  Toeplitz, so its product with ``x`` is a causal convolution with the kernel
  :math:`\lambda^d`, ``d = 0 .. T-1``
  (:func:`~rope_lessons.chapters.recurrence.decay_kernel`), done by FFT in
  ``O(T log T)`` per channel: the "convolutional view" of S4 (Gu et al. 2022,
  arXiv:2111.00396).

:func:`time_recurrence_forms` times all four in the same repeats and
:func:`fitted_slopes` fits each one's log-log slope of time against length
(:func:`loglog_slope`; ``benchmarks/recurrence_forms.py`` prints both).

Shapes: ``...`` any leading dimensions, ``T`` sequence length, ``n`` channels.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence

import torch
from scipy import stats
from torch.utils.benchmark.utils.timer import timer as synchronised_clock

from rope_lessons._checks import check_positive_int
from rope_lessons.chapters.recurrence import (
    _check_recurrence_args,
    decay_kernel,
    linear_recurrence,
    linear_recurrence_parallel,
)
from rope_lessons.evidence.benchmark import Timing, check_timing_args, time_in_turn

FFT_DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)


def _scan(x: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
    """The scan of ``x`` ``(..., T, n)`` under the step ``h -> decay * h + x_t``.

    Odd-even recursion: combine neighbours ``(2i, 2i+1)`` into one step of
    decay ``decay**2``, scan those ``T // 2`` steps (the states at odd
    positions), then fill in the even positions with one more step each.
    """
    seq_len = x.shape[-2]
    if seq_len == 1:
        return x
    pairs = seq_len // 2
    even, odd = x[..., 0 : 2 * pairs : 2, :], x[..., 1 : 2 * pairs : 2, :]
    odd_states = _scan(decay * even + odd, decay * decay)  # h_1, h_3, ...: (..., T//2, n)
    from_odd = decay * odd_states[..., : (seq_len - 1) // 2, :] + x[..., 2::2, :]  # h_2, h_4, ...
    states = torch.empty_like(x)
    states[..., 0:1, :] = x[..., 0:1, :]  # h_0 = x_0
    states[..., 2::2, :] = from_odd
    states[..., 1::2, :] = odd_states
    return states  # (..., T, n)


def linear_recurrence_scan(x: torch.Tensor, decay: torch.Tensor | complex) -> torch.Tensor:
    r"""The states :math:`h_t = \lambda h_{t-1} + x_t` by a parallel associative scan.

    The same states as :func:`~rope_lessons.chapters.recurrence.linear_recurrence`
    in :math:`\lceil \log_2 T \rceil` rounds of vectorised elementwise work on
    the whole sequence (``O(Tn)`` work in all, a Python loop of only
    ``log T`` levels): round ``k`` combines blocks of :math:`2^k` steps, whose
    decay is :math:`\lambda^{2^k}`. Differentiable like any torch code.

    Args:
        x: inputs ``(..., T, n)``, real or complex, ``T >= 1``.
        decay: :math:`\lambda`, a number or a tensor of shape ``()`` or ``(n,)``,
            real or complex (a Python number at the precision of ``x``).

    Returns:
        The states ``(..., T, n)``, in the dtype of ``x`` and ``decay``
        promoted together.

    Raises:
        TypeError, ValueError: as :func:`~rope_lessons.chapters.recurrence.linear_recurrence`.

    Example:
        >>> x = torch.tensor([[1.0], [2.0], [3.0]])
        >>> linear_recurrence_scan(x, 0.5)[:, 0].tolist()
        [1.0, 2.5, 4.25]
    """
    x, decay = _check_recurrence_args(x, decay)
    return _scan(x, decay)


def linear_recurrence_fft(x: torch.Tensor, decay: torch.Tensor | complex) -> torch.Tensor:
    r"""The states :math:`h_t = \sum_{u \le t} \lambda^{t-u} x_u` as a causal convolution by FFT.

    The kernel :math:`\lambda^d` (:func:`~rope_lessons.chapters.recurrence.decay_kernel`)
    and the inputs are zero-padded to a power of two of at least ``2T - 1``
    points, so that the FFT's circular convolution does not wrap the end of
    the sequence onto its start; real input with a real decay goes through
    the real FFT. ``O(T log T)`` work per channel.

    Precision: the FFT's rounding error is of the order of the float epsilon
    times the *largest* values of the whole sequence, not of each state, so a
    state much smaller than the others (after a long silence, say) is only
    known to that absolute accuracy. The step-by-step and scan forms do not
    have this limit.

    Args:
        x: inputs ``(..., T, n)``, float32, float64, complex64 or complex128
            (what ``torch.fft`` computes in on every device), ``T >= 1``.
        decay: :math:`\lambda`, as in :func:`linear_recurrence_scan`.

    Returns:
        The states ``(..., T, n)``, in the dtype of ``x`` and ``decay``
        promoted together (empty when ``x`` is: no channel, or an empty batch).

    Raises:
        TypeError: a dtype ``torch.fft`` does not compute in (e.g. float16);
            otherwise as :func:`~rope_lessons.chapters.recurrence.linear_recurrence`.
        ValueError: as :func:`~rope_lessons.chapters.recurrence.linear_recurrence`.
    """
    x, decay = _check_recurrence_args(x, decay)
    if x.dtype not in FFT_DTYPES:
        raise TypeError(f"linear_recurrence_fft computes in {FFT_DTYPES}, got {x.dtype}")
    if x.numel() == 0:  # no channel or an empty batch: no state (torch.fft refuses 0 signals)
        return torch.zeros_like(x)
    seq_len = x.shape[-2]
    kernel = decay_kernel(decay, seq_len)  # (T,) or (n, T): lambda^d
    kernel = kernel[None, :] if decay.ndim == 0 else kernel  # (1, T) or (n, T)
    signal = x.transpose(-1, -2)  # (..., n, T): transform along the last dimension
    size = 1 << (2 * seq_len - 1).bit_length()  # a power of two >= 2T - 1: no wrap-around
    if x.is_complex():
        spectrum = torch.fft.fft(signal, n=size) * torch.fft.fft(kernel, n=size)
        states: torch.Tensor = torch.fft.ifft(spectrum, n=size)
    else:
        spectrum = torch.fft.rfft(signal, n=size) * torch.fft.rfft(kernel, n=size)
        states = torch.fft.irfft(spectrum, n=size)
    return states[..., :seq_len].transpose(-1, -2)  # (..., T, n)


STEP = "step by step"
MATRIX = "T x T matrix"
SCAN = "associative scan"
FFT = "FFT convolution"
RECURRENCE_FORMS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    STEP: linear_recurrence,
    MATRIX: linear_recurrence_parallel,
    SCAN: linear_recurrence_scan,
    FFT: linear_recurrence_fft,
}


def time_recurrence_forms(
    lengths: Sequence[int],
    *,
    channels: int = 16,
    batch: int = 1,
    repeats: int = 5,
    min_time: float = 0.02,
    matrix_max_len: int | None = 1024,
    device: torch.device | str = "cpu",
    seed: int = 0,
) -> list[Timing]:
    """Check the four forms against the step-by-step one, then time them at each length.

    The input is complex64 ``(batch, T, channels)`` with one complex decay per
    channel, of modulus 0.99 and a random angle. Each repeat times every form
    once, one after the other (:func:`~rope_lessons.evidence.benchmark.time_in_turn`:
    enough calls each that one measurement lasts at least ``min_time``), so
    each form's ratio to the step-by-step form compares times taken moments
    apart. On the CPU the clock is the process's CPU time, which other
    programs competing for the cores disturb less than wall time; on a GPU it
    is wall time after a synchronisation (torch's ``Timer``).

    Args:
        lengths: the sequence lengths ``T``.
        channels, batch: the rest of the input's shape.
        repeats: measurements per form and length.
        min_time: seconds per measurement, at least.
        matrix_max_len: the ``T x T`` form, whose kernel alone takes
            ``8 * channels * T**2`` bytes, is timed only up to this length
            (``None``: at every length).
        device: where the input lives.
        seed: seed of the random input and decays.

    Returns:
        One :class:`~rope_lessons.evidence.benchmark.Timing` per form and length, the
        step-by-step form first at each length (its ratios are 1).
    """
    for name, value in (("channels", channels), ("batch", batch)):
        check_positive_int(value, name)
    check_timing_args(repeats, min_time)
    if not lengths:
        raise ValueError("lengths must name at least one length")
    if matrix_max_len is not None:
        check_positive_int(matrix_max_len, "matrix_max_len")
    device = torch.device(device)
    clock = time.process_time if device.type == "cpu" else synchronised_clock
    generator = torch.Generator().manual_seed(seed)
    angles = torch.rand(channels, generator=generator) * 2 * torch.pi
    decay = torch.polar(torch.full((channels,), 0.99), angles).to(device)  # (n,) complex64
    results = []
    for length in lengths:
        check_positive_int(length, "lengths")
        x = torch.randn(batch, length, channels, dtype=torch.complex64, generator=generator)
        x = x.to(device)
        forms = {
            name: functools.partial(form, x, decay)
            for name, form in RECURRENCE_FORMS.items()
            if name != MATRIX or matrix_max_len is None or length <= matrix_max_len
        }
        reference = linear_recurrence(x, decay)
        for name, form in forms.items():  # float32 arithmetic; states grow to ~ sqrt(1/(1-r^2))
            torch.testing.assert_close(form(), reference, rtol=1e-3, atol=1e-3, msg=name)
        results += time_in_turn(
            forms, STEP, length, repeats=repeats, min_time=min_time, clock=clock
        )
    return results


def loglog_slope(lengths: list[int] | tuple[int, ...], seconds: list[float]) -> float:
    """Least-squares slope of ``log(seconds)`` on ``log(length)``: the ``k`` of ``T^k``
    (``scipy.stats.linregress``).

    Raises:
        ValueError: fewer than two pairs, counts that differ, a length or time
            that is not positive, or only one distinct length (no slope).
    """
    if len(lengths) != len(seconds) or len(lengths) < 2:
        raise ValueError("need at least two (length, seconds) pairs of equal count")
    if not all(n > 0 for n in lengths) or not all(s > 0 for s in seconds):
        raise ValueError(
            f"lengths and seconds must be positive, got {list(lengths)} and {list(seconds)}"
        )
    if len(set(lengths)) < 2:
        raise ValueError(f"need at least two distinct lengths for a slope, got {list(lengths)}")
    fit = stats.linregress([math.log(n) for n in lengths], [math.log(s) for s in seconds])
    return float(fit.slope)


def fitted_slopes(timings: Sequence[Timing]) -> dict[str, float]:
    """Per form, the log-log slope of median seconds against length, over every length it was timed.

    A form timed at a single length gets no slope (it is left out).
    """
    slopes = {}
    for name in dict.fromkeys(t.name for t in timings):
        points = [(t.seq_len, t.seconds[1]) for t in timings if t.name == name]
        if len({length for length, _ in points}) >= 2:
            slopes[name] = loglog_slope([p[0] for p in points], [p[1] for p in points])
    return slopes


def format_recurrence_timings(timings: Sequence[Timing]) -> str:
    """A plain-text table: per length, each form's median time and its ratio to step by step.

    Columns: median milliseconds per call, then the ratio to the step-by-step
    form in the same repeat, min / median / max over the repeats; then each
    form's fitted slope over all its lengths (:func:`fitted_slopes`), under a
    heading of their own when at least one form was timed at two lengths.
    """
    lines = [
        f"{'T':>6s}  {'form':18s} {'median':>11s}  {'x step by step: min / median / max':>36s}"
    ]
    for length in dict.fromkeys(t.seq_len for t in timings):
        for t in (t for t in timings if t.seq_len == length):
            low, mid, high = t.ratios
            lines.append(
                f"{length:6d}  {t.name:18s} {t.seconds[1] * 1e3:8.3f} ms  "
                f"{low:14.3f} / {mid:8.3f} / {high:8.3f}"
            )
    slopes = fitted_slopes(timings)
    if slopes:
        lengths = sorted({t.seq_len for t in timings})
        lines.append(
            f"log-log slopes of median time on all lengths ({lengths[0]} to {lengths[-1]}):"
        )
        lines.extend(f"  {name:18s} {slope:5.2f}" for name, slope in slopes.items())
    return "\n".join(lines)
