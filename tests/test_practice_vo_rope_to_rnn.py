"""Chapter 7's checkers: right recurrences pass, and each planted bug is named.

The implementations are written as a reader would write them, in plain torch:
a Hillis-Steele scan, a ``T x T`` matrix of powers formed from the distances, an
FFT convolution, a loop, and VO-RoPE both as a recurrence on complex pairs and
as rotations around a weighted sum. The bugs are planted into them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lessons._grading import Report
from rope_lessons.practice.vo_rope_to_rnn import check_linear_recurrence, check_vo_rope_recurrence

Recurrence = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
VoRope = Callable[[torch.Tensor, float], torch.Tensor]


# --- a reader's recurrences: x (B, T, n) complex, decay (n,) complex ---------------------


def scan_form(x: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
    """Hillis-Steele: after round k, each step holds the composition of its last 2^k steps."""
    a, b = decay.expand_as(x).clone(), x.clone()
    shift = 1
    while shift < x.shape[1]:
        b = torch.cat((b[:, :shift], a[:, shift:] * b[:, :-shift] + b[:, shift:]), dim=1)
        a = torch.cat((a[:, :shift], a[:, shift:] * a[:, :-shift]), dim=1)
        shift *= 2
    return b


def matrix_form(
    x: torch.Tensor, decay: torch.Tensor, *, mask: str = "causal", sign: float = 1.0
) -> torch.Tensor:
    """States as one T x T weighted sum, powers |γ|^d e^{i d arg γ} from the distance d."""
    steps = torch.arange(x.shape[1], dtype=x.real.dtype)
    distance = steps[:, None] - steps[None, :]  # (T, T): m - n
    if mask == "upper":  # the matrix transposed
        distance = -distance
    keep = {
        "causal": distance >= 0,
        "upper": distance >= 0,
        "strict": distance > 0,
        "none": torch.ones_like(distance, dtype=torch.bool),
    }[mask]
    d = distance.abs()[..., None]  # (T, T, 1)
    powers = torch.polar(decay.abs() ** d, sign * decay.angle() * d)  # (T, T, n)
    weights = torch.where(keep[..., None], powers, torch.zeros_like(powers))
    return torch.einsum("mnj,bnj->bmj", weights, x)


def fft_form(x: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
    """A causal convolution with the kernel γ^d, zero-padded so that nothing wraps."""
    seq_len = x.shape[1]
    d = torch.arange(seq_len, dtype=x.real.dtype)[:, None]
    kernel = torch.polar(decay.abs() ** d, decay.angle() * d)  # (T, n)
    size = 2 * seq_len
    spectrum = torch.fft.fft(x, n=size, dim=1) * torch.fft.fft(kernel, n=size, dim=0)
    states: torch.Tensor = torch.fft.ifft(spectrum, n=size, dim=1)
    return states[:, :seq_len]


def loop_form(
    x: torch.Tensor,
    decay: torch.Tensor,
    *,
    start: str = "zero",
    store_before: bool = False,
    decay_input: bool = False,
) -> torch.Tensor:
    """Step by step, with the knobs the state bugs turn."""
    state = {
        "zero": torch.zeros_like(x[:, 0]),
        "x0": x[:, 0].clone(),
        "ones": torch.ones_like(x[:, 0]),
    }[start]
    states = []
    for m in range(x.shape[1]):
        before = state
        state = decay * (state + x[:, m]) if decay_input else decay * state + x[:, m]
        states.append(before if store_before else state)
    return torch.stack(states, dim=1)


def quotient_form(x: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
    """ξ_m = γ^m Σ γ^(-n) x_n: right until γ^(-n) overflows."""
    steps = torch.arange(x.shape[1], dtype=x.real.dtype)[:, None]
    inverse = decay ** (-steps)  # (T, n)
    return torch.cumsum(x * inverse, dim=1) / inverse


def cumprod_form(x: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
    """ξ_m = P_m Σ x_n / P_n with P the cumulative product of the decay."""
    products = torch.cumprod(decay.expand(x.shape[1], -1), dim=0)  # γ^(m+1)
    return products * torch.cumsum(x / products, dim=1)


def quotient_matrix(x: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
    """The T x T matrix as γ^m γ^(-n), masked by multiplying with the lower triangle."""
    steps = torch.arange(x.shape[1], dtype=x.real.dtype)[:, None]
    up, down = decay**steps, decay ** (-steps)  # (T, n)
    lower = torch.tril(torch.ones(x.shape[1], x.shape[1], dtype=x.real.dtype))[..., None]
    return torch.einsum("mnj,bnj->bmj", up[:, None] * down[None] * lower, x)


RIGHT_RECURRENCES: dict[str, Recurrence] = {
    "scan": scan_form,
    "matrix": matrix_form,
    "fft": fft_form,
    "loop": loop_form,
}


@pytest.mark.parametrize("name", RIGHT_RECURRENCES)
def test_a_right_recurrence_passes(name: str) -> None:
    report = check_linear_recurrence(RIGHT_RECURRENCES[name])
    assert report.ok, report.diagnosis
    assert report.diagnosis.startswith("correct")
    assert len(report.cases) == 5 and report.failed == ()
    assert report.max_error < 1e-3


PLANTED_RECURRENCES: dict[str, tuple[Recurrence, str]] = {
    "modulus": (lambda x, decay: scan_form(x, decay.abs()), "rotation dropped"),
    "real part": (
        lambda x, decay: scan_form(x, decay.real),
        "imaginary part of the decay dropped",
    ),
    "conjugate": (lambda x, decay: matrix_form(x, decay, sign=-1.0), "decay conjugated"),
    "conjugate by .conj()": (lambda x, decay: fft_form(x, decay.conj()), "decay conjugated"),
    "state stored before": (
        lambda x, decay: loop_form(x, decay, store_before=True),
        "states shifted by one step",
    ),
    "diagonal zeroed": (
        lambda x, decay: matrix_form(x, decay, mask="strict"),
        "x_m left out of its own state",
    ),
    "input decayed": (
        lambda x, decay: loop_form(x, decay, decay_input=True),
        "one decay too many",
    ),
    "starts at x_0": (
        lambda x, decay: loop_form(x, decay, start="x0"),
        "wrong initial state: fn starts from ξ_{-1} = x_0",
    ),
    "starts at 1": (
        lambda x, decay: loop_form(x, decay, start="ones"),
        "wrong initial state: fn starts from ξ_{-1} = 1",
    ),
    "matrix transposed": (
        lambda x, decay: matrix_form(x, decay, mask="upper"),
        "time reversed",
    ),
    "scan from the end": (
        lambda x, decay: scan_form(x.flip(1), decay).flip(1),
        "time reversed",
    ),
    "no mask": (lambda x, decay: matrix_form(x, decay, mask="none"), "causal mask missing"),
    "quotient": (quotient_form, "powers overflow"),
    "cumprod": (cumprod_form, "powers overflow"),
    "quotient matrix, mask multiplied": (quotient_matrix, "powers overflow"),
}


@pytest.mark.parametrize("bug", PLANTED_RECURRENCES)
def test_a_planted_recurrence_bug_is_named(bug: str) -> None:
    fn, phrase = PLANTED_RECURRENCES[bug]
    report = check_linear_recurrence(fn)
    assert not report.ok
    assert report.diagnosis.startswith(phrase), report.diagnosis
    assert report.first_failure is not None


def test_the_overflow_names_the_step_where_the_power_overflows() -> None:
    report = check_linear_recurrence(quotient_form)
    assert report.failed == (report.cases[-1],)  # only the long sequence
    assert "float32 (3.4e+38)" in report.diagnosis
    modulus = float(report.diagnosis.split("|γ| = ")[1].split(",")[0])
    step = int(report.diagnosis.split("from step m = ")[1].split(" ")[0])
    largest = math.log(torch.finfo(torch.float32).max)
    assert step - 2 <= largest / -math.log(modulus) <= step + 2


def test_two_bugs_in_one_recurrence_are_named_together() -> None:
    report = check_linear_recurrence(lambda x, decay: loop_form(x, decay.conj(), start="ones"))
    assert report.diagnosis.startswith("decay conjugated"), report.diagnosis
    assert "; wrong initial state: fn starts from ξ_{-1} = 1" in report.diagnosis


def test_an_unrecognised_recurrence_bug_gives_the_case_and_the_error() -> None:
    report = check_linear_recurrence(lambda x, decay: scan_form(x, decay * decay))
    assert report.diagnosis.startswith("unrecognised difference"), report.diagnosis
    assert report.first_failure is not None and report.first_failure in report.diagnosis
    assert math.isfinite(report.max_error) and report.max_error > 1e-3
    assert "largest error" in str(report)


def stub(x: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError("write it")


def test_a_stub_is_not_written_yet() -> None:
    report = check_linear_recurrence(stub)
    assert report.diagnosis.startswith("not written yet"), report.diagnosis
    assert math.isinf(report.max_error)


@pytest.mark.parametrize(
    ("fn", "phrase"),
    [
        (lambda x, decay: x[:, x.shape[1]], "fn raised IndexError"),
        (lambda x, decay: scan_form(x, decay).tolist(), "fn did not return a tensor"),
        (lambda x, decay: scan_form(x, decay)[:, -1], "wrong output shape"),
        (
            lambda x, decay: scan_form(x, decay).real,
            "wrong output dtype: fn returned torch.float64 (real: the imaginary part was dropped)",
        ),
        (
            lambda x, decay: scan_form(x, decay).to(torch.complex64),
            "wrong output dtype: fn returned torch.complex64 for torch.complex128",
        ),
    ],
)
def test_a_recurrence_output_of_the_wrong_kind_is_named(fn: Recurrence, phrase: str) -> None:
    report = check_linear_recurrence(fn)
    assert not report.ok
    assert report.diagnosis.startswith(phrase), report.diagnosis


def test_the_inputs_given_to_fn_cannot_corrupt_the_check() -> None:
    def in_place(x: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
        x.copy_(scan_form(x, decay))
        decay.zero_()
        return x

    assert check_linear_recurrence(in_place).ok


@settings(max_examples=8)
@given(seed=st.integers(0, 2**31 - 1))
def test_the_recurrence_check_accepts_a_right_form_and_names_a_bug_for_any_seed(
    seed: int,
) -> None:
    assert check_linear_recurrence(matrix_form, seed=seed).ok
    wrong = check_linear_recurrence(lambda x, d: matrix_form(x, d, sign=-1.0), seed=seed)
    assert wrong.diagnosis.startswith("decay conjugated"), wrong.diagnosis


# --- a reader's VO-RoPE: v (B, H, T, D) real, gamma a float ------------------------------


def vo_as_recurrence(
    v: torch.Tensor,
    gamma: float,
    *,
    sign: float = -1.0,
    pairs: str = "interleaved",
    decay_kind: str = "complex",
    recurrence: Recurrence = scan_form,
) -> torch.Tensor:
    """Pairs read as complex numbers, decayed by γ e^{-iθ_k}, written back."""
    dim = v.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (D/2,)
    decay = {
        "complex": torch.polar(torch.full_like(theta, gamma), sign * theta),
        "real": torch.full_like(theta, gamma).to(torch.complex128),
        "cos": (gamma * torch.cos(theta)).to(torch.complex128),
    }[decay_kind]
    if pairs == "interleaved":
        z = torch.complex(v[..., 0::2], v[..., 1::2])
    elif pairs == "imaginary first":
        z = torch.complex(v[..., 1::2], v[..., 0::2])
    else:
        z = torch.complex(*v.chunk(2, dim=-1))
    batch, heads, seq_len, half = z.shape
    states = recurrence(z.reshape(batch * heads, seq_len, half), decay.to(z.dtype))
    states = states.reshape(batch, heads, seq_len, half)
    if pairs == "interleaved":
        return torch.stack((states.real, states.imag), dim=-1).flatten(-2)
    if pairs == "imaginary first":
        return torch.stack((states.imag, states.real), dim=-1).flatten(-2)
    return torch.cat((states.real, states.imag), dim=-1)


def vo_as_rotations(v: torch.Tensor, gamma: float) -> torch.Tensor:
    """R_m^T Σ_n γ^(m-n) R_n v_n with cos/sin tables and a masked weight matrix."""
    seq_len, dim = v.shape[-2:]
    theta = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = torch.arange(seq_len, dtype=torch.float64)[:, None] * theta  # (T, D/2)
    cos = angles.cos().repeat_interleave(2, -1).to(v.dtype)
    sin = angles.sin().repeat_interleave(2, -1).to(v.dtype)

    def rotate_every_two(x: torch.Tensor) -> torch.Tensor:
        return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)

    rotated = v * cos + rotate_every_two(v) * sin  # R_n v_n
    steps = torch.arange(seq_len)
    distance = (steps[:, None] - steps[None, :]).to(v.dtype)
    weights = torch.where(distance >= 0, gamma ** distance.clamp(min=0), 0.0)  # (T, T)
    summed = weights @ rotated
    return summed * cos - rotate_every_two(summed) * sin  # R_m^T


RIGHT_VO_ROPES: dict[str, VoRope] = {
    "scan": vo_as_recurrence,
    "loop": lambda v, gamma: vo_as_recurrence(v, gamma, recurrence=loop_form),
    "fft": lambda v, gamma: vo_as_recurrence(v, gamma, recurrence=fft_form),
    "rotations": vo_as_rotations,
}


@pytest.mark.parametrize("name", RIGHT_VO_ROPES)
def test_a_right_vo_rope_passes(name: str) -> None:
    report = check_vo_rope_recurrence(RIGHT_VO_ROPES[name])
    assert report.ok, report.diagnosis
    assert report.diagnosis.startswith("correct")
    assert len(report.cases) == 5


PLANTED_VO_ROPES: dict[str, tuple[VoRope, str]] = {
    "counter-clockwise": (
        lambda v, gamma: vo_as_recurrence(v, gamma, sign=1.0),
        "decay conjugated",
    ),
    "imaginary part first": (
        lambda v, gamma: vo_as_recurrence(v, gamma, pairs="imaginary first"),
        "decay conjugated",
    ),
    "half layout": (
        lambda v, gamma: vo_as_recurrence(v, gamma, pairs="half"),
        "pairs read in the half layout",
    ),
    "real decay": (
        lambda v, gamma: vo_as_recurrence(v, gamma, decay_kind="real"),
        "rotation dropped",
    ),
    "gamma cos theta": (
        lambda v, gamma: vo_as_recurrence(v, gamma, decay_kind="cos"),
        "imaginary part of the decay dropped",
    ),
    "state stored before": (
        lambda v, gamma: vo_as_recurrence(
            v, gamma, recurrence=lambda x, d: loop_form(x, d, store_before=True)
        ),
        "states shifted by one step",
    ),
    "diagonal zeroed": (
        lambda v, gamma: vo_as_recurrence(
            v, gamma, recurrence=lambda x, d: matrix_form(x, d, mask="strict")
        ),
        "v_m left out of its own state",
    ),
    "input decayed": (
        lambda v, gamma: vo_as_recurrence(
            v, gamma, recurrence=lambda x, d: loop_form(x, d, decay_input=True)
        ),
        "one decay too many",
    ),
    "starts at v_0": (
        lambda v, gamma: vo_as_recurrence(
            v, gamma, recurrence=lambda x, d: loop_form(x, d, start="x0")
        ),
        "wrong initial state: fn starts from ξ_{-1} = v_0",
    ),
    "matrix transposed": (
        lambda v, gamma: vo_as_recurrence(
            v, gamma, recurrence=lambda x, d: matrix_form(x, d, mask="upper")
        ),
        "time reversed",
    ),
    "no mask": (
        lambda v, gamma: vo_as_recurrence(
            v, gamma, recurrence=lambda x, d: matrix_form(x, d, mask="none")
        ),
        "causal mask missing",
    ),
    "quotient": (
        lambda v, gamma: vo_as_recurrence(v, gamma, recurrence=quotient_form),
        "powers overflow",
    ),
}


@pytest.mark.parametrize("bug", PLANTED_VO_ROPES)
def test_a_planted_vo_rope_bug_is_named(bug: str) -> None:
    fn, phrase = PLANTED_VO_ROPES[bug]
    report = check_vo_rope_recurrence(fn)
    assert not report.ok
    assert report.diagnosis.startswith(phrase), report.diagnosis


def test_half_layout_and_the_wrong_turn_are_named_together() -> None:
    report = check_vo_rope_recurrence(
        lambda v, gamma: vo_as_recurrence(v, gamma, pairs="half", sign=1.0)
    )
    assert report.diagnosis.startswith("pairs read in the half layout"), report.diagnosis
    assert "; decay conjugated" in report.diagnosis


@pytest.mark.parametrize(
    ("fn", "phrase"),
    [
        (lambda v, gamma: vo_as_recurrence(v, gamma) * 1.5, "unrecognised difference"),
        (lambda v, gamma: v[..., 0::2] + 0j, "wrong output shape"),
        (
            lambda v, gamma: vo_as_recurrence(v, gamma).to(torch.float16),
            "wrong output dtype: fn returned torch.float16",
        ),
        (lambda v, gamma: 1 / 0, "fn raised ZeroDivisionError"),
    ],
)
def test_a_vo_rope_of_the_wrong_kind_is_named(fn: VoRope, phrase: str) -> None:
    report = check_vo_rope_recurrence(fn)
    assert report.diagnosis.startswith(phrase), report.diagnosis
    if phrase == "unrecognised difference":
        assert report.first_failure is not None and report.first_failure in report.diagnosis
        assert math.isfinite(report.max_error)


def test_a_vo_rope_stub_is_not_written_yet() -> None:
    def my_vo_rope(v: torch.Tensor, gamma: float) -> torch.Tensor:
        raise NotImplementedError

    assert check_vo_rope_recurrence(my_vo_rope).diagnosis.startswith("not written yet")


@settings(max_examples=5)
@given(seed=st.integers(0, 2**31 - 1))
def test_the_vo_rope_check_accepts_the_rotations_for_any_seed(seed: int) -> None:
    assert check_vo_rope_recurrence(vo_as_rotations, seed=seed).ok


# --- arguments -----------------------------------------------------------------------------


@pytest.mark.parametrize("check", [check_linear_recurrence, check_vo_rope_recurrence])
@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ({"fn": "scan"}, TypeError, "fn must be callable"),
        ({"seed": 0.5}, TypeError, "seed must be an int"),
        ({"seed": True}, TypeError, "seed must be an int"),
        ({"seed": -1}, ValueError, "seed must be >= 0"),
    ],
)
def test_bad_arguments_are_refused(
    check: Callable[..., Report], arguments: dict[str, object], error: type[Exception], match: str
) -> None:
    call: dict[str, object] = {"fn": scan_form} | arguments
    with pytest.raises(error, match=match):
        check(**call)
