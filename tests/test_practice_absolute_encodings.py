"""check_sinusoidal: right tables pass, and each planted bug is named.

The implementations are written as a reader would write them, in plain torch: one
parametrised function (positions over base^(2k/d), sines and cosines) into which the
bugs are planted, the annotated Transformer's ``exp(-log(base) 2k/d)`` form filling
even and odd columns, and a loop over entries in Python floats.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lessons.practice.absolute_encodings import check_sinusoidal
from rope_lessons.rope.encodings import sinusoidal

Fn = Callable[[int, int], torch.Tensor]


def reader_sinusoidal(
    n_positions: int,
    dim: int,
    *,
    base: float = 10000.0,
    exponents: Callable[[int], torch.Tensor] = lambda d: torch.arange(0, d, 2) / d,
    start: int = 0,
    cos_first: bool = False,
    concatenated: bool = False,
    speed: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """``sin(p / base^(2k/d))`` and ``cos`` of the same, with the knobs the bugs turn."""
    positions = speed * torch.arange(start, start + n_positions, dtype=dtype)[:, None]  # (n, 1)
    angles = positions / base ** exponents(dim).to(dtype)  # (n, d/2)
    first, second = angles.sin(), angles.cos()
    if cos_first:
        first, second = second, first
    if concatenated:
        return torch.cat((first, second), dim=-1)
    return torch.stack((first, second), dim=-1).flatten(-2)


def annotated_transformer(n_positions: int, dim: int) -> torch.Tensor:
    """The form of the annotated Transformer: even and odd columns filled in float32."""
    table = torch.zeros(n_positions, dim)
    position = torch.arange(0, n_positions).unsqueeze(1).float()
    div_term = torch.exp(torch.arange(0, dim, 2).float() * -(math.log(10000.0) / dim))
    table[:, 0::2] = torch.sin(position * div_term)
    table[:, 1::2] = torch.cos(position * div_term)
    return table


def looped(n_positions: int, dim: int) -> torch.Tensor:
    """Entry by entry, in Python floats."""
    rows = [
        [
            (math.sin if j % 2 == 0 else math.cos)(p / 10000.0 ** ((j - j % 2) / dim))
            for j in range(dim)
        ]
        for p in range(n_positions)
    ]
    return torch.tensor(rows, dtype=torch.float64)


@pytest.mark.parametrize(
    "fn",
    [
        reader_sinusoidal,
        annotated_transformer,
        looped,
        lambda n, d: reader_sinusoidal(n, d, dtype=torch.float64),
        lambda n, d: sinusoidal(n, d),
    ],
    ids=["reader", "annotated-transformer", "loop", "float64", "package"],
)
def test_a_right_table_passes(fn: Fn) -> None:
    report = check_sinusoidal(fn)
    assert report.ok, report.diagnosis
    assert report.diagnosis.startswith("correct: fn matches sinusoidal(n_positions, dim")
    assert report.failed == () and len(report.cases) == 4


def test_another_base_is_checked_as_claimed() -> None:
    assert check_sinusoidal(lambda n, d: reader_sinusoidal(n, d, base=500.0), base=500.0).ok
    report = check_sinusoidal(reader_sinusoidal, base=500.0)
    assert report.diagnosis.startswith("wrong base: the angles fit base 10000, not base=500")


def test_the_cases_cover_position_zero_alone_and_far_positions() -> None:
    cases = "\n".join(check_sinusoidal(reader_sinusoidal).cases)
    assert "position 0 alone" in cases and "0 .. 2047" in cases and "d = 64" in cases


# Each planted bug and the phrase its diagnosis starts with.
PLANTED: dict[str, tuple[Fn, str]] = {
    "sin-cos-swapped": (
        lambda n, d: reader_sinusoidal(n, d, cos_first=True),
        "sin and cos swapped",
    ),
    "concatenated": (
        lambda n, d: reader_sinusoidal(n, d, concatenated=True),
        "sines and cosines concatenated",
    ),
    "from-1": (lambda n, d: reader_sinusoidal(n, d, start=1), "positions counted from 1"),
    "exponent-k/d": (
        lambda n, d: reader_sinusoidal(n, d, exponents=lambda d: torch.arange(d // 2) / d),
        "wrong exponent: ω_k = base^(-k/d)",
    ),
    "exponent-4k/d": (
        lambda n, d: reader_sinusoidal(n, d, exponents=lambda d: 2 * torch.arange(0, d, 2) / d),
        "wrong exponent: ω_k = base^(-4k/d)",
    ),
    "exponent-linspace": (
        lambda n, d: reader_sinusoidal(n, d, exponents=lambda d: torch.linspace(0, 1, d // 2)),
        "wrong exponent: ω_k = base^(-2k/(d-2))",
    ),
    "exponent-from-1": (
        lambda n, d: reader_sinusoidal(n, d, exponents=lambda d: torch.arange(2, d + 1, 2) / d),
        "wrong exponent: ω_k = base^(-2(k+1)/d)",
    ),
    "ladder-reversed": (
        lambda n, d: reader_sinusoidal(n, d, exponents=lambda d: torch.arange(d - 2, -1, -2) / d),
        "frequency ladder reversed",
    ),
    "frequencies-inverted": (  # in float64: float32 angles of 2047 * 3000 are noise
        lambda n, d: reader_sinusoidal(
            n, d, exponents=lambda d: -torch.arange(0, d, 2) / d, dtype=torch.float64
        ),
        "frequencies inverted",
    ),
    "integer-division": (
        lambda n, d: reader_sinusoidal(n, d, exponents=lambda d: torch.arange(0, d, 2) // d),
        "every pair turns at 1 radian per position",
    ),
    "wrong-base": (
        lambda n, d: reader_sinusoidal(n, d, base=1000.0),
        "wrong base: the angles fit base 1000, not base=10000",
    ),
    "other-frequencies": (
        lambda n, d: reader_sinusoidal(n, d, speed=1.01),
        "wrong frequencies: for d = 8 fn's pairs turn by (1.01, 0.101",
    ),
    "not-sinusoidal": (lambda n, d: 1.1 * reader_sinusoidal(n, d), "unrecognised difference"),
}


@pytest.mark.parametrize("bug", PLANTED)
def test_a_planted_bug_is_named(bug: str) -> None:
    fn, phrase = PLANTED[bug]
    report = check_sinusoidal(fn)
    assert not report.ok
    assert report.diagnosis.startswith(phrase), report.diagnosis
    assert report.failed and set(report.failed) <= set(report.cases)
    assert report.max_error > 0.05


def test_several_bugs_are_named_together() -> None:
    report = check_sinusoidal(
        lambda n, d: reader_sinusoidal(n, d, start=1, cos_first=True, concatenated=True)
    )
    bugs = [bug.split(":")[0] for bug in report.diagnosis.split("; ")]
    assert bugs == [
        "sin and cos swapped",
        "sines and cosines concatenated",
        "positions counted from 1",
    ]


def test_an_unrecognised_difference_gives_the_case_and_a_finite_error() -> None:
    report = check_sinusoidal(PLANTED["not-sinusoidal"][0])
    assert report.first_failure is not None and report.first_failure in report.diagnosis
    assert math.isfinite(report.max_error) and report.max_error == pytest.approx(0.1)
    assert "largest error: 0.1" in str(report)


def test_a_stub_is_not_written_yet() -> None:
    def stub(n_positions: int, dim: int) -> torch.Tensor:
        raise NotImplementedError("write the sinusoidal code")

    report = check_sinusoidal(stub)
    assert not report.ok and report.diagnosis.startswith("not written yet")
    assert report.failed == (report.cases[0],)


def test_a_function_that_raises_is_reported_with_the_case() -> None:
    def odd_only(n_positions: int, dim: int) -> torch.Tensor:
        if dim > 32:
            raise ValueError("too wide")
        return reader_sinusoidal(n_positions, dim)

    report = check_sinusoidal(odd_only)
    assert report.diagnosis.startswith("fn raised ValueError: too wide (fn(64, 64)")
    assert report.max_error == math.inf


@pytest.mark.parametrize(
    ("fn", "phrase"),
    [
        (lambda n, d: reader_sinusoidal(n, d).T, "wrong output shape: fn returned (8, 1)"),
        (lambda n, d: reader_sinusoidal(n, d)[None], "wrong output shape"),
        (lambda n, d: reader_sinusoidal(n, d).numpy(), "fn did not return a tensor"),
        (lambda n, d: reader_sinusoidal(n, d).round().long(), "wrong output dtype"),
    ],
    ids=["transposed", "batch-axis", "numpy", "int64"],
)
def test_an_output_of_the_wrong_kind_is_named(fn: Fn, phrase: str) -> None:
    report = check_sinusoidal(fn)
    assert not report.ok and report.diagnosis.startswith(phrase), report.diagnosis


PLANTED_SHAPES: dict[str, Fn] = {
    "transposed": lambda n, d: reader_sinusoidal(n, d).T,
    "batched": lambda n, d: reader_sinusoidal(n, d)[None],
}


def test_the_transposed_and_batched_tables_get_their_hints() -> None:
    assert "transposed" in check_sinusoidal(PLANTED_SHAPES["transposed"]).diagnosis
    assert "batch axis" in check_sinusoidal(PLANTED_SHAPES["batched"]).diagnosis


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ({"fn": "sinusoidal"}, TypeError, "fn must be callable"),
        ({"base": 1.0}, ValueError, "base must be > 1"),
        ({"base": "10000"}, TypeError, "base must be a number"),
    ],
)
def test_bad_arguments_are_refused(
    arguments: dict[str, object], error: type[Exception], match: str
) -> None:
    call: dict[str, object] = {"fn": reader_sinusoidal} | arguments
    with pytest.raises(error, match=match):
        check_sinusoidal(call.pop("fn"), **call)  # type: ignore[arg-type]


@settings(max_examples=10)
@given(base=st.floats(100.0, 1e6))
def test_the_checker_accepts_the_code_and_names_a_swap_for_any_base(base: float) -> None:
    assert check_sinusoidal(lambda n, d: sinusoidal(n, d, base), base=base).ok
    swapped = check_sinusoidal(
        lambda n, d: reader_sinusoidal(n, d, base=base, cos_first=True), base
    )
    assert swapped.diagnosis.startswith("sin and cos swapped")
