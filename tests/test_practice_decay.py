"""check_relative_bound and check_abel_bound: right functions pass, each planted bug is named.

The implementations are written as a reader would write them, in plain torch with
cosine and sine sums (not the complex walk of the package): one parametrised function
per exercise into which the bugs are planted, and a Python loop for each.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rope_lessons._grading import Report
from rope_lessons.chapters.decay_bounds import abel_bound, roformer_bound
from rope_lessons.practice.decay import check_abel_bound, check_relative_bound

Relative = Callable[[torch.Tensor, int, float], torch.Tensor]
Abel = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def ladder(
    d: int, base: float, exponents: str = "2k/d", dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """The reader's frequencies ``(d/2,)`` with a wrong exponent where asked."""
    k = torch.arange(d // 2, dtype=dtype)
    if exponents == "2k/d":
        return 1.0 / base ** (torch.arange(0, d, 2, dtype=dtype) / d)
    if exponents == "k/d":
        return base ** (-k / d)
    if exponents == "2k/(d-2)":
        return base ** -torch.linspace(0, 1, d // 2, dtype=dtype)
    if exponents == "2(k+1)/d":
        return base ** (-2 * (k + 1) / d)
    if exponents == "+2k/d":
        return base ** (2 * k / d)
    if exponents == "int":  # 2k // d is 0 for every pair
        return base ** -(2 * torch.arange(d // 2) // d).to(dtype)
    raise ValueError(exponents)


def walk_sizes(
    distances: torch.Tensor,
    d: int,
    base: float,
    *,
    exponents: str = "2k/d",
    flip: bool = False,
    terms: str = "1..K",
    size: str = "modulus",
    shift: int = 0,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """What the reader adds for each partial sum, ``(R, J)``, from cos and sin sums."""
    theta = ladder(d, base, exponents, dtype)
    if flip:
        theta = theta.flip(0)
    angles = (distances + shift).to(dtype)[:, None] * theta
    cos, sin = angles.cos(), angles.sin()
    if size == "steps":
        return torch.hypot(cos, sin)
    cos_sums, sin_sums = cos.cumsum(-1), sin.cumsum(-1)
    if terms == "0..K-1":  # S_j for j = 0 .. d/2 - 1
        cos_sums = torch.nn.functional.pad(cos_sums, (1, 0))[:, :-1]
        sin_sums = torch.nn.functional.pad(sin_sums, (1, 0))[:, :-1]
    elif terms == "1..K-1":
        cos_sums, sin_sums = cos_sums[:, :-1], sin_sums[:, :-1]
    if size == "modulus":
        return torch.hypot(cos_sums, sin_sums)
    if size == "real":
        return cos_sums
    if size == "abs_real":
        return cos_sums.abs()
    if size == "squared":
        return cos_sums**2 + sin_sums**2
    if size == "outside":
        return torch.hypot(cos_sums.sum(-1, keepdim=True), sin_sums.sum(-1, keepdim=True))
    raise ValueError(size)


def reader_bound(
    distances: torch.Tensor,
    d: int,
    base: float,
    *,
    divide_by: str = "d/2",
    ignore_base: bool = False,
    **walk: object,
) -> torch.Tensor:
    """The reader's B(r), with the knobs the bugs turn."""
    sizes = walk_sizes(distances, d, 10000.0 if ignore_base else base, **walk)  # type: ignore[arg-type]
    if divide_by == "kept":  # the mean of the terms kept: NaN for d = 2, none kept
        return sizes.mean(-1).double()
    divisor = {"d/2": d // 2, "1": 1, "d": d, "d/2+1": d // 2 + 1, "d/2-1": d // 2 - 1}[divide_by]
    return (sizes.sum(-1) / divisor).double()


def loop_bound(distances: torch.Tensor, d: int, base: float) -> torch.Tensor:
    """B(r) with Python floats: the walk stepped pair by pair."""
    values = []
    for r in distances.tolist():
        x = y = total = 0.0
        for k in range(d // 2):
            angle = r * base ** (-2 * k / d)
            x, y = x + math.cos(angle), y + math.sin(angle)
            total += math.hypot(x, y)
        values.append(total / (d // 2))
    return torch.tensor(values, dtype=torch.float64)


def stub(*args: object) -> torch.Tensor:
    raise NotImplementedError("write this function")


# --- check_relative_bound --------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        roformer_bound,
        reader_bound,
        loop_bound,
        lambda r, d, b: reader_bound(r.flip(0), d, b).flip(0),
    ],
    ids=["package", "cos-sin sums", "loop", "flipped distances"],
)
def test_relative_bound_accepts_right_functions(fn: Relative) -> None:
    report = check_relative_bound(fn)
    assert report.ok, report
    assert report.diagnosis.startswith("correct")
    assert report.failed == () and len(report.cases) == 5
    assert report.max_error < 1e-10


def _bug(**knobs: object) -> Relative:
    return lambda r, d, b: reader_bound(r, d, b, **knobs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fn", "verdict"),
    [
        (_bug(terms="0..K-1"), "partial sums off by one"),
        (_bug(terms="1..K-1"), "partial sums off by one"),
        (_bug(terms="1..K-1", divide_by="kept"), "partial sums off by one"),
        (_bug(divide_by="d/2-1"), "averaged over d/2 - 1 terms"),
        (_bug(size="real"), "real parts in place of moduli"),
        (_bug(size="abs_real"), "|Re S_j| in place of |S_j|"),
        (_bug(size="squared"), "squared moduli"),
        (_bug(size="steps"), "moduli of the steps, not of the partial sums"),
        (_bug(size="outside"), "modulus taken after the sum over j"),
        (_bug(divide_by="1"), "not divided by d/2"),
        (_bug(divide_by="d"), "divided by d instead of d/2"),
        (_bug(divide_by="d/2+1"), "averaged over d/2 + 1 terms"),
        (_bug(shift=1), "distances off by one"),
        (_bug(shift=-1), "distances off by one"),
        (_bug(exponents="k/d"), "wrong exponent: θ_k = base^(-k/d)"),
        (_bug(exponents="2k/(d-2)"), "wrong exponent: θ_k = base^(-2k/(d-2))"),
        (_bug(exponents="2(k+1)/d"), "wrong exponent: θ_k = base^(-2(k+1)/d)"),
        (_bug(flip=True), "walk taken slowest pair first"),
        (_bug(exponents="+2k/d"), "frequencies inverted"),
        (_bug(exponents="int"), "every pair turns at 1 radian per position"),
        (_bug(ignore_base=True), "base ignored"),
        (_bug(dtype=torch.float32), "computed in float32"),
        (lambda r, d, b: roformer_bound(r, d, b).float(), "computed in float32"),
        (stub, "not written yet"),
        (lambda r, d, b: roformer_bound(r, d, b).tolist(), "fn did not return a tensor"),
        (lambda r, d, b: roformer_bound(r, d, b) + 0j, "fn returned complex numbers"),
        (
            lambda r, d, b: walk_sizes(r, d, b) / (d // 2),
            "one value per partial sum",
        ),
        (lambda r, d, b: roformer_bound(r, d, b)[None], "wrong output shape"),
        (lambda r, d, b: roformer_bound(r, d, b).round().long(), "wrong output dtype"),
        (lambda r, d, b: roformer_bound(r[:2], d, b), "wrong output shape"),
        (lambda r, d, b: torch.ones(()) / r.double().sum().sqrt(), "wrong output shape"),
        (_bug(divide_by="1", terms="0..K-1"), "partial sums off by one"),
        (lambda r, d, b: reader_bound(r, d, b) + r / 1e4, "unrecognised difference"),
    ],
)
def test_relative_bound_names_each_bug(fn: Relative, verdict: str) -> None:
    report = check_relative_bound(fn)
    assert not report.ok
    assert report.diagnosis.startswith(verdict), report
    assert report.failed and report.first_failure in report.cases


def test_two_bugs_are_both_named() -> None:
    report = check_relative_bound(_bug(divide_by="1", terms="0..K-1"))
    assert "; not divided by d/2" in report.diagnosis
    report = check_relative_bound(_bug(terms="1..K-1", divide_by="kept"))
    assert "; averaged over d/2 - 1 terms" in report.diagnosis


def test_raised_names_the_case_and_error() -> None:
    def broken(r: torch.Tensor, d: int, b: float) -> torch.Tensor:
        if d == 2:
            raise IndexError("only one pair")
        return roformer_bound(r, d, b)

    report = check_relative_bound(broken)
    assert report.diagnosis.startswith("fn raised IndexError: only one pair (d=2")
    assert report.max_error == math.inf
    assert report.first_failure is not None and report.first_failure.startswith("d=2")


def test_raised_on_int64_distances_gets_a_hint() -> None:
    def integer_angles(r: torch.Tensor, d: int, b: float) -> torch.Tensor:
        angles = r[:, None] * torch.ones(d // 2, dtype=torch.int64)
        return torch.polar(torch.ones_like(angles), angles).cumsum(-1).abs().mean(-1)

    report = check_relative_bound(integer_angles)
    assert report.diagnosis.startswith("fn raised RuntimeError")
    assert "distances.double()" in report.diagnosis


def test_unrecognised_gives_the_case_and_a_finite_error() -> None:
    report = check_relative_bound(lambda r, d, b: reader_bound(r, d, b) * 1.001)
    assert report.diagnosis.startswith("unrecognised difference")
    assert report.first_failure is not None and report.first_failure in report.diagnosis
    assert math.isfinite(report.max_error) and 5e-4 < report.max_error < 2e-3
    assert "largest error: 0.001" in str(report)


def test_the_checker_leaves_the_callers_inputs_and_copies_them() -> None:
    """A function that changes its input in place cannot spoil the next case."""

    def in_place(r: torch.Tensor, d: int, b: float) -> torch.Tensor:
        out = roformer_bound(r, d, b)
        r.zero_()
        return out

    assert check_relative_bound(in_place).ok


@pytest.mark.parametrize(
    ("args", "error"),
    [((42,), TypeError), ((roformer_bound,), None)],
)
def test_relative_bound_checks_its_arguments(args: tuple[object, ...], error: type | None) -> None:
    if error is None:
        with pytest.raises(TypeError, match="seed"):
            check_relative_bound(roformer_bound, seed=1.5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="seed"):
            check_relative_bound(roformer_bound, seed=True)
    else:
        with pytest.raises(error, match="callable"):
            check_relative_bound(*args)  # type: ignore[arg-type]


@given(st.integers(0, 2**31 - 1))
def test_relative_bound_accepts_a_right_function_for_any_seed(seed: int) -> None:
    assert check_relative_bound(reader_bound, seed=seed).ok


def test_report_prints_without_rounding_level_digits() -> None:
    report = check_relative_bound(_bug(divide_by="d"))
    text = str(report)
    assert text.startswith("ok: False\n  divided by d instead of d/2")
    assert "largest error: 0.5" in text


# --- check_abel_bound ------------------------------------------------------------------------


def reader_abel(
    q: torch.Tensor,
    k: torch.Tensor,
    distances: torch.Tensor,
    *,
    layout: str = "interleaved",
    product: str = "conj",
    steps: str = "append",
    norm: str = "max",
    sqrt_d: bool = False,
    mean: bool = False,
    dtype: torch.dtype = torch.float64,
    **walk: object,
) -> torch.Tensor:
    """The reader's bound, with the knobs the bugs turn, in real arithmetic."""
    q, k = q.to(dtype), k.to(dtype)
    d = q.shape[-1]
    if layout == "interleaved":
        a, b, c, e = q[..., 0::2], q[..., 1::2], k[..., 0::2], k[..., 1::2]
    else:
        a, b = q.chunk(2, -1)
        c, e = k.chunk(2, -1)
    # h = (a + ib)(c - ie), or (a + ib)(c + ie) without the conjugate
    sign = 1 if product == "plain" else -1
    re = a * c - sign * b * e
    im = b * c + sign * a * e
    if product == "real":
        im = torch.zeros_like(im)
    re, im = torch.broadcast_tensors(re, im)
    if steps == "append":
        pad = (0, 1)
    elif steps == "prepended":
        pad = (1, 0)
    if steps == "sizes":
        sizes = torch.hypot(re, im)
    elif steps == "forgotten":
        sizes = torch.hypot(re.diff(dim=-1), im.diff(dim=-1))
    else:
        padded = [torch.nn.functional.pad(part, pad) for part in (re, im)]
        sizes = torch.hypot(padded[0].diff(dim=-1), padded[1].diff(dim=-1))
    if norm == "max":
        content = sizes.amax(-1, keepdim=True)
    elif norm == "sum":
        content = sizes.sum(-1, keepdim=True)
    else:
        content = sizes.norm(dim=-1, keepdim=True)
    if sqrt_d:
        content = content / math.sqrt(d)
    factor = walk_sizes(distances, d, 10000.0, dtype=dtype, **walk).sum(-1)  # type: ignore[arg-type]
    if mean:
        factor = factor / (d // 2)
    return (content * factor).double()


def loop_abel(q: torch.Tensor, k: torch.Tensor, distances: torch.Tensor) -> torch.Tensor:
    """The bound with the package's B(r): (max step) * (d/2) * B(r), complex pairs."""
    q, k = torch.broadcast_tensors(q.double(), k.double())
    zq = torch.view_as_complex(q.reshape(*q.shape[:-1], -1, 2).contiguous())
    zk = torch.view_as_complex(k.reshape(*k.shape[:-1], -1, 2).contiguous())
    h = torch.cat((zq * zk.conj(), torch.zeros_like(zq[..., :1])), -1)
    largest = (h[..., 1:] - h[..., :-1]).abs().amax(-1, keepdim=True)
    d = q.shape[-1]
    return largest * (d // 2) * loop_bound(distances, d, 10000.0)


@pytest.mark.parametrize(
    "fn", [abel_bound, reader_abel, loop_abel], ids=["package", "real arithmetic", "complex"]
)
def test_abel_bound_accepts_right_functions(fn: Abel) -> None:
    report = check_abel_bound(fn)
    assert report.ok, report
    assert report.diagnosis.startswith("correct")
    assert report.max_error < 1e-10


def _abel_bug(**knobs: object) -> Abel:
    return lambda q, k, r: reader_abel(q, k, r, **knobs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fn", "verdict"),
    [
        (_abel_bug(steps="forgotten"), "h_{d/2} = 0 forgotten"),
        (_abel_bug(steps="prepended"), "zero put before h_0"),
        (_abel_bug(steps="sizes"), "sizes in place of steps"),
        (_abel_bug(norm="sum"), "wrong norm of the steps: fn adds Σ_k"),
        (_abel_bug(norm="l2"), "wrong norm of the steps: fn takes sqrt"),
        (_abel_bug(product="plain"), "conjugate missing"),
        (_abel_bug(product="real"), "h_k taken real"),
        (_abel_bug(layout="half"), "pairs of the half layout"),
        (_abel_bug(mean=True), "mean in place of the sum"),
        (_abel_bug(sqrt_d=True), "divided by sqrt(d)"),
        (_abel_bug(terms="0..K-1"), "partial sums off by one"),
        (_abel_bug(terms="1..K-1"), "partial sums off by one"),
        (_abel_bug(size="squared"), "squared moduli"),
        (_abel_bug(size="real"), "real parts in place of moduli"),
        (_abel_bug(size="steps"), "moduli of the steps, not of the partial sums"),
        (_abel_bug(size="abs_real"), "|Re S_j| in place of |S_j|"),
        (_abel_bug(size="outside"), "modulus taken after the sum over j"),
        (_abel_bug(exponents="int"), "every pair turns at 1 radian per position"),
        (_abel_bug(exponents="2(k+1)/d"), "wrong exponent: θ_k = base^(-2(k+1)/d)"),
        (lambda q, k, r: abel_bound(q, k, r).long(), "wrong output dtype"),
        (_abel_bug(shift=1), "distances off by one"),
        (_abel_bug(exponents="k/d"), "wrong exponent"),
        (_abel_bug(flip=True), "walk taken slowest pair first"),
        (_abel_bug(exponents="+2k/d"), "frequencies inverted"),
        (_abel_bug(dtype=torch.float32), "computed in float32"),
        (_abel_bug(steps="forgotten", norm="sum"), "h_{d/2} = 0 forgotten"),
        (stub, "not written yet"),
        (lambda q, k, r: abel_bound(q, k, r)[..., 1:], "wrong output shape"),
        (lambda q, k, r: abel_bound(q, k, r).mean(-1), "one value per query-key pair"),
        (lambda q, k, r: abel_bound(q, k, r) + 0j, "fn returned complex numbers"),
        (lambda q, k, r: abel_bound(q, k, r).numpy(), "fn did not return a tensor"),
        (lambda q, k, r: abel_bound(q, k, r) * (1 + r / 1e6), "unrecognised difference"),
    ],
)
def test_abel_bound_names_each_bug(fn: Abel, verdict: str) -> None:
    report = check_abel_bound(fn)
    assert not report.ok
    assert report.diagnosis.startswith(verdict), report
    assert report.failed and report.first_failure in report.cases


def test_abel_raised_on_broadcast_inputs_gets_a_hint() -> None:
    def no_broadcast(q: torch.Tensor, k: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        if q.shape != k.shape:
            raise RuntimeError("shapes differ")
        return abel_bound(q, k, r)

    report = check_abel_bound(no_broadcast)
    assert report.diagnosis.startswith("fn raised RuntimeError: shapes differ (d=16, float32")
    assert "broadcast" in report.diagnosis and ".double()" in report.diagnosis


def test_abel_bound_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match="callable"):
        check_abel_bound("abel_bound")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="seed"):
        check_abel_bound(abel_bound, seed="0")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seed"):
        check_abel_bound(abel_bound, seed=-1)
    with pytest.raises(ValueError, match="seed"):
        check_relative_bound(roformer_bound, seed=2**63)


@given(st.integers(0, 2**31 - 1))
def test_abel_bound_accepts_a_right_function_for_any_seed(seed: int) -> None:
    assert check_abel_bound(reader_abel, seed=seed).ok


@pytest.mark.parametrize("check", [check_relative_bound, check_abel_bound])
def test_reports_are_reports(check: Callable[..., Report]) -> None:
    report = check(stub)
    assert isinstance(report, Report)
    assert str(report).startswith("ok: False\n  not written yet: fn raised NotImplementedError")
